// An array's bitmap index on the volume (fs/array/array_index.h): built from
// the data, answering exactly, durable across a remount, dropped with `none`
// and its space freed; a damaged index leaves the array usable and is built
// again. How writes keep it current is tested in test_array_file_index.cc.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tests/unit/support/array_test_support.h"
#include "fs/device/fault_device.h"
#include "fs/volume/fsck.h"
#include "tests/unit/support/fs_test_support.h"
#include "indexes/values.h"
#include "tests/unit/support/array_index_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;
using namespace mmfs::fs::testing::arrays;
using namespace mmfs::fs::testing::array_indexes;

TEST_CASE("array index: built from the data, exact, durable, dropped with none", "[array_index]") {
  auto g = toy_disk();
  auto dev = formatted(*g);
  std::mt19937_64 rng(14);
  const ArraySchema s = make_schema({30, 41}, "int16", "multimap");
  Values data = random_values(rng, 30 * 41);
  Ino ino = 0;
  std::uint64_t free_before = 0;
  for (const char* encoding : {"e1", "bn", "range", "interval", "re", "ie"}) {
    INFO("encoding " << encoding);
    Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
    std::shared_ptr<ArrayFile> a;
    if (ino == 0) {
      a = create_with_values(m, "a", s, data);
      ino = a->ino();
      free_before = m.vol->allocator().free_sectors();
    } else {
      a = open_stored(m, ino);
    }
    std::string msg;
    REQUIRE(a->change_schema(indexed(s, encoding, "exact"), &msg) == 0);
    CHECK(a->has_index());
    CHECK(a->info()["device_bytes"]["index"].get<std::uint64_t>() > 0);
    CHECK(m.vol->allocator().free_sectors() < free_before);
    check_index_matches(*a, data, true);
    // After a remount the stored index answers the same.
    a.reset();
    Mount again = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
    auto b = open_stored(again, ino);
    REQUIRE(b->has_index());
    check_index_matches(*b, data, true);
    REQUIRE(b->change_schema(s, &msg) == 0);  // index none: dropped, its space back
    CHECK(!b->has_index());
    REQUIRE(again.md().sync() == 0);
    CHECK(again.vol->allocator().free_sectors() == free_before);
    auto report = check_volume(*again.vol, false);
    INFO((report.problems.empty() ? "" : report.problems[0]));
    CHECK(report.problems.empty());
  }
}

// A damaged index object must not take its array with it: the data reads,
// and the next query builds the index anew from the data (ArrayFile::
// heal_index; test_array_file_index_heal.cc) and frees the damaged
// object's space.
TEST_CASE("array index: a damaged index leaves the array usable and the next query builds it anew",
          "[array_index]") {
  auto g = toy_disk();
  auto dev = formatted(*g);
  std::mt19937_64 rng(17);
  const ArraySchema s = indexed(make_schema({30, 20}, "int16", "naive"), "e1", "exact");
  Values data = random_values(rng, 30 * 20);
  Ino ino = 0;
  std::uint64_t free_before = 0;
  {
    Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
    auto a = create_with_values(m, "d", make_schema({30, 20}, "int16", "naive"), data);
    ino = a->ino();
    std::string msg;
    REQUIRE(m.md().sync() == 0);
    free_before = m.vol->allocator().free_sectors();
    REQUIRE(a->change_schema(s, &msg) == 0);
    const std::vector<Extent> extents = ArrayIndex::stored_extents(m.md(), ino);
    REQUIRE(!extents.empty());
    // Garbage over the header's first sector.
    AlignedBuffer junk(512);
    for (std::size_t i = 0; i < 512; ++i) junk.data()[i] = std::byte(rng());
    REQUIRE(dev->write(extents[0].start * 512, junk.data(), 512) == 0);
    REQUIRE(dev->flush() == 0);
  }
  Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
  auto a = open_stored(m, ino);  // opens
  CHECK(!a->has_index());
  CHECK(read_values(*a) == data);
  CHECK(a->info()["index_detail"]["damaged"].get<std::string>().find("damaged") != std::string::npos);
  std::vector<indexes::Estimate> est;
  QueryCost cost;
  std::string msg;
  const indexes::KeySet eq3 =
      indexes::compare_keys(indexes::ValueType::I16, indexes::CompareOp::Eq, *indexes::parse_number("3"));
  CHECK(a->atom_estimates({eq3}, std::nullopt, &est, &cost, &msg) == 0);
  CHECK(!cost.scanned);
  CHECK(a->has_index());
  CHECK_FALSE(a->info()["index_detail"].contains("damaged"));
  check_index_matches(*a, data, true);
  REQUIRE(a->change_schema(make_schema({30, 20}, "int16", "naive"), &msg) == 0);
  REQUIRE(m.md().sync() == 0);
  CHECK(m.vol->allocator().free_sectors() == free_before);
  auto report = check_volume(*m.vol, false);
  INFO((report.problems.empty() ? "" : report.problems[0]));
  CHECK(report.problems.empty());
}
