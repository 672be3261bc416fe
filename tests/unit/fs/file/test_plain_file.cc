// Plain files (fs/file/plain_file.h): random writes, sparse holes, truncate and
// fallocate against a byte model; commit and reopen; whole-track growth;
// block checksums; space accounting with the allocator.
#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fs/device/fault_device.h"
#include "fs/volume/fsck.h"
#include "fs/file/plain_file.h"
#include "fs/device/sector_io.h"
#include "fs/volume/volume.h"
#include "geometry/load.h"
#include "tests/unit/support/fs_test_support.h"
#include "tests/unit/support/volume_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;

namespace {

using testing::RefDevice;
using testing::toy_disk;

using testing::Bytes;
using testing::bytes_diff;
using testing::random_bytes;

std::unique_ptr<MemoryDevice> formatted(const geom::Geometry& g, std::uint64_t bytes = 8ull << 20) {
  return testing::volumes::formatted(g, bytes, "plain");
}

struct Mount {
  std::unique_ptr<Volume> vol;
  std::unique_ptr<SectorIo> io;
  Metadata& md() const { return vol->metadata(); }
  Allocator& alloc() const { return vol->allocator(); }
  std::unique_ptr<PlainFile> plain(Ino ino) const {
    auto n = md().inode(ino);
    REQUIRE(n);
    return std::make_unique<PlainFile>(md(), alloc(), *io, vol->geometry(), ino, n->size);
  }
};

Mount mount(MemoryDevice& dev) {
  Mount m;
  m.vol = testing::volumes::open_ok(std::make_unique<RefDevice>(dev));
  m.io = std::make_unique<SectorIo>(m.vol->device(), m.vol->geometry());
  return m;
}

Ino new_file(Metadata& md, const std::string& name) {
  Inode n;
  REQUIRE(md.create(kRootIno, name, S_IFREG | 0644, 0, 0, "", &n) == 0);
  return n.ino;
}


int pwrite(PlainFile& p, std::uint64_t off, const Bytes& d) {
  return p.write(off, reinterpret_cast<const std::byte*>(d.data()), d.size());
}

Bytes pread(PlainFile& p, std::uint64_t off, std::size_t len) {
  Bytes out(len, 0xAA);
  std::size_t got = 0;
  int r = p.read(off, len, reinterpret_cast<std::byte*>(out.data()), &got);
  INFO("read " << len << " at " << off);
  REQUIRE(r == 0);
  out.resize(got);
  return out;
}

int pread_err(PlainFile& p, std::uint64_t off, std::size_t len) {
  Bytes out(len);
  std::size_t got = 0;
  return p.read(off, len, reinterpret_cast<std::byte*>(out.data()), &got);
}

Bytes expect_read(const Bytes& model, std::uint64_t off, std::size_t len) {
  if (off >= model.size()) return {};
  return Bytes(model.begin() + std::ptrdiff_t(off),
               model.begin() + std::ptrdiff_t(std::min<std::uint64_t>(model.size(), off + len)));
}

std::uint64_t sectors_of(const std::vector<Extent>& ex) {
  std::uint64_t s = 0;
  for (const Extent& e : ex) s += e.sectors;
  return s;
}

// The device byte holding file byte `pos`, through the extent map.
std::uint64_t device_byte(const std::vector<Extent>& ex, std::uint64_t pos) {
  std::uint64_t sector = pos / 512;
  for (const Extent& e : ex) {
    if (sector < e.sectors) return (e.start + sector) * 512 + pos % 512;
    sector -= e.sectors;
  }
  FAIL("file byte " << pos << " is not mapped");
  return 0;
}

}  // namespace

TEST_CASE("plain file: random writes, holes, truncate, fallocate and reads match a byte model", "[plain_file]") {
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    // The toy disk (a block is a track) and atlas10k3 (tracks that are not
    // whole blocks, so blocks straddle extents); one to three files at once.
    const bool atlas = seed > 3;
    auto g = atlas ? geom::load_geometry("atlas10k3") : toy_disk();
    const std::size_t files = 1 + seed % 3;
    INFO("seed " << seed << (atlas ? " atlas10k3" : " toy disk") << ", " << files << " files");
    std::mt19937_64 rng(seed);
    auto dev = formatted(*g, atlas ? 32ull << 20 : 8ull << 20);
    std::vector<Ino> inos(files);
    std::vector<Bytes> models(files);
    {
      Mount m = mount(*dev);
      std::vector<std::unique_ptr<PlainFile>> ps;
      for (std::size_t f = 0; f < files; ++f) {
        inos[f] = new_file(m.md(), "f" + std::to_string(f));
        ps.push_back(m.plain(inos[f]));
      }
      const std::uint64_t free0 = m.alloc().free_sectors();
      auto allocated = [&] {
        std::uint64_t s = 0;
        for (auto& p : ps) s += p->allocated_bytes() / 512;
        return s;
      };
      CHECK(ps[0]->block_size() == 4096);
      const std::uint64_t kMax = (atlas ? 1500 : 600) << 10;
      for (int op = 0; op < 300; ++op) {
        const std::size_t f = rng() % files;
        PlainFile& p = *ps[f];
        Bytes& model = models[f];
        const std::uint64_t size = model.size();
        int kind = int(rng() % 12);
        INFO("op " << op << " file " << f << " kind " << kind << " size " << size);
        if (kind <= 4) {  // write, possibly past the end (a sparse hole in between)
          std::uint64_t off = rng() % (size + (rng() % 3 == 0 ? 60000 : 5000));
          std::size_t len = std::size_t(1 + (rng() % 4 == 0 ? rng() % 40000 : rng() % 5000));
          if (off + len > kMax) continue;
          Bytes d = random_bytes(rng, len);
          INFO("write " << len << " at " << off);
          REQUIRE(pwrite(p, off, d) == 0);
          if (model.size() < off + len) model.resize(off + len, 0);
          std::copy(d.begin(), d.end(), model.begin() + std::ptrdiff_t(off));
          CHECK(p.allocated_bytes() >= (off + len + 4095) / 4096 * 4096);
        } else if (kind == 5) {  // truncate, mostly down
          std::uint64_t to = rng() % 3 == 0 ? size + rng() % 30000 : (size ? rng() % size : 0);
          if (rng() % 8 == 0) to = to / 4096 * 4096;  // on a block boundary
          if (to > kMax) continue;
          INFO("truncate to " << to);
          REQUIRE(p.truncate(to) == 0);
          model.resize(to, 0);
        } else if (kind == 6) {  // fallocate
          std::uint64_t off = rng() % (size + 20000);
          std::uint64_t len = 1 + rng() % 20000;
          bool keep = rng() % 2;
          if (off + len > kMax) continue;
          INFO("fallocate " << len << " at " << off << (keep ? " keep size" : ""));
          REQUIRE(p.fallocate(off, len, keep) == 0);
          CHECK(p.allocated_bytes() >= off + len);
          if (!keep && off + len > model.size()) model.resize(off + len, 0);
        } else if (kind <= 9) {  // read
          std::uint64_t off = rng() % (size + 100);
          std::size_t len = std::size_t(rng() % 30000);
          INFO("read " << len << " at " << off);
          CHECK(bytes_diff(pread(p, off, len), expect_read(model, off, len)) == "");
        } else if (kind == 10) {  // commit; reopen from the stored inode
          REQUIRE(p.commit() == 0);
          CHECK_FALSE(p.dirty());
          CHECK(m.md().inode(inos[f])->size == model.size());
          ps[f] = m.plain(inos[f]);
          CHECK(ps[f]->size() == model.size());
        } else {  // make everything durable; the space accounting adds up
          for (std::size_t k = 0; k < files; ++k) REQUIRE(ps[k]->commit() == 0);
          REQUIRE(m.md().sync() == 0);
          CHECK(m.alloc().free_sectors() + allocated() == free0);
          CHECK(sectors_of(m.md().extents(inos[f])) * 512 == ps[f]->allocated_bytes());
        }
        REQUIRE(ps[f]->size() == models[f].size());
      }
      for (std::size_t f = 0; f < files; ++f) {
        CHECK(bytes_diff(pread(*ps[f], 0, models[f].size() + 10), models[f]) == "");
        REQUIRE(ps[f]->commit() == 0);
      }
      REQUIRE(m.md().sync() == 0);
      CHECK(m.alloc().free_sectors() + allocated() == free0);
    }
    // Remount: the same bytes, and fsck finds nothing.
    Mount m = mount(*dev);
    for (std::size_t f = 0; f < files; ++f) {
      auto p = m.plain(inos[f]);
      CHECK(p->size() == models[f].size());
      CHECK(bytes_diff(pread(*p, 0, models[f].size()), models[f]) == "");
    }
    auto report = check_volume(*m.vol, false);
    INFO((report.problems.empty() ? "" : report.problems[0]));
    CHECK(report.problems.empty());
  }
}

TEST_CASE("plain file: truncate zeroes the cut tail; holes and fallocated space read as zeros", "[plain_file]") {
  auto g = toy_disk();
  auto dev = formatted(*g);
  Mount m = mount(*dev);
  Ino ino = new_file(m.md(), "t");
  auto p = m.plain(ino);
  std::mt19937_64 rng(3);
  Bytes d = random_bytes(rng, 10000);
  REQUIRE(pwrite(*p, 0, d) == 0);
  // Shrink into the middle of a block, grow again: the cut bytes are zeros.
  REQUIRE(p->truncate(5000) == 0);
  REQUIRE(p->truncate(12000) == 0);
  Bytes expect(12000, 0);
  std::copy(d.begin(), d.begin() + 5000, expect.begin());
  CHECK(bytes_diff(pread(*p, 0, 12000), expect) == "");
  // The same after a write elsewhere in the block that was cut.
  Bytes x = {1, 2, 3};
  REQUIRE(pwrite(*p, 7000, x) == 0);
  std::copy(x.begin(), x.end(), expect.begin() + 7000);
  CHECK(bytes_diff(pread(*p, 0, 12000), expect) == "");
  // A write far past the end leaves a hole of zeros.
  REQUIRE(pwrite(*p, 100000, x) == 0);
  expect.resize(100003, 0);
  std::copy(x.begin(), x.end(), expect.begin() + 100000);
  CHECK(p->size() == 100003);
  CHECK(bytes_diff(pread(*p, 0, 200000), expect) == "");
  // fallocate: space but zeros; keep_size leaves the size alone.
  REQUIRE(p->fallocate(100003, 50000, true) == 0);
  CHECK(p->size() == 100003);
  CHECK(p->allocated_bytes() >= 150003);
  REQUIRE(p->fallocate(100003, 5000, false) == 0);
  CHECK(p->size() == 105003);
  expect.resize(105003, 0);
  CHECK(bytes_diff(pread(*p, 0, 200000), expect) == "");
  // Reads at and past the end return nothing.
  CHECK(pread(*p, 105003, 10).empty());
  CHECK(pread(*p, 1 << 30, 10).empty());
  // Offsets that overflow: EFBIG.
  CHECK(pwrite(*p, UINT64_MAX - 5, Bytes(10, 1)) == EFBIG);
  CHECK(p->fallocate(UINT64_MAX - 5, 10, false) == EFBIG);
  CHECK(p->size() == 105003);
  // Commit, reopen: the same.
  REQUIRE(p->commit() == 0);
  p = m.plain(ino);
  CHECK(bytes_diff(pread(*p, 0, 200000), expect) == "");
}

TEST_CASE("plain file: a large file grows in whole-track extents (atlas10k3)", "[plain_file]") {
  auto g = geom::load_geometry("atlas10k3");
  auto dev = formatted(*g, 40ull << 20);
  Mount m = mount(*dev);
  Ino ino = new_file(m.md(), "big");
  auto p = m.plain(ino);
  std::mt19937_64 rng(11);
  const std::uint64_t small_limit = g->track_length(m.alloc().first());
  const std::uint64_t total = 6ull << 20;
  Bytes model = random_bytes(rng, total);
  for (std::uint64_t off = 0; off < total; off += 64 << 10) {
    Bytes piece(model.begin() + std::ptrdiff_t(off), model.begin() + std::ptrdiff_t(off + (64 << 10)));
    REQUIRE(pwrite(*p, off, piece) == 0);
  }
  auto ex = p->extents();
  REQUIRE_FALSE(ex.empty());
  // Every extent reaching past the first track's worth is whole tracks (the
  // small extents before it come from the top of the data area).
  std::uint64_t pos = 0;
  int whole = 0;
  for (const Extent& e : ex) {
    INFO("extent " << e.start << "+" << e.sectors << " at file sector " << pos << " (first track: " << small_limit
                   << " sectors)");
    if (pos + e.sectors > small_limit) {
      CHECK(g->track_boundaries(e.start).low == e.start);
      CHECK(g->track_boundaries(e.start + e.sectors - 1).high + 1 == e.start + e.sectors);
      ++whole;
    }
    pos += e.sectors;
  }
  CHECK(whole >= 1);
  // Growth doubles the allocation: a few extents, not one per write.
  CHECK(ex.size() <= 16);
  CHECK(p->allocated_bytes() >= total);
  CHECK(p->allocated_bytes() <= 2 * total + small_limit * 512);
  CHECK(bytes_diff(pread(*p, 0, total), model) == "");
  REQUIRE(p->commit() == 0);
  REQUIRE(m.md().sync() == 0);
  p = m.plain(ino);
  CHECK(p->extents() == ex);
  CHECK(bytes_diff(pread(*p, 0, total), model) == "");
  CHECK(check_volume(*m.vol, false).problems.empty());
  // Checksums span several records (1024 blocks each): shrink across a
  // record boundary, grow again with a hole, write past it, reopen.
  const std::uint64_t cut = (4ull << 20) + (512 << 10) + 123;
  REQUIRE(p->truncate(cut) == 0);
  model.resize(cut);
  REQUIRE(p->truncate(7ull << 20) == 0);
  model.resize(7ull << 20, 0);
  Bytes d = random_bytes(rng, 5000);
  REQUIRE(pwrite(*p, (6ull << 20) + 77, d) == 0);
  std::copy(d.begin(), d.end(), model.begin() + std::ptrdiff_t((6ull << 20) + 77));
  CHECK(bytes_diff(pread(*p, 0, model.size()), model) == "");
  REQUIRE(p->commit() == 0);
  REQUIRE(m.md().sync() == 0);
  p = m.plain(ino);
  CHECK(p->size() == model.size());
  CHECK(bytes_diff(pread(*p, 0, model.size()), model) == "");
  CHECK(m.alloc().free_sectors() + p->allocated_bytes() / 512 == m.alloc().total_sectors());
  CHECK(check_volume(*m.vol, false).problems.empty());
}

TEST_CASE("plain file: a damaged block reads as EIO, never as wrong bytes", "[plain_file]") {
  auto g = toy_disk();
  auto dev = formatted(*g);
  Mount m = mount(*dev);
  Ino ino = new_file(m.md(), "d");
  auto p = m.plain(ino);
  std::mt19937_64 rng(21);
  Bytes model = random_bytes(rng, 3 * 4096 + 100);
  REQUIRE(pwrite(*p, 0, model) == 0);
  REQUIRE(p->commit() == 0);
  REQUIRE(m.md().sync() == 0);
  // Flip a bit of block 1 on the device.
  std::uint64_t at = device_byte(p->extents(), 4096 + 777);
  REQUIRE(dev->bytes()[at] == std::byte{model[4096 + 777]});
  dev->bytes()[at] ^= std::byte{0x04};
  CHECK(pread_err(*p, 4096 + 777, 1) == EIO);
  CHECK(pread_err(*p, 0, model.size()) == EIO);
  CHECK(pread_err(*p, 4096, 4096) == EIO);
  // The blocks around it are fine.
  CHECK(bytes_diff(pread(*p, 0, 4096), expect_read(model, 0, 4096)) == "");
  CHECK(bytes_diff(pread(*p, 8192, 5000), expect_read(model, 8192, 5000)) == "");
  // A fresh handle (checksums from the store) sees it too.
  {
    auto q = m.plain(ino);
    CHECK(pread_err(*q, 5000, 10) == EIO);
  }
  // A partial write into the block cannot merge with wrong bytes: EIO.
  CHECK(pwrite(*p, 4096 + 10, Bytes(5, 9)) == EIO);
  CHECK(bytes_diff(pread(*p, 0, 4096), expect_read(model, 0, 4096)) == "");
  // Overwriting the whole block heals it.
  Bytes fresh = random_bytes(rng, 4096);
  REQUIRE(pwrite(*p, 4096, fresh) == 0);
  std::copy(fresh.begin(), fresh.end(), model.begin() + 4096);
  CHECK(bytes_diff(pread(*p, 0, model.size()), model) == "");
  // Flips injected on reads: EIO or the right bytes, never others.
  REQUIRE(p->commit() == 0);
  REQUIRE(m.md().sync() == 0);
  auto base = std::make_unique<MemoryDevice>(dev->size_bytes(), 512);
  base->bytes() = dev->bytes();
  auto* fault = new FaultInjectingDevice(std::move(base), 4);
  int err = 0;
  std::string msg;
  auto vol = Volume::open(std::unique_ptr<BlockDevice>(fault), &err, &msg);
  REQUIRE(vol);
  SectorIo io(vol->device(), vol->geometry());
  PlainFile f(vol->metadata(), vol->allocator(), io, vol->geometry(), ino, model.size());
  fault->set_read_bitflip_probability(1.0);
  int eio = 0;
  for (int i = 0; i < 20; ++i) {
    Bytes out(model.size());
    std::size_t got = 0;
    int r = f.read(0, out.size(), reinterpret_cast<std::byte*>(out.data()), &got);
    if (r == 0) {
      CHECK(bytes_diff(out, model) == "");
    } else {
      CHECK(r == EIO);
      ++eio;
    }
  }
  CHECK(eio > 0);
}

TEST_CASE("plain file: space accounting follows growth and truncation", "[plain_file]") {
  auto g = toy_disk();
  auto dev = formatted(*g);
  Mount m = mount(*dev);
  Ino ino = new_file(m.md(), "s");
  const std::uint64_t free0 = m.alloc().free_sectors();
  auto p = m.plain(ino);
  std::mt19937_64 rng(8);
  std::uint64_t last_free = free0;
  // Growth takes space from the allocator, exactly what the file holds.
  for (int i = 1; i <= 6; ++i) {
    REQUIRE(pwrite(*p, p->size(), random_bytes(rng, 60000)) == 0);
    std::uint64_t f = m.alloc().free_sectors();
    CHECK(f <= last_free);
    CHECK(f + p->allocated_bytes() / 512 == free0);
    last_free = f;
  }
  CHECK(last_free < free0);
  // fallocate(keep_size) reserves more without changing the size.
  std::uint64_t size = p->size();
  REQUIRE(p->fallocate(size, 300000, true) == 0);
  CHECK(p->size() == size);
  CHECK(m.alloc().free_sectors() < last_free);
  CHECK(m.alloc().free_sectors() + p->allocated_bytes() / 512 == free0);
  REQUIRE(p->commit() == 0);
  REQUIRE(m.md().sync() == 0);
  CHECK(check_volume(*m.vol, false).problems.empty());
  // Truncate to 0: the blocks go back once the drop is durable.
  REQUIRE(p->truncate(0) == 0);
  CHECK(p->allocated_bytes() == 0);
  CHECK(m.alloc().free_sectors() < free0);
  REQUIRE(p->commit() == 0);
  REQUIRE(m.md().sync() == 0);
  CHECK(m.alloc().free_sectors() == free0);
  CHECK(m.md().extents(ino).empty());
  CHECK(m.md().inode(ino)->size == 0);
  // The file is usable again, and reads back as written.
  Bytes d = random_bytes(rng, 9000);
  REQUIRE(pwrite(*p, 0, d) == 0);
  CHECK(bytes_diff(pread(*p, 0, 9000), d) == "");
  REQUIRE(p->commit() == 0);
  REQUIRE(m.md().sync() == 0);
  CHECK(m.alloc().free_sectors() + p->allocated_bytes() / 512 == free0);
  auto report = check_volume(*m.vol, false);
  INFO((report.problems.empty() ? "" : report.problems[0]));
  CHECK(report.problems.empty());
}

// The records a removed inode must not have: checksums, their alternatives,
// an extent map.
std::vector<std::string> records_of(Metadata& md, Ino ino) {
  std::vector<std::string> found;
  for (const std::string& prefix : {keys::alt_checksum_prefix(ino), keys::checksum_prefix(ino), keys::extents(ino)})
    md.store().scan(prefix, [&](std::string_view k, std::string_view) {
      found.push_back(std::string(1, k[0]) + "/ record");
      return true;
    });
  return found;
}

// The daemon once registered an open for an inode an unlink removed just
// before (both waited for its registry lock): the file's next overwrite
// committed alternative checksums for the missing inode, which mmfsck then
// found. Whatever the daemon does, a file's records commit only while its
// inode exists.
TEST_CASE("plain file: after its inode is removed, a write or truncate leaves no records of it", "[plain_file]") {
  auto g = toy_disk();
  auto dev = formatted(*g);
  Mount m = mount(*dev);
  std::mt19937_64 rng(19);
  Ino ino = new_file(m.md(), "gone");
  {
    auto p = m.plain(ino);
    REQUIRE(pwrite(*p, 0, random_bytes(rng, 3 * 4096)) == 0);
    REQUIRE(p->commit() == 0);
    REQUIRE(m.md().sync() == 0);
  }
  const std::uint64_t size = m.md().inode(ino)->size;
  // One object from before the removal, one made after it with the size the
  // daemon had read (the race's shape).
  auto before = m.plain(ino);
  REQUIRE(m.md().unlink(kRootIno, "gone") == 0);
  REQUIRE_FALSE(m.md().inode(ino));
  REQUIRE(records_of(m.md(), ino).empty());
  PlainFile after(m.md(), m.alloc(), *m.io, m.vol->geometry(), ino, size);
  for (PlainFile* p : {before.get(), &after}) {
    // An overwrite of stored blocks commits the file's state with their
    // alternatives first (ENOENT); the other object knows no stored blocks
    // and keeps the write until its commit (ENOENT below).
    const int w = pwrite(*p, 100, random_bytes(rng, 3000));
    CHECK((w == ENOENT || (w == 0 && p == &after)));
    CHECK(records_of(m.md(), ino).empty());
    CHECK(p->truncate(5000) == ENOENT);
    CHECK(records_of(m.md(), ino).empty());
    CHECK(p->commit() == ENOENT);
    CHECK(records_of(m.md(), ino).empty());
  }
  REQUIRE(m.md().sync() == 0);
  auto report = check_volume(*m.vol, false);
  INFO((report.problems.empty() ? "" : report.problems[0]));
  CHECK(report.problems.empty());
}

TEST_CASE("plain file: a full volume gives ENOSPC, and the file uses nearly all the space first", "[plain_file]") {
  auto g = toy_disk();
  auto dev = formatted(*g);
  Mount m = mount(*dev);
  Ino ino = new_file(m.md(), "full");
  const std::uint64_t free0 = m.alloc().free_sectors();
  auto p = m.plain(ino);
  std::mt19937_64 rng(17);
  constexpr std::size_t kPiece = 256 << 10;
  Bytes model;
  int r = 0;
  for (int i = 0; i < 100; ++i) {
    Bytes d = random_bytes(rng, kPiece);
    r = pwrite(*p, model.size(), d);
    if (r != 0) break;
    model.insert(model.end(), d.begin(), d.end());
  }
  REQUIRE(r == ENOSPC);
  CHECK(p->size() == model.size());
  // Growth doubles, but on a nearly full volume it takes what the write needs.
  CHECK(m.alloc().free_sectors() * 512 < kPiece + 4096);
  CHECK(model.size() + kPiece > free0 * 512);
  CHECK(bytes_diff(pread(*p, 0, model.size()), model) == "");
  // Overwrites inside the allocation still work.
  Bytes d = random_bytes(rng, 10000);
  REQUIRE(pwrite(*p, 5000, d) == 0);
  std::copy(d.begin(), d.end(), model.begin() + 5000);
  CHECK(bytes_diff(pread(*p, 0, model.size()), model) == "");
  REQUIRE(p->commit() == 0);
  REQUIRE(m.md().sync() == 0);
  CHECK(m.alloc().free_sectors() + p->allocated_bytes() / 512 == free0);
  CHECK(check_volume(*m.vol, false).problems.empty());
  REQUIRE(p->truncate(0) == 0);
  REQUIRE(p->commit() == 0);
  REQUIRE(m.md().sync() == 0);
  CHECK(m.alloc().free_sectors() == free0);
}

// docs/reference.md §9: data written and fsynced survives a crash at any instant. A
// plain file's blocks are written in place at once; their checksums reach
// the store at the next commit and sync. Another file's fsync flushes the
// device: a crash then must not make the first file's fsynced bytes
// unreadable.
TEST_CASE("plain file: fsynced bytes survive a crash after a later uncommitted write to their block",
          "[plain_file][crash]") {
  auto g = toy_disk();
  std::mt19937_64 rng(31);
  auto* fault = new FaultInjectingDevice(formatted(*g), 9);
  int err = 0;
  std::string msg;
  Bytes model = random_bytes(rng, 3 * 4096);
  Ino a_ino = 0;
  std::unique_ptr<MemoryDevice> image;
  {
    auto vol = Volume::open(std::unique_ptr<BlockDevice>(fault), &err, &msg);
    REQUIRE(vol);
    SectorIo io(vol->device(), vol->geometry());
    a_ino = new_file(vol->metadata(), "a");
    Ino b_ino = new_file(vol->metadata(), "b");
    PlainFile a(vol->metadata(), vol->allocator(), io, vol->geometry(), a_ino, 0);
    PlainFile b(vol->metadata(), vol->allocator(), io, vol->geometry(), b_ino, 0);
    REQUIRE(pwrite(a, 0, model) == 0);
    REQUIRE(a.commit() == 0);
    REQUIRE(vol->metadata().sync() == 0);  // fsync(a)
    REQUIRE(pwrite(a, 100, Bytes(4, 0x77)) == 0);  // not fsynced
    REQUIRE(pwrite(b, 0, Bytes(5000, 1)) == 0);
    REQUIRE(b.commit() == 0);
    REQUIRE(vol->metadata().sync() == 0);  // fsync(b)
    image = fault->crash_image();
  }
  auto vol = Volume::open(std::move(image), &err, &msg);
  REQUIRE(vol);
  SectorIo io(vol->device(), vol->geometry());
  PlainFile a(vol->metadata(), vol->allocator(), io, vol->geometry(), a_ino, vol->metadata().inode(a_ino)->size);
  REQUIRE(a.size() == model.size());
  Bytes out(model.size());
  std::size_t got = 0;
  int r = a.read(0, out.size(), reinterpret_cast<std::byte*>(out.data()), &got);
  CHECK(r == 0);  // fails: EIO, block 0 holds the new bytes, the store the fsynced checksum
  if (r == 0) {
    Bytes mid(out.begin() + 100, out.begin() + 104);
    CHECK((mid == Bytes(4, 0x77) || mid == Bytes(model.begin() + 100, model.begin() + 104)));
    std::copy(mid.begin(), mid.end(), model.begin() + 100);
    CHECK(bytes_diff(out, model) == "");
  }
}

// A crash of the daemon (not of the machine) at any moment of a truncate
// leaves the old file or the new one: never the old size with part of the
// cut bytes zeroed, nor the new size committed without the checksums it
// drops. Snapshots of the device taken between the steps stand for the
// crash: everything written is there, the metadata as far as it was synced.
TEST_CASE("plain file: a truncate cut by a crash leaves the old file or the new one", "[plain_file][crash]") {
  auto g = toy_disk();
  auto dev = formatted(*g);
  std::mt19937_64 rng(41);
  const Bytes d = random_bytes(rng, 10000);
  const Bytes cut(d.begin(), d.begin() + 5000);
  Bytes grown = cut;
  grown.resize(12000, 0);
  Ino ino = 0;
  std::vector<std::pair<std::string, std::unique_ptr<MemoryDevice>>> crashes;
  auto snapshot = [&](const std::string& when) {
    auto copy = std::make_unique<MemoryDevice>(dev->size_bytes(), dev->block_size());
    copy->bytes() = dev->bytes();
    crashes.emplace_back(when, std::move(copy));
  };
  {
    Mount m = mount(*dev);
    ino = new_file(m.md(), "t");
    auto p = m.plain(ino);
    REQUIRE(pwrite(*p, 0, d) == 0);
    REQUIRE(p->commit() == 0);
    REQUIRE(m.md().sync() == 0);
    REQUIRE(p->truncate(5000) == 0);
    snapshot("after the shrink");
    REQUIRE(m.md().sync() == 0);  // another file's fsync
    snapshot("after the shrink and a sync");
    REQUIRE(p->truncate(12000) == 0);
    snapshot("after growing again");
    REQUIRE(p->commit() == 0);
    REQUIRE(m.md().sync() == 0);
    snapshot("after growing again and a sync");
  }
  for (auto& [when, image] : crashes) {
    INFO("a crash " << when);
    Mount m = mount(*image);
    auto p = m.plain(ino);
    Bytes got = pread(*p, 0, 20000);
    bool ok = got == d || got == cut || got == grown;
    INFO(bytes_diff(got, got.size() > 5000 && got.size() < 10000 ? cut : got.size() == 12000 ? grown : d));
    CHECK(ok);
    auto report = check_volume(*m.vol, false);
    INFO((report.problems.empty() ? "" : report.problems[0]));
    CHECK(report.problems.empty());
  }
}

// The same for a plain file's blocks: a hole inside the file reads as zeros
// without a device read while its sectors hold an earlier file's bytes. The
// daemon killed anywhere in a write into the hole must leave the hole
// reading as zeros or as the new bytes, never as EIO.
TEST_CASE("plain file: the daemon killed in a write into a hole leaves zeros or the new bytes",
          "[plain_file][crash]") {
  auto g = toy_disk();
  auto golden = formatted(*g);
  std::mt19937_64 rng(1920);
  const Bytes head = random_bytes(rng, 4096), tail = random_bytes(rng, 4096), fill = random_bytes(rng, 8192);
  Ino ino = 0;
  {
    Mount m = mount(*golden);
    ino = new_file(m.md(), "h");
    auto p = m.plain(ino);
    REQUIRE(pwrite(*p, 0, head) == 0);
    REQUIRE(pwrite(*p, 20480, tail) == 0);  // blocks 1-4: a hole
    REQUIRE(p->commit() == 0);
    REQUIRE(m.md().sync() == 0);
    // An earlier file's bytes in the hole's sectors.
    auto ex = p->extents();
    for (std::uint64_t pos = 4096; pos < 20480; ++pos) golden->bytes()[device_byte(ex, pos)] = std::byte{0x5A};
  }
  auto run = [&](BlockDevice& dev) {
    int err = 0;
    std::string msg;
    auto vol = Volume::open(std::make_unique<RefDevice>(dev), &err, &msg);
    REQUIRE(vol);
    SectorIo io(vol->device(), vol->geometry());
    PlainFile p(vol->metadata(), vol->allocator(), io, vol->geometry(), ino, vol->metadata().inode(ino)->size);
    if (pwrite(p, 8192, fill) != 0 || p.commit() != 0) return;
    vol->metadata().sync();
  };
  const std::uint64_t events = testing::kill_at_every_event(*golden, run, [&](MemoryDevice& image, std::uint64_t cut,
                                                                               std::uint64_t all) {
    INFO("killed after " << cut << " of " << all << " device events");
    Mount m = mount(image);
    auto p = m.plain(ino);
    Bytes got(24576);
    std::size_t n = 0;
    int r = p->read(0, got.size(), reinterpret_cast<std::byte*>(got.data()), &n);
    REQUIRE(r == 0);
    REQUIRE(n == got.size());
    Bytes hole(got.begin() + 8192, got.begin() + 16384);
    CHECK((hole == Bytes(8192, 0) || hole == fill));
    CHECK(std::equal(head.begin(), head.end(), got.begin()));
    CHECK(std::equal(tail.begin(), tail.end(), got.begin() + 20480));
  });
  REQUIRE(events > 2);
}

// Overwrites in place before a commit: each block's new checksum is made
// durable as an alternative before its bytes change, and a block is only
// safe while its checksum or its alternative matches what the device holds.
// The daemon killed at any device event of a sequence of overwrites — of
// other blocks of the same checksum record, and of the same block twice —
// must leave every block reading as one of its versions, never as EIO.
TEST_CASE("plain file: the daemon killed between overwrites before a commit leaves every block readable",
          "[plain_file][crash]") {
  auto g = toy_disk();
  auto golden = formatted(*g);
  std::mt19937_64 rng(1921);
  const Bytes base = random_bytes(rng, 4 * 4096);
  const Bytes x = random_bytes(rng, 4096), y = random_bytes(rng, 4096), z = random_bytes(rng, 4096);
  Ino ino = 0;
  {
    Mount m = mount(*golden);
    ino = new_file(m.md(), "o");
    auto p = m.plain(ino);
    REQUIRE(pwrite(*p, 0, base) == 0);
    REQUIRE(p->commit() == 0);
    REQUIRE(m.md().sync() == 0);
  }
  auto run = [&](BlockDevice& dev) {
    int err = 0;
    std::string msg;
    auto vol = Volume::open(std::make_unique<RefDevice>(dev), &err, &msg);
    REQUIRE(vol);
    SectorIo io(vol->device(), vol->geometry());
    PlainFile p(vol->metadata(), vol->allocator(), io, vol->geometry(), ino, vol->metadata().inode(ino)->size);
    if (pwrite(p, 0, x) || pwrite(p, 4096, y) || pwrite(p, 0, z) || p.commit()) return;
    vol->metadata().sync();
  };
  auto block = [](const Bytes& b, std::size_t i) { return Bytes(b.begin() + std::ptrdiff_t(i * 4096),
                                                                b.begin() + std::ptrdiff_t((i + 1) * 4096)); };
  auto check = [&](MemoryDevice& image, std::uint64_t cut, std::uint64_t events) {
    INFO("killed after " << cut << " of " << events << " device events");
    Mount m = mount(image);
    auto p = m.plain(ino);
    Bytes got(base.size());
    std::size_t n = 0;
    REQUIRE(p->read(0, got.size(), reinterpret_cast<std::byte*>(got.data()), &n) == 0);
    Bytes b0 = block(got, 0), b1 = block(got, 1);
    CHECK((b0 == block(base, 0) || b0 == x || b0 == z));
    CHECK((b1 == block(base, 1) || b1 == y));
    CHECK(block(got, 2) == block(base, 2));
  };
  testing::kill_at_every_event(*golden, run, check, /*and_unkilled=*/true);
}
