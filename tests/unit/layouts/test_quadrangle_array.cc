// The quadrangle layout as a Layout on a volume geometry
// (layouts/quadrangle_array.h): volume LBNs against AtroposVolume and
// StripedGeometry by brute force, its space request, placement on the
// allocators' extents, the I/O planner and make_layout. How the allocator
// (fs/meta/allocator.h) hands out its aligned stripes is tested in
// tests/unit/fs/meta/test_allocator.cc.
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "fs/meta/allocator.h"
#include "fs/array/array_layout.h"
#include "layouts/io_plan.h"
#include "layouts/layout.h"
#include "layouts/quadrangle_array.h"
#include "tests/unit/support/quadrangle_array_test_support.h"
#include "tests/unit/support/quadrangle_test_support.h"

using namespace mmfs;
using namespace mmfs::layouts;
using testing::member_disk;
using testing::member_sector;
using testing::members_of;
using testing::Array;
using testing::check_cells;
using testing::check_extents;
using testing::for_each_cell;
using testing::make;

namespace {

// 2-D, 3-D and 4-D arrays of several dtypes; cells of one, two and four
// sectors (padded when smaller), partial cubes at the edges.
std::vector<Array> arrays() {
  return {
      {{40, 3000}, 8, {2, 32}, {1, 0}},               // float64, 512-byte cells, 2-D
      {{300, 50}, 4, {64, 2}, {0, 1}},                // int32, dimension 0 primary
      {{23, 777}, 2, {1, 300}, {1, 0}},               // int16, 600-byte cells: 2 sectors
      {{9, 1000}, 1, {3, 1000}, {1, 0}},              // uint8, 3000-byte cells: 6 sectors, d = 3, b = 9
      {{6, 7, 400}, 4, {1, 1, 128}, {2, 1, 0}},       // 3-D: order[1] takes 5 rows of d
      {{3, 2, 900}, 8, {1, 1, 64}, {2, 1, 0}},        // 3-D: short order[1], order[2] takes the rest
      {{5, 6, 300}, 2, {1, 2, 128}, {2, 0, 1}, {2, 2, 1}},  // explicit 2 x 2 depth split, permuted order
      {{3, 4, 2, 200}, 1, {1, 1, 2, 100}, {3, 0, 1, 2}},    // 4-D uint8, padded 200-byte cells
  };
}

// A row along the primary dimension (L = w*p*k cells from a multiple of L):
// on every member the first w*k*spc data sectors of the SAME member track m,
// i.e. of the p consecutive volume tracks m*p .. m*p+p-1.
void check_rows(const QuadrangleArrayLayout& l) {
  const geom::Geometry& g = l.geometry();
  const AtroposVolume& v = l.volume();
  const std::uint32_t p = members_of(g);
  const std::uint32_t primary = l.grid().order()[0];
  const std::uint64_t L = l.quadrangles().row_cells();
  REQUIRE(L == std::uint64_t(v.width()) * p * l.quadrangles().cells_per_block());
  const std::uint64_t extent = l.grid().grid()[primary];
  std::vector<std::uint64_t> others = l.grid().grid();
  others[primary] = 1;
  for_each_cell(others, [&](std::vector<std::uint64_t> cell) {
    for (std::uint64_t piece = 0; piece + L <= extent; piece += L) {
      std::map<std::uint32_t, std::set<geom::Lbn>> per_member;
      std::set<geom::Lbn> volume_tracks;
      for (std::uint64_t i = piece; i < piece + L; ++i) {
        cell[primary] = i;
        Run r[2];
        l.cell_runs(cell, r);
        for (std::uint32_t s = 0; s < r[0].sectors; ++s) {
          const testing::MemberSector m = member_sector(g, r[0].lbn + s);
          per_member[m.member].insert(m.lbn);
          volume_tracks.insert(g.track_of(r[0].lbn + s));
        }
      }
      REQUIRE(per_member.size() == p);
      std::set<geom::Lbn> track_starts;
      for (auto& [member, sectors] : per_member) {
        const geom::TrackBounds t = member_disk(g).track_boundaries(*sectors.begin());
        REQUIRE(*sectors.rbegin() <= t.high);
        REQUIRE(*sectors.rbegin() < t.low + std::uint64_t(v.width()) * v.block_sectors());
        REQUIRE(sectors.size() ==
                std::uint64_t(v.width()) * l.quadrangles().cells_per_block() * l.sectors_per_cell());
        track_starts.insert(t.low);
      }
      REQUIRE(track_starts.size() == 1);  // the same member track on every member
      REQUIRE(volume_tracks.size() == p);
      REQUIRE(*volume_tracks.begin() % p == 0);
      REQUIRE(*volume_tracks.rbegin() - *volume_tracks.begin() + 1 == p);
    }
  });
}

}  // namespace

TEST_CASE("quadrangle array: volume LBNs are AtroposVolume's (device, DLBN), whole stripes, whole-track rows",
          "[quadrangle_array]") {
  for (std::uint32_t p : {0u, 1u, 2u, 4u}) {  // 0: the plain disk, no striping wrapper
    auto g = testing::small_volume(p);
    for (const Array& a : arrays()) {
      auto l = make(*g, a);
      INFO("p " << p << " shape " << join(a.shape) << " cube " << join(l->quadrangles().cube()) << " zone "
                << l->zone());
      REQUIRE(l->devices() == std::max(1u, p));
      REQUIRE(l->volume().devices() == std::max(1u, p));
      // The block is the smallest that fits a cell (B = sectors per cell).
      const auto& spec = member_disk(*g).zones()[l->zone()].spec;
      REQUIRE(l->volume().params() ==
              geom::compute_quadrangle(spec.sectors_per_track, spec.track_skew_sectors, l->sectors_per_cell()));
      Lbn next = 0;
      const SpaceRequest req = l->space();
      l->place(allocate_linear(*g, req, 0, &next));
      check_extents(*l);
      check_cells(*l);
      check_rows(*l);
    }
  }
}

TEST_CASE("quadrangle array: on the Atlas 10K III alone and striped, 4 KiB cells", "[quadrangle_array]") {
  for (std::uint32_t p : {0u, 2u}) {
    auto g = testing::atlas_volume(p);
    auto l = make(*g, {{16, 10240}, 8, {8, 64}, {1, 0}});  // 2 x 160 cells; a row is 78 (p = 1) or 156
    CHECK(l->zone() == 0);
    CHECK(l->sectors_per_cell() == 8);
    CHECK(l->volume().depth() == 5);
    CHECK(l->volume().block_sectors() == 26);  // Eq. 3 grows B = 8 to 26: 3 cells a block
    CHECK(l->quadrangles().cells_per_block() == 3);
    fs::Allocator alloc(*g, 686 * 7 + 3, g->capacity_sectors() / 64);
    std::vector<Extent> out;
    REQUIRE(alloc.allocate(l->space(), &out) == 0);
    l->place(out);
    check_extents(*l);
    check_cells(*l);
    check_rows(*l);
  }
}

TEST_CASE("quadrangle array: the zone is the outermost that holds the array", "[quadrangle_array]") {
  auto g = testing::small_volume(1, testing::small_disk_params(4, 200));  // zone 0: 8 tracks, 1 stripe
  auto small = make(*g, {{5, 40}, 8, {1, 64}, {1, 0}});
  CHECK(small->zone() == 0);
  auto big = make(*g, {{10, 40}, 8, {1, 64}, {1, 0}});  // 2 stripes: zone 1 (N = 23, d = 6)
  CHECK(big->zone() == 1);
  CHECK(big->volume().depth() == 6);
  const SpaceRequest req = big->space();
  CHECK(req.exact_track_sectors == 23);
  CHECK(req.align_tracks == 6);
  CHECK(req.within.start == member_disk(*g).zones()[1].first_lbn);
  Lbn next = 0;
  big->place(allocate_linear(*g, req, 0, &next));
  check_extents(*big);
  check_cells(*big);
  // Larger than every zone: the zone that comes closest, and no space.
  auto huge = make(*g, {{600, 40}, 8, {1, 64}, {1, 0}});
  fs::Allocator alloc(*g, 0, g->capacity_sectors());
  std::vector<Extent> out;
  CHECK(alloc.allocate(huge->space(), &out) == ENOSPC);
  CHECK_THROWS_AS(allocate_linear(*g, huge->space(), 0), std::invalid_argument);
}

TEST_CASE("quadrangle array: place() refuses extents that are not whole aligned stripes of its zone",
          "[quadrangle_array]") {
  auto g = testing::small_volume(2);
  auto l = make(*g, {{10, 46}, 8, {1, 64}, {1, 0}});
  const std::uint64_t s = l->stripe_sectors();
  REQUIRE(l->space().groups == 2);
  REQUIRE(s == 5 * 2 * 47);
  CHECK_THROWS_AS(l->place({{0, s}}), std::invalid_argument);                  // too few
  CHECK_THROWS_AS(l->place({{47 * 2, 2 * s}}), std::invalid_argument);         // not at a stripe boundary
  CHECK_THROWS_AS(l->place({{0, 2 * s - 47}}), std::invalid_argument);         // not whole stripes
  CHECK_THROWS_AS(l->place({{0, s}, {0, s}}), std::invalid_argument);          // overlapping
  CHECK_THROWS_AS(l->place({{l->zone_stripe_sectors() - s, 2 * s}}), std::invalid_argument);  // past the zone
  CHECK_THROWS_AS(l->place({{l->zone_stripe_sectors(), 2 * s}}), std::invalid_argument);      // another zone
  l->place({{3 * s, s}, {s, s}});  // any order: stripes fill in the given order
  CHECK(l->extents().size() == 2);
  const std::vector<std::uint64_t> first_cell{0, 0};
  CHECK(l->cell_lbn(first_cell) == 3 * s);
  check_cells(*l);
}

TEST_CASE("quadrangle array: plans stream whole rows and batch quadrangle columns", "[quadrangle_array]") {
  auto g = testing::small_volume(2);
  auto l = make(*g, {{40, 92 * 64}, 8, {1, 64}, {1, 0}});  // one-sector cells: k = 2, L = 23*2*2 = 92
  Lbn next = 0;
  l->place(allocate_linear(*g, l->space(), 0, &next));
  REQUIRE(l->quadrangles().row_cells() == 92);
  // A row: on each member one request of w*b = 46 sectors at the start of
  // the same member track. The two quadrangles' batches are on different
  // members, so the planner joins them into one (io_plan.cc).
  std::vector<std::uint64_t> row;
  for (std::uint64_t i = 0; i < 92; ++i) row.insert(row.end(), {7, i});
  PlanOptions exact;
  exact.merge_gaps = false;
  IoPlan plan = plan_cells(*l, row, 92 * 512, exact);
  REQUIRE(plan.batches.size() == 1);
  REQUIRE(plan.batches[0].requests.size() == 2);
  std::set<std::uint32_t> members;
  std::set<geom::Lbn> member_tracks;
  for (const geom::Request& r : plan.batches[0].requests) {
    CHECK(r.sectors == 46);
    CHECK(g->track_boundaries(r.lbn).low == r.lbn);
    members.insert(member_sector(*g, r.lbn).member);
    member_tracks.insert(member_sector(*g, r.lbn).lbn);
  }
  CHECK(members.size() == 2);
  CHECK(member_tracks.size() == 1);
  // A column along dimension 0: d = 5 cells per quadrangle, 8 quadrangles.
  // The device rotation (quadrangle.h) puts cube u's rows on device u mod 2,
  // so the column alternates between the members and the planner joins one
  // quadrangle of each member per batch: 4 batches of 2 x 5 cells, each
  // member's 5 on 5 different tracks.
  std::vector<std::uint64_t> column;
  for (std::uint64_t i = 0; i < 40; ++i) column.insert(column.end(), {i, 50});
  plan = plan_cells(*l, column, 40 * 512, exact);
  CHECK(plan.batches.size() == 4);
  for (const IoBatch& b : plan.batches) {
    CHECK(b.requests.size() == 10);
    std::map<std::uint32_t, std::set<geom::Lbn>> tracks;
    for (const geom::Request& r : b.requests) tracks[member_sector(*g, r.lbn).member].insert(g->track_of(r.lbn));
    REQUIRE(tracks.size() == 2);
    for (const auto& [member, t] : tracks) CHECK(t.size() == 5);
  }
  // A second column, on the other member in every cube: each member now
  // has 8 quadrangle batches (one per cube), joined in 8 rounds of 2 x 5.
  for (std::uint64_t i = 0; i < 40; ++i) column.insert(column.end(), {i, 10});
  plan = plan_cells(*l, column, 80 * 512, exact);
  CHECK(plan.batches.size() == 8);
  for (const IoBatch& b : plan.batches) CHECK(b.requests.size() == 10);
}

TEST_CASE("quadrangle array: make_layout, the depth split, describe() and refusals", "[quadrangle_array]") {
  auto g = testing::small_volume(2);
  auto l = make_layout("quadrangle", *g, CellGrid({6, 7, 400}, 4, {1, 1, 128}, {2, 1, 0}), {3, 1, 77});
  REQUIRE(l->name() == "quadrangle");
  auto* q = dynamic_cast<QuadrangleArrayLayout*>(l.get());
  REQUIRE(q);
  CHECK(q->quadrangles().cube() == std::vector<std::uint64_t>{3, 1, 92});  // the primary's 77 is ignored
  CHECK(l->has_batch_groups());
  const nlohmann::json j = l->describe();
  CHECK(j["layout"] == "quadrangle");
  CHECK(j["p"] == 2);
  CHECK(j["N"] == 47);
  CHECK(j["H"] == 9);
  CHECK(j["b"] == 2);
  CHECK(j["d"] == 5);
  CHECK(j["w"] == 23);
  CHECK(j["R"] == 1);
  CHECK(j["zone"] == 0);
  CHECK(j["stripe_unit_sectors"] == 47);
  CHECK(j["stripe_tracks"] == 10);
  CHECK(j["cube"] == nlohmann::json{3, 1, 92});
  // A split of 6 rows needs zone 1's d = 6 (zone 0 has d = 5); 9 rows, or past an extent, fit no zone.
  auto deeper = make_layout("quadrangle", *g, CellGrid({6, 7, 400}, 4, {1, 1, 128}, {2, 1, 0}), {3, 2, 1});
  CHECK(dynamic_cast<QuadrangleArrayLayout&>(*deeper).zone() == 1);
  CHECK(dynamic_cast<QuadrangleArrayLayout&>(*deeper).quadrangles().cube() == std::vector<std::uint64_t>{3, 2, 46});
  CHECK_THROWS_AS(make_layout("quadrangle", *g, CellGrid({6, 7, 400}, 4, {1, 1, 128}, {2, 1, 0}), {3, 3, 1}),
                  std::invalid_argument);
  CHECK_THROWS_AS(make_layout("quadrangle", *g, CellGrid({6, 7, 400}, 4, {1, 1, 128}, {2, 1, 0}), {7, 1, 1}),
                  std::invalid_argument);
  // A cell no track holds.
  CHECK_THROWS_AS(make_layout("quadrangle", *g, CellGrid({4, 64}, 512, {1, 64}, {1, 0})), std::invalid_argument);
  // MEMS and flash volumes have no quadrangles.
  for (const char* profile : {"mems-g2", "ssd"}) {
    auto other = geom::load_geometry(profile);
    try {
      make_layout("quadrangle", *other, CellGrid({100, 100}, 8, {1, 64}, {1, 0}));
      FAIL("no error for " << profile);
    } catch (const geom::GeometryError& e) {
      CHECK(e.kind() == geom::ErrorKind::NotSupported);
      CHECK(std::string(e.what()).find("needs a disk volume") != std::string::npos);
    }
  }
  try {
    make_layout("atropos", *g, CellGrid({10}, 8, {1}, {0}));
    FAIL("no error");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("quadrangle") != std::string::npos);
  }
  // The schema path (ArrayFile, scrub) builds it too.
  fs::ArraySchema schema;
  schema.shape = {30, 500};
  schema.layout = "quadrangle";
  auto from_schema = fs::make_array_layout(*g, schema);
  CHECK(from_schema->name() == "quadrangle");
  CHECK(from_schema->space().shape == SpaceShape::TrackGroups);
}
