// SubsetAllocator (fs/meta/subset_allocator.h): a member set's space in its
// own LBNs, taken in the volume's one free map. Everything it hands out lies
// on the set's members, inside the data area, clear of what the volume has
// given anyone else, and goes back to the volume's map when freed.
#include <catch2/catch.hpp>

#include <cerrno>
#include <set>

#include "fs/meta/allocator.h"
#include "fs/meta/subset_allocator.h"
#include "geometry/load.h"
#include "geometry/member_subset.h"
#include "geometry/striped.h"
#include "layouts/layout.h"
#include "tests/unit/support/striped_test_support.h"

using namespace mmfs;
using fs::Allocator;
using fs::SubsetAllocator;
using geom::Lbn;
using layouts::Extent;
using layouts::SpaceShape;

namespace {

// The sectors of sub-VLBN extents, as VLBNs (each once).
std::set<Lbn> volume_sectors(const geom::MemberSubset& set, const std::vector<Extent>& extents) {
  std::set<Lbn> out;
  for (const Extent& e : extents)
    for (Lbn v = e.start; v < e.start + e.sectors; ++v) REQUIRE(out.insert(set.to_parent(v)).second);
  return out;
}

bool is_free(const Allocator& map, Lbn v) {
  for (const Extent& e : map.free_extents())
    if (v >= e.start && v < e.start + e.sectors) return true;
  return false;
}

}  // namespace

TEST_CASE("a member set's space lies on its members, clear of the volume's other allocations", "[subset_alloc]") {
  geom::StripedGeometry volume(geom::load_geometry(geom::testing::small_disk_json()), 4);  // 600 sectors
  const Lbn first = 20;  // a metadata area below the data area
  Allocator map(volume, first, volume.capacity_sectors());
  geom::MemberSubset set(volume, {1, 3});
  SubsetAllocator sub(map, set);
  std::uint64_t on_set = 0;
  for (Lbn v = first; v < volume.capacity_sectors(); ++v) on_set += set.contains(v);
  CHECK(sub.free_sectors() == on_set);

  // Another array takes a run on member 1 first (whole tracks from the bottom: members 0..3 in turn).
  std::vector<Extent> other;
  REQUIRE(map.allocate({SpaceShape::Runs, 60}, &other) == 0);
  std::set<Lbn> others;
  for (const Extent& e : other)
    for (Lbn v = e.start; v < e.start + e.sectors; ++v) others.insert(v);
  const std::uint64_t volume_free = map.free_sectors(), set_free = sub.free_sectors();
  CHECK(set_free < on_set);  // some of it was on the set's members

  // Runs and track groups for layouts over the set's geometry.
  std::vector<Extent> runs, groups;
  REQUIRE(sub.allocate({SpaceShape::Runs, 40}, &runs) == 0);
  layouts::SpaceRequest tg{SpaceShape::TrackGroups, 0, 2, 2, 0};
  REQUIRE(sub.allocate(tg, &groups) == 0);
  std::set<Lbn> mine = volume_sectors(set, runs);
  for (Lbn v : volume_sectors(set, groups)) REQUIRE(mine.insert(v).second);  // no overlap between them
  for (Lbn v : mine) {
    CHECK(v >= first);
    CHECK(set.contains(v));
    CHECK_FALSE(others.count(v));
    CHECK_FALSE(is_free(map, v));  // taken in the volume's map
  }
  CHECK(map.free_sectors() == volume_free - mine.size());
  CHECK(sub.free_sectors() == set_free - mine.size());
  // Each track group is whole sub-tracks, consecutive on one member (the layout's rule on the set's geometry).
  for (const Extent& e : groups) {
    CHECK(set.geometry().track_boundaries(e.start).low == e.start);
    CHECK(set.geometry().track_boundaries(e.start + e.sectors - 1).high == e.start + e.sectors - 1);
  }

  // More than the set has free: ENOSPC, nothing taken, though the volume has the room elsewhere.
  std::vector<Extent> none;
  const std::uint64_t before = map.free_sectors();
  REQUIRE(map.free_sectors() > sub.free_sectors() + 10);
  CHECK(sub.allocate({SpaceShape::Runs, sub.free_sectors() + 10}, &none) == ENOSPC);
  CHECK(none.empty());
  CHECK(map.free_sectors() == before);

  // Freed: back in the volume's map; freeing twice is refused.
  for (const Extent& e : runs) CHECK(sub.free(e));
  for (const Extent& e : groups) CHECK(sub.free(e));
  CHECK(map.free_sectors() == volume_free);
  CHECK(sub.free_sectors() == set_free);
  CHECK_FALSE(sub.free(runs[0]));
  CHECK_FALSE(sub.free({set.geometry().capacity_sectors(), 1}));
}

TEST_CASE("a member set's allocation fills the set before failing, from the bottom up", "[subset_alloc]") {
  geom::StripedGeometry volume(geom::load_geometry(geom::testing::small_disk_json()), 3);
  Allocator map(volume, 0, volume.capacity_sectors());
  geom::MemberSubset set(volume, {2});
  SubsetAllocator sub(map, set);
  // One sub-track at a time: the set's tracks in order, which are member 2's tracks bottom up.
  Lbn last = 0;
  for (int i = 0;; ++i) {
    std::vector<Extent> got;
    const int r = sub.allocate({SpaceShape::Runs, 1}, &got);
    if (r == ENOSPC) break;
    REQUIRE(r == 0);
    REQUIRE(got.size() == 1);
    const Lbn v = set.to_parent(got[0].start);
    CHECK(volume.locate(v).member == 2);
    if (i > 0) CHECK(v > last);
    last = v;
  }
  CHECK(sub.free_sectors() < set.geometry().capacity_sectors());
  // Members 0 and 1 are untouched.
  std::uint64_t free_elsewhere = 0;
  for (const Extent& e : map.free_extents())
    for (Lbn v = e.start; v < e.start + e.sectors; ++v) free_elsewhere += volume.locate(v).member != 2;
  CHECK(free_elsewhere == 2 * volume.member().capacity_sectors());
}
