// The two placements behind an array file (fs/array/placement.h): cells of
// every layout and a sealed mloc image of the same bytes read every
// selection alike, answer getfattr and A@/info each with its own fields, and
// locate elements inside their own extents.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <random>
#include <shared_mutex>
#include <string>
#include <vector>

#include "fs/array/placement.h"
#include "geometry/load.h"
#include "layouts/cell_grid.h"
#include "tests/unit/support/array_view_support.h"

using namespace mmfs;
using namespace mmfs::fs;
using namespace mmfs::fs::testing::arrays;

namespace {

// A random selection of `shape`: per dimension an index or a range with a step.
std::vector<Sel> random_selection(std::mt19937_64& rng, const std::vector<std::uint64_t>& shape) {
  std::vector<Sel> sel(shape.size());
  for (std::size_t d = 0; d < shape.size(); ++d) {
    Sel& s = sel[d];
    if (rng() % 4 == 0) {
      s.fixed = true;
      s.start = rng() % shape[d];
      continue;
    }
    s.start = rng() % shape[d];
    s.stop = s.start + 1 + rng() % (shape[d] - s.start);
    s.step = 1 + rng() % 3;
  }
  return sel;
}

layouts::Selection to_selection(const std::vector<Sel>& sel) {
  std::vector<layouts::DimRange> dims;
  for (const Sel& s : sel)
    dims.push_back(s.fixed ? layouts::DimRange{s.start, s.start + 1, 1, true}
                           : layouts::DimRange{s.start, s.stop, s.step, false});
  return layouts::Selection(dims);
}

Bytes read_selection(ArrayFile& a, const std::vector<Sel>& sel) {
  DataView v;
  v.selection = to_selection(sel);
  static int views = 0;
  v.spelling = "test/" + std::to_string(views++);  // chunk sizes are remembered per spelling
  const std::uint64_t total = v.selection.elements() * a.schema().dtype.itemsize;
  Bytes out(total, 0xAA);
  std::size_t got = 0;
  std::string msg;
  const int r = a.read_view(v, 0, total, reinterpret_cast<std::byte*>(out.data()), &got, &msg);
  INFO(msg);
  REQUIRE(r == 0);
  REQUIRE(got == total);
  return out;
}

std::uint64_t extent_sectors_hold(const std::vector<Extent>& extents, geom::Lbn lbn) {
  for (const Extent& e : extents)
    if (lbn >= e.start && lbn < e.start + e.sectors) return 1;
  return 0;
}

// A sealed mloc array's info: the image's levels, not the staging cells.
bool sealed(const nlohmann::json& info) {
  const nlohmann::json& m = info["mloc"];
  return m.is_object() && m.value("sealed", true) && !m.contains("staging") && m.contains("chunks");
}

}  // namespace

TEST_CASE("placement: cells of every layout and a sealed mloc image read every selection alike",
          "[placement][mloc]") {
  const auto g = toy_disk();
  Mount m = mount(formatted(*g));
  std::mt19937_64 rng(20261129);
  for (const char* dtype : {"float64", "int32"}) {
    const std::vector<std::uint64_t> shape{19, 11, 13};
    const std::uint32_t itemsize = std::string(dtype) == "float64" ? 8 : 4;
    const Bytes data = random_bytes(rng, 19 * 11 * 13 * itemsize);
    std::vector<std::shared_ptr<ArrayFile>> arrays;
    for (const char* layout : {"naive", "zorder", "hilbert", "multimap", "mloc"}) {
      auto a = create_array(m, std::string(layout) + "-" + dtype, make_schema(shape, dtype, layout));
      REQUIRE(write_file(*a, 0, data) == 0);
      std::string msg;
      REQUIRE(a->settle(&msg) == 0);  // an mloc array seals its image here
      arrays.push_back(a);
    }
    REQUIRE(sealed(arrays.back()->info()));
    for (int i = 0; i < 60; ++i) {
      const std::vector<Sel> sel = random_selection(rng, shape);
      const Bytes want = extract(data, shape, itemsize, sel);
      for (auto& a : arrays) {
        INFO(a->schema().layout << " " << dtype << " selection " << i);
        CHECK(bytes_diff(read_selection(*a, sel), want) == "");
      }
    }
  }
}

TEST_CASE("placement: getfattr of the layout's choices answers for an image as for cells", "[placement][mloc]") {
  const auto g = toy_disk();
  Mount m = mount(formatted(*g));
  std::mt19937_64 rng(7);
  auto mm = create_array(m, "mm", make_schema({16, 16, 8}, "float64", "multimap"));
  auto image = create_array(m, "image", make_schema({16, 16, 8}, "float64", "mloc"));
  const Bytes data = random_bytes(rng, 16 * 16 * 8 * 8);
  std::string msg;
  REQUIRE(write_file(*image, 0, data) == 0);
  REQUIRE(image->settle(&msg) == 0);
  REQUIRE(sealed(image->info()));

  CHECK(mm->attr_text("basic_cube") != "none");
  CHECK(mm->attr_text("chunk") == "none");
  // A sealed image has no basic cube (asking used to dereference absent cells).
  CHECK(image->attr_text("basic_cube") == "none");
  const nlohmann::json info = image->info();
  CHECK(image->attr_text("chunk") == layouts::join(info["chunk"].get<std::vector<std::uint64_t>>()));
  CHECK(image->attr_text("cell") == image->attr_text("chunk"));  // an image's chunks are its cells for views
}

TEST_CASE("placement: A@/info shows each placement's own fields", "[placement][mloc]") {
  const auto g = toy_disk();
  Mount m = mount(formatted(*g));
  std::mt19937_64 rng(11);
  const Bytes data = random_bytes(rng, 12 * 10 * 8);
  auto cells = create_array(m, "cells", make_schema({12, 10}, "float64", "multimap"));
  auto image = create_array(m, "image", make_schema({12, 10}, "float64", "mloc"));
  std::string msg;
  for (auto* a : {cells.get(), image.get()}) {
    REQUIRE(write_file(*a, 0, data) == 0);
    REQUIRE(a->settle(&msg) == 0);
  }
  const nlohmann::json c = cells->info();
  CHECK(c.contains("sectors_per_cell"));
  CHECK(c.contains("cells"));
  CHECK(c.contains("basic_cube"));
  CHECK(!c.contains("mloc"));
  CHECK(c["device_bytes"]["data"].get<std::uint64_t>() == cells->device_bytes());

  const nlohmann::json i = image->info();
  CHECK(!i.contains("sectors_per_cell"));
  CHECK(sealed(i));
  CHECK(i["chunk"].is_array());
  CHECK(i["device_bytes"]["data"].get<std::uint64_t>() > 0);

  // A write unseals the image into staging cells until the next seal.
  REQUIRE(write_file(*image, 0, Bytes(8, 1)) == 0);
  const nlohmann::json staging = image->info();
  CHECK(!sealed(staging));
  CHECK(staging["mloc"].value("staging", "") == "naive");
  CHECK(staging.contains("sectors_per_cell"));
  REQUIRE(image->settle(&msg) == 0);
  CHECK(sealed(image->info()));
  Bytes want = data;
  std::fill(want.begin(), want.begin() + 8, 1);
  CHECK(bytes_diff(read_all(*image), want) == "");
}

TEST_CASE("placement: every element lies in its placement's own extents", "[placement][mloc]") {
  const auto g = toy_disk();
  Mount m = mount(formatted(*g));
  std::mt19937_64 rng(5);
  const std::vector<std::uint64_t> shape{9, 7, 5};
  const Bytes data = random_bytes(rng, 9 * 7 * 5 * 8);
  for (const char* layout : {"naive", "hilbert", "multimap", "mloc"}) {
    INFO(layout);
    auto a = create_array(m, layout, make_schema(shape, "float64", layout));
    std::string msg;
    REQUIRE(write_file(*a, 0, data) == 0);
    REQUIRE(a->settle(&msg) == 0);
    const nlohmann::json info = a->info();
    std::vector<Extent> extents;
    {
      std::shared_lock lock(a->placement_mutex());
      extents = a->cells_locked() ? a->cells_locked()->layout().extents() : std::vector<Extent>{};
    }
    for (int i = 0; i < 20; ++i) {
      const std::vector<std::uint64_t> coords{rng() % shape[0], rng() % shape[1], rng() % shape[2]};
      std::string text;
      REQUIRE(a->lbn_text(coords, &text, &msg) == 0);
      unsigned long long lbn = 0;
      unsigned offset = 0;
      REQUIRE(std::sscanf(text.c_str(), "%llu %u", &lbn, &offset) == 2);
      CHECK(offset < g->sector_size());
      if (!extents.empty()) CHECK(extent_sectors_hold(extents, lbn) == 1);
    }
  }
}
