// Self-healing from the mirror of a RAID 1 volume (ArrayFile::heal_from_mirror_locked,
// MirrorSide): a cell damaged on one side is served from the other and
// rewritten to both, by a view read or by the scrub's repair pass; a cell
// damaged on both sides is EIO, never wrong bytes. Members are in-memory
// devices; the damage is put at the member sectors the striped geometry maps
// the array's cells to.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fs/array/array_file.h"
#include "fs/device/fault_device.h"
#include "fs/device/striped_device.h"
#include "fs/volume/volume.h"
#include "geometry/load.h"
#include "geometry/striped.h"
#include "tests/unit/support/array_test_support.h"
#include "tests/unit/support/array_view_support.h"
#include "tests/unit/support/fs_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;
using namespace mmfs::fs::testing::arrays;

namespace {

constexpr std::uint64_t kMember = 24ull << 20;

struct Mirrored {
  std::vector<std::unique_ptr<MemoryDevice>> disks;
  std::unique_ptr<Volume> vol;
  std::unique_ptr<SectorIo> io;
  std::vector<std::string> healed;

  Mirrored() {
    for (int i = 0; i < 4; ++i) disks.push_back(std::make_unique<MemoryDevice>(kMember, 512));
    auto g = geom::load_geometry("atlas10k3");
    std::string msg;
    REQUIRE(format_members(targets(), *g, 1, {}, nullptr, &msg) == 0);
    int err = 0;
    vol = Volume::open(targets(), &err, &msg, Volume::MembersOptions{});
    INFO(msg);
    REQUIRE(vol);
    io = std::make_unique<SectorIo>(vol->device(), vol->geometry());
  }
  // Views of the disks (the volume owns them; the disks stay here).
  std::vector<MemberTarget> targets() {
    std::vector<MemberTarget> out;
    for (std::size_t i = 0; i < disks.size(); ++i)
      out.push_back({fmt::format("disk{}", i), std::make_unique<RefDevice>(*disks[i])});
    return out;
  }
  ArrayContext ctx() {
    ArrayContext c{vol->metadata(), vol->allocator(), *io, vol->geometry(), vol->geometry().name()};
    c.on_healed = [this](Ino, const std::string& m) { healed.push_back(m); };
    return c;
  }
  // Flips a byte of the sector holding the element at `coords`, on one side
  // of the mirror; returns (stripe member, member LBN).
  std::pair<std::uint32_t, geom::Lbn> damage(const ArrayFile& a, const std::vector<std::uint64_t>& coords, int side) {
    std::string text, msg;
    REQUIRE(a.lbn_text(coords, &text, &msg) == 0);
    const geom::Lbn v = std::stoull(text);
    const auto at = dynamic_cast<const geom::StripedGeometry&>(vol->geometry()).locate(v);
    disks[2 * at.member + std::uint32_t(side)]->bytes()[at.lbn * 512 + 77] ^= std::byte{0x3C};
    return {at.member, at.lbn};
  }
  bool sides_agree(std::pair<std::uint32_t, geom::Lbn> where) {
    const auto [member, lbn] = where;
    return std::memcmp(disks[2 * member]->bytes().data() + lbn * 512,
                       disks[2 * member + 1]->bytes().data() + lbn * 512, 512) == 0;
  }
};

}  // namespace

TEST_CASE("RAID 1: a cell damaged on one side is served from the other and rewritten to both",
          "[array_file][mirror]") {
  Mirrored m;
  REQUIRE(m.io->mirror_sides() == 2);
  std::mt19937_64 rng(83);
  // Cells of one sector (4x4x4 float64): damage on the two sides never meets in one cell.
  ArraySchema s = make_schema({24, 32, 16}, "float64", "multimap");
  s.cell = {4, 4, 4};
  Inode n;
  new_file(m.vol->metadata(), "mirrored", &n);
  std::shared_ptr<ArrayFile> a;
  std::string msg;
  REQUIRE(ArrayFile::create(m.ctx(), n, s, nullptr, &a, &msg) == 0);
  const Bytes model = random_bytes(rng, a->size());
  REQUIRE(write_file(*a, 0, model) == 0);
  REQUIRE(a->flush(true, &msg) == 0);
  const Ino ino = a->ino();
  // Side 0 of some cells, side 1 of others: each read finds the good side.
  std::vector<std::pair<std::uint32_t, geom::Lbn>> damaged;
  for (std::uint64_t c = 0; c < 6 * 8 * 4; c += 7)
    damaged.push_back(m.damage(*a, {c / 32 * 4, c / 4 % 8 * 4, c % 4 * 4}, int(c / 7 % 2)));
  for (const auto& d : damaged) REQUIRE_FALSE(m.sides_agree(d));
  auto reopen = [&] {
    a->quiesce();
    a.reset();
    const auto stored = decode_schema(*m.vol->metadata().xattr(ino, std::string(ArrayFile::kSchemaXattr)));
    REQUIRE(stored);
    REQUIRE(ArrayFile::open(m.ctx(), ino, *stored, &a, &msg) == 0);
  };
  reopen();
  // Every read sees the bytes written, whichever side each piece came from.
  CHECK(bytes_diff(read_all(*a), model) == "");
  for (std::uint64_t i : {0u, 7u, 23u}) {
    const DataView v = resolve({"slice", "0", std::to_string(i)}, a->schema());
    CHECK(bytes_diff(read_view_bytes(*a, v, 0, v.bytes(8)), extract(model, s.shape, 8,
                                                                     {Sel{true, i, 0, 1}, Sel{false, 0, 32, 1},
                                                                      Sel{false, 0, 16, 1}})) == "");
  }
  // The scrub's pass reads both sides and rewrites every damaged cell: the sides agree again.
  std::atomic<bool> stop{false};
  std::uint64_t repaired = 0;
  REQUIRE(a->repair_placements(stop, &repaired, &msg) == 0);
  INFO(msg);
  REQUIRE(!m.healed.empty());
  CHECK(m.healed.front().find("of the mirror; served from side") != std::string::npos);
  CHECK(m.healed.size() == damaged.size());
  for (const auto& d : damaged) CHECK(m.sides_agree(d));
  repaired = 0;
  REQUIRE(a->repair_placements(stop, &repaired, &msg) == 0);
  CHECK(repaired == 0);
  reopen();
  CHECK(bytes_diff(read_all(*a), model) == "");

  // The same sector damaged on both sides: EIO, never other bytes.
  m.damage(*a, {8, 8, 8}, 0);
  m.damage(*a, {8, 8, 8}, 1);
  reopen();
  Bytes out(a->size());
  std::size_t got = 0;
  CHECK(a->read(0, out.size(), reinterpret_cast<std::byte*>(out.data()), &got, &msg) == EIO);
  repaired = 0;
  CHECK(a->repair_placements(stop, &repaired, &msg) == EIO);
  CHECK(msg.find("both sides of the mirror") != std::string::npos);
}
