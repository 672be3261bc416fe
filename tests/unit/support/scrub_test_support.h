// The scrub's toy owner map (fs/scrub/scrub_map.h) and a real in-memory
// volume holding an array and a plain file, shared by the owner map's and the
// scrub engine's unit tests.
#pragma once

#include <catch2/catch.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fs/array/array_file.h"
#include "fs/file/plain_file.h"
#include "fs/scrub/scrub_map.h"
#include "tests/unit/support/array_test_support.h"
#include "tests/unit/support/fs_test_support.h"

namespace mmfs::fs::testing {

// A map of 1,000 sectors: metadata [0, 100), data [100, 1000) free, and an
// array (ino 7, "/t/a") of 4 cells of 3 sectors: cell c at 200 + 10c, except
// cell 2, split in two runs (300..301 and 400).
inline std::unique_ptr<OwnerMap> toy_map() {
  auto map = std::make_unique<OwnerMap>(1000, 512);
  map->add_region(OwnerKind::Metadata, 0, 100);
  map->add_region(OwnerKind::Free, 100, 900);
  ScrubObject a;
  a.kind = OwnerKind::ArrayCell;
  a.ino = 7;
  a.path = "/t/a";
  a.unit_sectors = 3;
  a.units = 4;
  a.checked_bytes = 1500;  // the brick: the padding past it is not checksummed
  a.pieces = {{0, 200, 3}, {3, 210, 3}, {6, 300, 2}, {8, 400, 1}, {9, 230, 3}};
  map->add_object(std::move(a));
  map->seal();
  return map;
}

// A volume on the toy disk holding the float64 array "a" of `s`, element i
// written as value(i) and flushed, and the plain file "f" (`fino`) of
// `file_bytes` bytes `fill`, committed; the metadata synced. Members die in
// reverse order: the file and the array before the mount, the mount before
// the device under it.
struct ScrubVolume {
  std::unique_ptr<geom::Geometry> g;
  std::unique_ptr<MemoryDevice> dev;
  arrays::Mount m;
  std::shared_ptr<ArrayFile> a;
  Ino fino = 0;
  std::unique_ptr<PlainFile> file;
};

template <class Value>
ScrubVolume scrub_volume(const ArraySchema& s, Value value, std::size_t file_bytes, char fill) {
  ScrubVolume v;
  v.g = toy_disk();
  v.dev = arrays::formatted(*v.g);
  v.m = arrays::mount(std::make_unique<RefDevice>(*v.dev));
  v.a = arrays::create_array(v.m, "a", s);
  std::vector<double> values(v.a->size() / sizeof(double));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = value(i);
  std::string msg;
  const auto* bytes = reinterpret_cast<const std::byte*>(values.data());
  REQUIRE(v.a->write(0, bytes, values.size() * sizeof(double), &msg) == 0);
  REQUIRE(v.a->flush(true, &msg) == 0);
  v.fino = arrays::new_file(v.m.md(), "f");
  v.file = std::make_unique<PlainFile>(v.m.md(), v.m.vol->allocator(), *v.m.io, *v.g, v.fino, 0);
  std::vector<std::byte> text(file_bytes, static_cast<std::byte>(fill));
  REQUIRE(v.file->write(0, text.data(), text.size()) == 0);
  REQUIRE(v.file->commit() == 0);
  REQUIRE(v.m.md().sync() == 0);
  return v;
}

}  // namespace mmfs::fs::testing
