// The data-area allocator (fs/meta/allocator.h): runs, track groups, small
// objects, and the aligned stripes of a zone a quadrangle array asks for.
#include <catch2/catch.hpp>
#include <algorithm>
#include <random>
#include <set>

#include "fs/meta/allocator.h"
#include "geometry/load.h"
#include "geometry/zoned_disk.h"
#include "layouts/layout.h"
#include "layouts/multimap.h"
#include "layouts/quadrangle_array.h"
#include "tests/unit/support/quadrangle_array_test_support.h"
#include "tests/unit/support/quadrangle_test_support.h"

using namespace mmfs;
using fs::Allocator;
using geom::Lbn;
using layouts::Extent;
using layouts::SpaceRequest;
using layouts::SpaceShape;

namespace testing = layouts::testing;
using layouts::allocate_linear;
using testing::Array;
using testing::check_cells;
using testing::check_extents;
using testing::make;
using testing::member_disk;

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

TEST_CASE("allocator: withheld sectors never return to the free map, whatever frees them", "[alloc]") {
  auto g = geom::load_geometry("cheetah36es");
  Allocator a(*g, 0, 736 * 4 * 300);
  // Every sector in [k*1000 + 300, k*1000 + 700) withheld (a lost member's
  // stripes, as Volume::exclude_member_space computes them).
  auto withheld_in = [](const Extent& e) {
    std::vector<Extent> out;
    for (Lbn k = e.start / 1000; k * 1000 < e.start + e.sectors; ++k) {
      const Lbn from = std::max<Lbn>(e.start, k * 1000 + 300), to = std::min<Lbn>(e.start + e.sectors, k * 1000 + 700);
      if (from < to) out.push_back({from, to - from});
    }
    std::reverse(out.begin(), out.end());  // any order
    return out;
  };
  auto is_withheld = [](Lbn s) { return s % 1000 >= 300 && s % 1000 < 700; };
  std::mt19937_64 rng(11);
  std::vector<Extent> live;
  std::set<Lbn> used;
  for (int i = 0; i < 40; ++i) {
    std::vector<Extent> out;
    REQUIRE(a.allocate_small(1 + rng() % 5000, &out) == 0);
    for (const Extent& e : out)
      for (Lbn s = e.start; s < e.start + e.sectors; ++s) used.insert(s);
    live.insert(live.end(), out.begin(), out.end());
  }
  a.set_withheld(withheld_in);
  std::set<Lbn> kept;  // withheld when freed: in use for good
  for (const Extent& e : live) {
    REQUIRE(a.free(e));
    for (Lbn s = e.start; s < e.start + e.sectors; ++s) {
      used.erase(s);
      if (is_withheld(s)) kept.insert(s);
    }
    CHECK_FALSE(a.free(e));  // a double free is still refused (its free parts)
  }
  REQUIRE_FALSE(kept.empty());
  CHECK(a.free_sectors() == a.total_sectors() - kept.size());
  // Everything free allocated again: never a withheld sector.
  for (;;) {
    std::vector<Extent> out;
    if (a.allocate_small(4096, &out) != 0) break;
    for (const Extent& e : out)
      for (Lbn s = e.start; s < e.start + e.sectors; ++s) REQUIRE(kept.count(s) == 0);
  }
  // Without the filter, a free gives every sector back.
  a.set_withheld(nullptr);
  const std::uint64_t before = a.free_sectors();
  REQUIRE(a.free({*kept.begin(), 1}));
  CHECK(a.free_sectors() == before + 1);
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

TEST_CASE("quadrangle array: the allocator hands out aligned stripes of the zone, also in fragmented space",
          "[quadrangle_array][alloc]") {
  for (std::uint32_t p : {1u, 2u, 4u}) {
    auto g = testing::small_volume(p);
    const Array a{{20, 3000}, 8, {2, 32}, {1, 0}};  // 6, 4 or 2 stripes for p = 1, 2, 4
    auto probe = make(*g, a);
    const std::uint64_t stripe = probe->stripe_sectors();
    const std::uint64_t T = 47;
    // The area starts mid-stripe; single tracks taken here and there break the alignment.
    fs::Allocator alloc(*g, 3 * T + 5, g->capacity_sectors());
    std::vector<std::vector<Extent>> tracks;
    for (int i = 0; i < 40; ++i) {
      std::vector<Extent> t;
      REQUIRE(alloc.allocate({SpaceShape::Runs, T}, &t) == 0);
      tracks.push_back(t);
    }
    for (std::size_t i = 0; i < tracks.size(); ++i)
      if (i % 7 != 3) REQUIRE(alloc.free(tracks[i][0]));  // keep every 7th track in use
    // First fit over the aligned stripes of the zone that are wholly free.
    std::vector<Lbn> expected;
    auto is_free = [&](Lbn lo, Lbn hi) {
      for (const Extent& f : alloc.free_extents())
        if (f.start <= lo && hi <= f.start + f.sectors) return true;
      return false;
    };
    for (Lbn s = probe->zone_first_lbn(); s + stripe <= probe->zone_first_lbn() + probe->zone_stripe_sectors();
         s += stripe)
      if (is_free(s, s + stripe) && expected.size() < probe->space().groups) expected.push_back(s);
    const std::uint64_t before = alloc.free_sectors();
    std::vector<Extent> out;
    INFO("p " << p << " stripes " << probe->space().groups);
    if (expected.size() < probe->space().groups) {
      CHECK(alloc.allocate(probe->space(), &out) == ENOSPC);
      CHECK(out.empty());
      CHECK(alloc.free_sectors() == before);
      continue;
    }
    REQUIRE(alloc.allocate(probe->space(), &out) == 0);
    REQUIRE(out.size() == expected.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
      CHECK(out[i].start == expected[i]);
      CHECK(out[i].sectors == stripe);
    }
    probe->place(out);
    check_extents(*probe);
    check_cells(*probe);
    // Another array of the same kind takes the next free stripes; nothing overlaps.
    auto second = make(*g, a);
    std::vector<Extent> more;
    if (alloc.allocate(second->space(), &more) == 0) {
      second->place(more);
      check_extents(*second);
      for (const Extent& x : more)
        for (const Extent& y : out) CHECK((x.start + x.sectors <= y.start || y.start + y.sectors <= x.start));
    }
  }
}

TEST_CASE("quadrangle array: ENOSPC when no aligned stripes fit its zone, even with other zones free",
          "[quadrangle_array][alloc]") {
  auto g = testing::small_volume(2);
  // 2-D, one-sector cells, 16 of zone 0's 16 stripes.
  auto whole = make(*g, {{80, 1472}, 8, {1, 64}, {1, 0}});
  REQUIRE(whole->zone() == 0);
  REQUIRE(whole->space().groups == 16);
  fs::Allocator alloc(*g, 0, g->capacity_sectors());
  std::vector<Extent> out;
  REQUIRE(alloc.allocate(whole->space(), &out) == 0);
  whole->place(out);
  check_extents(*whole);
  REQUIRE(alloc.free(out[5]));  // one stripe free again
  auto one = make(*g, {{5, 46}, 8, {1, 64}, {1, 0}});
  REQUIRE(one->zone() == 0);
  auto two = make(*g, {{10, 46}, 8, {1, 64}, {1, 0}});
  REQUIRE(two->space().groups == 2);
  const std::uint64_t before = alloc.free_sectors();
  std::vector<Extent> got;
  CHECK(alloc.allocate(two->space(), &got) == ENOSPC);  // zone 1 is free but has other parameters
  CHECK(got.empty());
  CHECK(alloc.free_sectors() == before);
  REQUIRE(alloc.allocate(one->space(), &got) == 0);
  CHECK(got == std::vector<Extent>{out[5]});
  CHECK(alloc.allocate(one->space(), &got) == ENOSPC);
}

TEST_CASE("quadrangle array: requests without the new fields allocate as before", "[quadrangle_array][alloc]") {
  auto g = testing::small_volume(2);
  SpaceRequest groups{SpaceShape::TrackGroups, 0, 7, 6, 0};
  groups.sectors = 6 * 7 * 47;
  fs::Allocator a(*g, 5, g->capacity_sectors()), b(*g, 5, g->capacity_sectors());
  std::vector<Extent> plain, same;
  REQUIRE(a.allocate(groups, &plain) == 0);
  // The first groups go back to back from the first whole track.
  for (std::size_t i = 0; i < plain.size(); ++i) CHECK(plain[i].start == 47 + i * 7 * 47);
  // An alignment of 1 and a range covering everything change nothing.
  groups.align_tracks = 1;
  groups.within = {0, g->capacity_sectors()};
  REQUIRE(b.allocate(groups, &same) == 0);
  CHECK(same == plain);
  CHECK(allocate_linear(*g, groups, 5) == plain);
}

TEST_CASE("quadrangle array: an alignment past a zone's end moves to the next zone's first track",
          "[quadrangle_array][alloc]") {
  auto g = testing::small_volume(0);  // zone 0: 80 tracks of 47; zone 1: 122 tracks of 23
  const geom::ZonedDisk::Zone& z1 = member_disk(*g).zones()[1];
  SpaceRequest req{SpaceShape::TrackGroups, 0, 7, 13, 0};
  req.sectors = 13 * 7 * 47;
  req.align_tracks = 7;
  fs::Allocator a(*g, 0, g->capacity_sectors());
  std::vector<Extent> out;
  REQUIRE(a.allocate(req, &out) == 0);
  const std::vector<Extent> lin = allocate_linear(*g, req, 0);
  REQUIRE(out.size() == 13);
  for (std::size_t i = 0; i < 11; ++i) CHECK(out[i] == Extent{i * 7 * 47, 7 * 47});  // tracks 0, 7, ..., 70
  // Zone 0's tracks 77..79 hold no group: the next ones start at zone 1's tracks 0 and 7.
  CHECK(out[11] == Extent{z1.first_lbn, 7 * 23});
  CHECK(out[12] == Extent{z1.first_lbn + 7 * 23, 7 * 23});
  CHECK(lin == out);
}
