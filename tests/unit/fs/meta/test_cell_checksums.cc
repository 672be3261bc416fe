// Array data checksums (fs/meta/cell_checksums.h) through a volume: data written
// at the allocated sectors, checksums committed with the metadata, a flipped
// bit caught on read.
#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <cstring>
#include <random>
#include <thread>

#include "fs/meta/cell_checksums.h"
#include "fs/device/fault_device.h"
#include "fs/volume/fsck.h"
#include "fs/volume/volume.h"
#include "geometry/load.h"

using namespace mmfs;
using namespace mmfs::fs;

namespace {
// A freshly formatted 16 MiB volume of geometry `g`, mounted.
std::unique_ptr<Volume> small_volume(const geom::Geometry& g) {
  auto dev = std::make_unique<MemoryDevice>(16 << 20, 512);
  FormatOptions fo;
  fo.meta_bytes = 4 << 20;
  std::string msg;
  REQUIRE(format_volume(*dev, g, fo, nullptr, &msg) == 0);
  int err = 0;
  auto vol = Volume::open(std::move(dev), &err, &msg);
  REQUIRE(vol);
  return vol;
}
}  // namespace

TEST_CASE("cell checksums: committed with the metadata, verified on read, removed with the inode", "[checksum]") {
  auto g = geom::load_geometry(nlohmann::json{{"kind", "disk"}, {"sector_size", 512}, {"cylinders", 250},
                                              {"surfaces", 2}, {"sectors_per_track", 64}, {"rpm", 10000},
                                              {"settle_ms", 1.0}, {"settle_cylinders", 4}});
  auto vol = small_volume(*g);
  Inode file;
  REQUIRE(vol->metadata().create(kRootIno, "a", S_IFREG | 0644, 0, 0, "", &file) == 0);
  const std::uint64_t cells = 3000;  // three checksum records
  std::vector<Extent> ext;
  REQUIRE(vol->metadata().allocate_extents(file.ino, {layouts::SpaceShape::Runs, cells}, &ext) == 0);
  REQUIRE(ext.size() == 1);

  // Write every cell but the last, one sector each, and record its checksum.
  CellChecksums sums(vol->store(), file.ino, cells);
  AlignedBuffer data(cells * 512);
  std::mt19937_64 rng(3);
  for (std::uint64_t c = 0; c + 1 < cells; ++c)
    for (int i = 0; i < 512; ++i) data.data()[c * 512 + i] = std::byte(rng());
  REQUIRE(vol->device().write(ext[0].start * 512, data.data(), std::uint32_t(cells * 512)) == 0);
  for (std::uint64_t c = 0; c < cells; ++c) sums.set(c, {data.data() + c * 512, 512});
  WriteBatch batch;
  sums.stage(batch);
  CHECK(batch.size() == 3);
  REQUIRE(vol->store().apply(batch) == 0);
  REQUIRE(vol->metadata().sync() == 0);

  // Reload the table and read the cells back from the device.
  CellChecksums loaded(vol->store(), file.ino, cells);
  AlignedBuffer back(cells * 512);
  REQUIRE(vol->device().read(ext[0].start * 512, back.data(), std::uint32_t(cells * 512)) == 0);
  for (std::uint64_t c = 0; c < cells; ++c) REQUIRE(loaded.verify(c, {back.data() + c * 512, 512}));
  CHECK(loaded.get(cells - 1) == 0);  // never written: reads as zeros

  // A flipped bit is caught, for that cell only.
  auto& mem = dynamic_cast<MemoryDevice&>(vol->device());
  mem.bytes()[ext[0].start * 512 + 1234 * 512 + 77] ^= std::byte{4};
  REQUIRE(vol->device().read(ext[0].start * 512, back.data(), std::uint32_t(cells * 512)) == 0);
  for (std::uint64_t c = 0; c < cells; ++c) CHECK(loaded.verify(c, {back.data() + c * 512, 512}) == (c != 1234));

  CHECK(check_volume(*vol, false).problems.empty());
  REQUIRE(vol->metadata().unlink(kRootIno, "a") == 0);
  REQUIRE(vol->metadata().sync() == 0);
  int left = 0;
  vol->store().scan("c/", [&](std::string_view, std::string_view) { return ++left, true; });
  CHECK(left == 0);
  CHECK(check_volume(*vol, false).problems.empty());
}

TEST_CASE("cell checksums: per block of a cell, zero records not stored, alternatives absent until a rewrite",
          "[checksum]") {
  // The blocks rule: whole sectors that tile the cell, else one per cell.
  CHECK(checksum_block_bytes(512) == 4096);
  CHECK(checksum_block_bytes(4096) == 4096);
  CHECK(checksum_block_bytes(8192) == 8192);
  CHECK(checksum_blocks(8192, 2, 4096, 4096).per_cell == 2);
  CHECK(checksum_blocks(8000, 2, 4096, 4096).per_cell == 2);   // the last block covers 3904 bytes
  CHECK(checksum_blocks(8192, 16, 512, 4096).per_cell == 2);
  CHECK(checksum_blocks(6144, 12, 512, 4096).per_cell == 1);  // 4096 + 2048: would not tile 12 sectors
  CHECK(checksum_blocks(4096, 1, 4096, 4096).per_cell == 1);
  CHECK(checksum_blocks(8192, 2, 4096, 0).per_cell == 1);     // arrays placed before blocks

  auto g = geom::load_geometry("ssd");
  auto vol = small_volume(*g);
  const Ino ino = 77;
  const std::uint64_t cells = 1500;  // 3000 entries: three records
  const ChecksumBlocks blocks = checksum_blocks(8192, 2, 4096, 4096);
  std::mt19937_64 rng(8);
  std::vector<std::byte> cell(8192);
  for (auto& b : cell) b = std::byte(rng());

  CellChecksums sums = CellChecksums::fresh(ino, cells, 'c', blocks);
  CellChecksums alt = CellChecksums::fresh(ino, cells, 'a', blocks);
  CHECK(sums.entries() == 3000);
  CHECK_FALSE(alt.maybe_recorded());
  // Cell 10: block 0 random, block 1 zeros (which records 0, like a block never written).
  std::vector<std::byte> half = cell;
  std::fill(half.begin() + 4096, half.end(), std::byte{0});
  sums.set(10, half);
  CHECK(sums.entry(20) != 0);
  CHECK(sums.entry(21) == 0);
  CHECK(sums.any(10));
  CHECK_FALSE(sums.any(11));
  CHECK(sums.verify(10, half));
  CHECK_FALSE(sums.verify(10, cell));  // block 1 must read as zeros
  CHECK(sums.verify_block(10, 0, std::span<const std::byte>(cell).first(4096)));
  WriteBatch batch;
  sums.stage(batch);
  alt.stage(batch);
  REQUIRE(vol->store().apply(batch) == 0);
  auto records = [&](char tag) {
    int n = 0;
    vol->store().scan(keys::checksum_prefix(ino, tag), [&](std::string_view, std::string_view) {
      return ++n, true;
    });
    return n;
  };
  CHECK(records('c') == 1);  // only the record holding cell 10
  CHECK(records('a') == 0);
  CellChecksums loaded(vol->store(), ino, cells, 'c', blocks);
  CHECK(loaded.verify(10, half));
  CHECK(loaded.entry(2999) == 0);
  CellChecksums loaded_alt(vol->store(), ino, cells, 'a', blocks);
  CHECK_FALSE(loaded_alt.maybe_recorded());
  CHECK_FALSE(loaded_alt.any(10));

  // A rewrite's alternative is stored, matches block by block, and goes with the commit.
  loaded_alt.set_alternative(10, cell);
  CHECK(loaded_alt.maybe_recorded());
  CHECK(loaded_alt.alternative_matches(10, 1, std::span<const std::byte>(cell).subspan(4096)));
  WriteBatch b2;
  loaded_alt.stage(b2);
  REQUIRE(vol->store().apply(b2) == 0);
  CHECK(records('a') == 1);
  loaded_alt.clear_cell(10);
  WriteBatch b3;
  loaded_alt.stage(b3);
  REQUIRE(vol->store().apply(b3) == 0);
  CHECK(records('a') == 0);  // back to zeros: the record is deleted, not rewritten
  // And the committed table's record goes once every cell in it reads as zeros.
  loaded.set(10, std::vector<std::byte>(8192));
  WriteBatch b4;
  loaded.stage(b4);
  REQUIRE(vol->store().apply(b4) == 0);
  CHECK(records('c') == 0);
}

TEST_CASE("cell checksums: records read on first use give the stored values to concurrent readers, and resize "
          "and load_all keep them", "[checksum]") {
  auto g = geom::load_geometry("ssd");
  auto vol = small_volume(*g);
  const Ino ino = 91;
  const std::uint64_t entries = 5000;  // five records, the last one short
  std::mt19937_64 rng(12);
  std::vector<std::uint32_t> want(entries, 0);
  {
    CellChecksums sums = CellChecksums::fresh(ino, entries, 'c');
    for (std::uint64_t i = 0; i < entries; ++i)
      if (i / CellChecksums::kCellsPerRecord != 2) sums.set_raw(i, want[i] = std::uint32_t(rng() | 1));  // record 2: zeros
    WriteBatch batch;
    sums.stage(batch);
    REQUIRE(vol->store().apply(batch) == 0);
  }
  CellChecksums table(vol->store(), ino, entries, 'c');
  CHECK(table.maybe_recorded());
  // Four readers at once, each over every entry from a different start: each
  // record is read from the store by whichever reader comes first.
  std::vector<std::uint64_t> wrong(4, 0);
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t)
    readers.emplace_back([&, t] {
      for (std::uint64_t k = 0; k < entries; ++k) {
        const std::uint64_t i = (k + std::uint64_t(t) * 1237) % entries;
        wrong[std::size_t(t)] += table.entry(i) != want[i];
      }
    });
  for (auto& r : readers) r.join();
  CHECK(wrong == std::vector<std::uint64_t>(4, 0));

  // A shrink into a record not yet read drops the entries past the end; a
  // growth brings them back as zeros.
  CellChecksums shrunk(vol->store(), ino, entries, 'c');
  shrunk.resize(3500);
  shrunk.resize(4100);
  for (std::uint64_t i : {0ull, 1023ull, 3072ull, 3499ull}) CHECK(shrunk.get(i) == want[i]);
  for (std::uint64_t i : {3500ull, 4095ull, 4096ull, 4099ull}) CHECK(shrunk.get(i) == 0);

  // After load_all the table no longer reads the store: removing the records
  // leaves its values.
  CellChecksums detached(vol->store(), ino, entries, 'c');
  detached.load_all();
  WriteBatch removal;
  CellChecksums::stage_removal(vol->store(), ino, removal);
  REQUIRE(vol->store().apply(removal) == 0);
  std::uint64_t differ = 0;
  for (std::uint64_t i = 0; i < entries; ++i) differ += detached.get(i) != want[i];
  CHECK(differ == 0);
  CHECK_FALSE(CellChecksums(vol->store(), ino, entries, 'c').maybe_recorded());
}
