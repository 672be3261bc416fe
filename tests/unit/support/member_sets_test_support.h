// Arrays on a RAID 0 volume of four in-memory members, each behind a
// RefDevice a test can make fail (fs/array/member_sets.h): the volume, its
// member sets and the ArrayContext over them, reopened with members missing
// (degraded), and checks of every placement of an array against its bytes.
#pragma once

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "fs/array/array_file.h"
#include "fs/array/member_sets.h"
#include "fs/array/copy_spec.h"
#include "fs/device/fault_device.h"
#include "fs/meta/keys.h"
#include "fs/paths/view_path.h"
#include "fs/volume/fsck.h"
#include "fs/volume/volume.h"
#include "geometry/load.h"
#include "geometry/striped.h"
#include "tests/unit/support/array_test_support.h"
#include "tests/unit/support/array_view_support.h"
#include "tests/unit/support/copies_test_support.h"
#include "tests/unit/support/fs_test_support.h"

namespace mmfs::fs::testing::members {

using namespace mmfs::fs::testing::arrays;

inline constexpr std::uint64_t kMember = 24ull << 20;

// A RAID 0 volume of four members, each behind a RefDevice the test can make fail.
struct Striped {
  std::vector<std::unique_ptr<MemoryDevice>> disks;
  std::vector<RefDevice*> views;
  std::unique_ptr<Volume> vol;
  std::unique_ptr<SectorIo> io;
  std::unique_ptr<MemberSets> sets;
  std::vector<std::string> around;
  // The lost members an ArrayContext reports (a degraded mount's), and the
  // promotions it was told of.
  MemberLost lost = nullptr;
  std::vector<std::string> promoted;
  std::vector<std::string> healed;  // what on_healed was told

  Striped() {
    for (int i = 0; i < 4; ++i) disks.push_back(std::make_unique<MemoryDevice>(kMember, 512));
    auto g = geom::load_geometry("atlas10k3");
    std::string msg;
    REQUIRE(format_members(targets(), *g, 0, {}, nullptr, &msg) == 0);
    int err = 0;
    vol = Volume::open(targets(), &err, &msg, Volume::MembersOptions{});
    INFO(msg);
    REQUIRE(vol);
    io = std::make_unique<SectorIo>(vol->device(), vol->geometry());
    sets = std::make_unique<MemberSets>(vol->allocator(), vol->device(), vol->geometry());
    REQUIRE(sets->stripe_members() == 4);
  }
  ~Striped() { close(); }
  void close() {
    sets.reset();
    io.reset();
    vol.reset();
  }
  // The volume again, from the members in `which` only (the others missing), degraded.
  void reopen(const std::vector<std::size_t>& which) {
    close();
    std::vector<MemberTarget> all = targets(), some;
    for (std::size_t i : which) some.push_back(std::move(all[i]));
    // The members left out are destroyed with `all`: no view of them remains.
    for (std::size_t i = 0; i < views.size(); ++i)
      if (std::find(which.begin(), which.end(), i) == which.end()) views[i] = nullptr;
    Volume::MembersOptions o;
    o.degraded = true;
    int err = 0;
    std::string msg;
    vol = Volume::open(std::move(some), &err, &msg, o);
    INFO(msg);
    REQUIRE(vol);
    io = std::make_unique<SectorIo>(vol->device(), vol->geometry());
    sets = std::make_unique<MemberSets>(vol->allocator(), vol->device(), vol->geometry());
  }
  std::vector<MemberTarget> targets() {
    std::vector<MemberTarget> out;
    views.clear();
    for (std::size_t i = 0; i < disks.size(); ++i) {
      auto v = std::make_unique<RefDevice>(*disks[i]);
      views.push_back(v.get());
      out.push_back({fmt::format("disk{}", i), std::move(v)});
    }
    return out;
  }
  ArrayContext ctx() {
    ArrayContext c{vol->metadata(), vol->allocator(), *io, vol->geometry(), vol->geometry().name()};
    c.member_sets = sets.get();
    c.on_served_around = [this](Ino, const std::string& m) { around.push_back(m); };
    c.member_lost = lost;
    c.on_promoted = [this](Ino, const std::string& m) { promoted.push_back(m); };
    c.on_healed = [this](Ino, const std::string& m) { healed.push_back(m); };
    return c;
  }
  const geom::StripedGeometry& geometry() const { return dynamic_cast<const geom::StripedGeometry&>(vol->geometry()); }
  // Every read of member `m` fails (a lost disk), or none with m < 0.
  void lose(int m) {
    for (RefDevice* v : views)
      if (v) v->failing.clear();
    if (m < 0) return;
    REQUIRE(views[std::size_t(m)] != nullptr);  // a member the volume was opened without
    views[std::size_t(m)]->failing.emplace_back(0, kMember);
  }
  // The members the volume sectors of `extents` lie on.
  std::set<std::uint32_t> members_of(const std::vector<Extent>& extents) const {
    std::set<std::uint32_t> out;
    for (const Extent& e : extents)
      for (geom::Lbn v = e.start; v < e.start + e.sectors; ++v) out.insert(geometry().locate(v).member);
    return out;
  }
  std::vector<Extent> copy_extents(Ino ino, std::uint8_t slot) const {
    auto v = vol->metadata().store().get(keys::copy_extents(ino, slot));
    REQUIRE(v);
    auto e = decode_extents(*v);
    REQUIRE(e);
    return *e;
  }
  // The volume's free sectors plus every sector the array's placements hold.
  std::uint64_t accounted(const ArrayFile& a) const {
    std::uint64_t total = vol->allocator().free_sectors();
    for (const Extent& e : vol->metadata().extents(a.ino())) total += e.sectors;
    for (const CopySpec& c : a.schema().copies)
      for (const Extent& e : copy_extents(a.ino(), c.slot)) total += e.sectors;
    return total;
  }
};

inline std::set<std::uint32_t> as_set(const std::vector<std::uint32_t>& v) { return {v.begin(), v.end()}; }

// The whole array and a slice along every dimension, through placement k, equal `model`.
inline void check_placement(ArrayFile& a, std::size_t k, const Bytes& model) {
  const ArraySchema s = a.schema();
  INFO("placement " << k);
  CHECK(bytes_diff(view_bytes(a, {"copy", std::to_string(k)}), model) == "");
  for (std::size_t d = 0; d < s.shape.size(); ++d) {
    std::vector<Sel> sel(s.shape.size());
    for (std::size_t e = 0; e < s.shape.size(); ++e) sel[e] = Sel{false, 0, s.shape[e], 1};
    sel[d] = Sel{true, s.shape[d] / 3, 0, 1};
    CHECK(bytes_diff(view_bytes(a, {"copy", fmt::format("{}@", k), "slice", std::to_string(d),
                                    std::to_string(s.shape[d] / 3)}),
                     extract(model, s.shape, s.dtype.itemsize, sel)) == "");
  }
}

// An array `name` of schema `s` created on `m`, filled with random bytes
// (returned in *model), durable and its copies current.
inline std::shared_ptr<ArrayFile> filled(Striped& m, const std::string& name, const ArraySchema& s, std::mt19937_64& rng,
                                  Bytes* model) {
  Inode n;
  new_file(m.vol->metadata(), name, &n);
  std::shared_ptr<ArrayFile> a;
  std::string msg;
  REQUIRE(ArrayFile::create(m.ctx(), n, s, nullptr, &a, &msg) == 0);
  *model = random_bytes(rng, a->size());
  REQUIRE(write_file(*a, 0, *model) == 0);
  REQUIRE(a->flush(true, &msg) == 0);
  REQUIRE(a->catch_up(&msg) == 0);
  return a;
}

inline std::optional<ArraySchema> stored_schema_of(Striped& m, Ino ino) {
  auto v = m.vol->metadata().xattr(ino, std::string(ArrayFile::kSchemaXattr));
  return v ? decode_schema(*v) : std::nullopt;
}

inline std::shared_ptr<ArrayFile> reopen(Striped& m, std::shared_ptr<ArrayFile> a) {
  const Ino ino = a->ino();
  a->quiesce();
  a.reset();
  auto stored = decode_schema(*m.vol->metadata().xattr(ino, std::string(ArrayFile::kSchemaXattr)));
  REQUIRE(stored);
  std::string msg;
  REQUIRE(ArrayFile::open(m.ctx(), ino, *stored, &a, &msg) == 0);
  return a;
}

// The members `members` lost, as a degraded mount's ArrayContext tells it.
inline MemberLost lose(std::vector<std::uint32_t> members) {
  return [members](std::uint32_t m) { return std::find(members.begin(), members.end(), m) != members.end(); };
}

// The volume again from the members in `which` (a degraded mount's, telling
// `lost`; nullptr: a read-only one, or every member back), and the array on it.
inline std::shared_ptr<ArrayFile> reopen_array(Striped& m, Ino ino, const std::vector<std::size_t>& which, MemberLost lost) {
  m.reopen(which);
  m.lost = std::move(lost);
  std::shared_ptr<ArrayFile> a;
  std::string msg;
  const int rc = ArrayFile::open(m.ctx(), ino, *stored_schema_of(m, ino), &a, &msg);
  INFO(msg);
  REQUIRE(rc == 0);
  return a;
}

// Every member back (as after mmfsck --rebuild): the array's copy catches
// up, and both placements read `model`.
inline void with_every_member_back(Striped& m, Ino ino, const Bytes& model) {
  auto a = reopen_array(m, ino, {0, 1, 2, 3}, nullptr);
  std::string msg;
  REQUIRE(a->catch_up(&msg) == 0);
  CHECK(a->info()["copies"][0]["state"] == "current");
  check_placement(*a, 0, model);
  check_placement(*a, 1, model);
  a->quiesce();
}

// After the array `ino` was promoted once (its schema now `after`): a
// degraded open without member 0 promotes nothing more and reads `model`,
// and with every member back the old primary catches up.
inline void promoted_once_then_member_back(Striped& m, Ino ino, const ArraySchema& after, const Bytes& model) {
  const std::size_t promotions = m.promoted.size();
  auto a = reopen_array(m, ino, {1, 2, 3}, lose({0}));
  CHECK(m.promoted.size() == promotions);
  CHECK(a->schema() == after);
  CHECK(bytes_diff(read_all(*a), model) == "");
  a->quiesce();
  a.reset();
  with_every_member_back(m, ino, model);
}

// mmfsck's check of the volume finds nothing.
inline void check_clean(Striped& m) {
  REQUIRE(m.vol->metadata().sync() == 0);
  const auto report = check_volume(*m.vol, false);
  INFO((report.problems.empty() ? "" : report.problems[0]));
  CHECK(report.problems.empty());
}

}  // namespace mmfs::fs::testing::members
