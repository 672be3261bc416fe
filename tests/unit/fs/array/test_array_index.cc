// An array's bitmap index on the volume (fs/array/array_index.h,
// fs/array/array_file_index.cc): built from the data, answering exactly, kept
// current by writes, durable across a remount, dropped with `none`, and
// consistent with the data beside it after a power cut at any device event
// of a flush (the fault-injecting device).
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

using namespace mmfs;
using namespace mmfs::fs;
using namespace mmfs::fs::testing::arrays;
using mmfs::fs::testing::RefDevice;
using mmfs::fs::testing::toy_disk;

namespace {

using Values = std::vector<std::int16_t>;

// Small values, so `exact` bins hold one value each and every atom is aligned.
Values random_values(std::mt19937_64& rng, std::size_t n) {
  Values v(n);
  for (auto& x : v) x = std::int16_t(int(rng() % 41) - 20);
  return v;
}

int write_values(ArrayFile& a, std::uint64_t first, const Values& v) {
  std::string msg;
  return a.write(first * 2, reinterpret_cast<const std::byte*>(v.data()), v.size() * 2, &msg);
}

Values read_values(ArrayFile& a) {
  Values v(a.size() / 2);
  std::size_t got = 0;
  std::string msg;
  int r = a.read(0, a.size(), reinterpret_cast<std::byte*>(v.data()), &got, &msg);
  INFO(msg);
  REQUIRE(r == 0);
  REQUIRE(got == a.size());
  return v;
}

indexes::KeySet keys(indexes::CompareOp op, int c) {
  return indexes::compare_keys(indexes::ValueType::I16, op, *indexes::parse_number(std::to_string(c)));
}

// Every comparison with a few constants: the index's rows equal the data's.
void check_index_matches(ArrayFile& a, const Values& data, bool expect_aligned, const std::string& when = "") {
  using indexes::CompareOp;
  INFO(when);
  for (CompareOp op : {CompareOp::Eq, CompareOp::Ne, CompareOp::Lt, CompareOp::Ge})
    for (int c : {-20, -3, 0, 7, 25}) {
      const indexes::KeySet k = keys(op, c);
      std::vector<indexes::Estimate> est;
      QueryCost cost;
      std::string msg;
      REQUIRE(a.atom_estimates({k}, std::nullopt, &est, &cost, &msg) == 0);
      indexes::Bitmap truth;
      for (std::size_t i = 0; i < data.size(); ++i)
        if (indexes::contains(k, indexes::ValueType::I16, reinterpret_cast<const std::byte*>(&data[i])))
          truth.add(std::uint64_t(i));
      INFO("op " << int(op) << " constant " << c);
      CHECK(!cost.scanned);
      const indexes::Bitmap& sure = est[0].sure_rows();  // possibly lent by the index's cache
      CHECK(indexes::is_subset(sure, truth));
      CHECK(indexes::is_subset(truth, sure | est[0].maybe));
      if (expect_aligned) CHECK(indexes::same_rows(sure, truth));
      if (expect_aligned) CHECK(est[0].maybe.isEmpty());
      // Asked again, the atom comes from memory (bitmaps, or the combined
      // rows of a range of bins) and is the same.
      std::vector<indexes::Estimate> again;
      QueryCost cost2;
      REQUIRE(a.atom_estimates({k}, std::nullopt, &again, &cost2, &msg) == 0);
      CHECK(cost2.index_read_bytes == 0);
      CHECK(indexes::same_rows(again[0].sure_rows(), sure));
      CHECK(indexes::same_rows(again[0].maybe, est[0].maybe));
    }
}

ArraySchema indexed(ArraySchema s, const std::string& encoding, const std::string& bins) {
  s.index = encoding;
  s.bins = bins;
  return s;
}

}  // namespace

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
      a = create_array(m, "a", s);
      ino = a->ino();
      REQUIRE(write_values(*a, 0, data) == 0);
      std::string msg;
      REQUIRE(a->flush(true, &msg) == 0);
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
    auto a = create_array(m, "c", make_schema({40, 37}, "int16", "naive"));
    ino = a->ino();
    REQUIRE(write_values(*a, 0, data) == 0);
    std::string msg;
    REQUIRE(a->flush(true, &msg) == 0);
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

// A damaged index object must not take its array with it: the data reads,
// queries answer EIO naming the damage, and setting user.mmfs.index again
// (the same value) replaces it and frees its space.
TEST_CASE("array index: a damaged index leaves the array usable and is rebuilt by setting the index again",
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
    auto a = create_array(m, "d", make_schema({30, 20}, "int16", "naive"));
    ino = a->ino();
    REQUIRE(write_values(*a, 0, data) == 0);
    std::string msg;
    REQUIRE(a->flush(true, &msg) == 0);
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
  CHECK(a->atom_estimates({indexes::compare_keys(indexes::ValueType::I16, indexes::CompareOp::Eq, *indexes::parse_number("3"))}, std::nullopt, &est, &cost, &msg) == EIO);
  CHECK(msg.find("set user.mmfs.index again") != std::string::npos);
  // The same value again: rebuilt from the data, the damaged object's space returned.
  REQUIRE(a->change_schema(s, &msg) == 0);
  CHECK(a->has_index());
  check_index_matches(*a, data, true);
  REQUIRE(a->change_schema(make_schema({30, 20}, "int16", "naive"), &msg) == 0);
  REQUIRE(m.md().sync() == 0);
  CHECK(m.vol->allocator().free_sectors() == free_before);
  auto report = check_volume(*m.vol, false);
  INFO((report.problems.empty() ? "" : report.problems[0]));
  CHECK(report.problems.empty());
}
