// mmfsck --rebuild of a RAID 0 member (fs/volume/volume_members.cc
// rebuild_member) and the repair of the data that lay on it
// (fs/scrub/member_repair.h), on a volume of four in-memory members: member
// 1 replaced by a blank device, its metadata copy written from the other
// copy (the volume then opens whole, both copies equal), an array with a
// copy on other members made whole in every placement, and an array without
// copies listed as lost.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fs/array/array_file.h"
#include "fs/array/array_index.h"
#include "fs/array/copy_spec.h"
#include "fs/paths/view_path.h"
#include "fs/scrub/member_repair.h"
#include "fs/volume/fsck.h"
#include "fs/volume/volume.h"
#include "geometry/load.h"
#include "geometry/striped.h"
#include "indexes/bitmap.h"
#include "indexes/values.h"
#include "tests/unit/support/array_test_support.h"
#include "tests/unit/support/array_view_support.h"
#include "tests/unit/support/fs_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;
using namespace mmfs::fs::testing::arrays;

namespace {

constexpr std::uint64_t kMember = 24ull << 20;

std::vector<MemberTarget> targets(std::vector<std::unique_ptr<MemoryDevice>>& disks, std::vector<std::size_t> which) {
  std::vector<MemberTarget> out;
  for (std::size_t i : which) out.push_back({fmt::format("disk{}", i), std::make_unique<RefDevice>(*disks[i])});
  return out;
}

// The arrays' context on an open volume: its I/O, its member sets.
struct OnVolume {
  explicit OnVolume(Volume& vol)
      : io(vol.device(), vol.geometry()),
        sets(vol.allocator(), vol.device(), vol.geometry()),
        ctx{vol.metadata(), vol.allocator(), io, vol.geometry(), "atlas10k3"} {
    ctx.member_sets = &sets;
  }
  SectorIo io;
  MemberSets sets;
  ArrayContext ctx;
};

Bytes placement_bytes(ArrayFile& a, std::size_t k) {
  const ArraySchema s = a.schema();
  const std::vector<std::string> path{"copy", std::to_string(k)};
  auto r = resolve_view(path, s.shape, s.dtype.itemsize, false, {}, s.copies.size());
  REQUIRE(std::holds_alternative<ViewNode>(r));
  const DataView v = *std::get<ViewNode>(r).data;
  Bytes out(v.bytes(s.dtype.itemsize));
  std::size_t got = 0;
  std::string msg;
  INFO("placement " << k);
  const int rc = a.read_view(v, 0, out.size(), reinterpret_cast<std::byte*>(out.data()), &got, &msg);
  INFO(msg);
  REQUIRE(rc == 0);
  return out;
}

}  // namespace

TEST_CASE("RAID 0 rebuild: the metadata copy from its twin, an array's cells from its copies", "[members][rebuild]") {
  std::vector<std::unique_ptr<MemoryDevice>> disks;
  for (int i = 0; i < 4; ++i) disks.push_back(std::make_unique<MemoryDevice>(kMember, 512));
  std::string msg;
  REQUIRE(format_members(targets(disks, {0, 1, 2, 3}), *geom::load_geometry("atlas10k3"), 0, {}, nullptr, &msg) == 0);
  std::mt19937_64 rng(173);
  Bytes kept, alone;
  Ino kept_ino = 0;
  {
    int err = 0;
    auto vol = Volume::open(targets(disks, {0, 1, 2, 3}), &err, &msg, {});
    REQUIRE(vol);
    OnVolume on(*vol);
    ArrayContext& ctx = on.ctx;
    auto make = [&](const std::string& name, ArraySchema s, Bytes* model) {
      Inode n;
      REQUIRE(vol->metadata().create(kRootIno, name, S_IFREG | 0644, 0, 0, "", &n) == 0);
      std::shared_ptr<ArrayFile> a;
      REQUIRE(ArrayFile::create(ctx, n, s, nullptr, &a, &msg) == 0);
      *model = random_bytes(rng, a->size());
      REQUIRE(write_file(*a, 0, *model) == 0);
      REQUIRE(a->flush(true, &msg) == 0);
      REQUIRE(a->catch_up(&msg) == 0);
      a->quiesce();
      return n.ino;
    };
    ArraySchema s = make_schema({96, 80, 48}, "int32", "zorder");
    REQUIRE(set_schema_attr(s, "copies", "naive:order=0,2,1").error == 0);
    s.index = "e1";
    s.bins = "100";
    kept_ino = make("kept", s, &kept);
    ArraySchema t = make_schema({64, 64, 64}, "float64", "naive");
    t.index = "e1";
    make("alone", t, &alone);
    // Both indexes have bytes on member 1: what the rebuild does with them is seen.
    const auto& g = dynamic_cast<const geom::StripedGeometry&>(vol->geometry());
    for (const Ino ino : {kept_ino, *vol->metadata().lookup(kRootIno, "alone")}) {
      bool on_member1 = false;
      for (const Extent& e : ArrayIndex::stored_extents(vol->metadata(), ino))
        for (const auto& [member, piece] : g.split({e.start, std::uint32_t(e.sectors)})) on_member1 |= member == 1;
      REQUIRE(on_member1);
    }
  }
  // Member 1 is replaced by a blank device.
  auto blank = std::make_unique<MemoryDevice>(kMember, 512);
  std::string report;
  REQUIRE(rebuild_member(targets(disks, {0, 2, 3}), {"new1", std::make_unique<RefDevice>(*blank)}, &report, &msg) ==
          0);
  CHECK_THAT(report, Catch::Contains("rebuilt member 1 of RAID 0 volume") && Catch::Contains("metadata copy 1"));
  disks[1] = std::move(blank);
  int err = 0;
  // Whole again: no option, no member failed, both metadata copies verify equal, mmfsck clean.
  Volume::MembersOptions o;
  o.metadata.verify_copies = true;
  auto vol = Volume::open(targets(disks, {0, 1, 2, 3}), &err, &msg, o);
  INFO(msg);
  REQUIRE(vol);
  CHECK(vol->superblock().failed.empty());
  CHECK(vol->metadata_report().problems.empty());
  MemberRepairReport rep;
  REQUIRE(repair_member_data(*vol, 1, &rep, &msg) == 0);
  CHECK(rep.arrays == 1);
  CHECK(rep.cells > 0);
  // The array with a copy has its index built anew from the data the copy
  // put back; the other's is lost with its cells.
  CHECK(rep.indexes == 1);
  REQUIRE(rep.lost.size() == 2);
  CHECK_THAT(rep.lost[0], Catch::Contains("/alone") && Catch::Contains("no copies"));
  CHECK_THAT(rep.lost[1], Catch::Contains("/alone: its bitmap index") && Catch::Contains("lost too"));
  CHECK(rep.failed.empty());
  // Every placement of the array reads whole again; the other fails its checksums.
  OnVolume on(*vol);
  ArrayContext& ctx = on.ctx;
  std::shared_ptr<ArrayFile> a;
  REQUIRE(ArrayFile::open(ctx, kept_ino, *decode_schema(*vol->metadata().xattr(kept_ino, "mmfs.schema")), &a, &msg) ==
          0);
  CHECK(bytes_diff(placement_bytes(*a, 0), kept) == "");
  CHECK(bytes_diff(placement_bytes(*a, 1), kept) == "");
  // Its index answers from its new bytes: every row of `>= 0` and none else,
  // each bitmap read from the device and verified.
  {
    const indexes::KeySet keys = indexes::compare_keys(indexes::ValueType::I32, indexes::CompareOp::Ge, *indexes::parse_number("0"));
    std::vector<indexes::Estimate> est;
    QueryCost cost;
    REQUIRE(a->atom_estimates({keys}, std::nullopt, &est, &cost, &msg) == 0);
    indexes::Bitmap truth;
    for (std::uint64_t i = 0; i < kept.size() / 4; ++i) {
      std::int32_t v = 0;
      std::memcpy(&v, kept.data() + i * 4, 4);
      if (v >= 0) truth.add(i);
    }
    CHECK(indexes::is_subset(est[0].sure_rows(), truth));
    CHECK(indexes::is_subset(truth, est[0].sure_rows() | est[0].maybe));
    CHECK(cost.index_read_bytes > 0);
  }
  a->quiesce();
  a.reset();
  const Ino alone_ino = *vol->metadata().lookup(kRootIno, "alone");
  REQUIRE(ArrayFile::open(ctx, alone_ino, *decode_schema(*vol->metadata().xattr(alone_ino, "mmfs.schema")), &a,
                          &msg) == 0);
  Bytes out(alone.size());
  std::size_t got = 0;
  CHECK(a->read(0, out.size(), reinterpret_cast<std::byte*>(out.data()), &got, &msg) == EIO);
  CHECK_THAT(msg, Catch::Contains("failed its checksum"));
  a->quiesce();
  a.reset();
  CHECK(check_volume(*vol, false).problems.empty());
}

TEST_CASE("RAID 0 rebuild: an mloc primary's image on the member is sealed anew from its copy",
          "[members][rebuild][mloc_copies]") {
  std::vector<std::unique_ptr<MemoryDevice>> disks;
  for (int i = 0; i < 4; ++i) disks.push_back(std::make_unique<MemoryDevice>(kMember, 512));
  std::string msg;
  REQUIRE(format_members(targets(disks, {0, 1, 2, 3}), *geom::load_geometry("atlas10k3"), 0, {}, nullptr, &msg) == 0);
  std::mt19937_64 rng(181);
  Bytes model;
  Ino ino = 0;
  std::uint32_t member = 0;
  std::vector<Extent> image;
  {
    int err = 0;
    auto vol = Volume::open(targets(disks, {0, 1, 2, 3}), &err, &msg, {});
    REQUIRE(vol);
    OnVolume on(*vol);
    ArrayContext& ctx = on.ctx;
    Inode n;
    REQUIRE(vol->metadata().create(kRootIno, "sealed", S_IFREG | 0644, 0, 0, "", &n) == 0);
    std::shared_ptr<ArrayFile> a;
    REQUIRE(ArrayFile::create(ctx, n, make_schema({48, 40, 32}, "float64", "mloc"), nullptr, &a, &msg) == 0);
    model = random_bytes(rng, a->size());
    REQUIRE(write_file(*a, 0, model) == 0);
    REQUIRE(a->settle(&msg) == 0);
    ArraySchema s = a->schema();
    REQUIRE(set_schema_attr(s, "copies", "zorder").error == 0);
    REQUIRE(a->change_schema(s, &msg) == 0);
    REQUIRE(a->catch_up(&msg) == 0);
    REQUIRE(a->cells_locked() == nullptr);
    a->quiesce();
    ino = n.ino;
    image = *decode_extents(*vol->metadata().store().get(keys::mloc_extents(ino)));
    const auto& g = dynamic_cast<const geom::StripedGeometry&>(vol->geometry());
    member = g.locate(image.front().start).member;
    const auto copy_members = a->schema().copies[0].members;
    REQUIRE(std::find(copy_members.begin(), copy_members.end(), member) == copy_members.end());
  }
  std::vector<std::size_t> others;
  for (std::size_t i = 0; i < 4; ++i)
    if (i != member) others.push_back(i);
  auto blank = std::make_unique<MemoryDevice>(kMember, 512);
  std::string report;
  REQUIRE(rebuild_member(targets(disks, others), {"new", std::make_unique<RefDevice>(*blank)}, &report, &msg) == 0);
  disks[member] = std::move(blank);
  int err = 0;
  auto vol = Volume::open(targets(disks, {0, 1, 2, 3}), &err, &msg, {});
  INFO(msg);
  REQUIRE(vol);
  MemberRepairReport rep;
  REQUIRE(repair_member_data(*vol, member, &rep, &msg) == 0);
  CHECK(rep.lost.empty());
  CHECK(rep.failed.empty());
  CHECK(rep.arrays == 1);
  // A new image (fresh extents: the blank member's were given back) that reads the array.
  CHECK(*decode_extents(*vol->metadata().store().get(keys::mloc_extents(ino))) != image);
  OnVolume on(*vol);
  ArrayContext& ctx = on.ctx;
  std::shared_ptr<ArrayFile> a;
  REQUIRE(ArrayFile::open(ctx, ino, *decode_schema(*vol->metadata().xattr(ino, "mmfs.schema")), &a, &msg) == 0);
  CHECK(a->cells_locked() == nullptr);
  CHECK(bytes_diff(placement_bytes(*a, 0), model) == "");
  CHECK(bytes_diff(placement_bytes(*a, 1), model) == "");
  a->quiesce();
  a.reset();
  const auto problems = check_volume(*vol, false).problems;
  INFO((problems.empty() ? "" : problems[0]));
  CHECK(problems.empty());
}

TEST_CASE("RAID 0 rebuild: cells lost with the member are listed; the copies catch up on every other cell",
          "[members][rebuild][lost]") {
  std::vector<std::unique_ptr<MemoryDevice>> disks;
  for (int i = 0; i < 4; ++i) disks.push_back(std::make_unique<MemoryDevice>(kMember, 512));
  std::string msg;
  REQUIRE(format_members(targets(disks, {0, 1, 2, 3}), *geom::load_geometry("atlas10k3"), 0, {}, nullptr, &msg) == 0);
  std::mt19937_64 rng(331);
  Bytes model;
  Ino ino = 0;
  constexpr std::uint64_t kRow = 80 * 48 * 4;
  {
    int err = 0;
    auto vol = Volume::open(targets(disks, {0, 1, 2, 3}), &err, &msg, {});
    REQUIRE(vol);
    OnVolume on(*vol);
    Inode n;
    REQUIRE(vol->metadata().create(kRootIno, "kept", S_IFREG | 0644, 0, 0, "", &n) == 0);
    ino = n.ino;
    ArraySchema s = make_schema({96, 80, 48}, "int32", "zorder");
    REQUIRE(set_schema_attr(s, "copies", "naive:order=0,2,1").error == 0);
    std::shared_ptr<ArrayFile> a;
    REQUIRE(ArrayFile::create(on.ctx, n, s, nullptr, &a, &msg) == 0);
    REQUIRE(a->schema().members == std::vector<std::uint32_t>{0, 2});
    model = random_bytes(rng, a->size());
    REQUIRE(write_file(*a, 0, model) == 0);
    REQUIRE(a->flush(true, &msg) == 0);
    REQUIRE(a->catch_up(&msg) == 0);
    // Row 4 rewritten and durable on the primary; its copy has not caught up.
    a->quiesce();
    const Bytes row = random_bytes(rng, kRow);
    std::copy(row.begin(), row.end(), model.begin() + 4 * kRow);
    REQUIRE(write_file(*a, 4 * kRow, row) == 0);
    REQUIRE(a->flush(true, &msg) == 0);
    REQUIRE(a->info()["copies"][0]["state"] == "behind");
  }
  {
    // Member 0 is gone: a degraded mount promotes the copy, row 4's cells lost.
    Volume::MembersOptions o;
    o.degraded = true;
    int err = 0;
    auto vol = Volume::open(targets(disks, {1, 2, 3}), &err, &msg, o);
    INFO(msg);
    REQUIRE(vol);
    OnVolume on(*vol);
    on.ctx.member_lost = [](std::uint32_t m) { return m == 0; };
    std::shared_ptr<ArrayFile> a;
    REQUIRE(ArrayFile::open(on.ctx, ino, *decode_schema(*vol->metadata().xattr(ino, "mmfs.schema")), &a, &msg) == 0);
    CHECK(a->schema().members == std::vector<std::uint32_t>{1, 3});
    REQUIRE(a->info().contains("lost_cells"));
    a->quiesce();
  }
  auto blank = std::make_unique<MemoryDevice>(kMember, 512);
  std::string report;
  REQUIRE(rebuild_member(targets(disks, {1, 2, 3}), {"new0", std::make_unique<RefDevice>(*blank)}, &report, &msg) ==
          0);
  disks[0] = std::move(blank);
  int err = 0;
  auto vol = Volume::open(targets(disks, {0, 1, 2, 3}), &err, &msg, {});
  INFO(msg);
  REQUIRE(vol);
  MemberRepairReport rep;
  REQUIRE(repair_member_data(*vol, 0, &rep, &msg) == 0);
  REQUIRE(rep.lost.size() == 1);
  CHECK_THAT(rep.lost[0], Catch::Contains("/kept") && Catch::Contains("array cell(s)"));
  CHECK(rep.failed.empty());

  OnVolume on(*vol);
  std::shared_ptr<ArrayFile> a;
  REQUIRE(ArrayFile::open(on.ctx, ino, *decode_schema(*vol->metadata().xattr(ino, "mmfs.schema")), &a, &msg) == 0);
  // The old primary, now copy 1, caught up on every cell but those over the
  // lost ones: still behind, serving nothing; the rows beside read.
  const nlohmann::json info = a->info();
  CHECK(info["copies"][0]["state"] == "behind");
  const std::uint64_t lost_rows = info["cell"][0].get<std::uint64_t>();  // row 4's cells: rows 0 .. lost_rows - 1
  // Behind: exactly the copy's cells over those rows.
  const std::uint64_t copy_rows = info["copies"][0]["cell"][0].get<std::uint64_t>();
  const std::uint64_t copy_cells = info["copies"][0]["cells"].get<std::uint64_t>();
  CHECK(info["copies"][0]["cells_behind"].get<std::uint64_t>() ==
        copy_cells / ((96 + copy_rows - 1) / copy_rows) * ((lost_rows + copy_rows - 1) / copy_rows));
  Bytes out(kRow);
  std::size_t got = 0;
  CHECK(a->read(4 * kRow, kRow, reinterpret_cast<std::byte*>(out.data()), &got, &msg) == EIO);
  CHECK_THAT(msg, Catch::Contains("lost with a failed member"));
  const std::uint64_t beside = 4 / lost_rows * lost_rows + lost_rows;
  REQUIRE(a->read(beside * kRow, kRow, reinterpret_cast<std::byte*>(out.data()), &got, &msg) == 0);
  CHECK(std::equal(out.begin(), out.end(), model.begin() + std::ptrdiff_t(beside * kRow)));
  // Written whole: nothing lost, and copy 1 catches up on the rest.
  REQUIRE(write_file(*a, 0, model) == 0);
  REQUIRE(a->flush(true, &msg) == 0);
  CHECK_FALSE(a->info().contains("lost_cells"));
  REQUIRE(a->catch_up(&msg) == 0);
  CHECK(a->info()["copies"][0]["state"] == "current");
  CHECK(bytes_diff(placement_bytes(*a, 0), model) == "");
  CHECK(bytes_diff(placement_bytes(*a, 1), model) == "");
  a->quiesce();
  a.reset();
  CHECK(check_volume(*vol, false).problems.empty());
}
