// Shared by the unit tests of array files and their indexes
// (test_array_file.cc, test_array_index.cc): a formatted in-memory volume, a
// mounted one with the pieces an array needs, schemas and arrays. The names
// of fs_test_support.h these tests use are in this namespace too.
#pragma once

#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fs/array/array_file.h"
#include "fs/array/array_schema.h"
#include "fs/device/block_device.h"
#include "fs/device/fault_device.h"
#include "fs/device/sector_io.h"
#include "fs/volume/volume.h"
#include "tests/unit/support/fs_test_support.h"
#include "tests/unit/support/volume_test_support.h"

namespace mmfs::fs::testing::arrays {

using testing::Bytes;
using testing::bytes_diff;
using testing::random_bytes;
using testing::RefDevice;
using testing::toy_disk;

inline constexpr std::uint64_t kToyDeviceBytes = 8ull << 20;

inline std::unique_ptr<MemoryDevice> formatted(const geom::Geometry& g, std::uint64_t bytes = kToyDeviceBytes) {
  return volumes::formatted(g, bytes, "arrays");
}

inline std::unique_ptr<MemoryDevice> copy_of(MemoryDevice& d) {
  auto c = std::make_unique<MemoryDevice>(d.size_bytes(), d.block_size());
  c->bytes() = d.bytes();
  return c;
}

// A mounted volume with the pieces an array needs. Members die in reverse
// order: the SectorIo before the volume whose device it uses.
struct Mount {
  std::unique_ptr<Volume> vol;
  std::unique_ptr<SectorIo> io;
  std::unique_ptr<MemberSets> sets;  // as the daemon has them (none on a volume of one member)
  ArrayContext ctx() const {
    ArrayContext c{vol->metadata(), vol->allocator(), *io, vol->geometry(), vol->geometry().name()};
    c.member_sets = sets.get();
    return c;
  }
  Metadata& md() const { return vol->metadata(); }
};

inline Mount mount(std::unique_ptr<BlockDevice> dev) {
  Mount m;
  m.vol = volumes::open_ok(std::move(dev));
  m.io = std::make_unique<SectorIo>(m.vol->device(), m.vol->geometry());
  m.sets = std::make_unique<MemberSets>(m.vol->allocator(), m.vol->device(), m.vol->geometry());
  return m;
}

inline ArraySchema make_schema(std::vector<std::uint64_t> shape, const std::string& dtype, const std::string& layout) {
  ArraySchema s;
  s.shape = std::move(shape);
  auto d = parse_dtype(dtype);
  REQUIRE(d);
  s.dtype = *d;
  s.layout = layout;
  // What the volume records when it places the array (fs/array/array_file.h
  // placed_schema, for the 512 B and 4 KiB sectors of the tests' volumes), so
  // a stored schema compares equal to the one asked for.
  s.checksum_block = checksum_block_bytes(512);
  auto v = validate_schema(s);
  INFO(v.message);
  REQUIRE(v.error == 0);
  return s;
}

inline Ino new_file(Metadata& md, const std::string& name, Inode* out = nullptr) {
  Inode n;
  REQUIRE(md.create(kRootIno, name, S_IFREG | 0644, 0, 0, "", &n) == 0);
  if (out) *out = n;
  return n.ino;
}

inline std::shared_ptr<ArrayFile> create_array(const Mount& m, const std::string& name, const ArraySchema& s,
                                        PlainFile* source = nullptr) {
  Inode n;
  new_file(m.md(), name, &n);
  std::shared_ptr<ArrayFile> a;
  std::string msg;
  int r = ArrayFile::create(m.ctx(), n, s, source, &a, &msg);
  INFO(msg);
  REQUIRE(r == 0);
  REQUIRE(a);
  return a;
}

inline std::optional<ArraySchema> stored_schema(const Mount& m, Ino ino) {
  auto v = m.md().xattr(ino, std::string(ArrayFile::kSchemaXattr));
  if (!v) return std::nullopt;
  return decode_schema(*v);
}

inline std::shared_ptr<ArrayFile> open_stored(const Mount& m, Ino ino) {
  auto s = stored_schema(m, ino);
  REQUIRE(s);
  std::shared_ptr<ArrayFile> a;
  std::string msg;
  int r = ArrayFile::open(m.ctx(), ino, *s, &a, &msg);
  INFO(msg);
  REQUIRE(r == 0);
  return a;
}


}  // namespace mmfs::fs::testing::arrays
