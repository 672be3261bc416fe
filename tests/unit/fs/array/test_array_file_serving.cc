// Which placement serves a view (fs/array/array_file_serving.cc): the one
// A@/plan prices cheapest among the primary and the current copies, except
// that on flash a placement reading the view in one small request takes it
// unpriced; every view equals the bytes written whichever serves it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "fs/array/array_file.h"
#include "tests/unit/support/array_test_support.h"
#include "tests/unit/support/array_view_support.h"
#include "tests/unit/support/copies_test_support.h"
#include "geometry/load.h"

using namespace mmfs;
using namespace mmfs::fs;
using namespace mmfs::fs::testing::arrays;

namespace {

// A@/plan of the box `spelled` of `a`, checked against the bytes of `model`.
nlohmann::json planned(ArrayFile& a, const std::string& spelled, const Bytes& model, const std::vector<Sel>& sel) {
  const ArraySchema s = a.schema();
  nlohmann::json plan;
  std::string msg;
  REQUIRE(a.plan(resolve({"box", spelled}, s), &plan, &msg) == 0);
  CHECK(bytes_diff(view_bytes(a, {"box", spelled}), extract(model, s.shape, s.dtype.itemsize, sel)) == "");
  return plan;
}

std::uint32_t cheapest(const nlohmann::json& plan) {
  const auto& c = plan["copies"];
  const auto it = std::min_element(c.begin(), c.end(), [](const nlohmann::json& x, const nlohmann::json& y) {
    return x["modeled_ms"].get<double>() < y["modeled_ms"].get<double>();
  });
  return (*it)["copy"].get<std::uint32_t>();
}

// A flash device of one channel at 100 MB/s, on which a request's bytes cost
// time: reading 4 KiB is modeled cheaper than reading 8 KiB (on several
// channels a request of a few pages costs one page's time).
std::unique_ptr<geom::Geometry> slow_flash() {
  return geom::load_geometry(nlohmann::json{{"kind", "flash"},     {"sector_size", 4096}, {"capacity_sectors", 4096},
                                            {"track_sectors", 1},  {"queues", 1},         {"latency_ms", 0.08},
                                            {"bandwidth_mb_s", 100.0}, {"depth", 128},    {"name", "slow-flash"}});
}

// The primary's cells (2x8x64: a 4 KiB checksum block per index of dimension
// 0) hold the box 2:4,2:4,7:9 in two blocks, one request of 8 KiB; the
// copy's (2x2x64, a sector each) in one cell, one request of 4 KiB.
ArraySchema two_layouts() {
  ArraySchema s = make_schema({16, 16, 64}, "float64", "naive");
  REQUIRE(set_schema_attr(s, "cell", "2,8,64").error == 0);
  return with_copies(s, "naive:cell=2,2,64");
}

}  // namespace

TEST_CASE("serving: on flash one small request of the primary serves a view unpriced", "[copies][serving]") {
  auto g = slow_flash();
  auto dev = formatted(*g, 4096ull * 4096);
  Mount m = mount(std::move(dev));
  std::mt19937_64 rng(97);
  Bytes model;
  auto a = filled_with_copies(m, m.ctx(), "flash", two_layouts(), rng, &model);
  // The copy is priced cheaper, but the primary reads the box in one request of at most 16 KiB.
  const std::vector<Sel> box{{false, 2, 4, 1}, {false, 2, 4, 1}, {false, 7, 9, 1}};
  const nlohmann::json tiny = planned(*a, "2:4,2:4,7:9", model, box);
  INFO(tiny.dump());
  REQUIRE(tiny["copies"][0]["requests"] == 1);
  REQUIRE(tiny["copies"][1]["modeled_ms"].get<double>() < tiny["copies"][0]["modeled_ms"].get<double>());
  CHECK(tiny["served_by"] == 0);
  CHECK(tiny["bytes_read"] == 8192);  // the served plan is the primary's
  // A view no placement reads in one small request is priced: the cheapest serves it.
  const std::vector<Sel> wide{{false, 0, 16, 1}, {false, 0, 16, 1}, {false, 7, 9, 1}};
  const nlohmann::json priced = planned(*a, "0:16,0:16,7:9", model, wide);
  CHECK(priced["served_by"] == cheapest(priced));
}

TEST_CASE("serving: on a disk every view is priced, a small one too", "[copies][serving]") {
  auto g = toy_disk();
  auto dev = formatted(*g);
  Mount m = mount(std::move(dev));
  std::mt19937_64 rng(101);
  Bytes model;
  auto a = filled_with_copies(m, m.ctx(), "disk", two_layouts(), rng, &model);
  const std::vector<Sel> box{{false, 2, 4, 1}, {false, 2, 4, 1}, {false, 7, 9, 1}};
  const nlohmann::json tiny = planned(*a, "2:4,2:4,7:9", model, box);
  CHECK(tiny["served_by"] == cheapest(tiny));
}
