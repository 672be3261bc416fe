// The capsule layout (layouts/capsule.h) on a volume of p striped MEMStores
// (geometry/striped.h): every cell against a brute force built from
// StripedGeometry::locate/volume_lbn and the MEMBER's capsule_alloc, the
// paper's two access directions (a record in one class of one member, an
// attribute over whole tracks of every member), and p = 1 against the plain
// MemStore layout, bit for bit.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <set>
#include <vector>

#include "geometry/load.h"
#include "geometry/memstore.h"
#include "geometry/striped.h"
#include "layouts/capsule.h"
#include "layouts/io_plan.h"
#include "layouts/selection.h"
#include "tests/unit/support/mems_test_support.h"

using namespace mmfs;
using namespace mmfs::layouts;
using geom::Lbn;
using geom::StripedGeometry;

namespace {

std::unique_ptr<StripedGeometry> striped_g2(std::uint32_t p, std::uint32_t M = 0) {
  return std::make_unique<StripedGeometry>(std::make_unique<geom::MemStore>(geom::testing::g2(M)), p);
}

const geom::MemStore& member_of(const StripedGeometry& v) { return dynamic_cast<const geom::MemStore&>(v.member()); }

// The brute force: the capsule in `slot` of the band group at volume LBN
// `group` is the member capsule_alloc of member slot / T, slot mod T, on the
// member band that locate() finds at the group's volume track of that member.
struct Brute {
  std::uint32_t member = 0;
  std::vector<Lbn> lbns;              // volume LBNs, block by block
  std::vector<std::uint32_t> splits;  // blocks starting a new class
};
Brute brute_capsule(const StripedGeometry& v, Lbn group, std::uint32_t c, std::uint64_t slot) {
  const geom::MemStore& m = member_of(v);
  const std::uint64_t T = m.sectors_per_track();
  Brute b;
  b.member = std::uint32_t(slot / T);
  const StripedGeometry::MemberLbn start = v.locate(group + b.member * T);
  REQUIRE(start.member == b.member);
  for (Lbn l : capsule_alloc(m, start.lbn, c, slot % T, &b.splits)) b.lbns.push_back(v.volume_lbn(b.member, l));
  return b;
}

bool in(const std::vector<Lbn>& sorted, Lbn l) { return std::binary_search(sorted.begin(), sorted.end(), l); }

// Checks a capsule against the paper's rules on the volume: every block on
// the capsule's member and in the class of its segment's anchor (a segment
// per split, as on one device); returns whether it is split.
bool check_one_member_one_class(const StripedGeometry& v, const Brute& b) {
  std::vector<Lbn> cls = v.equivalent(b.lbns[0]);
  std::size_t seg = 0;
  for (std::uint32_t k = 0; k < b.lbns.size(); ++k) {
    CHECK(v.locate(b.lbns[k]).member == b.member);
    if (seg < b.splits.size() && b.splits[seg] == k) {
      CHECK_FALSE(in(cls, b.lbns[k]));
      cls = v.equivalent(b.lbns[k]);
      ++seg;
    }
    CHECK(in(cls, b.lbns[k]));
  }
  return !b.splits.empty();
}

bool inside(const std::vector<Extent>& extents, Lbn l) {
  return std::any_of(extents.begin(), extents.end(), [&](const Extent& e) { return l >= e.start && l < e.start + e.sectors; });
}

}  // namespace

TEST_CASE("Striped capsules: every cell where the member's CapsuleAlloc puts it, one member and class a capsule",
          "[capsule][striped]") {
  const std::uint32_t p = GENERATE(2u, 4u);
  const std::uint32_t M = GENERATE(0u, 1u);
  INFO("p = " << p << ", M = " << M);
  auto vp = striped_g2(p, M);
  const StripedGeometry& v = *vp;
  const geom::MemStore& m = member_of(v);
  const std::uint64_t T = m.sectors_per_track(), Nx = m.Nx();
  // 6 float64 columns (capsules of 6 sectors), 64 records a cell: two whole
  // band groups of p*T capsules and a partial third.
  const std::uint32_t c = 6;
  const std::uint64_t capsules = 2 * p * T + 77;
  const std::vector<std::uint64_t> shape{capsules * 64 - 5, c};
  CellGrid grid(shape, 8, CapsuleLayout::default_cell(shape, 8, 512), {1, 0});
  CapsuleLayout layout(v, grid);
  REQUIRE(layout.members() == p);
  REQUIRE(layout.capsules() == capsules);
  REQUIRE(layout.capsules_per_band() == p * T);
  REQUIRE(layout.bands() == 3);
  const SpaceRequest req = layout.space();
  CHECK(req.group_tracks == c * p);
  CHECK(req.align_tracks == p);
  CHECK(req.sectors == 3 * c * p * T);
  CHECK(req.boundary_tracks == (M == 0 ? m.Ny() * p : 0));

  // Band groups at member tracks 0, 7 (crosses into cylinder 1: split without
  // micropositioning) and 31: volume tracks 0, 7p, 31p.
  const std::vector<std::uint64_t> mtracks{0, 7, 31};
  std::vector<Extent> ext;
  for (std::uint64_t t : mtracks) ext.push_back({t * p * T, c * p * T});
  layout.place(ext);
  std::uint64_t want_split = 0;
  std::set<Lbn> used;
  std::uint64_t cell[2];
  std::vector<Lbn> prev;  // the previous capsule's LBNs
  for (std::uint64_t q = 0; q < capsules; ++q) {
    const std::uint64_t band = q / (p * T), slot = q % (p * T);
    const Brute b = brute_capsule(v, ext[band].start, c, slot);
    want_split += check_one_member_one_class(v, b);
    // The single-device rule, now per member: a band splits only where it
    // leaves a cylinder micropositioning cannot reach.
    const std::uint64_t t0 = mtracks[band];
    CHECK(!b.splits.empty() == ((t0 + c - 1) / m.Ny() - t0 / m.Ny() > M));
    std::vector<Lbn> got;
    for (cell[1] = 0; cell[1] < c; ++cell[1]) {
      cell[0] = q;  // grid coordinates: one cell (64 records) of a column per capsule
      Run r[2];
      REQUIRE(layout.cell_runs(cell, r) == 1);
      CHECK(r[0].sectors == 1);
      CHECK(r[0].lbn == b.lbns[cell[1]]);
      CHECK(inside(ext, r[0].lbn));
      CHECK(used.insert(r[0].lbn).second);
      got.push_back(r[0].lbn);
      // Block b of capsule q lies on volume track g0 + b*p + (its member).
      CHECK(v.track_of(r[0].lbn) == t0 * p + cell[1] * p + b.member);
      // Where the block's track runs as the band's first (the same row
      // direction) and the capsule is whole, block b of the group's capsules
      // is p*T sequential volume LBNs across the members, capsule by capsule.
      if (b.splits.empty() && cell[1] % 2 == 0) CHECK(r[0].lbn == ext[band].start + cell[1] * p * T + slot);
    }
    // Consecutive capsules in one row of squares of one member: block b one LBN on.
    if (slot % T % Nx != 0)
      for (std::uint32_t k = 0; k < c; ++k) CHECK(got[k] == prev[k] + 1);
    prev = got;
  }
  CHECK(layout.split_capsules() == want_split);
  CHECK(want_split == (M == 0 ? p * T : 0));
  // The two whole groups use every sector of their extents (block b: p whole tracks).
  std::uint64_t whole = 0;
  for (Lbn l : used) whole += l < ext[2].start;
  CHECK(whole == 2 * c * p * T);
}

TEST_CASE("Striped capsules: an attribute streams from every member, a record is one member's access",
          "[capsule][striped]") {
  const std::uint32_t p = GENERATE(2u, 4u);
  auto vp = striped_g2(p);
  const StripedGeometry& v = *vp;
  const std::uint64_t T = member_of(v).sectors_per_track();
  const std::vector<std::uint64_t> shape{64 * p * T * 3, 8};
  CellGrid grid(shape, 8, CapsuleLayout::default_cell(shape, 8, 512), {1, 0});
  CapsuleLayout layout(v, grid);
  // From track 3 (not a multiple of p): the allocator aligns the groups.
  Lbn next = 0;
  const std::vector<Extent> ext = allocate_linear(v, layout.space(), 3 * T, &next);
  REQUIRE(ext.size() == 3);
  for (const Extent& e : ext) {
    CHECK(v.track_of(e.start) % p == 0);
    CHECK(v.track_of(e.start) / (10 * p) == v.track_of(e.start + e.sectors - 1) / (10 * p));  // one cylinder
  }
  layout.place(ext);
  CHECK(layout.split_capsules() == 0);
  // A record: 8 sectors of one class on one member, one batch.
  for (std::uint64_t row : {std::uint64_t(0), std::uint64_t(64 * T + 5), shape[0] - 1}) {
    IoPlan r = plan_selection(layout, Selection::slice(shape, 0, row));
    CHECK(r.sectors == 8);
    REQUIRE(r.batches.size() == 1);
    std::set<std::uint32_t> members;
    for (const geom::Request& q : r.batches[0].requests) members.insert(v.locate(q.lbn).member);
    CHECK(members.size() == 1);
  }
  // A column: one request per band group, p whole tracks, split over all p members.
  IoPlan col = plan_selection(layout, Selection::slice(shape, 1, 3));
  CHECK(col.requests == 3);
  CHECK(col.bytes_read == col.bytes_useful);
  for (const IoBatch& b : col.batches)
    for (const geom::Request& q : b.requests) {
      CHECK(q.sectors == p * T);
      CHECK(v.split(q).size() == p);
    }
  // The same column on one device of the member's geometry takes about p times longer.
  auto one = geom::load_geometry("mems-g2");
  CapsuleLayout single(*one, grid);
  single.place(allocate_linear(*one, single.space(), 0));
  IoPlan col1 = plan_selection(single, Selection::slice(shape, 1, 3));
  const double ms_p = model_plan(col, v), ms_1 = model_plan(col1, *one);
  INFO("column: " << ms_p << " ms on " << p << " members, " << ms_1 << " ms on one");
  CHECK(ms_p < ms_1 / (0.75 * p));
}

TEST_CASE("Striped capsules: a table's attributes own one run of their blocks' tracks per band group",
          "[capsule][striped]") {
  const std::uint32_t p = GENERATE(2u, 4u);
  auto vp = striped_g2(p);
  const StripedGeometry& v = *vp;
  const std::uint64_t T = member_of(v).sectors_per_track();
  std::vector<std::uint32_t> sizes{8, 32, 15, 16};
  CapsuleFormat f = capsule_resolve(sizes, 512, v.parallelism());
  REQUIRE(f.total == 9);
  const std::uint64_t records = f.records * (p * T + 300);  // two band groups, the second partial
  // The table's bands as fs/table/capsule_table.cc allocates them: one request for
  // every attribute (the first's probe), cut into whole groups.
  CellGrid g0({records}, sizes[0], {f.records_per_block(0)}, {0});
  CapsuleLayout probe(v, g0, CapsulePart{f.total, f.first[0], f.blocks[0]});
  REQUIRE(probe.bands() == 2);
  SpaceRequest req = probe.space();
  CHECK(req.sectors == 2 * probe.band_sectors());
  const std::vector<Extent> bands = split_into_bands(allocate_linear(v, req, 5 * T), probe.band_sectors());
  REQUIRE(bands.size() == 2);
  std::set<Lbn> used;
  std::vector<std::vector<Lbn>> capsule_lbns(probe.capsules(), std::vector<Lbn>(f.total));
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    CellGrid grid({records}, sizes[i], {f.records_per_block(i)}, {0});
    CapsuleLayout a(v, grid, CapsulePart{f.total, f.first[i], f.blocks[i]});
    const std::vector<Extent> mine = band_part_extents(bands, a.capsules_per_band(), a.part());
    for (std::size_t k = 0; k < bands.size(); ++k)
      CHECK(mine[k] == Extent{bands[k].start + f.first[i] * p * T, f.blocks[i] * p * T});
    a.place(mine);
    for (std::uint64_t cell = 0; cell < a.grid().grid()[0]; ++cell) {
      Run r[2];
      a.cell_runs(std::span<const std::uint64_t>(&cell, 1), r);
      CHECK(inside(mine, r[0].lbn));
      CHECK(used.insert(r[0].lbn).second);
      std::uint64_t capsule;
      std::uint32_t block;
      a.locate(std::span<const std::uint64_t>(&cell, 1), &capsule, &block);
      capsule_lbns[capsule][block] = r[0].lbn;
    }
  }
  // A record's sectors of every attribute: the brute-force capsule, in one class of one member.
  for (std::uint64_t q = 0; q < probe.capsules(); ++q) {
    const Brute b = brute_capsule(v, bands[q / (p * T)].start, f.total, q % (p * T));
    CHECK(capsule_lbns[q] == b.lbns);
    CHECK_FALSE(check_one_member_one_class(v, b));
  }
}

TEST_CASE("Striped capsules with p = 1 are the single device's, bit for bit", "[capsule][striped]") {
  auto vp = std::make_unique<StripedGeometry>(geom::load_geometry("mems-g2"), 1);
  auto one = geom::load_geometry("mems-g2");
  const std::uint64_t T = 270;
  const std::vector<std::uint64_t> shape{64 * T * 2 + 1000, 5};
  CellGrid grid(shape, 8, CapsuleLayout::default_cell(shape, 8, 512), {1, 0});
  CapsuleLayout a(*vp, grid), b(*one, grid);
  const SpaceRequest ra = a.space(), rb = b.space();
  CHECK(ra.group_tracks == rb.group_tracks);
  CHECK(ra.groups == rb.groups);
  CHECK(ra.sectors == rb.sectors);
  CHECK(ra.boundary_tracks == rb.boundary_tracks);
  CHECK(ra.align_tracks == 0);
  CHECK(rb.align_tracks == 0);
  const std::vector<Extent> ext = allocate_linear(*one, rb, 3 * T);
  CHECK(allocate_linear(*vp, ra, 3 * T) == ext);
  // A band crossing a cylinder too (split capsules).
  std::vector<Extent> hand = ext;
  hand.back() = {8 * T, 5 * T};
  for (const auto& e : {ext, hand}) {
    a.place(e);
    b.place(e);
    CHECK(a.describe() == b.describe());
    std::uint64_t cell[2];
    for (cell[0] = 0; cell[0] < grid.grid()[0]; ++cell[0])
      for (cell[1] = 0; cell[1] < grid.grid()[1]; ++cell[1]) REQUIRE(a.cell_lbn(cell) == b.cell_lbn(cell));
  }
  CHECK(b.split_capsules() > 0);
}

TEST_CASE("Striped capsules: bands off the members' grid and non-MEMS members are refused", "[capsule][striped]") {
  auto vp = striped_g2(4);
  const std::uint64_t T = 270;
  CellGrid grid({1000, 4}, 8, {64, 1}, {1, 0});
  CapsuleLayout ok(*vp, grid);
  CHECK_THROWS_AS(ok.place({{T, 16 * T}}), std::invalid_argument);       // starts on member 1
  CHECK_THROWS_AS(ok.place({{4 * T, 4 * T}}), std::invalid_argument);    // one member's band, not the group
  CHECK_THROWS_AS(ok.place({{4 * T + 1, 16 * T}}), std::invalid_argument);  // not at a track's start
  CHECK_THROWS_AS(ok.place({{vp->capacity_sectors() - 8 * T, 16 * T}}), std::invalid_argument);  // past the end
  CHECK_NOTHROW(ok.place({{8 * T, 16 * T}}));
  // A table part's extent starts at its first block's p tracks.
  CapsuleLayout part(*vp, CellGrid({1000}, 8, {64}, {0}), CapsulePart{3, 1, 1});
  CHECK_THROWS_AS(part.place({{9 * T, 4 * T}}), std::invalid_argument);  // block 1 of a group at track 8 is track 12
  CHECK_NOTHROW(part.place({{12 * T, 4 * T}}));
  StripedGeometry disks(geom::load_geometry("atlas10k3"), 2);
  CHECK_THROWS_AS(CapsuleLayout(disks, grid), std::invalid_argument);
}
