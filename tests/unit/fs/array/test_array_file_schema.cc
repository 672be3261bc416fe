// Schema changes of array files (fs/array/array_file_schema.cc): relayout keeps
// the contents between every pair of layouts; shape and dtype freeze with data.
#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <atomic>
#include <map>
#include <set>
#include <thread>
#include <random>
#include <string>
#include <vector>

#include "fs/array/array_file.h"
#include "fs/array/array_schema.h"
#include "fs/device/fault_device.h"
#include "fs/volume/fsck.h"
#include "fs/file/plain_file.h"
#include "fs/device/sector_io.h"
#include "fs/paths/view_path.h"
#include "layouts/cell_copy.h"
#include "layouts/selection_chunks.h"
#include "fs/volume/volume.h"
#include "geometry/load.h"
#include "tests/unit/support/array_test_support.h"
#include "tests/unit/support/array_view_support.h"
#include "tests/unit/support/fs_test_support.h"
#include "tests/unit/support/array_file_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;
using namespace mmfs::fs::testing::arrays;

TEST_CASE("array file: relayout keeps the contents; shape and dtype are frozen once it holds data", "[array_file]") {
  auto g = toy_disk();
  std::mt19937_64 rng(4242);
  auto dev = formatted(*g);
  Ino ino = 0;
  Bytes model;
  ArraySchema s = make_schema({9, 10, 11}, "float64", "naive");
  {
    Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
    const std::uint64_t free0 = m.vol->allocator().free_sectors();
    auto a = create_array(m, "r", s);
    ino = a->ino();
    model.assign(a->size(), 0);
    random_writes(*a, model, rng, 30);  // some of it still dirty when the schema changes

    auto change = [&](ArraySchema next, const char* what) {
      INFO(what);
      std::string msg;
      int r = a->change_schema(next, &msg);
      INFO(msg);
      REQUIRE(r == 0);
      CHECK(a->schema() == next);
      CHECK(*stored_schema(m, ino) == next);
      CHECK(a->size() == model.size());
      CHECK(bytes_diff(read_all(*a), model) == "");
      // The old placement went back to the allocator (after the commit's sync).
      CHECK(m.vol->allocator().free_sectors() + a->device_bytes() / 512 == free0);
      check_views(*a, next, model, rng);
      s = next;
    };
    ArraySchema next = s;
    next.layout = "hilbert";
    change(next, "naive -> hilbert");
    random_writes(*a, model, rng, 10);
    next.order = {0, 2, 1};
    change(next, "order change");
    next.cell = {3, 2, 5};
    change(next, "cell change");
    CHECK(a->attr_text("cell") == "3,2,5");
    random_writes(*a, model, rng, 10);
    next.layout = "multimap";
    next.cell.clear();
    change(next, "hilbert -> multimap, default cell");
    next.layout = "zorder";
    change(next, "multimap -> zorder");
    next.priority = "S-M-V";
    change(next, "a record-only change");

    // Shape and dtype changes on an array holding data: EBUSY, nothing changes.
    for (int k = 0; k < 2; ++k) {
      ArraySchema bad = s;
      if (k == 0) bad.shape = {9, 10, 12};
      else bad.dtype = *parse_dtype("int64");
      std::uint64_t free_before = m.vol->allocator().free_sectors();
      std::string msg;
      CHECK(a->change_schema(bad, &msg) == EBUSY);
      CHECK_FALSE(msg.empty());
      CHECK(a->schema() == s);
      CHECK(*stored_schema(m, ino) == s);
      CHECK(a->size() == model.size());
      CHECK(bytes_diff(read_all(*a), model) == "");
      CHECK(m.vol->allocator().free_sectors() == free_before);
    }
    // A layout this volume cannot place (capsules need a MEMS device): refused, nothing changes.
    {
      ArraySchema bad = s;
      bad.layout = "capsule";
      std::string msg;
      CHECK(a->change_schema(bad, &msg) == ENOTSUP);
      CHECK(a->schema() == s);
      CHECK(bytes_diff(read_all(*a), model) == "");
    }
    // After zero() the array holds no data: the shape may change.
    std::string msg;
    REQUIRE(a->zero(&msg) == 0);
    ArraySchema reshaped = s;
    reshaped.shape = {4, 4, 4};
    REQUIRE(a->change_schema(reshaped, &msg) == 0);
    CHECK(a->size() == 4 * 4 * 4 * 8);
    CHECK(m.md().inode(ino)->size == 4 * 4 * 4 * 8);  // st_size follows the shape
    CHECK(bytes_diff(read_all(*a), Bytes(4 * 4 * 4 * 8, 0)) == "");
    // ... and back, then fill it again for the remount below.
    REQUIRE(a->change_schema(s, &msg) == 0);
    CHECK(m.md().inode(ino)->size == model.size());
    CHECK(bytes_diff(read_all(*a), Bytes(model.size(), 0)) == "");
    REQUIRE(write_file(*a, 0, model) == 0);
    REQUIRE(a->flush(true, &msg) == 0);
    CHECK(m.vol->allocator().free_sectors() + a->device_bytes() / 512 == free0);
  }
  Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
  CHECK(*stored_schema(m, ino) == s);
  auto a = open_stored(m, ino);
  CHECK(bytes_diff(read_all(*a), model) == "");
  auto report = check_volume(*m.vol, false);
  INFO((report.problems.empty() ? "" : report.problems[0]));
  CHECK(report.problems.empty());
}


TEST_CASE("array file: relayout between every pair of layouts, every shape", "[array_file]") {
  auto g = toy_disk();
  auto golden = formatted(*g);
  std::uint64_t seed = 500;
  for (const Case& c : cases()) {
    for (const std::string& from : kLayouts) {
      for (const std::string& to : kLayouts) {
        if (from == to) continue;
        std::mt19937_64 rng(++seed);
        INFO(from << " -> " << to << " shape " << layouts::join(c.shape) << " " << c.dtype);
        Mount m = mount(copy_of(*golden));
        const std::uint64_t free0 = m.vol->allocator().free_sectors();
        ArraySchema s = make_schema(c.shape, c.dtype, from);
        s.cell = c.cell;
        auto a = create_array(m, "x", s);
        Bytes model(a->size(), 0);
        random_writes(*a, model, rng, 12);
        ArraySchema next = s;
        next.layout = to;
        if (rng() % 2) next.cell.clear();
        std::string msg;
        int r = a->change_schema(next, &msg);
        INFO(msg);
        REQUIRE(r == 0);
        CHECK(bytes_diff(read_all(*a), model) == "");
        CHECK(m.vol->allocator().free_sectors() + a->device_bytes() / 512 == free0);
        auto b = open_stored(m, a->ino());
        CHECK(b->schema() == next);
        CHECK(bytes_diff(read_all(*b), model) == "");
      }
    }
  }
}

