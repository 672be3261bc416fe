// Volumes of several devices (fs/volume/volume_members.cc, fs/device/striped_device.h):
// format, identity checks, where bytes land on the members, RAID 1 failover,
// recording and rebuild, RAID 0 errors. Members are in-memory devices.
#include <catch2/catch.hpp>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <random>
#include <set>

#include <fmt/format.h>
#include <sys/stat.h>

#include "fs/device/fault_device.h"
#include "fs/device/simulated_device.h"
#include "fs/device/split_meta_device.h"
#include "fs/volume/volume.h"
#include "geometry/load.h"
#include "geometry/striped.h"
#include "layouts/layout.h"
#include "layouts/multimap.h"
#include "tests/unit/support/device_test_support.h"

using namespace mmfs::fs;

namespace {

using testing::devices::SwitchableDevice;

constexpr std::uint64_t kMember = 24ull << 20;

// The members' storage outlives the volumes opened on it; each open gets fresh switchable views.
struct Members {
  std::vector<std::unique_ptr<MemoryDevice>> disks;
  std::vector<SwitchableDevice*> views;  // of the last open()
  explicit Members(std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) disks.push_back(std::make_unique<MemoryDevice>(kMember, 512));
  }
  std::vector<MemberTarget> targets(std::vector<std::size_t> which = {}) {
    if (which.empty())
      for (std::size_t i = 0; i < disks.size(); ++i) which.push_back(i);
    views.assign(disks.size(), nullptr);
    std::vector<MemberTarget> out;
    for (std::size_t i : which) {
      auto v = std::make_unique<SwitchableDevice>(disks[i].get());
      views[i] = v.get();
      out.push_back({"disk" + std::to_string(i), std::move(v)});
    }
    return out;
  }
};

std::unique_ptr<Volume> open_members(Members& m, std::vector<std::size_t> which = {}, int* err_out = nullptr,
                                     std::string* msg_out = nullptr) {
  int err = 0;
  std::string msg;
  auto v = Volume::open(m.targets(std::move(which)), &err, &msg, Volume::MembersOptions{});
  if (err_out) *err_out = err;
  if (msg_out) *msg_out = msg;
  return v;
}

std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> out(n);
  for (auto& b : out) b = std::byte(rng());
  return out;
}

int write_bytes(Volume& v, std::uint64_t off, const std::vector<std::byte>& data) {
  AlignedBuffer buf(data.size());
  std::memcpy(buf.data(), data.data(), data.size());
  return v.device().write(off, buf.data(), std::uint32_t(data.size()));
}

int read_bytes(Volume& v, std::uint64_t off, std::vector<std::byte>* out, std::size_t n) {
  AlignedBuffer buf(n);
  int r = v.device().read(off, buf.data(), std::uint32_t(n));
  out->assign(buf.data(), buf.data() + n);
  return r;
}

void format(Members& m, std::uint32_t raid) {
  auto g = mmfs::geom::load_geometry("atlas10k3");
  std::string msg;
  REQUIRE(format_members(m.targets(), *g, raid, {}, nullptr, &msg) == 0);
}

}  // namespace

TEST_CASE("a striped volume puts volume track t on member t mod p at member track t / p", "[members]") {
  Members m(4);
  format(m, 0);
  auto v = open_members(m);
  REQUIRE(v);
  const auto& g = dynamic_cast<const mmfs::geom::StripedGeometry&>(v->geometry());
  CHECK(g.members() == 4);
  CHECK(v->superblock().devices == 4);
  const std::uint64_t ss = g.sector_size();
  // Three whole volume tracks and a bit, starting mid-track: every sector is
  // found on the member the geometry names, at the member LBN it names.
  const mmfs::geom::Lbn first = v->superblock().data_first_lbn + 100;
  const std::size_t n = std::size_t(3 * g.track_length(first) + 7) * ss;
  auto data = pattern(n, 1);
  REQUIRE(write_bytes(*v, first * ss, data) == 0);
  for (std::size_t s = 0; s < n / ss; ++s) {
    const auto at = g.locate(first + s);
    const auto& bytes = m.disks[at.member]->bytes();
    REQUIRE(std::memcmp(bytes.data() + at.lbn * ss, data.data() + s * ss, ss) == 0);
  }
  std::vector<std::byte> back;
  REQUIRE(read_bytes(*v, first * ss, &back, n) == 0);
  CHECK(back == data);
  // Every device got part of the batch.
  for (auto* d : m.views) CHECK(d->calls_ > 0);
}

TEST_CASE("members are checked: missing, foreign and duplicated targets are refused by name", "[members]") {
  Members m(4);
  format(m, 0);
  int err = 0;
  std::string msg;
  CHECK_FALSE(open_members(m, {0, 1, 3}, &err, &msg));
  CHECK(err == ENODEV);
  CHECK_THAT(msg, Catch::Contains("member 2"));

  Members other(2);
  format(other, 0);
  auto targets = m.targets({0, 1, 2});
  auto foreign = other.targets({1});
  targets.push_back(std::move(foreign[0]));
  targets.back().target = "stranger";
  CHECK_FALSE(Volume::open(std::move(targets), &err, &msg, {}));
  CHECK(err == EINVAL);
  CHECK_THAT(msg, Catch::Contains("stranger") && Catch::Contains("not a member"));

  // A byte-for-byte copy of member 1 given beside it.
  Members copy(1);
  copy.disks[0]->bytes() = m.disks[1]->bytes();
  targets = m.targets();
  auto dup = copy.targets();
  dup[0].target = "copy-of-1";
  targets.push_back(std::move(dup[0]));
  CHECK_FALSE(Volume::open(std::move(targets), &err, &msg, {}));
  CHECK_THAT(msg, Catch::Contains("copy-of-1") && Catch::Contains("both member 1"));

  // One member alone says what it is.
  CHECK_FALSE(Volume::open(m.disks.size() ? m.targets({2}) : std::vector<MemberTarget>{}, &err, &msg, {}));
  CHECK_THAT(msg, Catch::Contains("member"));
  // Format refusals.
  auto g = mmfs::geom::load_geometry("atlas10k3");
  Members three(3);
  CHECK(format_members(three.targets(), *g, 1, {}, nullptr, &msg) == EINVAL);
  CHECK_THAT(msg, Catch::Contains("odd"));
}

TEST_CASE("RAID 1 keeps serving from the mirror, records the failure and rebuilds onto a replacement",
          "[members]") {
  Members m(4);
  format(m, 1);
  auto v = open_members(m);
  REQUIRE(v);
  const std::uint64_t ss = v->geometry().sector_size();
  const std::uint64_t off = (v->superblock().data_first_lbn + 5) * ss;
  const std::size_t n = 3 << 20;
  auto data = pattern(n, 2);
  REQUIRE(write_bytes(*v, off, data) == 0);
  // Both copies hold the same bytes (all but their superblocks, which name each one's place).
  const std::size_t sb_room = 64 << 10;
  CHECK(std::memcmp(m.disks[0]->bytes().data() + sb_room, m.disks[1]->bytes().data() + sb_room,
                    kMember - 2 * sb_room) == 0);
  std::vector<std::string> failures;
  v->set_failure_hook([&](const std::string& t, const std::string& why) { failures.push_back(t + ": " + why); });

  m.views[2]->off_ = true;  // device 2 dies
  std::vector<std::byte> back;
  REQUIRE(read_bytes(*v, off, &back, n) == 0);
  CHECK(back == data);
  REQUIRE(failures.size() == 1);
  CHECK_THAT(failures[0], Catch::StartsWith("disk2"));
  CHECK(v->striped()->failed(2));
  // Writes after the failure go to the survivor only.
  auto data2 = pattern(n, 3);
  REQUIRE(write_bytes(*v, off, data2) == 0);
  REQUIRE(read_bytes(*v, off, &back, n) == 0);
  CHECK(back == data2);
  v.reset();

  // The device comes back, but the survivors' superblocks say it failed: its stale copy is never read.
  auto again = open_members(m);
  REQUIRE(again);
  CHECK(again->striped()->failed(2));
  m.views[2]->calls_ = 0;  // its superblocks were read to know it
  for (int round = 0; round < 4; ++round) {
    REQUIRE(read_bytes(*again, off, &back, n) == 0);
    CHECK(back == data2);
  }
  CHECK(m.views[2]->calls_ == 0);
  again.reset();
  // Without the failed device at all, the volume mounts degraded.
  auto degraded = open_members(m, {0, 1, 3});
  REQUIRE(degraded);
  REQUIRE(read_bytes(*degraded, off, &back, n) == 0);
  CHECK(back == data2);
  degraded.reset();

  // Rebuild onto a fresh device, then the volume is whole again.
  Members fresh(1);
  std::string report, msg;
  auto repl = fresh.targets();
  REQUIRE(rebuild_member(m.targets({0, 1, 3}), std::move(repl[0]), &report, &msg) == 0);
  CHECK_THAT(report, Catch::Contains("rebuilt member 2"));
  m.disks[2] = std::move(fresh.disks[0]);
  auto whole = open_members(m);
  REQUIRE(whole);
  CHECK(whole->striped()->failed_devices().empty());
  // The rebuilt copy alone serves the data: its twin is switched off.
  m.views[3]->off_ = true;
  REQUIRE(read_bytes(*whole, off, &back, n) == 0);
  CHECK(back == data2);
}

TEST_CASE("a degraded open runs a RAID 1 volume without a missing or blank member, and only when asked",
          "[members]") {
  Members m(4);
  format(m, 1);
  std::uint64_t off = 0;
  const std::size_t n = 1 << 20;
  const auto data = pattern(n, 5);
  {
    auto v = open_members(m);
    REQUIRE(v);
    off = (v->superblock().data_first_lbn + 7) * v->geometry().sector_size();
    REQUIRE(write_bytes(*v, off, data) == 0);
  }
  int err = 0;
  std::string msg;
  // Member 1 merely missing (never recorded failed): refused, naming it and the option.
  CHECK_FALSE(open_members(m, {0, 2, 3}, &err, &msg));
  CHECK(err == ENODEV);
  CHECK_THAT(msg, Catch::Contains("member 1 of the 4-device volume") && Catch::Contains("-o degraded") &&
                      Catch::Contains("mmfsck --rebuild"));
  // A blank device in its place: refused, saying what -o degraded would do.
  Members blank(1);
  auto targets = m.targets({0, 2, 3});
  auto b = blank.targets();
  b[0].target = "blank";
  targets.push_back(std::move(b[0]));
  CHECK_FALSE(Volume::open(std::move(targets), &err, &msg, {}));
  CHECK_THAT(msg, Catch::Contains("blank") && Catch::Contains("not an mmfs") && Catch::Contains("-o degraded"));

  // Degraded: the blank target is left out, member 1 runs on its mirror, and
  // both are said; the survivors record member 1 failed.
  Volume::MembersOptions o;
  o.degraded = true;
  o.left_out = {"disk9: No such file or directory (left out)"};
  targets = m.targets({0, 2, 3});
  b = blank.targets();
  b[0].target = "blank";
  targets.push_back(std::move(b[0]));
  auto v = Volume::open(std::move(targets), &err, &msg, o);
  INFO(msg);
  REQUIRE(v);
  const auto& notes = v->degraded_notes();
  REQUIRE(notes.size() == 3);
  CHECK(notes[0] == "disk9: No such file or directory (left out)");
  CHECK_THAT(notes[1], Catch::StartsWith("blank: holds no mmfs superblock"));
  CHECK_THAT(notes[2], Catch::Contains("member 1 is missing") && Catch::Contains("mirror, member 0 (disk0)"));
  CHECK(v->striped()->failed(1));
  std::vector<std::byte> back;
  REQUIRE(read_bytes(*v, off, &back, n) == 0);
  CHECK(back == data);
  // Writes go on, to the survivors.
  const auto data2 = pattern(n, 6);
  REQUIRE(write_bytes(*v, off, data2) == 0);
  v.reset();
  // The member comes back: the survivors' superblocks keep its stale copy out, with no option.
  v = open_members(m);
  REQUIRE(v);
  CHECK(v->striped()->failed(1));
  REQUIRE(read_bytes(*v, off, &back, n) == 0);
  CHECK(back == data2);
  CHECK_THAT(v->degraded_notes().at(0), Catch::Contains("member 1 (disk1) is marked failed"));
  v.reset();
  // Both copies of a stripe member gone: refused even degraded.
  CHECK_FALSE(Volume::open(m.targets({2, 3}), &err, &msg, o));
  CHECK(err == ENODEV);
  CHECK_THAT(msg, Catch::Contains("no surviving copy"));
}

TEST_CASE("a RAID 0 volume runs without one member: its metadata from the copy on the other members",
          "[members]") {
  Members m(4);
  format(m, 0);
  int err = 0;
  std::string msg;
  std::vector<std::byte> data = pattern(64 << 10, 7);
  {
    auto v = open_members(m);
    REQUIRE(v);
    CHECK(v->superblock().meta_sets);
    CHECK(v->superblock().version == kMetaSetsVersion);
    Inode n;
    REQUIRE(v->metadata().create(kRootIno, "before", S_IFREG | 0644, 0, 0, "", &n) == 0);
    REQUIRE(v->metadata().sync() == 0);
  }
  // Without -o degraded a missing member is refused, naming it and the option.
  CHECK_FALSE(open_members(m, {0, 2, 3}, &err, &msg));
  CHECK(err == ENODEV);
  CHECK_THAT(msg, Catch::Contains("member 1") && Catch::Contains("-o degraded"));
  // With it, each member in turn: the metadata is whole, new space avoids the lost member.
  Volume::MembersOptions o;
  o.degraded = true;
  for (std::size_t lost = 0; lost < 4; ++lost) {
    INFO("member " << lost << " missing");
    std::vector<std::size_t> others;
    for (std::size_t i = 0; i < 4; ++i)
      if (i != lost) others.push_back(i);
    auto v = Volume::open(m.targets(others), &err, &msg, o);
    INFO(msg);
    REQUIRE(v);
    CHECK_THAT(v->degraded_notes().at(0), Catch::Contains(fmt::format("member {} is missing", lost)));
    CHECK(v->metadata().lookup(kRootIno, "before"));
    const auto& g = dynamic_cast<const mmfs::geom::StripedGeometry&>(v->geometry());
    std::vector<Extent> got;
    REQUIRE(v->allocator().allocate({mmfs::layouts::SpaceShape::Runs, 4 * g.track_length(0)}, &got) == 0);
    for (const Extent& e : got)
      for (mmfs::geom::Lbn x = e.start; x < e.start + e.sectors; ++x) REQUIRE(g.locate(x).member != lost);
    REQUIRE(write_bytes(*v, got.front().start * 512, data) == 0);
    std::vector<std::byte> back;
    REQUIRE(read_bytes(*v, got.front().start * 512, &back, data.size()) == 0);
    CHECK(back == data);
    // Metadata writes go on (to the surviving copy).
    Inode n;
    REQUIRE(v->metadata().create(kRootIno, fmt::format("during{}", lost), S_IFREG | 0644, 0, 0, "", &n) == 0);
    REQUIRE(v->metadata().sync() == 0);
    v.reset();
    // Recorded failed: the next mount needs no option, the member back or not.
    auto again = open_members(m, others, &err, &msg);
    INFO(msg);
    REQUIRE(again);
    CHECK(again->metadata().lookup(kRootIno, fmt::format("during{}", lost)));
    again.reset();
    auto back_again = open_members(m, {}, &err, &msg);
    INFO(msg);
    REQUIRE(back_again);
    CHECK(back_again->superblock().failed == std::vector<std::uint32_t>{std::uint32_t(lost)});
    CHECK(back_again->metadata().lookup(kRootIno, fmt::format("during{}", lost)));  // the copy it lacks is not read
    back_again.reset();
    // Two members out is one too many.
    std::vector<std::size_t> two;
    for (std::size_t i = 0; i < 4; ++i)
      if (i != lost && i != (lost + 1) % 4) two.push_back(i);
    CHECK_FALSE(Volume::open(m.targets(two), &err, &msg, o));
    CHECK(err == ENODEV);
    CHECK_THAT(msg, Catch::Contains("one member at most"));
    // Start the next round from a whole volume again: format anew.
    FormatOptions force;
    force.force = true;
    REQUIRE(format_members(m.targets(), *mmfs::geom::load_geometry("atlas10k3"), 0, force, nullptr, &msg) == 0);
    auto fresh = open_members(m);
    REQUIRE(fresh);
    REQUIRE(fresh->metadata().create(kRootIno, "before", S_IFREG | 0644, 0, 0, "", &n) == 0);
    REQUIRE(fresh->metadata().sync() == 0);
  }
}

TEST_CASE("a RAID 0 volume whose member fails while it runs records it and goes on with the other metadata copy",
          "[members]") {
  Inode n;
  int err = 0;
  std::string msg;
  for (std::uint32_t lost : {1u, 2u}) {  // a member of each copy's set
    INFO("member " << lost << " fails");
    Members m(4);
    format(m, 0);
    auto v = open_members(m);
    REQUIRE(v);
    std::vector<std::string> told;
    v->set_failure_hook(
        [&](const std::string& target, const std::string& reason) { told.push_back(target + ": " + reason); });
    REQUIRE(v->metadata().create(kRootIno, "before", S_IFREG | 0644, 0, 0, "", &n) == 0);
    REQUIRE(v->metadata().sync() == 0);
    CHECK(v->superblock().failed.empty());
    m.views[lost]->off_ = true;
    // Metadata changes go on: the first write or flush that meets the
    // member records it failed, and the commit stands on the other copy.
    for (int i = 0; i < 100; ++i)
      REQUIRE(v->metadata().create(kRootIno, fmt::format("during{}", i), S_IFREG | 0644, 0, 0, "", &n) == 0);
    REQUIRE(v->metadata().sync() == 0);
    CHECK(v->superblock().failed == std::vector<std::uint32_t>{lost});
    CHECK(v->striped()->failed(lost));
    auto* split = dynamic_cast<SplitMetaDevice*>(v->meta_device());
    REQUIRE(split);
    CHECK(split->lost() == SplitMetaDevice::copy_on(lost));
    REQUIRE(told.size() == 1);
    CHECK_THAT(told[0], Catch::Contains(fmt::format("disk{}: member {} failed while the volume runs", lost, lost)) &&
                            Catch::Contains("mmfsck --rebuild"));
    // New space avoids the lost member.
    const auto& g = dynamic_cast<const mmfs::geom::StripedGeometry&>(v->geometry());
    std::vector<Extent> got;
    REQUIRE(v->allocator().allocate({mmfs::layouts::SpaceShape::Runs, 4 * g.track_length(0)}, &got) == 0);
    for (const Extent& e : got)
      for (mmfs::geom::Lbn x = e.start; x < e.start + e.sectors; ++x) REQUIRE(g.locate(x).member != lost);
    REQUIRE(v->metadata().create(kRootIno, "after", S_IFREG | 0644, 0, 0, "", &n) == 0);
    REQUIRE(v->metadata().sync() == 0);
    v.reset();
    // The survivors recorded it: a mount without the member needs no option,
    // and with it back its stale copy is never read.
    std::vector<std::size_t> others;
    for (std::size_t i = 0; i < 4; ++i)
      if (i != lost) others.push_back(i);
    for (const auto& which : {others, std::vector<std::size_t>{}}) {
      auto again = open_members(m, which, &err, &msg);
      INFO(msg);
      REQUIRE(again);
      CHECK(again->superblock().failed == std::vector<std::uint32_t>{lost});
      CHECK(again->metadata().lookup(kRootIno, "before"));
      CHECK(again->metadata().lookup(kRootIno, "during99"));
      CHECK(again->metadata().lookup(kRootIno, "after"));
    }
  }
  // A second member, of the other copy's set, leaves the metadata no copy: its writes fail.
  Members m(4);
  format(m, 0);
  auto v = open_members(m);
  REQUIRE(v);
  m.views[0]->off_ = true;
  REQUIRE(v->metadata().create(kRootIno, "one", S_IFREG | 0644, 0, 0, "", &n) == 0);
  REQUIRE(v->metadata().sync() == 0);
  CHECK(v->superblock().failed == std::vector<std::uint32_t>{0});
  m.views[1]->off_ = true;
  int r = 0;
  for (int i = 0; i < 100 && r == 0; ++i) {
    r = v->metadata().create(kRootIno, fmt::format("two{}", i), S_IFREG | 0644, 0, 0, "", &n);
    if (r == 0) r = v->metadata().sync();
  }
  CHECK(r == EIO);
  CHECK(v->superblock().failed == std::vector<std::uint32_t>{0});
}

TEST_CASE("a RAID 0 volume keeps each metadata copy on its own members", "[members]") {
  Members m(3);
  format(m, 0);
  auto v = open_members(m);
  REQUIRE(v);
  const Superblock& sb = v->superblock();
  const auto& g = dynamic_cast<const mmfs::geom::StripedGeometry&>(v->geometry());
  // Whole stripes: the region starts on member 0 at a track start and ends where a stripe ends.
  CHECK(g.locate(sb.meta_offset / 512).member == 0);
  CHECK(g.locate((sb.meta_offset + sb.meta_length) / 512 - 1).member == 2);
  CHECK(sb.data_first_lbn == (sb.meta_offset + sb.meta_length) / 512);
  // The region header (the store's first block) is at the start of copy 0 on
  // member 0, and its twin at the start of copy 1 on member 1, the same bytes.
  const auto at0 = g.locate(sb.meta_offset / 512);
  const auto at1 = g.locate(sb.meta_offset / 512 + g.track_length(sb.meta_offset / 512));
  REQUIRE(at1.member == 1);
  CHECK(std::memcmp(m.disks[0]->bytes().data() + at0.lbn * 512, "MMFSMETA", 8) == 0);
  CHECK(std::memcmp(m.disks[0]->bytes().data() + at0.lbn * 512, m.disks[1]->bytes().data() + at1.lbn * 512, 512) ==
        0);
}

TEST_CASE("RAID 0 returns EIO for a lost device's data, serves the rest, and reads again when it returns",
          "[members]") {
  Members m(2);
  format(m, 0);
  auto v = open_members(m);
  REQUIRE(v);
  const auto& g = dynamic_cast<const mmfs::geom::StripedGeometry&>(v->geometry());
  const std::uint64_t ss = g.sector_size();
  const mmfs::geom::Lbn t0 = v->superblock().data_first_lbn;
  const std::size_t track = std::size_t(g.track_length(t0) * ss);
  auto data = pattern(4 * track, 4);
  REQUIRE(write_bytes(*v, t0 * ss, data) == 0);
  const std::uint32_t lost = g.locate(t0).member;
  m.views[lost]->off_ = true;
  std::vector<std::byte> back;
  CHECK(read_bytes(*v, t0 * ss, &back, track) == EIO);       // on the lost device
  REQUIRE(read_bytes(*v, t0 * ss + track, &back, track) == 0);  // on the other
  CHECK(std::equal(back.begin(), back.end(), data.begin() + std::ptrdiff_t(track)));
  CHECK_FALSE(v->striped()->failed(lost));
  m.views[lost]->off_ = false;
  REQUIRE(read_bytes(*v, t0 * ss, &back, 4 * track) == 0);
  CHECK(back == data);
}

TEST_CASE("multimap on a striped volume keeps every basic cube on one member, inside its extent", "[members]") {
  auto g = std::make_unique<mmfs::geom::StripedGeometry>(mmfs::geom::load_geometry("atlas10k3"), 4);
  using namespace mmfs::layouts;
  for (const std::vector<std::uint64_t>& shape :
       {std::vector<std::uint64_t>{64, 96, 40}, std::vector<std::uint64_t>{300, 200}}) {
    CellGrid grid(shape, 512, std::vector<std::uint64_t>(shape.size(), 1), CellGrid::default_order(shape.size()));
    auto layout = make_layout("multimap", *g, grid);
    const SpaceRequest req = layout->space();
    CHECK(req.group_tracks % 4 == 0);
    layout->place(allocate_linear(*g, req, 7 * g->track_length(0)));
    std::set<Lbn> seen;
    std::map<std::uint64_t, std::uint32_t> cube_member;
    std::vector<std::uint64_t> cell(shape.size(), 0);
    const auto* mm = dynamic_cast<const MultiMapLayout*>(layout.get());
    REQUIRE(mm);
    for (std::uint64_t linear = 0; linear < grid.cells(); ++linear) {
      std::uint64_t rest = linear;
      for (std::size_t d = shape.size(); d-- > 0;) {
        cell[d] = rest % shape[d];
        rest /= shape[d];
      }
      const Lbn lbn = layout->cell_lbn(cell);
      REQUIRE(seen.insert(lbn).second);  // no two cells share a sector
      bool inside = false;
      for (const Extent& e : layout->extents()) inside |= lbn >= e.start && lbn < e.start + e.sectors;
      REQUIRE(inside);
      // A basic cube (cells of one batch key) lives on one member.
      const std::uint32_t member = g->locate(lbn).member;
      auto [it, fresh] = cube_member.emplace(layout->batch_key(cell), member);
      REQUIRE(it->second == member);
    }
    // Successive cubes use every member (as far as there are cubes).
    std::set<std::uint32_t> members;
    for (const auto& [key, m] : cube_member) members.insert(m);
    CHECK(members.size() == std::min<std::size_t>(4, cube_member.size()));
  }
}

TEST_CASE("a batch the striped device refuses whole fails with EINVAL and touches no member", "[members]") {
  Members m(2);
  format(m, 0);
  auto v = open_members(m);
  REQUIRE(v);
  for (auto* d : m.views) d->calls_ = 0;
  AlignedBuffer buf(4096);
  std::vector<IoRequest> batch = {{IoRequest::Op::Read, v->device().size_bytes(), 4096, buf.data(), 0},
                                  {IoRequest::Op::Read, 100, 4096, buf.data(), 0}};  // past the end; misaligned
  CHECK(v->device().submit(batch) == EINVAL);
  CHECK(batch[0].result == EINVAL);
  CHECK(batch[1].result == EINVAL);
  for (auto* d : m.views) CHECK(d->calls_ == 0);
}

TEST_CASE("multimap on a striped volume keeps a basic cube the user gave", "[members]") {
  auto g = std::make_unique<mmfs::geom::StripedGeometry>(mmfs::geom::load_geometry("atlas10k3"), 4);
  using namespace mmfs::layouts;
  const std::vector<std::uint64_t> shape = {64, 96, 40};
  CellGrid grid(shape, 512, {1, 1, 1}, CellGrid::default_order(3));
  auto layout = make_layout("multimap", *g, grid, {64, 8, 40});
  CHECK(layout->describe().at("basic_cube") == nlohmann::json({64, 8, 40}));
}

TEST_CASE("a simulate mount of a striped volume models its members in parallel", "[members][simulate]") {
  Members m(4);
  format(m, 0);
  int err = 0;
  std::string msg;
  Volume::MembersOptions o;
  o.simulate = true;
  auto v = Volume::open(m.targets(), &err, &msg, o);
  REQUIRE(v);
  auto* sim = dynamic_cast<SimulatedDevice*>(&v->device());
  REQUIRE(sim);
  const auto& g = dynamic_cast<const mmfs::geom::StripedGeometry&>(v->geometry());
  const std::uint64_t ss = g.sector_size();
  // A whole volume track at the first track boundary past the metadata, then the p - 1 next ones.
  const mmfs::geom::Lbn start = g.track_boundaries(v->superblock().data_first_lbn + 4 * 686).low;
  const std::uint32_t track = std::uint32_t(g.track_length(start));
  auto data = pattern(std::size_t(4) * track * ss, 3);
  REQUIRE(write_bytes(*v, start * ss, data) == 0);

  // One batch of 4 volume tracks: one whole track on each member, served at once.
  std::vector<std::byte> back;
  double before = sim->modeled_ms();
  REQUIRE(read_bytes(*v, start * ss, &back, data.size()) == 0);
  const double parallel = sim->modeled_ms() - before;
  CHECK(back == data);
  // The same 4 tracks' worth from ONE member: volume tracks start, start + 4p, ... (member tracks m, m+4, ...)
  // read one after another, each its own batch.
  before = sim->modeled_ms();
  for (int i = 0; i < 4; ++i) {
    std::vector<std::byte> one;
    REQUIRE(read_bytes(*v, (start + mmfs::geom::Lbn(i) * 16 * track) * ss, &one, std::size_t(track) * ss) == 0);
  }
  const double serial = sim->modeled_ms() - before;
  // A whole track with zero-latency firmware is at most about a revolution and a switch (6 ms) plus a seek;
  // 4 of them in a row cost about 4 times that, the parallel batch about one.
  INFO("parallel " << parallel << " ms, serial " << serial << " ms");
  CHECK(parallel > 6.0 * 0.9);
  CHECK(parallel < 2 * 6.0 + 5.0);
  CHECK(serial > 3.0 * parallel);
}
