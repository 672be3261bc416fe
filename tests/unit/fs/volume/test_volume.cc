// Volumes: format, open, and crash consistency of the whole metadata path
// (fs/volume/volume.h, fs/meta/metadata.h) on the fault-injecting device,
// checked with fsck (whose own tests are in test_fsck.cc).
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>

#include "fs/device/fault_device.h"
#include "fs/volume/fsck.h"
#include "fs/volume/volume.h"
#include "geometry/load.h"
#include "tests/unit/support/volume_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;

namespace {

using namespace testing::volumes;

std::map<std::string, std::string> dump(const MetaStore& s) {
  std::map<std::string, std::string> m;
  s.scan("", [&](std::string_view k, std::string_view v) {
    m.emplace(k, v);
    return true;
  });
  return m;
}

}  // namespace

TEST_CASE("format and open a volume", "[volume]") {
  auto g = small_disk();
  auto dev = formatted(*g);
  auto vol = open_ok(std::move(dev));
  CHECK(vol->superblock().label == "test");
  CHECK(vol->geometry().name() == "small");
  CHECK(vol->geometry().capacity_sectors() == g->capacity_sectors());
  CHECK(vol->primary_valid());
  CHECK(vol->backup_valid());
  auto root = vol->metadata().inode(kRootIno);
  REQUIRE(root);
  CHECK(S_ISDIR(root->mode));
  // The data area starts on a track boundary after the metadata region.
  CHECK(vol->superblock().data_first_lbn % 64 == 0);
  CHECK(vol->superblock().data_first_lbn * 512 >= vol->superblock().meta_offset + vol->superblock().meta_length);
  CHECK(vol->allocator().free_sectors() == vol->superblock().data_end_lbn - vol->superblock().data_first_lbn);
  auto report = check_volume(*vol, false);
  CHECK(report.problems.empty());
  CHECK(report.exit_code() == 0);
}

TEST_CASE("format refuses signatures, small targets and small sectors", "[volume]") {
  auto g = small_disk();
  auto dev = formatted(*g);
  std::string msg;
  FormatOptions opt;
  CHECK(format_volume(*dev, *g, opt, nullptr, &msg) == EEXIST);
  CHECK_THAT(msg, Catch::Contains("mmfs") && Catch::Contains("-f"));
  opt.force = true;
  opt.meta_bytes = 4 << 20;
  CHECK(format_volume(*dev, *g, opt, nullptr, &msg) == 0);

  MemoryDevice ext4(16 << 20, 512);
  ext4.bytes()[1080] = std::byte{0x53};
  ext4.bytes()[1081] = std::byte{0xef};
  CHECK(format_volume(ext4, *g, FormatOptions{}, nullptr, &msg) == EEXIST);
  CHECK_THAT(msg, Catch::Contains("ext"));

  MemoryDevice tiny(96 << 10, 512);
  CHECK(format_volume(tiny, *g, FormatOptions{}, nullptr, &msg) == ENOSPC);
  CHECK_THAT(msg, Catch::Contains(fmt::format("at least {} bytes", minimum_volume_bytes(*g, 512))));
  CHECK(std::all_of(tiny.bytes().begin(), tiny.bytes().end(), [](std::byte b) { return b == std::byte{0}; }));

  MemoryDevice four_k(64 << 20, 4096);
  auto big_sectors = geom::load_geometry("ssd");  // 4096-byte sectors: fine
  CHECK(format_volume(four_k, *big_sectors, FormatOptions{}, nullptr, &msg) == 0);
  MemoryDevice eight_k(16 << 20, 8192);
  CHECK(format_volume(eight_k, *g, FormatOptions{}, nullptr, &msg) == EINVAL);
  CHECK_THAT(msg, Catch::Contains("smaller"));
}

namespace {

// The uniform toy disk of docs/reference.md §7: CYLINDERS x 8 sectors of 512 bytes.
std::unique_ptr<geom::Geometry> toy_disk(int cylinders) {
  return geom::load_geometry(nlohmann::json{{"kind", "disk"}, {"sector_size", 512}, {"cylinders", cylinders},
                                            {"surfaces", 1}, {"sectors_per_track", 8}, {"rpm", 10000},
                                            {"track_skew_sectors", 0}, {"settle_ms", 1.0},
                                            {"settle_cylinders", 4}, {"conservatism_deg", 0}});
}

// Formats a fresh device of `bytes`; returns format_volume's result.
int format_fresh(const geom::Geometry& g, std::uint64_t bytes, std::uint32_t block, std::string* msg,
                 std::unique_ptr<MemoryDevice>* out = nullptr) {
  auto dev = std::make_unique<MemoryDevice>(bytes, block);
  int r = format_volume(*dev, g, FormatOptions{}, nullptr, msg);
  if (out) *out = std::move(dev);
  return r;
}

}  // namespace

TEST_CASE("small devices format down to the minimum the error message names", "[volume]") {
  std::string msg;
  // The toy disks of docs/reference.md §7 (4 MB and 8 MB modeled devices), the default
  // ssd and the Atlas 10K III: every size from the minimum up formats, mounts
  // clean, and the metadata region scales with the volume.
  std::vector<std::pair<std::string, std::unique_ptr<geom::Geometry>>> geometries;
  geometries.emplace_back("toy 1000", toy_disk(1000));
  geometries.emplace_back("toy 2000", toy_disk(2000));
  geometries.emplace_back("ssd", geom::load_geometry("ssd"));
  geometries.emplace_back("atlas10k3", geom::load_geometry("atlas10k3"));
  for (auto& [name, g] : geometries) {
    INFO(name);
    const std::uint32_t block = g->sector_size() >= 4096 ? 4096 : 512;
    const std::uint64_t min = minimum_volume_bytes(*g, block);
    REQUIRE(min < 4 << 20);
    CHECK(min % 4096 == 0);
    // One 4 KiB step below the minimum: refused, naming the minimum.
    CHECK(format_fresh(*g, min - 4096, block, &msg) == ENOSPC);
    CHECK_THAT(msg, Catch::Contains(fmt::format("needs at least {} bytes", min)));
    // The minimum and every size above it (byte-granular sizes too).
    for (std::uint64_t bytes : {min, min + 1, min + 4096, min + 12345, min + (256 << 10), min + (1 << 20),
                                std::uint64_t(8) << 20}) {
      INFO(bytes);
      std::unique_ptr<MemoryDevice> dev;
      REQUIRE(format_fresh(*g, bytes, block, &msg, &dev) == 0);
      auto vol = open_ok(std::move(dev));
      const Superblock& sb = vol->superblock();
      CHECK(sb.meta_length >= 64 << 10);
      CHECK(sb.meta_length <= std::max<std::uint64_t>(bytes / 8 + 4096, 64 << 10));
      CHECK(sb.data_end_lbn - sb.data_first_lbn >= 4 * vol->geometry().track_length(sb.data_first_lbn));
      CHECK(sb.data_end_lbn * g->sector_size() <= sb.backup_offset);
      Inode f;
      REQUIRE(vol->metadata().create(kRootIno, "f", S_IFREG | 0644, 0, 0, "", &f) == 0);
      REQUIRE(vol->metadata().sync() == 0);
      CHECK(check_volume(*vol, false).problems.empty());
    }
    // Every 4 KiB size over the first 2 MiB above the minimum.
    for (std::uint64_t bytes = min; bytes < min + (2 << 20); bytes += 4096)
      CHECK(format_fresh(*g, bytes, block, &msg) == 0);
  }
  // From 64 MiB up the metadata region is what it always was: 1/32, at least 8 MiB.
  auto g = geom::load_geometry("atlas10k3");
  std::unique_ptr<MemoryDevice> dev;
  REQUIRE(format_fresh(*g, 64 << 20, 512, &msg, &dev) == 0);
  CHECK(open_ok(std::move(dev))->superblock().meta_length == 8 << 20);
  // A modeled device too small for any volume: the message says why, no number wraps.
  auto tiny = toy_disk(10);
  CHECK(minimum_volume_bytes(*tiny, 512) == UINT64_MAX);
  CHECK(format_fresh(*tiny, 1 << 20, 512, &msg) == ENOSPC);
  CHECK_THAT(msg, Catch::Contains("too small") && !Catch::Contains("18446744073709551615"));
  // Devices smaller than one superblock: refused, and open() reads nothing wrapped.
  CHECK(format_fresh(*toy_disk(1000), 8192, 512, &msg) == ENOSPC);
  CHECK(backup_superblock_offset(8192) == 0);
  int err = 0;
  CHECK(Volume::open(std::make_unique<MemoryDevice>(8192, 512), &err, &msg) == nullptr);
  CHECK(err == EINVAL);
}

TEST_CASE("open refuses what is not a healthy mmfs volume", "[volume]") {
  auto g = small_disk();
  int err = 0;
  std::string msg;
  CHECK_FALSE(Volume::open(std::make_unique<MemoryDevice>(16 << 20, 512), &err, &msg));
  CHECK(err == EINVAL);
  CHECK_THAT(msg, Catch::Contains("not an mmfs volume"));

  // One damaged superblock copy: mounts from the other, fsck repairs it.
  auto dev = formatted(*g);
  dev->bytes()[100] ^= std::byte{0x10};
  {
    auto vol = open_ok(std::move(dev));
    CHECK_FALSE(vol->primary_valid());
    auto report = check_volume(*vol, true);
    CHECK(report.exit_code() == 1);
    CHECK(vol->primary_valid());
  }
  // Both damaged: refused, naming both.
  auto dev2 = formatted(*g);
  std::uint64_t backup = backup_superblock_offset(dev2->size_bytes());
  dev2->bytes()[100] ^= std::byte{0x10};
  dev2->bytes()[backup + 100] ^= std::byte{0x10};
  CHECK_FALSE(Volume::open(std::move(dev2), &err, &msg));
  CHECK(err == EUCLEAN);
  CHECK_THAT(msg, Catch::Contains("checksum"));
}

TEST_CASE("random bit flips in superblocks and metadata are detected, never crash", "[volume]") {
  auto g = small_disk();
  auto golden = formatted(*g);
  {
    // Put some metadata in.
    auto copy = std::make_unique<MemoryDevice>(golden->size_bytes(), 512);
    copy->bytes() = golden->bytes();
    auto vol = open_ok(std::move(copy));
    for (int i = 0; i < 50; ++i) {
      Inode n;
      REQUIRE(vol->metadata().create(kRootIno, fmt::format("f{}", i), S_IFREG | 0644, 0, 0, "", &n) == 0);
      REQUIRE(vol->metadata().set_xattr(n.ino, "user.k", "v") == 0);
    }
    REQUIRE(vol->metadata().sync() == 0);
    golden->bytes() = dynamic_cast<MemoryDevice&>(vol->device()).bytes();
  }
  const auto meta_off = 16384u;
  std::mt19937_64 rng(9);
  int refused = 0, opened = 0;
  for (int i = 0; i < 300; ++i) {
    auto dev = std::make_unique<MemoryDevice>(golden->size_bytes(), 512);
    dev->bytes() = golden->bytes();
    // Anywhere in the first superblock and the first 512 KiB of metadata.
    std::uint64_t where = i % 3 == 0 ? rng() % kSuperblockBytes : meta_off + rng() % (512 << 10);
    dev->bytes()[where] ^= std::byte(1u << (rng() % 8));
    int err = 0;
    std::string msg;
    auto vol = Volume::open(std::move(dev), &err, &msg);
    if (!vol) {
      ++refused;
      CHECK((err == EUCLEAN || err == EINVAL));
      CHECK_FALSE(msg.empty());
      continue;
    }
    ++opened;
    // What opens is the committed state (the flip hit slack, a backup copy or an unused slot).
    CHECK(vol->metadata().lookup(kRootIno, "f49"));
  }
  CHECK(refused + opened == 300);
}

TEST_CASE("metadata operations: POSIX semantics and fsck", "[volume]") {
  auto vol = fresh_volume();
  Metadata& m = vol->metadata();
  Inode d, f, h;
  REQUIRE(m.create(kRootIno, "dir", S_IFDIR | 0755, 0, 0, "", &d) == 0);
  REQUIRE(m.create(d.ino, "file", S_IFREG | 0644, 0, 0, "", &f) == 0);
  CHECK(m.create(d.ino, "file", S_IFREG | 0644, 0, 0, "", nullptr) == EEXIST);
  CHECK(m.create(f.ino, "x", S_IFREG | 0644, 0, 0, "", nullptr) == ENOTDIR);
  CHECK(m.create(kRootIno, "a/b", S_IFREG | 0644, 0, 0, "", nullptr) == EINVAL);
  CHECK(m.create(kRootIno, std::string(256, 'x'), S_IFREG | 0644, 0, 0, "", nullptr) == ENAMETOOLONG);
  REQUIRE(m.link(f.ino, kRootIno, "hard", &h) == 0);
  CHECK(m.inode(f.ino)->nlink == 2);
  CHECK(m.inode(kRootIno)->nlink == 3);  // ".", the root's own name, and dir's ".."
  CHECK(m.rmdir(kRootIno, "dir") == ENOTEMPTY);
  CHECK(m.rename(kRootIno, "dir", d.ino, "inside", 0) == EINVAL);  // into itself
  CHECK(m.rename(kRootIno, "hard", d.ino, "file", Metadata::kNoReplace) == EEXIST);
  REQUIRE(m.rename(kRootIno, "hard", kRootIno, "hard2", 0) == 0);
  Inode other;
  REQUIRE(m.create(kRootIno, "other", S_IFREG | 0600, 0, 0, "", &other) == 0);
  REQUIRE(m.rename(kRootIno, "other", d.ino, "file", Metadata::kExchange) == 0);
  CHECK(*m.lookup(d.ino, "file") == other.ino);
  CHECK(*m.lookup(kRootIno, "other") == f.ino);
  std::vector<Extent> ext;
  REQUIRE(m.allocate_small_extents(f.ino, 100, &ext) == 0);
  std::uint64_t before = vol->allocator().free_sectors();
  REQUIRE(m.unlink(kRootIno, "other") == 0);  // one of two names
  REQUIRE(m.unlink(kRootIno, "hard2") == 0);  // the last: inode and extents go
  CHECK_FALSE(m.inode(f.ino));
  CHECK(vol->allocator().free_sectors() == before);  // not before the drop is durable
  REQUIRE(m.sync() == 0);
  CHECK(vol->allocator().free_sectors() == before + 100);
  REQUIRE(m.set_xattr(d.ino, "user.a", "1") == 0);
  CHECK(m.remove_xattr(d.ino, "user.b") == ENODATA);
  REQUIRE(m.sync() == 0);
  auto report = check_volume(*vol, false);
  INFO((report.problems.empty() ? "" : report.problems[0]));
  CHECK(report.problems.empty());
}

TEST_CASE("device nodes keep their rdev; names_of finds every link", "[volume]") {
  auto g = small_disk();
  auto dev = formatted(*g);
  MemoryDevice* raw = dev.get();
  auto vol = open_ok(std::move(dev));
  Metadata& m = vol->metadata();
  Inode chr, blk, fifo, d;
  const std::uint64_t chr_dev = makedev(1, 3), blk_dev = makedev(259, 70000);
  REQUIRE(m.create(kRootIno, "chr", S_IFCHR | 0640, 0, 0, "", &chr, chr_dev) == 0);
  REQUIRE(m.create(kRootIno, "blk", S_IFBLK | 0600, 0, 0, "", &blk, blk_dev) == 0);
  REQUIRE(m.create(kRootIno, "fifo", S_IFIFO | 0644, 0, 0, "", &fifo, 1234) == 0);  // no device: rdev ignored
  CHECK(chr.rdev == chr_dev);
  CHECK(m.inode(blk.ino)->rdev == blk_dev);
  CHECK(m.inode(fifo.ino)->rdev == 0);
  REQUIRE(m.create(kRootIno, "d", S_IFDIR | 0755, 0, 0, "", &d) == 0);
  REQUIRE(m.link(chr.ino, d.ino, "again", nullptr) == 0);
  auto names = m.names_of(chr.ino);
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::pair<Ino, std::string>>{{kRootIno, "chr"}, {d.ino, "again"}});
  CHECK(m.names_of(blk.ino) == std::vector<std::pair<Ino, std::string>>{{kRootIno, "blk"}});
  CHECK(m.names_of(999999).empty());
  REQUIRE(m.sync() == 0);
  CHECK(check_volume(*vol, false).problems.empty());
  // From the device again: the numbers persisted.
  auto copy = std::make_unique<MemoryDevice>(raw->bytes().size(), 512);
  std::copy(raw->bytes().begin(), raw->bytes().end(), copy->bytes().begin());
  vol.reset();
  auto again = open_ok(std::move(copy));
  CHECK(again->metadata().inode(chr.ino)->rdev == chr_dev);
  CHECK(again->metadata().inode(blk.ino)->rdev == blk_dev);
  CHECK(S_ISBLK(again->metadata().inode(blk.ino)->mode));
}

TEST_CASE("crash consistency: 500 random cut points over namespace, xattr and extent operations", "[volume][crash]") {
  auto g = small_disk();
  auto golden = formatted(*g);
  int exact = 0, later = 0, cuts = 0;
  for (std::uint64_t seed = 1; seed <= 500; ++seed) {
    std::mt19937_64 rng(seed);
    auto base = std::make_unique<MemoryDevice>(golden->size_bytes(), 512);
    base->bytes() = golden->bytes();
    auto* fault = new FaultInjectingDevice(std::move(base), seed);
    auto vol = open_ok(std::unique_ptr<BlockDevice>(fault));
    Metadata& m = vol->metadata();
    std::vector<std::map<std::string, std::string>> states = {dump(vol->store())};
    std::size_t last_synced = 0;
    fault->fail_after(fault->events() + 1 + rng() % 30);
    std::vector<Ino> dirs = {kRootIno};
    std::vector<std::pair<Ino, std::string>> names;  // files: (parent, name)
    for (int op = 0; op < 120; ++op) {
      int kind = int(rng() % 10);
      Ino dir = dirs[rng() % dirs.size()];
      std::string name = fmt::format("n{}", rng() % 40);
      int r = 0;
      if (kind <= 2) {
        Inode n;
        bool is_dir = kind == 0;
        r = m.create(dir, name, (is_dir ? S_IFDIR | 0755 : S_IFREG | 0644), 0, 0, "", &n);
        if (!r) (is_dir ? dirs.push_back(n.ino) : names.push_back({dir, name}));
      } else if (kind == 3 && !names.empty()) {
        auto [p, nm] = names[rng() % names.size()];
        r = m.rename(p, nm, dir, name, unsigned(rng() % 3));
      } else if (kind == 4 && !names.empty()) {
        auto [p, nm] = names[rng() % names.size()];
        r = m.unlink(p, nm);
      } else if (kind == 5 && !names.empty()) {
        auto [p, nm] = names[rng() % names.size()];
        if (auto ino = m.lookup(p, nm)) r = m.set_xattr(*ino, fmt::format("user.k{}", rng() % 3), name);
      } else if (kind == 6 && !names.empty()) {
        auto [p, nm] = names[rng() % names.size()];
        std::vector<Extent> ext;
        if (auto ino = m.lookup(p, nm))
          r = rng() % 2 ? m.allocate_small_extents(*ino, 1 + rng() % 200, &ext)
                        : m.allocate_extents(*ino, {layouts::SpaceShape::Runs, 1 + rng() % 500}, &ext);
      } else if (kind == 7 && !names.empty()) {
        auto [p, nm] = names[rng() % names.size()];
        if (auto ino = m.lookup(p, nm)) r = m.set_extents(*ino, {});
      } else if (kind == 8 && dirs.size() > 1) {
        r = m.rmdir(kRootIno, name);
      } else {
        if (m.sync() == 0) last_synced = states.size() - 1;
        continue;
      }
      (void)r;
      states.push_back(dump(vol->store()));
    }
    if (m.sync() == 0) last_synced = states.size() - 1;
    auto image = fault->crash_image();
    vol.reset();
    auto reopened = open_ok(std::move(image));
    auto got = dump(reopened->store());
    std::size_t match = states.size();
    for (std::size_t k = last_synced; k < states.size(); ++k)
      if (states[k] == got) {
        match = k;
        break;
      }
    INFO("seed " << seed << " last synced " << last_synced << " of " << states.size());
    REQUIRE(match < states.size());  // a prefix state that keeps every synced operation
    (match == last_synced ? exact : later)++;
    auto report = check_volume(*reopened, false);
    INFO((report.problems.empty() ? "" : report.problems[0]));
    REQUIRE(report.problems.empty());
    ++cuts;
  }
  WARN("crash cut points: " << cuts << ", recovered exactly the last synced state: " << exact
                            << ", a later prefix: " << later);
}
