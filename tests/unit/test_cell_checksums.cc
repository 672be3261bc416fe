// Array data checksums (fs/cell_checksums.h) through a volume: data written
// at the allocated sectors, checksums committed with the metadata, a flipped
// bit caught on read.
#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <cstring>
#include <random>

#include "fs/cell_checksums.h"
#include "fs/fault_device.h"
#include "fs/fsck.h"
#include "fs/volume.h"
#include "geometry/load.h"

using namespace mmfs;
using namespace mmfs::fs;

TEST_CASE("cell checksums: committed with the metadata, verified on read, removed with the inode", "[checksum]") {
  auto g = geom::load_geometry(nlohmann::json{{"kind", "disk"}, {"sector_size", 512}, {"cylinders", 250},
                                              {"surfaces", 2}, {"sectors_per_track", 64}, {"rpm", 10000},
                                              {"settle_ms", 1.0}, {"settle_cylinders", 4}});
  auto dev = std::make_unique<MemoryDevice>(16 << 20, 512);
  FormatOptions fo;
  fo.meta_bytes = 4 << 20;
  std::string msg;
  REQUIRE(format_volume(*dev, *g, fo, nullptr, &msg) == 0);
  int err = 0;
  auto vol = Volume::open(std::move(dev), &err, &msg);
  REQUIRE(vol);
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
