// Who owns each sector of a volume, for the scrub (fs/scrub/scrub_map.h): a
// hand-built map's owners, units and runs, and the map of a real in-memory
// volume placing array cells, plain-file blocks and superblocks.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "fs/file/plain_file.h"
#include "fs/scrub/scrub_map.h"
#include "tests/unit/support/array_test_support.h"
#include "tests/unit/support/fs_test_support.h"
#include "tests/unit/support/scrub_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;

namespace {

using testing::toy_map;
using namespace testing::arrays;

}  // namespace

TEST_CASE("the owner map names each sector's unit and the unit's runs", "[scrub]") {
  auto map = toy_map();
  CHECK(map->owner(0).kind == OwnerKind::Metadata);
  CHECK(map->owner(150).kind == OwnerKind::Free);
  CHECK(map->owner(1000).kind == OwnerKind::Outside);
  Owner o = map->owner(212);
  CHECK(o.kind == OwnerKind::ArrayCell);
  CHECK(o.unit == 1);
  CHECK(o.sector == 2);
  o = map->owner(400);  // the split cell's last sector
  CHECK(o.kind == OwnerKind::ArrayCell);
  CHECK(o.unit == 2);
  CHECK(o.sector == 2);
  const auto runs = map->object(0).unit_runs(2);
  REQUIRE(runs.size() == 2);
  CHECK(runs[0].lbn == 300);
  CHECK(runs[0].sectors == 2);
  CHECK(runs[1].lbn == 400);
  CHECK(runs[1].sectors == 1);
  CHECK(map->describe(231) == "cell 3 of /t/a");
  CHECK(map->describe(50) == "the metadata region");
}

TEST_CASE("the map of a real volume places array cells, file blocks and superblocks", "[scrub]") {
  ArraySchema s = make_schema({24, 16}, "float64", "naive");
  s.cell = {4, 4};  // 128 bytes: a quarter of a sector
  auto v = testing::scrub_volume(s, [](std::size_t i) { return double(i) + 0.5; }, 10000, 'x');
  Mount& m = v.m;
  auto& a = v.a;
  std::string msg;

  auto map = OwnerMap::from_volume(*m.vol);
  CHECK(map->unmapped_objects() == 0);
  const ScrubObject* array = nullptr;
  const ScrubObject* file = nullptr;
  int superblocks = 0;
  for (const auto& o : map->objects()) {
    if (o.kind == OwnerKind::ArrayCell) array = &o;
    if (o.kind == OwnerKind::PlainBlock) file = &o;
    superblocks += o.kind == OwnerKind::Superblock;
  }
  CHECK(superblocks == 2);
  REQUIRE(array);
  CHECK(array->path == "/a");
  CHECK(array->units == 24);
  CHECK(array->unit_sectors == 1);
  CHECK(array->checked_bytes == 128);
  REQUIRE(file);
  CHECK(file->path == "/f");
  CHECK(file->units == 3);  // 10,000 bytes: three 4 KiB blocks
  CHECK(file->unit_sectors == 8);
  // Every element's sector belongs to its cell.
  for (std::uint64_t i : {0u, 5u, 23u}) {
    for (std::uint64_t j : {0u, 7u, 15u}) {
      std::string text_lbn;
      REQUIRE(a->lbn_text(std::vector<std::uint64_t>{i, j}, &text_lbn, &msg) == 0);
      const Owner o = map->owner(std::stoull(text_lbn));
      CHECK(o.kind == OwnerKind::ArrayCell);
      CHECK(o.unit == (i / 4) * 4 + j / 4);
    }
  }
  CHECK(map->owner(0).kind == OwnerKind::Superblock);
  CHECK(map->owner(m.vol->superblock().meta_offset / 512 + 1).kind == OwnerKind::Metadata);
  CHECK(map->owner(m.vol->superblock().data_end_lbn - 1).kind != OwnerKind::Outside);
}
