// An array file's bitmap index over its lifetime (fs/array/array_file_index.cc):
// kept current by writes, before and after a flush and a remount, and
// consistent with the data beside it after a power cut at any device event
// of a flush (the fault-injecting device). Building, storing and loading the
// index are tested in test_array_index.cc.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fs/device/fault_device.h"
#include "fs/volume/fsck.h"
#include "indexes/values.h"
#include "tests/unit/support/array_index_test_support.h"
#include "tests/unit/support/array_test_support.h"
#include "tests/unit/support/fs_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;
using namespace mmfs::fs::testing::arrays;
using namespace mmfs::fs::testing::array_indexes;

TEST_CASE("array index: writes keep it current, before and after a flush and a remount", "[array_index]") {
  auto g = toy_disk();
  auto dev = formatted(*g);
  std::mt19937_64 rng(15);
  const ArraySchema s = indexed(make_schema({25, 33}, "int16", "naive"), "re", "exact");
  Values data = random_values(rng, 25 * 33);
  Ino ino = 0;
  {
    Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
    auto a = create_array(m, "w", s);  // indexed while empty: provisional bins
    ino = a->ino();
    REQUIRE(write_values(*a, 0, data) == 0);
    check_index_matches(*a, data, false, "written, not flushed");
    std::string msg;
    REQUIRE(a->flush(true, &msg) == 0);
    check_index_matches(*a, data, false, "flushed");
    for (int round = 0; round < 20; ++round) {
      // Byte ranges at odd offsets: elements cut in half are read back at flush.
      const std::uint64_t first = rng() % data.size(), n = 1 + rng() % 40;
      Values v = random_values(rng, std::size_t(std::min<std::uint64_t>(n, data.size() - first)));
      const std::int16_t kept_low = data[first];
      std::copy(v.begin(), v.end(), data.begin() + std::ptrdiff_t(first));
      if (round % 2)  // the first element's low byte is not written: it keeps the old one
        data[first] = std::int16_t((std::uint16_t(v[0]) & 0xFF00) | (std::uint16_t(kept_low) & 0x00FF));
      const std::uint64_t byte = first * 2 + (round % 2), len = v.size() * 2 - (round % 2);
      std::string m2;
      REQUIRE(a->write(byte, reinterpret_cast<const std::byte*>(v.data()) + (round % 2), len, &m2) == 0);
      check_index_matches(*a, data, false, "round " + std::to_string(round));
    }
    REQUIRE(a->flush(true, &msg) == 0);
  }
  Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
  auto a = open_stored(m, ino);
  CHECK(read_values(*a) == data);
  check_index_matches(*a, data, false);
}

// docs/reference.md §4: "fsync on an array file makes its data, placement and index
// durable"; the issue: "a crash leaves an index that matches the data it sits
// beside". A power cut at every device event of a flush of indexed writes.
TEST_CASE("array index: a power cut anywhere in a flush leaves an index that matches the data",
          "[array_index][crash]") {
  auto g = toy_disk();
  std::mt19937_64 rng(16);
  const ArraySchema s = indexed(make_schema({40, 37}, "int16", "naive"), "e1", "exact");
  auto golden = formatted(*g);
  Values data = random_values(rng, 40 * 37);
  Ino ino = 0;
  {
    Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*golden)));
    auto a = create_with_values(m, "c", make_schema({40, 37}, "int16", "naive"), data);
    ino = a->ino();
    std::string msg;
    REQUIRE(a->change_schema(s, &msg) == 0);  // exact bins from the data: every atom aligned
  }
  // The writes every run makes, and how many device events their flush takes.
  std::vector<std::pair<std::uint64_t, Values>> writes;
  for (int i = 0; i < 6; ++i) {
    const std::uint64_t first = rng() % (data.size() - 60);
    writes.push_back({first, random_values(rng, 1 + rng() % 60)});
  }
  std::uint64_t events = 0;
  {
    auto* fault = new FaultInjectingDevice(copy_of(*golden), 1);
    Mount m = mount(std::unique_ptr<BlockDevice>(fault));
    auto a = open_stored(m, ino);
    for (const auto& [first, v] : writes) REQUIRE(write_values(*a, first, v) == 0);
    const std::uint64_t before = fault->events();
    std::string msg;
    REQUIRE(a->flush(true, &msg) == 0);
    events = fault->events() - before;
    REQUIRE(events > 3);
  }
  Values after = data;
  for (const auto& [first, v] : writes) std::copy(v.begin(), v.end(), after.begin() + std::ptrdiff_t(first));
  int old_data = 0, new_data = 0;
  for (std::uint64_t cut = 1; cut <= events + 1; ++cut) {
    INFO("cut " << cut << " of " << events);
    auto* fault = new FaultInjectingDevice(copy_of(*golden), 100 + cut);
    std::unique_ptr<MemoryDevice> image;
    int r = 0;
    {
      Mount m = mount(std::unique_ptr<BlockDevice>(fault));
      auto a = open_stored(m, ino);
      for (const auto& [first, v] : writes) REQUIRE(write_values(*a, first, v) == 0);
      fault->fail_after(fault->events() + cut);
      std::string msg;
      r = a->flush(true, &msg);
      image = fault->crash_image();
      a->quiesce();
    }
    Mount m = mount(std::move(image));
    auto a = open_stored(m, ino);
    REQUIRE(a->has_index());
    const Values got = read_values(*a);
    if (r == 0) CHECK(got == after);  // fsync returned: the writes are durable
    (got == data ? old_data : new_data)++;
    // Whatever the data is, the index says the same (aligned: exactly).
    check_index_matches(*a, got, true);
    auto report = check_volume(*m.vol, false);
    INFO((report.problems.empty() ? "" : report.problems[0]));
    CHECK(report.problems.empty());
  }
  CHECK(old_data > 0);
  CHECK(new_data > 0);
}
