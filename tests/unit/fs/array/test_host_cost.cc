// The machine's part of a read (geom::HostCost): a measured flash
// geometry's "host" (parsed, printed, refused when malformed), and a view's
// plan on such a volume, whose modeled_ms is the whole read and device_ms the
// device's part. The pipeline layouts::modeled_read_ms predicts a chunked
// read with is tested in tests/unit/layouts/test_io_plan.cc.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <random>
#include <vector>

#include "fs/array/array_file.h"
#include "geometry/flash.h"
#include "geometry/load.h"
#include "layouts/io_plan.h"
#include "tests/unit/support/geometry_errors.h"
#include "tests/unit/support/array_test_support.h"
#include "tests/unit/support/array_view_support.h"
#include "tests/unit/support/fs_test_support.h"

using namespace mmfs;

namespace {

using geom::testing::error_of;
using geom::testing::message_of;

nlohmann::json small_ssd_json() {
  return {{"kind", "flash"},    {"sector_size", 4096},        {"capacity_sectors", 4096},
          {"track_sectors", 32}, {"queues", 32},              {"latency_ms", 0.08},
          {"bandwidth_mb_s", 2000.0}, {"depth", 128},         {"name", "small-ssd"}};
}

}  // namespace

TEST_CASE("host cost: a flash geometry's host is read, printed only when set, and checked", "[host_cost]") {
  nlohmann::json j = small_ssd_json();
  CHECK(geom::load_geometry(j)->host_cost().empty());
  CHECK_FALSE(geom::load_geometry(j)->definition().contains("host"));  // older geometries print as before

  j["host"] = {{"request_ms", 0.2}, {"ms_per_mib", 0.42}};
  auto g = geom::load_geometry(j);
  CHECK(g->host_cost().request_ms == 0.2);
  CHECK(g->host_cost().ms_per_mib == 0.42);
  // The definition (what the superblock keeps) carries it back.
  auto again = geom::load_geometry(g->definition());
  CHECK(again->host_cost().request_ms == 0.2);
  CHECK(again->host_cost().ms_per_mib == 0.42);

  // A striped volume of such members: the machine is the same.
  nlohmann::json striped = j;
  striped["members"] = 2;
  auto sg = geom::load_geometry(striped);
  CHECK(sg->host_cost().request_ms == 0.2);
  CHECK(sg->host_cost().ms_per_mib == 0.42);

  // The daemon's work on cells (probes/read_path_probe.h): read back, printed
  // only when measured.
  CHECK_FALSE(g->definition()["host"].contains("verify_ms_per_mib"));
  j["host"]["verify_ms_per_mib"] = 0.36;
  j["host"]["gather_ms_per_mib"] = 0.04;
  auto cells = geom::load_geometry(geom::load_geometry(j)->definition());
  CHECK(cells->host_cost().verify_ms_per_mib == 0.36);
  CHECK(cells->host_cost().gather_ms_per_mib == 0.04);
  for (const char* field : {"verify_ms_per_mib", "gather_ms_per_mib"}) {
    nlohmann::json k = j;
    k["host"][field] = -0.1;
    CAPTURE(field);
    CHECK(error_of([&] { geom::load_geometry(k); }) == geom::ErrorKind::Invalid);
    CHECK(message_of([&] { geom::load_geometry(k); }).find(field) != std::string::npos);
  }

  for (const nlohmann::json& bad : {nlohmann::json{{"request_ms", -1}}, nlohmann::json{{"ms_per_mib", "fast"}},
                                    nlohmann::json{{"ms_per_mb", 0.4}}, nlohmann::json(0.4)}) {
    nlohmann::json k = small_ssd_json();
    k["host"] = bad;
    CAPTURE(bad.dump());
    CHECK(error_of([&] { geom::load_geometry(k); }) == geom::ErrorKind::Invalid);
    CHECK(message_of([&] { geom::load_geometry(k); }).find("host") != std::string::npos);
  }
}

TEST_CASE("host cost: a view's plan on a volume with a host predicts the read; without, the device",
          "[host_cost][array_file]") {
  using namespace fs::testing::arrays;
  std::mt19937_64 rng(77);
  nlohmann::json with_host = small_ssd_json();
  with_host["host"] = {{"request_ms", 0.3}, {"ms_per_mib", 0.5}};
  nlohmann::json plans[2];
  for (int k = 0; k < 2; ++k) {
    auto g = geom::load_geometry(k == 0 ? small_ssd_json() : with_host);
    fs::MemoryDevice dev(16ull << 20, 512);
    {
      auto f = formatted(*g, 16ull << 20);
      dev.bytes() = f->bytes();
    }
    fs::ArraySchema s = make_schema({64, 64, 16}, "float64", "hilbert");
    s.cell = {16, 16, 4};
    Mount m = mount(std::unique_ptr<fs::BlockDevice>(new fs::testing::RefDevice(dev)));
    auto a = create_array(m, "a", s);
    Bytes model = random_bytes(rng, a->size());
    std::string msg;
    REQUIRE(write_file(*a, 0, model) == 0);
    REQUIRE(a->flush(true, &msg) == 0);
    REQUIRE(a->plan(resolve({"box", "0:64,0:64,0:16"}, s), &plans[k], &msg) == 0);
    REQUIRE(plans[k].at("chunks") == 1);
  }
  const nlohmann::json& bare = plans[0];
  const nlohmann::json& host = plans[1];
  CHECK_FALSE(bare.contains("device_ms"));
  CHECK_FALSE(bare.contains("host_ms"));
  const double device = bare.at("modeled_ms").get<double>();
  REQUIRE(device > 0);
  // The same requests; the device's part is the bare volume's whole model.
  CHECK(host.at("requests") == bare.at("requests"));
  CHECK(host.at("device_ms").get<double>() == Approx(device));
  const double mib = double(64 * 64 * 16 * 8) / (1 << 20);  // 0.5 MiB handed over
  CHECK(host.at("modeled_ms").get<double>() == Approx(0.3 + device + mib * 0.5));
  CHECK(host.at("host_ms").get<double>() == Approx(0.3 + mib * 0.5));
}
