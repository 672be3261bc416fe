// MemberSubset (geometry/member_subset.h): a set of a striped volume's
// members as a striped volume of its own, checked against every sector of
// small zoned-disk, MEMS and flash volumes: the mapping is a bijection onto
// the set's members, keeps tracks, skews and GETADJACENT, and converts runs
// both ways.
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <set>

#include "geometry/member_subset.h"
#include "geometry/striped.h"
#include "tests/unit/support/geometry_errors.h"
#include "tests/unit/support/striped_test_support.h"

using namespace mmfs::geom;
using testing::error_of;

namespace {

// Each member kind of the striped tests: a zoned disk, a MEMStore, flash.
std::unique_ptr<Geometry> member_of(int kind) { return testing::make_member(testing::Kind(kind)); }

}  // namespace

TEST_CASE("placements get disjoint member sets where the volume has enough members", "[member_subset]") {
  CHECK(MemberSubset::members_for(4, 2, 0) == std::vector<std::uint32_t>{0, 2});
  CHECK(MemberSubset::members_for(4, 2, 1) == std::vector<std::uint32_t>{1, 3});
  CHECK(MemberSubset::members_for(3, 2, 0) == std::vector<std::uint32_t>{0, 2});
  CHECK(MemberSubset::members_for(3, 2, 1) == std::vector<std::uint32_t>{1});
  CHECK(MemberSubset::members_for(6, 3, 2) == std::vector<std::uint32_t>{2, 5});
  CHECK(MemberSubset::members_for(1, 1, 0) == std::vector<std::uint32_t>{0});
  // Fewer members than placements: they share.
  CHECK(MemberSubset::members_for(1, 2, 1) == std::vector<std::uint32_t>{0});
  CHECK(MemberSubset::members_for(2, 3, 2) == std::vector<std::uint32_t>{0});
  // Every member serves some placement, and no two placements share one when p >= placements.
  for (std::uint32_t p = 1; p <= 7; ++p)
    for (std::uint32_t n = 1; n <= 4; ++n) {
      std::map<std::uint32_t, int> uses;
      for (std::uint32_t k = 0; k < n; ++k)
        for (std::uint32_t m : MemberSubset::members_for(p, n, k)) ++uses[m];
      if (p >= n) {
        CHECK(uses.size() == p);
        for (auto [m, count] : uses) CHECK(count == 1);
      }
    }
  CHECK(error_of([] { MemberSubset::members_for(4, 2, 2); }) == ErrorKind::Invalid);
  CHECK(error_of([] { MemberSubset::members_for(0, 1, 0); }) == ErrorKind::Invalid);
}

TEST_CASE("a member set maps every sector once onto its members, keeping tracks, skews and adjacency",
          "[member_subset]") {
  for (int kind = 0; kind < 3; ++kind)
    for (auto [p, members] : std::vector<std::pair<std::uint32_t, std::vector<std::uint32_t>>>{
             {1, {0}}, {3, {0, 2}}, {3, {1}}, {4, {3, 1}}, {4, {0, 1, 2, 3}}, {5, {4, 0, 2}}}) {
      CAPTURE(kind, p, members);
      StripedGeometry volume(member_of(kind), p);
      MemberSubset set(volume, members);
      const StripedGeometry& sub = set.geometry();
      REQUIRE(sub.members() == members.size());
      REQUIRE(sub.capacity_sectors() == volume.member().capacity_sectors() * members.size());
      std::set<Lbn> seen;
      for (Lbn v = 0; v < sub.capacity_sectors(); ++v) {
        const Lbn parent = set.to_parent(v);
        REQUIRE(seen.insert(parent).second);
        const auto on = volume.locate(parent);
        REQUIRE(std::find(members.begin(), members.end(), on.member) != members.end());
        // The same member sector: sub-member k' is parent member members[k'].
        const auto sub_on = sub.locate(v);
        REQUIRE(members[sub_on.member] == on.member);
        REQUIRE(sub_on.lbn == on.lbn);
        REQUIRE(set.contains(parent));
        REQUIRE(set.to_sub(parent) == v);
        // A sub-track is one parent track of the same length, at the same offset.
        const TrackBounds st = sub.track_boundaries(v), pt = volume.track_boundaries(parent);
        REQUIRE(st.length() == pt.length());
        REQUIRE(v - st.low == parent - pt.low);
        REQUIRE(sub.skew(v) == volume.skew(parent));
        for (std::uint32_t step = 1; step <= sub.depth(); ++step) {
          Lbn a = 0;
          try {
            a = sub.adjacent(v, step);
          } catch (const GeometryError& e) {
            REQUIRE(e.kind() == ErrorKind::OutOfRange);  // past the last track: the volume says so too
            CHECK(error_of([&] { volume.adjacent(parent, step); }) == ErrorKind::OutOfRange);
            continue;
          }
          REQUIRE(set.to_parent(a) == volume.adjacent(parent, step));
        }
      }
      // Every sector of the set's members is reached.
      std::uint64_t on_set = 0;
      for (Lbn v = 0; v < volume.capacity_sectors(); ++v)
        if (set.contains(v)) ++on_set;
      CHECK(on_set == seen.size());
      CHECK(set.is_whole_volume() == (members.size() == p && std::is_sorted(members.begin(), members.end())));
      if (set.is_whole_volume())
        for (Lbn v = 0; v < sub.capacity_sectors(); ++v) REQUIRE(set.to_parent(v) == v);
    }
}

TEST_CASE("runs convert both ways sector by sector, merged where contiguous", "[member_subset]") {
  std::mt19937_64 rng(55);
  for (int kind = 0; kind < 3; ++kind)
    for (auto [p, members] : std::vector<std::pair<std::uint32_t, std::vector<std::uint32_t>>>{
             {2, {1}}, {4, {0, 2}}, {4, {0, 1, 2, 3}}, {3, {2, 0}}}) {
      CAPTURE(kind, p, members);
      StripedGeometry volume(member_of(kind), p);
      MemberSubset set(volume, members);
      const Lbn cap = set.geometry().capacity_sectors();
      for (int trial = 0; trial < 200; ++trial) {
        std::vector<LbnRun> runs;
        for (int r = 0, n = int(rng() % 4) + 1; r < n; ++r) {
          const Lbn first = rng() % cap;
          runs.push_back({first, 1 + rng() % (cap - first)});
        }
        const std::vector<LbnRun> parent = set.to_parent(runs);
        std::vector<Lbn> expected, got;
        for (const LbnRun& r : runs)
          for (Lbn v = r.first; v < r.first + r.count; ++v) expected.push_back(set.to_parent(v));
        for (const LbnRun& r : parent) {
          REQUIRE(r.count > 0);
          for (Lbn v = r.first; v < r.first + r.count; ++v) got.push_back(v);
        }
        REQUIRE(got == expected);
        for (std::size_t i = 1; i < parent.size(); ++i)
          REQUIRE(parent[i - 1].first + parent[i - 1].count != parent[i].first);
        // And back: the same sectors in the same order.
        std::vector<Lbn> back;
        for (const LbnRun& r : set.to_sub(parent))
          for (Lbn v = r.first; v < r.first + r.count; ++v) back.push_back(v);
        std::vector<Lbn> sub_sectors;
        for (const LbnRun& r : runs)
          for (Lbn v = r.first; v < r.first + r.count; ++v) sub_sectors.push_back(v);
        REQUIRE(back == sub_sectors);
      }
      // A whole sub-track is one parent run; the whole subset, one run per member track at most.
      const TrackBounds t = set.geometry().track_boundaries(0);
      CHECK(set.to_parent({{t.low, t.length()}}).size() == 1);
      CHECK(set.to_parent({{0, cap}}).size() <= set.geometry().tracks());
    }
}

TEST_CASE("the part of volume runs on a member set, sector by sector", "[member_subset]") {
  std::mt19937_64 rng(9);
  for (int kind = 0; kind < 3; ++kind) {
    StripedGeometry volume(member_of(kind), 4);
    MemberSubset set(volume, {0, 2});
    const Lbn cap = volume.capacity_sectors();
    for (int trial = 0; trial < 200; ++trial) {
      const Lbn first = rng() % cap;
      const LbnRun run{first, 1 + rng() % (cap - first)};
      std::vector<Lbn> expected, got;
      for (Lbn v = run.first; v < run.first + run.count; ++v)
        if (set.contains(v)) expected.push_back(set.to_sub(v));
      const std::vector<LbnRun> parts = set.on_set({run});
      for (const LbnRun& r : parts)
        for (Lbn v = r.first; v < r.first + r.count; ++v) got.push_back(v);
      REQUIRE(got == expected);
      for (std::size_t i = 1; i < parts.size(); ++i) REQUIRE(parts[i - 1].first + parts[i - 1].count != parts[i].first);
    }
    // The whole volume: the whole set, in one run.
    CHECK(set.on_set({{0, cap}}) == std::vector<LbnRun>{{0, set.geometry().capacity_sectors()}});
  }
}

TEST_CASE("member sets refuse bad members and LBNs off the set", "[member_subset]") {
  StripedGeometry volume(member_of(0), 3);
  CHECK(error_of([&] { MemberSubset(volume, {}); }) == ErrorKind::Invalid);
  CHECK(error_of([&] { MemberSubset(volume, {3}); }) == ErrorKind::Invalid);
  CHECK(error_of([&] { MemberSubset(volume, {1, 1}); }) == ErrorKind::Invalid);
  MemberSubset set(volume, {1});
  const Lbn first_on_0 = volume.volume_lbn(0, 0), first_on_1 = volume.volume_lbn(1, 0);
  CHECK_FALSE(set.contains(first_on_0));
  CHECK(set.contains(first_on_1));
  CHECK(error_of([&] { set.to_sub(first_on_0); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { set.to_sub(volume.capacity_sectors()); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { set.to_parent(set.geometry().capacity_sectors()); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { set.to_parent(std::vector<LbnRun>{{set.geometry().capacity_sectors() - 1, 2}}); }) ==
        ErrorKind::OutOfRange);
  CHECK(error_of([&] { set.to_sub(std::vector<LbnRun>{{first_on_0, 1}}); }) == ErrorKind::OutOfRange);
  CHECK(set.on_set({{first_on_0, 1}}).empty());
  CHECK(error_of([&] { set.on_set({{volume.capacity_sectors() - 1, 2}}); }) == ErrorKind::OutOfRange);
}
