// MemberSets and MemberSetSite (fs/array/member_sets.h): which members each
// placement gets, one site per set for the mount's lifetime, what the site
// translates to the volume's LBNs (extents, single sectors, plans), where
// its space comes from, and its device counters summed into the volume's.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "fs/array/member_sets.h"
#include "fs/device/block_device.h"
#include "fs/device/fault_device.h"
#include "geometry/load.h"
#include "geometry/striped.h"
#include "tests/unit/support/fs_test_support.h"
#include "tests/unit/support/striped_test_support.h"

using namespace mmfs;
using fs::Allocator;
using fs::MemberSets;
using fs::MemberSetSite;
using layouts::Extent;

namespace {

struct Fixture {
  geom::StripedGeometry volume{geom::load_geometry(geom::testing::small_disk_json()), 4};  // 600 sectors
  fs::MemoryDevice device{600 * 512, 512};
  Allocator allocator{volume, 20, volume.capacity_sectors()};
  MemberSets sets{allocator, device, volume};
};

}  // namespace

TEST_CASE("member sets: the members each placement gets", "[member_sets]") {
  Fixture f;
  CHECK(f.sets.stripe_members() == 4);
  CHECK(f.sets.members_for(1, 0).empty());  // a lone placement keeps the whole volume
  CHECK(f.sets.members_for(2, 0) == std::vector<std::uint32_t>{0, 2});
  CHECK(f.sets.members_for(2, 1) == std::vector<std::uint32_t>{1, 3});
  CHECK(f.sets.members_for(3, 0) == std::vector<std::uint32_t>{0, 3});
  CHECK(f.sets.members_for(5, 4) == std::vector<std::uint32_t>{0});  // fewer members than placements: shared
  // One device: no sets at all.
  auto single = geom::load_geometry(geom::testing::small_disk_json());
  fs::MemoryDevice one(150 * 512, 512);
  Allocator alloc(*single, 10, single->capacity_sectors());
  MemberSets none(alloc, one, *single);
  CHECK(none.stripe_members() == 1);
  CHECK(none.members_for(3, 1).empty());
  std::string msg;
  CHECK(none.site({0}, &msg) == nullptr);
  CHECK(msg.find("has one") != std::string::npos);
}

TEST_CASE("member sets: one site per set; members the volume lacks are refused", "[member_sets]") {
  Fixture f;
  std::string msg;
  MemberSetSite* a = f.sets.site({1, 3}, &msg);
  REQUIRE(a);
  CHECK(f.sets.site({1, 3}, &msg) == a);
  CHECK(f.sets.site({3, 1}, &msg) != a);  // another order is another striping
  CHECK(a->members() == std::vector<std::uint32_t>{1, 3});
  CHECK(a->geometry().capacity_sectors() == 300);
  for (const std::vector<std::uint32_t>& bad : {std::vector<std::uint32_t>{4}, {1, 1}, {}}) {
    msg.clear();
    CHECK(f.sets.site(bad, &msg) == nullptr);
    CHECK_FALSE(msg.empty());
  }
}

TEST_CASE("member sets: a site's space, sectors and plans in the volume's LBNs", "[member_sets]") {
  Fixture f;
  std::string msg;
  MemberSetSite* site = f.sets.site({1, 3}, &msg);
  REQUIRE(site);
  const std::uint64_t free_before = f.allocator.free_sectors();
  std::vector<Extent> got;
  REQUIRE(site->allocate({layouts::SpaceShape::Runs, 40}, &got) == 0);
  std::uint64_t sectors = 0;
  for (const Extent& e : got) sectors += e.sectors;
  CHECK(f.allocator.free_sectors() == free_before - sectors);
  // The same sectors on the volume, each on member 1 or 3, in order.
  const std::vector<Extent> on_volume = site->to_volume(got);
  std::vector<geom::Lbn> expect, seen;
  for (const Extent& e : got)
    for (geom::Lbn v = e.start; v < e.start + e.sectors; ++v) expect.push_back(site->to_volume(v));
  for (const Extent& e : on_volume) {
    for (geom::Lbn v = e.start; v < e.start + e.sectors; ++v) seen.push_back(v);
    CHECK(f.volume.locate(e.start).member == f.volume.locate(e.start + e.sectors - 1).member);
  }
  CHECK(seen == expect);
  for (geom::Lbn v : seen) CHECK((f.volume.locate(v).member == 1 || f.volume.locate(v).member == 3));
  // A plan's requests, split where they change member, keep their sectors.
  layouts::IoPlan plan;
  plan.batches.push_back({{{got.front().start, std::uint32_t(got.front().sectors)}}});
  plan.requests = 1;
  plan.modeled_ms = 1.5;
  const layouts::IoPlan shown = site->to_volume(plan);
  CHECK(shown.modeled_ms == 1.5);
  std::uint64_t shown_sectors = 0;
  for (const geom::Request& r : shown.batches.at(0).requests) {
    shown_sectors += r.sectors;
    CHECK(f.volume.locate(r.lbn).member == f.volume.locate(r.lbn + r.sectors - 1).member);
  }
  CHECK(shown_sectors == got.front().sectors);
  CHECK(shown.requests == shown.batches[0].requests.size());
  site->free(got);
  CHECK(f.allocator.free_sectors() == free_before);
}

TEST_CASE("member sets: a site's device counters are added to the volume's", "[member_sets]") {
  Fixture f;
  std::string msg;
  MemberSetSite* site = f.sets.site({0, 2}, &msg);
  REQUIRE(site);
  fs::AlignedBuffer buf(4 * 512);
  REQUIRE(site->io().write(std::vector<fs::SectorRun>{{10, 4, buf.data()}}) == 0);
  REQUIRE(site->io().read(std::vector<fs::SectorRun>{{10, 4, buf.data()}}) == 0);
  nlohmann::json volume = {{"sectors_read", 100}, {"sectors_written", 7}, {"requests", 3}, {"sector_size", 512},
                           {"modeled_ms", 0.5}};
  f.sets.add_stats(&volume);
  CHECK(volume["sectors_read"] == 104);
  CHECK(volume["sectors_written"] == 11);
  CHECK(volume["requests"].get<std::uint64_t>() > 3);
  CHECK(volume["sector_size"] == 512);  // not a counter
  CHECK(volume["modeled_ms"].get<double>() > 0.5);
  CHECK_FALSE(volume.contains("batches"));  // only the volume's own fields
}
