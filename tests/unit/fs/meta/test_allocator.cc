// The data-area allocator (fs/meta/allocator.h).
#include <catch2/catch.hpp>
#include <random>
#include <set>

#include "fs/meta/allocator.h"
#include "geometry/load.h"
#include "geometry/zoned_disk.h"
#include "layouts/layout.h"
#include "layouts/multimap.h"

using namespace mmfs;
using fs::Allocator;
using geom::Lbn;
using layouts::Extent;
using layouts::SpaceRequest;
using layouts::SpaceShape;

TEST_CASE("allocator: whole-track runs from the bottom, small objects from the top", "[alloc]") {
  auto g = geom::load_geometry("atlas10k3");
  Allocator a(*g, 686 * 10 + 5, 686 * 10000);
  const std::uint64_t total = a.free_sectors();
  std::vector<Extent> out;
  REQUIRE(a.allocate({SpaceShape::Runs, 1000}, &out) == 0);
  REQUIRE(out.size() == 1);
  CHECK(out[0].start == 686 * 11);  // the first whole track at or after the area start
  CHECK(out[0].sectors == 2 * 686);  // rounded up to whole tracks
  std::vector<Extent> small;
  REQUIRE(a.allocate_small(10, &small) == 0);
  CHECK(small[0].start + small[0].sectors == 686 * 10000);  // the top end
  CHECK(a.free_sectors() == total - 2 * 686 - 10);
  CHECK(a.free(out[0]));
  CHECK_FALSE(a.free(out[0]));  // double free is refused
  CHECK(a.free(small[0]));
  CHECK(a.free_sectors() == total);
  CHECK(a.free_extents().size() == 1);  // coalesced back into one run
}

TEST_CASE("allocator: a linear layout's runs hold all its cells when free space is fragmented", "[alloc]") {
  // A hole of one 686-sector track below the free tail: a z-order array of
  // 171 cells of 8 sectors (1,368 sectors, two tracks less 4) that spans it
  // gets the hole and a second run. The hole holds 85 whole cells, not 85.75:
  // counting its 686 sectors left the second run a cell short, and placing
  // the array failed (EUCLEAN "extents hold 170 cells ..., the array has 171").
  auto g = geom::load_geometry("atlas10k3");
  Allocator a(*g, 0, 686 * 1000);
  std::vector<Extent> below, hole, above;
  REQUIRE(a.allocate({SpaceShape::Runs, 686}, &below) == 0);
  REQUIRE(a.allocate({SpaceShape::Runs, 686}, &hole) == 0);
  REQUIRE(a.allocate({SpaceShape::Runs, 686}, &above) == 0);
  REQUIRE(a.free(hole[0]));
  auto layout = layouts::make_layout("zorder", *g, layouts::CellGrid({171 * 512}, 8, {512}, {0}));
  SpaceRequest req = layout->space();
  REQUIRE(req.sectors == 171 * 8);
  std::vector<Extent> out;
  REQUIRE(a.allocate(req, &out) == 0);
  REQUIRE(out.size() == 2);
  CHECK(out[0].start == hole[0].start);  // the hole is still used first
  std::uint64_t cells = 0;
  for (const Extent& e : out) cells += e.sectors / 8;
  CHECK(cells >= 171);
  CHECK_NOTHROW(layout->place(out));
}

TEST_CASE("allocator: MultiMap track groups stay inside one zone", "[alloc]") {
  auto g = geom::load_geometry("atlas10k3");
  auto* disk = dynamic_cast<const geom::ZonedDisk*>(g.get());
  const auto& z1 = disk->zones()[1];
  // Start 100 tracks before the end of zone 0: a 200-track group must skip to zone 1.
  Lbn start = z1.first_lbn - 100 * 686;
  Allocator a(*g, start, z1.first_lbn + z1.sectors);
  std::vector<Extent> out;
  REQUIRE(a.allocate({SpaceShape::TrackGroups, 0, 200, 3, 600}, &out) == 0);
  REQUIRE(out.size() == 3);
  for (const Extent& e : out) {
    CHECK(e.start >= z1.first_lbn);
    CHECK(e.sectors == 200 * 654);
    CHECK(g->track_length(e.start) == 654);
    CHECK(g->track_length(e.start + e.sectors - 1) == 654);
  }
  // Tracks shorter than the group needs are skipped: nothing in this area has 687.
  std::vector<Extent> none;
  CHECK(a.allocate({SpaceShape::TrackGroups, 0, 2, 1, 687}, &none) == ENOSPC);
  CHECK(none.empty());
}

// The soak test (tests/integration/test_soak.py) found relayouts refused with
// EUCLEAN once earlier relayouts had left the bottom of the data area in
// one-track holes: runs counted in sectors, but a 686-sector track holds 85
// cells of 8 sectors, not 85.75, and the array came up cells short.
TEST_CASE("allocator: runs split across holes still hold every cell of a linear layout", "[alloc]") {
  auto g = geom::load_geometry("atlas10k3");
  const std::uint64_t T = 686;  // sectors per track in the outer zone; 686 % 8 == 6
  Allocator a(*g, 0, T * 200);
  // Every other track free: one-track holes.
  std::vector<Extent> tracks;
  for (int i = 0; i < 100; ++i) {
    std::vector<Extent> out;
    REQUIRE(a.allocate({SpaceShape::Runs, T}, &out) == 0);
    REQUIRE(out.size() == 1);
    tracks.push_back(out[0]);
  }
  for (std::size_t i = 0; i < tracks.size(); i += 2) REQUIRE(a.free(tracks[i]));
  // 8x8x8 float64 cells: 8 sectors each.
  layouts::CellGrid grid({64, 64, 64}, 8, {8, 8, 8}, layouts::CellGrid::default_order(3));
  for (const std::string layout : {"naive", "zorder", "hilbert"}) {
    auto l = layouts::make_layout(layout, *g, grid, {});
    SpaceRequest req = l->space();
    CHECK(req.unit_sectors == 8);
    std::vector<Extent> out;
    REQUIRE(a.allocate(req, &out) == 0);
    CHECK(out.size() > 1);  // spread over holes
    std::uint64_t cells = 0;
    for (const Extent& e : out) cells += e.sectors / 8;
    CHECK(cells >= grid.cells());
    CHECK_NOTHROW(l->place(out));
    for (const Extent& e : out) REQUIRE(a.free(e));
  }
}

TEST_CASE("allocator: random allocations and frees track free space exactly", "[alloc]") {
  auto g = geom::load_geometry("cheetah36es");
  Allocator a(*g, 0, 736 * 4 * 300);
  std::mt19937_64 rng(5);
  std::vector<std::vector<Extent>> live;
  std::set<Lbn> used;
  for (int i = 0; i < 3000; ++i) {
    if (!live.empty() && rng() % 3 == 0) {
      std::size_t k = rng() % live.size();
      for (const Extent& e : live[k]) {
        REQUIRE(a.free(e));
        for (Lbn s = e.start; s < e.start + e.sectors; ++s) used.erase(s);
      }
      live.erase(live.begin() + std::ptrdiff_t(k));
      continue;
    }
    std::vector<Extent> out;
    int r = rng() % 2 ? a.allocate_small(1 + rng() % 900, &out)
                      : a.allocate({SpaceShape::Runs, 1 + rng() % 3000}, &out);
    if (r == ENOSPC) {
      CHECK(out.empty());
      continue;
    }
    REQUIRE(r == 0);
    for (const Extent& e : out)
      for (Lbn s = e.start; s < e.start + e.sectors; ++s) REQUIRE(used.insert(s).second);  // never handed out twice
    live.push_back(out);
  }
  CHECK(a.free_sectors() == a.total_sectors() - used.size());
  // Whole-track runs start and end on track boundaries.
  for (const auto& v : live)
    for (const Extent& e : v)
      if (e.sectors % 736 == 0 && g->track_boundaries(e.start).low == e.start)
        CHECK(g->track_boundaries(e.start + e.sectors - 1).high == e.start + e.sectors - 1);
}

TEST_CASE("allocator: extents for a 64 GiB MultiMap array (speed shown by mmfs-bench)", "[alloc]") {
  // 64 GiB is 98.7 % of the 8-surface Atlas, and MultiMap loses the part of
  // every track beyond K_0 x cubes-per-track; the 16-surface variant of the
  // profile (twice the cylinders' capacity) holds it.
  auto g = geom::load_geometry(nlohmann::json{{"profile", "atlas10k3"}, {"surfaces", 16}});
  // float64 cells of 4x4x4 (one sector each): 396 x 580 x 585 cells = 64.1 GiB.
  layouts::CellGrid grid({4 * 585, 4 * 580, 4 * 396}, 8, {4, 4, 4}, {2, 1, 0});
  // The automatic cube keeps the whole last dimension (groups of 34k tracks,
  // one per zone); this one splits it so several groups fill each zone.
  layouts::MultiMapLayout layout(*g, grid, {117, 116, 396});
  CHECK(grid.cells() * 512 >= 64ull << 30);
  Allocator a(*g, 686 * 16 * 2, g->capacity_sectors() - 64);
  std::vector<Extent> out;
  REQUIRE(a.allocate(layout.space(), &out) == 0);
  layout.place(out);  // the layout accepts every group
  CHECK(out.size() == layout.groups());
}

// Capsule bands (layouts/capsule.h) ask that a group never straddle a MEMS
// cylinder: 9-track bands on the G2's 10-track cylinders take one each, and
// the track left over in every cylinder stays free for other requests.
TEST_CASE("allocator: track groups never straddle the requested boundary", "[alloc]") {
  auto g = geom::load_geometry("mems-g2");
  const std::uint64_t T = 270, Ny = 10;
  Allocator a(*g, 3 * T, 200 * Ny * T);  // the data area starts three tracks into cylinder 0
  SpaceRequest bands{SpaceShape::TrackGroups, 0, 9, 5, 0};
  bands.sectors = 5 * 9 * T;
  bands.boundary_tracks = Ny;
  std::vector<Extent> out;
  REQUIRE(a.allocate(bands, &out) == 0);
  REQUIRE(out.size() == 5);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::uint64_t t = out[i].start / T;
    CHECK(out[i].sectors == 9 * T);
    CHECK(t / Ny == (t + 8) / Ny);
    CHECK(t == (i + 1) * Ny);  // cylinder 0 has only 7 tracks left; then one band per cylinder
  }
  // The single tracks left over serve runs.
  std::vector<Extent> run;
  REQUIRE(a.allocate({SpaceShape::Runs, T}, &run) == 0);
  CHECK(run.size() == 1);
  // Without the boundary the same request packs the bands back to back.
  Allocator b(*g, 3 * T, 200 * Ny * T);
  bands.boundary_tracks = 0;
  REQUIRE(b.allocate(bands, &out) == 0);
  CHECK(out[0].start == 3 * T);
  CHECK(out[1].start == 12 * T);
  // The modeled allocator follows the same rule.
  bands.boundary_tracks = Ny;
  std::vector<Extent> lin = layouts::allocate_linear(*g, bands, 3 * T);
  for (std::size_t i = 0; i < lin.size(); ++i) CHECK(lin[i].start == (i + 1) * Ny * T);
}
