// Layouts by name (layouts/layout.h: make_layout, allocate_linear, the merge
// gap, describe()) and the linear allocator's runs and track groups; every
// layout is a bijection from cells onto sectors inside its extents, on random
// shapes, orders and item sizes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <set>

#include "geometry/load.h"
#include "layouts/layout.h"
#include "layouts/merge_gap.h"
#include "tests/unit/support/layout_test_support.h"

using namespace mmfs;
using namespace mmfs::layouts;
using namespace mmfs::layouts::testing;

TEST_CASE("every layout is a bijection from cells onto its sectors, on random shapes") {
  std::mt19937_64 rng(2024);
  auto atlas = geom::load_geometry("atlas10k3");
  auto g = toy();
  for (int round = 0; round < 60; ++round) {
    std::size_t dims = 1 + rng() % 6;
    std::vector<std::uint64_t> shape(dims);
    std::uint64_t total = 1;
    for (auto& s : shape) {
      s = 1 + rng() % (dims <= 2 ? 300 : dims <= 4 ? 12 : 5);
      total *= s;
    }
    std::vector<std::uint32_t> order = CellGrid::default_order(dims);
    std::shuffle(order.begin(), order.end(), rng);
    std::uint32_t itemsize = std::vector<std::uint32_t>{1, 2, 4, 8}[rng() % 4];
    const geom::Geometry& geometry = (round % 2) ? *atlas : *g;
    auto cell = CellGrid::default_cell(shape, itemsize, geometry.sector_size(), order);
    for (const char* name : {"naive", "zorder", "hilbert", "multimap"}) {
      INFO(name << " shape " << join(shape) << " cell " << join(cell) << " order " << order.size());
      auto layout = placed(name, geometry, CellGrid(shape, itemsize, cell, order), {}, round % 2 ? 686 * 64 : 0);
      std::set<Lbn> used;
      std::uint64_t runs = 0;
      bool inside = true;
      for_each_cell(layout->grid().grid(), [&](const auto& c) {
        Run r[2];
        std::size_t n = layout->cell_runs(c, r);
        std::uint32_t sectors = 0;
        for (std::size_t i = 0; i < n; ++i) {
          sectors += r[i].sectors;
          for (Lbn s = r[i].lbn; s < r[i].lbn + r[i].sectors; ++s) {
            used.insert(s);
            bool in_extent = false;
            for (const Extent& e : layout->extents()) in_extent |= s >= e.start && s < e.start + e.sectors;
            inside &= in_extent;
          }
        }
        CHECK(sectors == layout->sectors_per_cell());
        runs += layout->sectors_per_cell();
      });
      CHECK(inside);
      CHECK(used.size() == runs);  // no two cells share a sector
      CHECK(runs == layout->grid().cells() * layout->sectors_per_cell());
    }
  }
}

TEST_CASE("make_layout: each name builds its layout; unknown names are refused naming the known ones",
          "[layout]") {
  auto g = toy();
  const CellGrid grid({6, 10}, 8, {2, 4}, {1, 0});
  for (const char* name : {"naive", "zorder", "hilbert", "multimap"}) {
    auto l = make_layout(name, *g, grid);
    CHECK(l->name() == name);
    CHECK(l->grid().cell() == std::vector<std::uint64_t>{2, 4});
    CHECK(l->sectors_per_cell() == 1);  // 2 * 4 * 8 = 64 bytes in a 512-byte sector
    CHECK(l->extents().empty());
  }
  try {
    make_layout("spiral", *g, grid);
    FAIL("no error for an unknown layout");
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    CHECK(what.find("'spiral'") != std::string::npos);
    for (const char* known : {"naive", "zorder", "hilbert", "multimap", "quadrangle", "capsule"})
      CHECK(what.find(known) != std::string::npos);
  }
  CHECK_THROWS_AS(make_layout("", *g, grid), std::invalid_argument);
  CHECK_THROWS_AS(make_layout("Naive", *g, grid), std::invalid_argument);  // names are case-sensitive
}

TEST_CASE("layout: sectors per cell round the cell's bytes up; describe() names the base parameters", "[layout]") {
  auto g = toy();
  // 3 x 5 float64 = 120 bytes: one sector; 10 x 10 x 8 = 800 bytes: two.
  CHECK(make_layout("naive", *g, CellGrid({9, 9}, 8, {3, 5}, {1, 0}))->sectors_per_cell() == 1);
  CHECK(make_layout("naive", *g, CellGrid({20, 20}, 8, {10, 10}, {0, 1}))->sectors_per_cell() == 2);
  CHECK(make_layout("naive", *g, CellGrid({64}, 8, {64}, {0}))->sectors_per_cell() == 1);  // exactly 512
  CHECK(make_layout("naive", *g, CellGrid({65}, 8, {65}, {0}))->sectors_per_cell() == 2);
  auto l = placed("naive", *g, CellGrid({20, 20}, 8, {10, 10}, {0, 1}), {}, 3);
  const nlohmann::json j = l->describe();
  CHECK(j["layout"] == "naive");
  CHECK(j["cell"] == nlohmann::json{10, 10});
  CHECK(j["order"] == nlohmann::json{0, 1});
  CHECK(j["sectors_per_cell"] == 2);
  CHECK(j["extents"] == 1);
}

TEST_CASE("allocate_linear: runs of whole tracks from the first track boundary at or after the start",
          "[layout][alloc]") {
  auto g = toy();  // 1000 tracks of 8 sectors: 8000 sectors
  REQUIRE(g->capacity_sectors() == 8000);
  SpaceRequest req;
  req.shape = SpaceShape::Runs;
  req.sectors = 20;
  Lbn next = 0;
  // From inside track 0: the run starts at track 1; the next free LBN ends the last track it touches.
  CHECK(allocate_linear(*g, req, 3, &next) == std::vector<Extent>{{8, 20}});
  CHECK(next == 32);
  // From a track boundary: there.
  CHECK(allocate_linear(*g, req, 16, &next) == std::vector<Extent>{{16, 20}});
  CHECK(next == 40);
  // A run of whole tracks ends where it ends.
  req.sectors = 24;
  CHECK(allocate_linear(*g, req, 16, &next) == std::vector<Extent>{{16, 24}});
  CHECK(next == 40);
  // The whole device, and one sector more.
  req.sectors = 8000;
  CHECK(allocate_linear(*g, req, 0, &next) == std::vector<Extent>{{0, 8000}});
  CHECK(next == 8000);
  CHECK_THROWS_AS(allocate_linear(*g, req, 1), std::invalid_argument);  // starts at 8: 8 sectors short
  req.sectors = 1;
  CHECK_THROWS_AS(allocate_linear(*g, req, 8000), std::invalid_argument);  // beyond the device
  CHECK_THROWS_AS(allocate_linear(*g, req, 7999), std::invalid_argument);  // no whole track left
}

TEST_CASE("allocate_linear: track groups back to back, kept off boundaries and inside a range", "[layout][alloc]") {
  auto g = toy();
  SpaceRequest req;
  req.shape = SpaceShape::TrackGroups;
  req.group_tracks = 3;
  req.groups = 4;
  req.sectors = 4 * 3 * 8;
  Lbn next = 0;
  CHECK(allocate_linear(*g, req, 5, &next) == std::vector<Extent>{{8, 24}, {32, 24}, {56, 24}, {80, 24}});
  CHECK(next == 104);

  // No group of 3 tracks straddles a multiple of 4 tracks: tracks 1-3, 4-6, 8-10, 12-14.
  SpaceRequest bounded = req;
  bounded.boundary_tracks = 4;
  CHECK(allocate_linear(*g, bounded, 5, &next) == std::vector<Extent>{{8, 24}, {32, 24}, {64, 24}, {96, 24}});
  CHECK(next == 120);

  // Aligned to 5 tracks from the zone's first: tracks 5-7 and 10-12.
  SpaceRequest aligned = req;
  aligned.groups = 2;
  aligned.align_tracks = 5;
  CHECK(allocate_linear(*g, aligned, 5, &next) == std::vector<Extent>{{40, 24}, {80, 24}});
  CHECK(next == 104);

  // Inside tracks 100..129 (240 sectors): from its start whatever first_lbn says, ten groups at most.
  SpaceRequest within = req;
  within.within = {800, 240};
  CHECK(allocate_linear(*g, within, 0, &next) == std::vector<Extent>{{800, 24}, {824, 24}, {848, 24}, {872, 24}});
  within.groups = 10;
  CHECK(allocate_linear(*g, within, 0, &next).back() == Extent{1016, 24});
  CHECK(next == 1040);
  within.groups = 11;
  CHECK_THROWS_AS(allocate_linear(*g, within, 0), std::invalid_argument);

  // Tracks of exactly 8 sectors are these; of 16 or at least 9 there are none.
  SpaceRequest exact = req;
  exact.exact_track_sectors = 8;
  CHECK(allocate_linear(*g, exact, 5) == allocate_linear(*g, req, 5));
  exact.exact_track_sectors = 16;
  CHECK_THROWS_AS(allocate_linear(*g, exact, 0), std::invalid_argument);
  SpaceRequest longer = req;
  longer.min_track_sectors = 9;
  CHECK_THROWS_AS(allocate_linear(*g, longer, 0), std::invalid_argument);
  // More groups than the device holds.
  SpaceRequest many = req;
  many.groups = 334;  // 333 groups of 3 tracks fit in tracks 1..999
  CHECK_THROWS_AS(allocate_linear(*g, many, 5), std::invalid_argument);
  many.groups = 333;
  CHECK(allocate_linear(*g, many, 5).size() == 333);
}

TEST_CASE("layout: the merge gap is the volume model's, for a cell's requests and for other sizes", "[layout]") {
  auto atlas = geom::load_geometry("atlas10k3");
  auto ssd = small_ssd();
  for (const geom::Geometry* g : {atlas.get(), ssd.get()}) {
    INFO(g->name());
    auto l = make_layout("naive", *g, CellGrid({64, 64}, 8, {16, 16}, {1, 0}));
    const std::uint32_t spc = l->sectors_per_cell();
    CHECK(l->merge_gap_sectors() == merge_gap_sectors(*g, spc, Layout::kPlanDepth));
    CHECK(l->merge_gap_sectors(spc) == l->merge_gap_sectors());
    for (std::uint32_t sectors : {1u, 3u, 1u}) {  // asked again: the remembered value
      CHECK(l->merge_gap_sectors(sectors) == merge_gap_sectors(*g, sectors, Layout::kPlanDepth));
    }
  }
}
