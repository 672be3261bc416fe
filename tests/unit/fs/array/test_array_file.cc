// Array files (fs/array/array_file.h, fs/array/array_state.h, docs/reference.md §4-5): the write path
// with its dirty-cell cache against a byte model for every implemented
// layout, views (slice, box, plod) against a brute-force extraction, zeroing,
// EFBIG, durability across a remount, schema changes with relayout, crash
// consistency of a relayout on the fault-injecting device, checksums, and the
// conversion of a plain file into an array.
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
#include "array_test_support.h"
#include "array_view_support.h"
#include "fs_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;

namespace {

using testing::RefDevice;
using testing::toy_disk;
using namespace testing::arrays;

// Random writes in random pieces (cutting elements and cells), with flushes
// and reads in between, mirrored into `model`.
void random_writes(ArrayFile& a, Bytes& model, std::mt19937_64& rng, int count) {
  const std::uint64_t N = model.size();
  for (int i = 0; i < count; ++i) {
    std::uint64_t off = rng() % N;
    std::uint64_t max_len = std::min<std::uint64_t>(N - off, rng() % 3 == 0 ? N : 1 + N / 8);
    std::size_t len = std::size_t(1 + rng() % max_len);
    Bytes data = random_bytes(rng, len);
    INFO("write " << len << " at " << off);
    REQUIRE(write_file(a, off, data) == 0);
    std::copy(data.begin(), data.end(), model.begin() + std::ptrdiff_t(off));
    switch (rng() % 6) {
      case 0: {
        std::string msg;
        REQUIRE(a.flush(false, &msg) == 0);
        break;
      }
      case 1: {  // a read sees every write before it
        std::uint64_t ro = rng() % N;
        std::size_t rl = std::size_t(1 + rng() % (N - ro));
        Bytes expect(model.begin() + std::ptrdiff_t(ro), model.begin() + std::ptrdiff_t(ro + rl));
        REQUIRE(bytes_diff(read_file(a, ro, rl), expect) == "");
        break;
      }
      default:
        break;
    }
  }
}

// Every element's bytes are on the device at the sector and offset lbn_text names.
void check_locations(ArrayFile& a, const ArraySchema& s, const Bytes& model, MemoryDevice& dev) {
  const std::size_t n = s.shape.size();
  const std::uint32_t I = s.dtype.itemsize;
  std::vector<std::uint64_t> x(n, 0);
  std::set<std::uint64_t> seen;
  int wrong = 0, shared = 0;
  for (std::uint64_t e = 0; e < model.size() / I; ++e) {
    std::uint64_t r = e;
    for (std::size_t d = n; d-- > 0;) {
      x[d] = r % s.shape[d];
      r /= s.shape[d];
    }
    std::string text, msg;
    REQUIRE(a.lbn_text(x, &text, &msg) == 0);
    unsigned long lbn = 0, offset = 0;
    REQUIRE(std::sscanf(text.c_str(), "%lu %lu", &lbn, &offset) == 2);
    REQUIRE(text.back() == '\n');
    REQUIRE(offset + I <= 512);
    std::uint64_t byte = std::uint64_t(lbn) * 512 + offset;
    REQUIRE(byte + I <= dev.bytes().size());
    if (!seen.insert(byte).second) ++shared;  // no two elements share a place
    if (std::memcmp(dev.bytes().data() + byte, model.data() + e * I, I) != 0 && wrong++ < 3)
      FAIL_CHECK("element " << e << " is not at " << text);
  }
  CHECK(wrong == 0);
  CHECK(shared == 0);
}

struct Case {
  std::vector<std::uint64_t> shape;
  std::string dtype;
  std::vector<std::uint64_t> cell;  // empty: the layout's choice
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {{37}, "float64", {}},
      {{37}, "float64", {5}},
      {{9, 10, 11}, "float64", {}},
      {{9, 10, 11}, "float64", {2, 3, 4}},  // many one-sector cells, cut at every edge
      {{3, 5, 4, 6}, "int16", {}},
      {{3, 5, 4, 6}, "int16", {2, 2, 3, 4}},
      {{1, 13, 1, 5}, "uint8", {1, 3, 1, 2}},  // single-element dimensions
      {{7, 1, 9}, "int32", {3, 1, 4}},
      {{1}, "float32", {}},                     // one element
      {{13, 40}, "float64", {4, 40}},           // 3-sector cells on 8-sector tracks
      {{30, 40, 20}, "int16", {}},              // several default (4 KiB) cells
  };
  return c;
}

const std::vector<std::string> kLayouts = {"naive", "zorder", "hilbert", "multimap"};

}  // namespace

TEST_CASE("array file: random writes, reads and views match a byte model on every layout", "[array_file]") {
  auto g = toy_disk();
  auto golden = formatted(*g);
  std::uint64_t seed = 0;
  for (const std::string& layout : kLayouts) {
    for (const Case& c : cases()) {
      ++seed;
      std::mt19937_64 rng(seed);
      ArraySchema s = make_schema(c.shape, c.dtype, layout);
      s.cell = c.cell;
      INFO("layout " << layout << " shape " << layouts::join(c.shape) << " " << c.dtype << " seed " << seed);
      Mount m = mount(copy_of(*golden));
      auto a = create_array(m, "a", s);
      const std::uint64_t N = array_bytes(s);
      REQUIRE(a->size() == N);
      REQUIRE(m.md().inode(a->ino())->size == N);
      Bytes model(N, 0);
      // Unwritten elements read as zero.
      CHECK(bytes_diff(read_all(*a), model) == "");
      CHECK_FALSE(a->holds_data());
      random_writes(*a, model, rng, 40);
      CHECK(a->holds_data());
      CHECK(bytes_diff(read_all(*a), model) == "");
      // Reads at random offsets, some past the end (short).
      for (int i = 0; i < 20; ++i) {
        std::uint64_t off = rng() % (N + 3);
        std::size_t len = std::size_t(rng() % (N + 5));
        Bytes expect;
        if (off < N)
          expect.assign(model.begin() + std::ptrdiff_t(off),
                        model.begin() + std::ptrdiff_t(std::min<std::uint64_t>(N, off + len)));
        INFO("read " << len << " at " << off);
        CHECK(bytes_diff(read_file(*a, off, len), expect) == "");
      }
      check_views(*a, s, model, rng);
      // A second round after the cells hold data: partial overwrites merge with the stored bytes.
      std::string msg;
      REQUIRE(a->flush(true, &msg) == 0);
      random_writes(*a, model, rng, 25);
      REQUIRE(a->flush(false, &msg) == 0);
      CHECK(bytes_diff(read_all(*a), model) == "");
      check_views(*a, s, model, rng);
      // A fresh handle over the stored placement and checksums reads the same.
      auto b = open_stored(m, a->ino());
      CHECK(bytes_diff(read_all(*b), model) == "");
      // lbn/...: every element is where the layout says, on the device.
      REQUIRE(a->flush(true, &msg) == 0);
      check_locations(*a, s, model, dynamic_cast<MemoryDevice&>(m.vol->device()));
    }
  }
}

TEST_CASE("array file: results of short-row cells, gathered by lines of cells, match the model", "[array_file]") {
  // Cells whose rows are shorter than a cache line (32 and 24 bytes) and
  // results of 4 MiB or more: gathered a line of cells at a time
  // (SelectionGather::gathers_lines), with cells never written (zeros) and,
  // on a disk's tracks, cells split across a track's end (copied alone).
  auto g = geom::load_geometry("atlas10k3");
  auto golden = formatted(*g, 64ull << 20);
  std::uint64_t seed = 100;
  for (const std::string& layout : kLayouts) {
    for (const std::vector<std::uint64_t>& cell : {std::vector<std::uint64_t>{16, 16, 4}, {5, 8, 3}}) {
      INFO("layout " << layout << " cell " << layouts::join(cell));
      std::mt19937_64 rng(++seed);
      ArraySchema s = make_schema({40, 64, 260}, "float64", layout);
      s.cell = cell;
      Mount m = mount(copy_of(*golden));
      auto a = create_array(m, "a", s);
      const std::uint64_t N = array_bytes(s);
      REQUIRE(N >= ArrayState::kStreamedResultBytes);
      const layouts::CellGrid grid(s.shape, 8, cell, layouts::CellGrid::default_order(3));
      REQUIRE(layouts::SelectionGather(grid, layouts::Selection::all(s.shape),
                                       layouts::SelectionGather::Stores::streamed)
                  .gathers_lines());
      // Planes 0..29 written; the cells of planes 32.. never are.
      Bytes model(N, 0);
      const std::uint64_t plane = N / 40;
      Bytes head = testing::random_bytes(rng, 30 * plane);
      std::copy(head.begin(), head.end(), model.begin());
      REQUIRE(write_file(*a, 0, head) == 0);
      std::string msg;
      REQUIRE(a->flush(true, &msg) == 0);
      auto b = open_stored(m, a->ino());  // no cell in memory: every one from the device
      CHECK(bytes_diff(read_all(*b), model) == "");
      std::vector<Sel> box = {{false, 1, 40, 1}, {false, 0, 64, 1}, {false, 2, 259, 1}};
      check_view(*b, resolve({"box", spell(box)}, s), extract(model, s.shape, 8, box), rng);
      check_views(*b, s, model, rng);
    }
  }
}

TEST_CASE("array file: zero(), EFBIG past the end, unwritten elements", "[array_file]") {
  auto g = toy_disk();
  auto golden = formatted(*g);
  for (const std::string& layout : kLayouts) {
    INFO("layout " << layout);
    std::mt19937_64 rng(77);
    Mount m = mount(copy_of(*golden));
    ArraySchema s = make_schema({9, 10, 11}, "float64", layout);
    auto a = create_array(m, "z", s);
    const std::uint64_t N = a->size();
    Bytes model(N, 0);
    // Only one element written: everything else reads as zero.
    Bytes one = random_bytes(rng, 8);
    std::uint64_t at = 8 * (5 * 110 + 3 * 11 + 7);
    REQUIRE(write_file(*a, at, one) == 0);
    std::copy(one.begin(), one.end(), model.begin() + std::ptrdiff_t(at));
    CHECK(bytes_diff(read_all(*a), model) == "");

    random_writes(*a, model, rng, 20);
    std::string msg;
    REQUIRE(a->flush(true, &msg) == 0);
    // Past the end: EFBIG, nothing written.
    CHECK(write_file(*a, N - 3, Bytes(4, 0x11)) == EFBIG);
    CHECK(write_file(*a, N, Bytes(1, 0x11)) == EFBIG);
    CHECK(write_file(*a, N + 100, Bytes(1, 0x11)) == EFBIG);
    CHECK(write_file(*a, 0, Bytes(N + 1, 0x11)) == EFBIG);
    CHECK(write_file(*a, N, Bytes()) == 0);  // empty at the end: nothing to do
    CHECK(a->size() == N);
    CHECK(bytes_diff(read_all(*a), model) == "");
    REQUIRE(a->flush(false, &msg) == 0);
    CHECK(bytes_diff(read_all(*a), model) == "");

    // zero(): every element reads as zero, also through views and after a remount.
    REQUIRE(a->zero(&msg) == 0);
    std::fill(model.begin(), model.end(), 0);
    CHECK_FALSE(a->holds_data());
    CHECK(a->size() == N);
    CHECK(bytes_diff(read_all(*a), model) == "");
    CHECK(bytes_diff(read_view_bytes(*a, resolve({"slice", "1", "4"}, s), 0, 9 * 11 * 8), Bytes(9 * 11 * 8, 0)) == "");
    // Writes after zero() start from zeros, not from the old cells.
    Bytes piece = random_bytes(rng, 13);
    REQUIRE(write_file(*a, 101, piece) == 0);
    std::copy(piece.begin(), piece.end(), model.begin() + 101);
    CHECK(bytes_diff(read_all(*a), model) == "");
    REQUIRE(a->flush(true, &msg) == 0);
    auto b = open_stored(m, a->ino());
    CHECK(bytes_diff(read_all(*b), model) == "");
  }
}

TEST_CASE("array file: flush(true) survives a remount and a power cut; fsck is clean", "[array_file]") {
  auto g = toy_disk();
  for (const std::string& layout : kLayouts) {
    INFO("layout " << layout);
    ArraySchema s = make_schema({3, 5, 4, 6}, "int16", layout);
    s.order = {1, 3, 0, 2};
    const std::uint64_t seed = std::hash<std::string>{}(layout);
    // The same writes (same seed) on a device closed cleanly and on one cut right after fsync.
    auto fill = [&](const Mount& m, Bytes* model) {
      std::mt19937_64 rng(seed);
      auto a = create_array(m, "durable", s);
      model->assign(array_bytes(s), 0);
      random_writes(*a, *model, rng, 30);
      std::string msg;
      REQUIRE(a->flush(true, &msg) == 0);
      return a->ino();
    };
    auto dev = formatted(*g);
    Bytes model, model2;
    Ino ino = 0;
    {
      Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
      ino = fill(m, &model);
    }
    std::unique_ptr<MemoryDevice> power_cut;
    {
      auto* fault = new FaultInjectingDevice(formatted(*g), 5);
      Mount m = mount(std::unique_ptr<BlockDevice>(fault));
      REQUIRE(fill(m, &model2) == ino);
      power_cut = fault->crash_image();
    }
    REQUIRE(bytes_diff(model, model2) == "");
    for (int pass = 0; pass < 2; ++pass) {
      INFO((pass == 0 ? "remount" : "after the power cut"));
      Mount m = mount(pass == 0 ? std::unique_ptr<BlockDevice>(new RefDevice(*dev))
                                : std::unique_ptr<BlockDevice>(std::move(power_cut)));
      auto stored = stored_schema(m, ino);
      REQUIRE(stored);
      CHECK(*stored == s);
      auto a = open_stored(m, ino);
      CHECK(a->size() == model.size());
      CHECK(bytes_diff(read_all(*a), model) == "");
      CHECK(m.md().inode(ino)->size == model.size());
      auto report = check_volume(*m.vol, false);
      INFO((report.problems.empty() ? "" : report.problems[0]));
      CHECK(report.problems.empty());
    }
    // Write more after a remount, close, reopen the same device again.
    {
      std::mt19937_64 rng(seed + 1);
      Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
      auto a = open_stored(m, ino);
      Bytes more = random_bytes(rng, 50);
      REQUIRE(write_file(*a, 17, more) == 0);
      std::copy(more.begin(), more.end(), model.begin() + 17);
      std::string msg;
      REQUIRE(a->flush(true, &msg) == 0);
    }
    {
      Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
      auto a = open_stored(m, ino);
      CHECK(bytes_diff(read_all(*a), model) == "");
      CHECK(check_volume(*m.vol, false).problems.empty());
    }
  }
}

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

TEST_CASE("array file: a power cut during a relayout leaves the old or the new placement, never a mix",
          "[array_file][crash]") {
  auto g = toy_disk();
  std::mt19937_64 rng(31337);
  // The golden image: an array full of data, durable.
  auto golden = formatted(*g);
  ArraySchema s = make_schema({40, 30, 20}, "float32", "naive");
  Ino ino = 0;
  Bytes model(array_bytes(s), 0);
  {
    Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*golden)));
    auto a = create_array(m, "c", s);
    ino = a->ino();
    random_writes(*a, model, rng, 40);
    REQUIRE(write_file(*a, 0, Bytes(model.begin(), model.begin() + 1000)) == 0);
    std::string msg;
    REQUIRE(a->flush(true, &msg) == 0);
  }
  std::vector<ArraySchema> targets;
  {
    ArraySchema t = s;
    t.layout = "hilbert";
    targets.push_back(t);
    t.layout = "multimap";
    t.order = {0, 1, 2};
    targets.push_back(t);
    t = s;
    t.cell = {5, 3, 2};
    targets.push_back(t);
  }
  // How many device events (writes and flushes) each relayout takes.
  std::vector<std::uint64_t> events(targets.size());
  for (std::size_t t = 0; t < targets.size(); ++t) {
    auto* fault = new FaultInjectingDevice(copy_of(*golden), 1);
    Mount m = mount(std::unique_ptr<BlockDevice>(fault));
    auto a = open_stored(m, ino);
    std::uint64_t before = fault->events();
    std::string msg;
    REQUIRE(a->change_schema(targets[t], &msg) == 0);
    events[t] = fault->events() - before;
    REQUIRE(events[t] > 2);
  }
  int old_kept = 0, new_kept = 0;
  for (std::uint64_t i = 0; i < 100; ++i) {
    std::size_t t = i % targets.size();
    // Cut points 1..events (the machine dies there) and, now and then, none at all.
    std::uint64_t cut = i % 10 == 9 ? 0 : 1 + rng() % events[t];
    INFO("iteration " << i << " target " << t << " cut " << cut << " of " << events[t]);
    auto* fault = new FaultInjectingDevice(copy_of(*golden), 1000 + i);
    std::unique_ptr<MemoryDevice> image;
    int r = 0;
    {
      Mount m = mount(std::unique_ptr<BlockDevice>(fault));
      auto a = open_stored(m, ino);
      if (cut) fault->fail_after(fault->events() + cut);
      std::string msg;
      r = a->change_schema(targets[t], &msg);
      if (!cut) CHECK(r == 0);
      image = fault->crash_image();
      a.reset();
    }
    Mount m = mount(std::move(image));
    auto stored = stored_schema(m, ino);
    REQUIRE(stored);
    bool is_old = *stored == s, is_new = *stored == targets[t];
    CHECK((is_old || is_new));
    if (r == 0) CHECK(is_new);  // change_schema returns when the new placement is durable
    (is_new ? new_kept : old_kept)++;
    auto a = open_stored(m, ino);
    Bytes got(model.size());
    std::size_t n = 0;
    std::string msg;
    int rr = a->read(0, got.size(), reinterpret_cast<std::byte*>(got.data()), &n, &msg);
    INFO(msg);
    REQUIRE(rr == 0);
    REQUIRE(n == model.size());
    REQUIRE(bytes_diff(got, model) == "");
    auto report = check_volume(*m.vol, false);
    INFO((report.problems.empty() ? "" : report.problems[0]));
    REQUIRE(report.problems.empty());
  }
  CHECK(old_kept > 0);
  CHECK(new_kept > 0);
}

TEST_CASE("array file: a damaged cell reads as EIO, never as wrong bytes", "[array_file]") {
  auto g = toy_disk();
  for (const std::string& layout : kLayouts) {
    INFO("layout " << layout);
    std::mt19937_64 rng(99);
    MemoryDevice dev(kToyDeviceBytes, 512);
    {
      auto f = formatted(*g);
      dev.bytes() = f->bytes();
    }
    ArraySchema s = make_schema({9, 10, 11}, "float64", layout);
    Bytes model(array_bytes(s));
    auto* ref = new RefDevice(dev);
    Mount m = mount(std::unique_ptr<BlockDevice>(ref));
    auto a = create_array(m, "sum", s);
    model = random_bytes(rng, model.size());
    REQUIRE(write_file(*a, 0, model) == 0);
    std::string msg;
    REQUIRE(a->flush(true, &msg) == 0);
    // Element (4, 5, 6): flip one bit of its sector on the device.
    std::vector<std::uint64_t> x = {4, 5, 6};
    std::string where;
    REQUIRE(a->lbn_text(x, &where, &msg) == 0);
    std::uint64_t lbn = 0, offset = 0;
    REQUIRE(std::sscanf(where.c_str(), "%lu %lu", &lbn, &offset) == 2);
    std::uint64_t byte = lbn * 512 + offset;
    // The sector does hold the element (lbn_text points at it).
    std::uint64_t e = ((4 * 10) + 5) * 11 + 6;
    REQUIRE(std::memcmp(dev.bytes().data() + byte, model.data() + e * 8, 8) == 0);
    dev.bytes()[byte + 3] ^= std::byte{0x20};
    auto b = open_stored(m, a->ino());  // no cached chunks
    Bytes out(model.size());
    std::size_t got = 0;
    CHECK(b->read(0, out.size(), reinterpret_cast<std::byte*>(out.data()), &got, &msg) == EIO);
    CHECK_THAT(msg, Catch::Contains("checksum"));
    // A device that fails the read is not a checksum mismatch.
    ref->fail_reads = true;
    msg.clear();
    CHECK(open_stored(m, a->ino())->read(0, out.size(), reinterpret_cast<std::byte*>(out.data()), &got, &msg) ==
          EIO);
    CHECK(msg == "device read failed");
    ref->fail_reads = false;
    // Views that touch the cell fail too; views that do not are intact.
    DataView hit = resolve({"slice", "0", "4"}, s);
    Bytes hv(hit.bytes(8));
    CHECK(b->read_view(hit, 0, hv.size(), reinterpret_cast<std::byte*>(hv.data()), &got, &msg) == EIO);
    // A slice outside the damaged cell: along a dimension the cell does not span.
    std::vector<std::uint64_t> cell = b->info()["cell"].get<std::vector<std::uint64_t>>();
    std::size_t d = 0;
    while (d < 3 && cell[d] >= s.shape[d]) ++d;
    REQUIRE(d < 3);
    std::uint64_t lo = x[d] / cell[d] * cell[d];
    std::uint64_t i = lo > 0 ? 0 : cell[d];
    std::vector<Sel> away = {{false, 0, 9, 1}, {false, 0, 10, 1}, {false, 0, 11, 1}};
    away[d] = Sel{true, i, i + 1, 1};
    Bytes expect = extract(model, s.shape, 8, away);
    CHECK(bytes_diff(read_view_bytes(*b, resolve({"box", spell(away)}, s), 0, expect.size()), expect) == "");
    // A partial write into the damaged cell cannot be merged: flush fails with
    // EIO instead of writing a cell built on wrong bytes.
    REQUIRE(write_file(*b, e * 8 + 1, Bytes(2, 0x5A)) == 0);
    CHECK(b->flush(false, &msg) == EIO);
    // Repair the device: the pending write merges with the true bytes.
    dev.bytes()[byte + 3] ^= std::byte{0x20};
    REQUIRE(b->flush(false, &msg) == 0);
    model[e * 8 + 1] = model[e * 8 + 2] = 0x5A;
    CHECK(bytes_diff(read_all(*b), model) == "");
  }
}

TEST_CASE("array file: random read bit flips give EIO or the right bytes", "[array_file]") {
  auto g = toy_disk();
  std::mt19937_64 rng(5);
  auto golden = formatted(*g);
  ArraySchema s = make_schema({9, 10, 11}, "float64", "hilbert");
  Bytes model = random_bytes(rng, array_bytes(s));
  Ino ino = 0;
  {
    Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*golden)));
    auto a = create_array(m, "flip", s);
    ino = a->ino();
    REQUIRE(write_file(*a, 0, model) == 0);
    std::string msg;
    REQUIRE(a->flush(true, &msg) == 0);
  }
  auto* fault = new FaultInjectingDevice(copy_of(*golden), 8);
  Mount m = mount(std::unique_ptr<BlockDevice>(fault));
  int eio = 0, ok = 0;
  for (int i = 0; i < 20; ++i) {
    fault->set_read_bitflip_probability(0);
    auto a = open_stored(m, ino);
    fault->set_read_bitflip_probability(i % 2 ? 1.0 : 0.3);
    Bytes out(model.size());
    std::size_t got = 0;
    std::string msg;
    int r = a->read(0, out.size(), reinterpret_cast<std::byte*>(out.data()), &got, &msg);
    if (r == 0) {
      ++ok;
      CHECK(bytes_diff(out, model) == "");
    } else {
      ++eio;
      CHECK(r == EIO);
    }
  }
  CHECK(eio > 0);
}

TEST_CASE("array file: a plain file of prod(shape)*itemsize bytes converts into an array", "[array_file]") {
  auto g = toy_disk();
  std::mt19937_64 rng(123);
  auto dev = formatted(*g);
  for (const std::string& layout : kLayouts) {
    INFO("layout " << layout);
    Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
    ArraySchema s = make_schema({10, 9, 7}, "int32", layout);
    const std::uint64_t N = array_bytes(s);
    Inode n;
    Ino ino = new_file(m.md(), "plain-" + layout, &n);
    const std::uint64_t free0 = m.vol->allocator().free_sectors();
    Bytes model(N, 0);
    {
      PlainFile p(m.md(), m.vol->allocator(), *m.io, m.vol->geometry(), ino, 0);
      // Random pieces, leaving a hole in the middle (reads as zeros), and the last byte.
      for (int i = 0; i < 12; ++i) {
        std::uint64_t off = rng() % N;
        std::size_t len = std::size_t(std::min<std::uint64_t>(N - off, 1 + rng() % 900));
        if (off < N / 2 && off + len > N / 3) continue;  // the hole [N/3, N/2) stays unwritten
        Bytes d = random_bytes(rng, len);
        REQUIRE(p.write(off, reinterpret_cast<const std::byte*>(d.data()), d.size()) == 0);
        std::copy(d.begin(), d.end(), model.begin() + std::ptrdiff_t(off));
      }
      Bytes tail = {0x42};
      REQUIRE(p.write(N - 1, reinterpret_cast<const std::byte*>(tail.data()), 1) == 0);
      model[N - 1] = 0x42;
      REQUIRE(p.size() == N);
      REQUIRE(p.commit() == 0);
      REQUIRE(m.md().sync() == 0);
      CHECK(m.vol->allocator().free_sectors() < free0);
      auto fresh = m.md().inode(ino);
      std::shared_ptr<ArrayFile> a;
      std::string msg;
      int r = ArrayFile::create(m.ctx(), *fresh, s, &p, &a, &msg);
      INFO(msg);
      REQUIRE(r == 0);
      CHECK(a->size() == N);
      CHECK(bytes_diff(read_all(*a), model) == "");
      // The plain file's blocks went back (after the commit's sync); only the array's placement is in use.
      CHECK(m.vol->allocator().free_sectors() + a->device_bytes() / 512 == free0);
      auto extents = m.md().extents(ino);
      std::uint64_t sectors = 0;
      for (const Extent& e : extents) sectors += e.sectors;
      CHECK(sectors * 512 == a->device_bytes());
      CHECK(m.md().inode(ino)->size == N);
      check_views(*a, s, model, rng);
    }
    auto report = check_volume(*m.vol, false);
    INFO((report.problems.empty() ? "" : report.problems[0]));
    CHECK(report.problems.empty());
  }
  // After a remount every converted array reads the same.
  Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
  for (const std::string& layout : kLayouts) {
    auto ino = m.md().lookup(kRootIno, "plain-" + layout);
    REQUIRE(ino);
    auto a = open_stored(m, *ino);
    CHECK(a->schema().layout == layout);
    CHECK(a->holds_data());
  }
  CHECK(check_volume(*m.vol, false).problems.empty());
}

TEST_CASE("array file on atlas10k3: multimap array, views and a relayout", "[array_file]") {
  auto g = geom::load_geometry("atlas10k3");
  auto dev = formatted(*g, 32ull << 20);
  std::mt19937_64 rng(10);
  Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
  ArraySchema s = make_schema({40, 30, 20}, "float64", "multimap");
  auto a = create_array(m, "atlas", s);
  Bytes model(a->size(), 0);
  random_writes(*a, model, rng, 30);
  CHECK(bytes_diff(read_all(*a), model) == "");
  auto info = a->info();
  CHECK(info["layout"] == "multimap");
  CHECK(info.contains("basic_cube"));
  check_views(*a, s, model, rng);
  ArraySchema next = s;
  next.layout = "naive";
  std::string msg;
  REQUIRE(a->change_schema(next, &msg) == 0);
  CHECK(bytes_diff(read_all(*a), model) == "");
  REQUIRE(a->flush(true, &msg) == 0);
  auto b = open_stored(m, a->ino());
  CHECK(bytes_diff(read_all(*b), model) == "");
  CHECK(check_volume(*m.vol, false).problems.empty());
}

TEST_CASE("array file: gathering scattered rows, in several batches, returns each row's element", "[array_file]") {
  // Few enough rows for the cell-by-cell path (fs/array/array_file_query.cc), more
  // than one batch of them (the next batch's cells are read while the last
  // is copied), and a damaged cell still gives EIO, never wrong bytes.
  auto g = geom::load_geometry("atlas10k3");
  auto dev = formatted(*g, 32ull << 20);
  std::mt19937_64 rng(21);
  Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
  ArraySchema s = make_schema({1200, 3000}, "uint8", "naive");
  auto a = create_array(m, "scattered", s);
  const Bytes model = random_bytes(rng, a->size());
  REQUIRE(write_file(*a, 0, model) == 0);
  std::string msg;
  REQUIRE(a->flush(true, &msg) == 0);
  indexes::Bitmap rows;
  std::vector<std::uint64_t> picked;
  for (std::uint64_t r = 0; r < model.size(); ++r)
    if (rng() % 9 == 0 || (r / 3000 % 97 == 5 && rng() % 2)) picked.push_back(r);
  REQUIRE(picked.size() > (1u << 18) + 10000);  // two batches at least
  REQUIRE(picked.size() * 8 < model.size());    // and the cell-by-cell path
  rows.addMany(picked.size(), picked.data());
  std::string out;
  QueryCost cost;
  REQUIRE(a->gather_rows(rows, &out, &cost, &msg) == 0);
  REQUIRE(out.size() == picked.size());
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < picked.size(); ++i) wrong += static_cast<unsigned char>(out[i]) != model[picked[i]];
  CHECK(wrong == 0);
  CHECK(cost.data_bytes > 0);

  // A bit flipped in a cell of the second batch: EIO.
  const std::uint64_t late = picked[picked.size() - 5];
  std::string where;
  const std::vector<std::uint64_t> at = {late / 3000, late % 3000};
  REQUIRE(a->lbn_text(at, &where, &msg) == 0);
  std::uint64_t lbn = 0, offset = 0;
  REQUIRE(std::sscanf(where.c_str(), "%lu %lu", &lbn, &offset) == 2);
  REQUIRE(std::memcmp(dev->bytes().data() + lbn * 512 + offset, &model[late], 1) == 0);
  dev->bytes()[lbn * 512 + offset] ^= std::byte{0x10};
  auto c = open_stored(m, a->ino());  // no cached chunks
  std::string again;
  CHECK(c->gather_rows(rows, &again, &cost, &msg) == EIO);
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

TEST_CASE("array file: ENOSPC for an array or a relayout that does not fit; nothing changes", "[array_file]") {
  auto g = toy_disk();
  Mount m = mount(formatted(*g));
  const std::uint64_t free0 = m.vol->allocator().free_sectors();
  // Larger than the whole data area.
  {
    ArraySchema big = make_schema({free0 + 100, 512}, "uint8", "naive");
    Inode n;
    new_file(m.md(), "big", &n);
    std::shared_ptr<ArrayFile> a;
    std::string msg;
    CHECK(ArrayFile::create(m.ctx(), n, big, nullptr, &a, &msg) == ENOSPC);
    CHECK_THAT(msg, Catch::Contains("MiB"));
    CHECK_FALSE(a);
    CHECK(m.vol->allocator().free_sectors() == free0);
    CHECK_FALSE(m.md().xattr(n.ino, std::string(ArrayFile::kSchemaXattr)));
  }
  // An array taking more than half the space cannot be relaid out (two placements at once).
  std::mt19937_64 rng(1);
  ArraySchema s = make_schema({free0 * 6 / 10, 512}, "uint8", "naive");
  s.cell = {1, 512};
  auto a = create_array(m, "most", s);
  Bytes model(a->size(), 0);
  for (int i = 0; i < 20; ++i) {
    std::uint64_t off = rng() % model.size();
    Bytes d = random_bytes(rng, std::size_t(std::min<std::uint64_t>(3000, model.size() - off)));
    REQUIRE(write_file(*a, off, d) == 0);
    std::copy(d.begin(), d.end(), model.begin() + std::ptrdiff_t(off));
  }
  const std::uint64_t free1 = m.vol->allocator().free_sectors();
  ArraySchema next = s;
  next.layout = "zorder";
  std::string msg;
  CHECK(a->change_schema(next, &msg) == ENOSPC);
  CHECK(a->schema() == s);
  CHECK(*stored_schema(m, a->ino()) == s);
  CHECK(m.vol->allocator().free_sectors() == free1);
  CHECK(bytes_diff(read_all(*a), model) == "");
  REQUIRE(a->flush(true, &msg) == 0);
  CHECK(check_volume(*m.vol, false).problems.empty());
}

// After an I/O error in the middle of a relayout (change_schema returns the
// error), the handle, the metadata store and the allocator must still agree:
// the extents the store records for the array are not free, and the handle
// serves the schema the store records.
TEST_CASE("array file: a relayout failing with EIO leaves metadata, allocator and handle in agreement",
          "[array_file]") {
  auto g = toy_disk();
  std::mt19937_64 rng(2024);
  auto golden = formatted(*g);
  ArraySchema s = make_schema({12, 10, 9}, "float32", "naive");
  Ino ino = 0;
  Bytes model(array_bytes(s), 0);
  {
    Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*golden)));
    auto a = create_array(m, "e", s);
    ino = a->ino();
    random_writes(*a, model, rng, 30);
    std::string msg;
    REQUIRE(a->flush(true, &msg) == 0);
  }
  ArraySchema next = s;
  next.layout = "hilbert";
  std::uint64_t events = 0;
  {
    auto* fault = new FaultInjectingDevice(copy_of(*golden), 1);
    Mount m = mount(std::unique_ptr<BlockDevice>(fault));
    auto a = open_stored(m, ino);
    std::uint64_t before = fault->events();
    std::string msg;
    REQUIRE(a->change_schema(next, &msg) == 0);
    events = fault->events() - before;
  }
  for (std::uint64_t cut = 1; cut <= events; ++cut) {
    auto* fault = new FaultInjectingDevice(copy_of(*golden), cut);
    Mount m = mount(std::unique_ptr<BlockDevice>(fault));
    auto a = open_stored(m, ino);
    fault->fail_after(fault->events() + cut);
    std::string msg;
    int r = a->change_schema(next, &msg);
    INFO("cut " << cut << " of " << events << ": change_schema returned " << r << " (" << msg << ")");
    if (r == 0) continue;
    CHECK(r == EIO);
    auto stored = stored_schema(m, ino);
    REQUIRE(stored);
    CHECK(a->schema() == *stored);
    std::vector<Extent> mine = m.md().extents(ino);
    std::uint64_t overlap = 0;
    for (const Extent& f : m.vol->allocator().free_extents())
      for (const Extent& e : mine) {
        std::uint64_t lo = std::max(f.start, e.start), hi = std::min(f.start + f.sectors, e.start + e.sectors);
        if (lo < hi) overlap += hi - lo;
      }
    CHECK(overlap == 0);  // sectors the store gives the array must not be free
  }
}

// The same for the conversion of a plain file: when ArrayFile::create fails
// with EIO, the sectors the store records for the file must not be free.
TEST_CASE("array file: a conversion failing with EIO leaves metadata and allocator in agreement",
          "[array_file]") {
  auto g = toy_disk();
  std::mt19937_64 rng(77);
  auto golden = formatted(*g);
  ArraySchema s = make_schema({12, 10, 9}, "float32", "naive");
  const std::uint64_t N = array_bytes(s);
  Bytes model = random_bytes(rng, N);
  Ino ino = 0;
  {
    Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*golden)));
    ino = new_file(m.md(), "p");
    PlainFile p(m.md(), m.vol->allocator(), *m.io, m.vol->geometry(), ino, 0);
    REQUIRE(p.write(0, reinterpret_cast<const std::byte*>(model.data()), N) == 0);
    REQUIRE(p.commit() == 0);
    REQUIRE(m.md().sync() == 0);
  }
  auto convert = [&](const Mount& m, int* r, std::string* msg) {
    PlainFile p(m.md(), m.vol->allocator(), *m.io, m.vol->geometry(), ino, N);
    std::shared_ptr<ArrayFile> a;
    *r = ArrayFile::create(m.ctx(), *m.md().inode(ino), s, &p, &a, msg);
    return a;
  };
  std::uint64_t events = 0;
  {
    auto* fault = new FaultInjectingDevice(copy_of(*golden), 1);
    Mount m = mount(std::unique_ptr<BlockDevice>(fault));
    std::uint64_t before = fault->events();
    int r = 0;
    std::string msg;
    auto a = convert(m, &r, &msg);
    REQUIRE(r == 0);
    CHECK(bytes_diff(read_all(*a), model) == "");
    events = fault->events() - before;
  }
  for (std::uint64_t cut = 1; cut <= events; ++cut) {
    auto* fault = new FaultInjectingDevice(copy_of(*golden), cut);
    Mount m = mount(std::unique_ptr<BlockDevice>(fault));
    fault->fail_after(fault->events() + cut);
    int r = 0;
    std::string msg;
    auto a = convert(m, &r, &msg);
    INFO("cut " << cut << " of " << events << ": create returned " << r << " (" << msg << ")");
    if (r == 0) continue;
    CHECK(r == EIO);
    std::uint64_t overlap = 0;
    for (const Extent& f : m.vol->allocator().free_extents())
      for (const Extent& e : m.md().extents(ino)) {
        std::uint64_t lo = std::max(f.start, e.start), hi = std::min(f.start + f.sectors, e.start + e.sectors);
        if (lo < hi) overlap += hi - lo;
      }
    CHECK(overlap == 0);
  }
}

TEST_CASE("array file: concurrent readers of views see stable bytes while a writer changes other elements",
          "[array_file]") {
  auto g = toy_disk();
  Mount m = mount(formatted(*g));
  ArraySchema s = make_schema({9, 10, 11}, "float64", "hilbert");
  auto a = create_array(m, "conc", s);
  std::mt19937_64 rng(6);
  Bytes model = random_bytes(rng, a->size());
  REQUIRE(write_file(*a, 0, model) == 0);
  std::string msg;
  REQUIRE(a->flush(true, &msg) == 0);
  // Readers: rows 5..8 (whole, boxes, slices, plod); the writer: rows 0..4 only.
  const std::uint64_t row = 10 * 11 * 8;
  std::vector<std::pair<DataView, Bytes>> views;
  views.push_back({resolve({"box", "5:9,:,:"}, s), extract(model, s.shape, 8, {{false, 5, 9, 1}, {false, 0, 10, 1}, {false, 0, 11, 1}})});
  views.push_back({resolve({"slice", "0", "7"}, s), extract(model, s.shape, 8, {{true, 7, 8, 1}, {false, 0, 10, 1}, {false, 0, 11, 1}})});
  views.push_back({resolve({"plod", "3@", "box", "6:9:2,1:9:3,::5"}, s),
                   plod(extract(model, s.shape, 8, {{false, 6, 9, 2}, {false, 1, 9, 3}, {false, 0, 11, 5}}), 8, true, 3)});
  std::atomic<int> bad{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::mt19937_64 r(100 + t);
      for (int i = 0; i < 150; ++i) {
        std::string e;
        std::size_t got = 0;
        if (i % 3 == 0) {
          Bytes out(4 * row);
          if (a->read(5 * row, out.size(), reinterpret_cast<std::byte*>(out.data()), &got, &e)) ++errors;
          else if (!std::equal(out.begin(), out.end(), model.begin() + std::ptrdiff_t(5 * row))) ++bad;
          continue;
        }
        const auto& [v, expect] = views[r() % views.size()];
        Bytes out(expect.size());
        if (a->read_view(v, 0, out.size(), reinterpret_cast<std::byte*>(out.data()), &got, &e)) ++errors;
        else if (out != expect) ++bad;
      }
    });
  Bytes written = model;
  for (int i = 0; i < 200; ++i) {
    std::uint64_t off = rng() % (5 * row);
    std::size_t len = std::size_t(1 + rng() % std::min<std::uint64_t>(700, 5 * row - off));
    Bytes d = random_bytes(rng, len);
    REQUIRE(write_file(*a, off, d) == 0);
    std::copy(d.begin(), d.end(), written.begin() + std::ptrdiff_t(off));
    if (i % 20 == 0) REQUIRE(a->flush(false, &msg) == 0);
  }
  for (auto& th : threads) th.join();
  CHECK(errors == 0);
  CHECK(bad == 0);
  CHECK(bytes_diff(read_all(*a), written) == "");
}

// docs/reference.md §9: data written and fsynced survives a crash at any instant. Cells
// are rewritten in place and their checksums reach the store only at the
// next metadata sync: a crash in between must not make the cell's other,
// fsynced, elements unreadable.
TEST_CASE("array file: fsynced elements survive a crash after a later unsynced write to their cell",
          "[array_file][crash]") {
  auto g = toy_disk();
  std::mt19937_64 rng(808);
  ArraySchema s = make_schema({9, 10, 11}, "float64", "naive");
  Bytes model = random_bytes(rng, array_bytes(s));
  auto* fault = new FaultInjectingDevice(formatted(*g), 3);
  std::unique_ptr<MemoryDevice> image;
  Ino ino = 0;
  const std::uint64_t e = (4 * 10 + 5) * 11 + 6;  // the element rewritten after the fsync
  {
    Mount m = mount(std::unique_ptr<BlockDevice>(fault));
    auto a = create_array(m, "fs", s);
    ino = a->ino();
    REQUIRE(write_file(*a, 0, model) == 0);
    std::string msg;
    REQUIRE(a->flush(true, &msg) == 0);  // fsync: every element durable
    REQUIRE(write_file(*a, e * 8, Bytes(8, 0x33)) == 0);
    // A read writes the dirty cell back (flush(false): data and device flush, no metadata sync).
    Bytes probe = read_file(*a, e * 8, 8);
    CHECK(probe == Bytes(8, 0x33));
    image = fault->crash_image();  // the power cut
  }
  Mount m = mount(std::move(image));
  auto a = open_stored(m, ino);
  Bytes out(model.size());
  std::size_t got = 0;
  std::string msg;
  int r = a->read(0, out.size(), reinterpret_cast<std::byte*>(out.data()), &got, &msg);
  INFO(msg);
  CHECK(r == 0);  // fails: EIO, the cell's stored checksum is the fsynced one, its sectors the new bytes
  if (r == 0) {
    // Every fsynced element is intact; the rewritten one is old or new.
    Bytes rewritten(out.begin() + std::ptrdiff_t(e * 8), out.begin() + std::ptrdiff_t(e * 8 + 8));
    CHECK((rewritten == Bytes(8, 0x33) ||
           rewritten == Bytes(model.begin() + std::ptrdiff_t(e * 8), model.begin() + std::ptrdiff_t(e * 8 + 8))));
    std::copy(rewritten.begin(), rewritten.end(), model.begin() + std::ptrdiff_t(e * 8));
    CHECK(bytes_diff(out, model) == "");
  }
}

// A cell that never held data reads as zeros without a device read; the
// sectors the placement got hold whatever an earlier file left there. The
// daemon killed anywhere in the first write-back of such cells (the
// alternative checksums durable, the cells not yet written) must leave each
// cell reading as zeros or as its new bytes, never as EIO.
TEST_CASE("array file: the daemon killed in the first write-back of cells leaves zeros or the new bytes",
          "[array_file][crash]") {
  auto g = toy_disk();
  std::mt19937_64 rng(1919);
  ArraySchema s = make_schema({16, 16, 16}, "float64", "zorder");
  const Bytes data = random_bytes(rng, array_bytes(s));
  auto golden = formatted(*g);
  Ino ino = 0;
  {
    Mount m = mount(std::make_unique<RefDevice>(*golden));
    ino = create_array(m, "a", s)->ino();
    // An earlier file's bytes in the array's sectors.
    for (const Extent& e : m.md().extents(ino))
      std::fill_n(golden->bytes().begin() + std::ptrdiff_t(e.start * 512), e.sectors * 512, std::byte{0x5A});
  }
  auto run = [&](BlockDevice& dev) {
    Mount m = mount(std::make_unique<RefDevice>(dev));
    auto a = open_stored(m, ino);
    std::string msg;
    if (write_file(*a, 0, data) != 0) return;
    a->flush(true, &msg);
  };
  auto check = [&](MemoryDevice& image, std::uint64_t cut, std::uint64_t events) {
    INFO("killed after " << cut << " of " << events << " device events");
    Mount m = mount(std::make_unique<RefDevice>(image));
    auto a = open_stored(m, ino);
    Bytes got(data.size());
    std::size_t n = 0;
    std::string msg;
    int r = a->read(0, got.size(), reinterpret_cast<std::byte*>(got.data()), &n, &msg);
    INFO(msg);
    REQUIRE(r == 0);
    // Element by element: zero (the cell's old state) or the value written.
    for (std::size_t e = 0; e < data.size(); e += 8) {
      Bytes x(got.begin() + std::ptrdiff_t(e), got.begin() + std::ptrdiff_t(e + 8));
      bool zero = x == Bytes(8, 0);
      bool written = std::equal(x.begin(), x.end(), data.begin() + std::ptrdiff_t(e));
      if (!zero && !written) FAIL("element " << e / 8 << " is neither zero nor the value written");
    }
    auto report = check_volume(*m.vol, false);
    INFO((report.problems.empty() ? "" : report.problems[0]));
    CHECK(report.problems.empty());
  };
  REQUIRE(testing::kill_at_every_event(*golden, run, check) > 2);
}

// The same during a relayout: change_schema first writes the dirty cells
// back in place (old placement), then copies. A power cut before its commit
// leaves the old placement, whose cells must still read (old or new bytes).
TEST_CASE("array file: a power cut during a relayout with unflushed writes leaves readable cells",
          "[array_file][crash]") {
  auto g = toy_disk();
  std::mt19937_64 rng(4711);
  auto golden = formatted(*g);
  ArraySchema s = make_schema({12, 10, 9}, "float32", "naive");
  Ino ino = 0;
  Bytes model = random_bytes(rng, array_bytes(s));
  {
    Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*golden)));
    auto a = create_array(m, "u", s);
    ino = a->ino();
    REQUIRE(write_file(*a, 0, model) == 0);
    std::string msg;
    REQUIRE(a->flush(true, &msg) == 0);
  }
  ArraySchema next = s;
  next.layout = "hilbert";
  int unreadable = 0;
  // 100 cut points: a few of them tear a cell that spans several device
  // blocks (settled at the next load, ArrayState::settle_torn_rewrites).
  for (std::uint64_t i = 0; i < 100; ++i) {
    std::mt19937_64 r(i);
    auto* fault = new FaultInjectingDevice(copy_of(*golden), 50 + i);
    Bytes written = model;
    std::unique_ptr<MemoryDevice> image;
    {
      Mount m = mount(std::unique_ptr<BlockDevice>(fault));
      auto a = open_stored(m, ino);
      for (int k = 0; k < 5; ++k) {
        std::uint64_t off = r() % model.size();
        Bytes d = random_bytes(r, std::size_t(std::min<std::uint64_t>(1 + r() % 40, model.size() - off)));
        REQUIRE(write_file(*a, off, d) == 0);
        std::copy(d.begin(), d.end(), written.begin() + std::ptrdiff_t(off));
      }
      fault->fail_after(fault->events() + 1 + r() % 6);
      std::string msg;
      (void)a->change_schema(next, &msg);
      image = fault->crash_image();
    }
    Mount m = mount(std::move(image));
    auto stored = stored_schema(m, ino);
    REQUIRE(stored);
    CHECK((*stored == s || *stored == next));
    auto a = open_stored(m, ino);
    Bytes out(model.size());
    std::size_t got = 0;
    std::string msg;
    int rr = a->read(0, out.size(), reinterpret_cast<std::byte*>(out.data()), &got, &msg);
    INFO("iteration " << i << ": " << msg);
    if (rr != 0) {
      ++unreadable;
      std::printf("power cut %llu during a relayout: unreadable: %s\n", static_cast<unsigned long long>(i),
                  msg.c_str());
      continue;
    }
    std::size_t neither = 0;
    for (std::size_t b = 0; b < out.size(); ++b) neither += out[b] != model[b] && out[b] != written[b];
    CHECK(neither == 0);  // bytes that are neither the fsynced nor the written value
    CHECK(check_volume(*m.vol, false).problems.empty());
  }
  CHECK(unreadable == 0);
}

namespace {

constexpr std::uint64_t kSmallChunk = 64 << 10;  // 16 chunks of a 1 MiB array

// An array read in chunks of kSmallChunk, written at random, flushed, and
// opened again through a fresh handle: nothing cached, nothing loading.
std::shared_ptr<ArrayFile> small_chunked_array(Mount& m, const std::string& name, const ArraySchema& s,
                                               std::mt19937_64& rng, Bytes* model) {
  ArrayContext ctx = m.ctx();
  ctx.chunk_bytes = kSmallChunk;
  Inode n;
  new_file(m.md(), name, &n);
  std::shared_ptr<ArrayFile> a;
  std::string msg;
  REQUIRE(ArrayFile::create(ctx, n, s, nullptr, &a, &msg) == 0);
  model->assign(a->size(), 0);
  random_writes(*a, *model, rng, 40);
  REQUIRE(a->flush(true, &msg) == 0);
  a->quiesce();
  REQUIRE(ArrayFile::open(ctx, a->ino(), s, &a, &msg) == 0);
  return a;
}

}  // namespace

TEST_CASE("array file: a sequential reader loads each chunk once, the pipeline ahead of it", "[array_file]") {
  auto g = toy_disk();
  auto dev = formatted(*g);
  std::mt19937_64 rng(21);
  Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
  for (const char* layout : {"naive", "hilbert"}) {
    INFO(layout);
    ArraySchema s = make_schema({64, 64, 32}, "float64", layout);
    Bytes model;
    std::shared_ptr<ArrayFile> a = small_chunked_array(m, std::string("seq-") + layout, s, rng, &model);
    std::string msg;

    const DataView all = a->whole();
    // The chunk size is the model's choice (kSmallChunk or a multiple); the
    // plan says how many chunks the read takes.
    nlohmann::json plan;
    REQUIRE(a->plan(all, &plan, &msg) == 0);
    const std::uint64_t chunks = plan["chunks"].get<std::uint64_t>();
    REQUIRE(chunks >= 8);
    REQUIRE(a->chunk_stats().loads == 0);
    // The first chunk, then a pause: the pipeline fills the chunks after it.
    std::shared_ptr<const AlignedBuffer> first;
    const std::byte* first_data = nullptr;
    std::size_t first_got = 0;
    REQUIRE(a->view_span(all, 0, 8, &first, &first_data, &first_got, &msg) == 0);
    a->wait_for_prefetches();
    // Three chunks of the context's size ahead, in chunks of the chosen
    // size, and never fewer than two.
    const std::uint64_t depth =
        std::clamp<std::uint64_t>(3 * kSmallChunk / plan["chunk_bytes"].get<std::uint64_t>(), 2, 3);
    CHECK(a->chunk_stats().loads == depth + 1);
    CHECK(a->chunk_stats().prefetched == depth);
    // As the kernel reads a file: pieces smaller than a chunk, in order.
    constexpr std::size_t kPiece = 24 << 10;
    for (std::uint64_t off = 0; off < model.size(); off += kPiece) {
      std::size_t len = std::min<std::uint64_t>(kPiece, model.size() - off);
      std::shared_ptr<const AlignedBuffer> keep;
      const std::byte* data = nullptr;
      std::size_t got = 0;
      REQUIRE(a->view_span(all, off, len, &keep, &data, &got, &msg) == 0);
      Bytes piece;
      if (data != nullptr) {
        REQUIRE(got == len);
        piece.assign(reinterpret_cast<const std::uint8_t*>(data), reinterpret_cast<const std::uint8_t*>(data) + len);
      } else {
        piece = read_view_bytes(*a, all, off, len);  // the piece crosses chunks
      }
      Bytes want(model.begin() + std::ptrdiff_t(off), model.begin() + std::ptrdiff_t(off + len));
      REQUIRE(bytes_diff(piece, want) == "");
    }
    a->wait_for_prefetches();
    const ChunkStats st = a->chunk_stats();
    CHECK(st.loads == chunks);  // no chunk read twice: prefetched ones wait for their reader
    CHECK(st.evicted_unread == 0);
  }
}

TEST_CASE("array file: the plan of a view read in chunks is the reads the read makes", "[array_file]") {
  // A view longer than a chunk is read chunk by chunk, each chunk's cells
  // planned on their own. Its plan must say so: planned as one selection, the
  // whole file of a contiguous layout was one request, while the read made
  // hundreds (modeled_ms of the full read).
  auto g = toy_disk();
  auto dev = formatted(*g);
  std::mt19937_64 rng(23);
  Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
  for (const char* layout : {"naive", "hilbert"}) {
    INFO(layout);
    ArraySchema s = make_schema({64, 64, 32}, "float64", layout);
    Bytes model;
    std::shared_ptr<ArrayFile> a = small_chunked_array(m, std::string("planned-") + layout, s, rng, &model);
    std::string msg;

    DataView rows;  // a view of several chunks, and the whole file
    rows.selection = layouts::Selection({{8, 40, 1}, {0, 64, 1}, {0, 32, 1}});
    rows.spelling = "box/8:48,:,:";
    for (const DataView& view : {a->whole(), rows}) {
      INFO(view.spelling);
      nlohmann::json plan;
      REQUIRE(a->plan(view, &plan, &msg) == 0);
      const std::uint64_t total = view.bytes(s.dtype.itemsize);
      CHECK(plan.value("chunks", std::uint64_t(0)) > 1);
      CHECK(plan.at("bytes_useful").get<std::uint64_t>() == total);
      const nlohmann::json before = m.io->stats();
      for (std::uint64_t off = 0; off < total; off += 24 << 10) {
        const std::size_t len = std::min<std::uint64_t>(24 << 10, total - off);
        std::shared_ptr<const AlignedBuffer> keep;
        const std::byte* data = nullptr;
        std::size_t got = 0;
        REQUIRE(a->view_span(view, off, len, &keep, &data, &got, &msg) == 0);
        if (data == nullptr) read_view_bytes(*a, view, off, len);  // the piece crosses chunks
      }
      a->wait_for_prefetches();
      const nlohmann::json after = m.io->stats();
      auto delta = [&](const char* key) { return after.at(key).get<std::uint64_t>() - before.at(key).get<std::uint64_t>(); };
      CHECK(delta("requests") == plan.at("requests").get<std::uint64_t>());
      CHECK(delta("data_sectors_read") * g->sector_size() == plan.at("bytes_read").get<std::uint64_t>());
      std::uint64_t planned_requests = 0;
      for (const auto& b : plan.at("batches")) planned_requests += b.size();
      CHECK(planned_requests == plan.at("requests").get<std::uint64_t>());
    }
  }
}

TEST_CASE("array file: a long view is read in larger chunks only when the model reads them cheaper per byte",
          "[array_file]") {
  // Flash priced per request (a request costs as much as 80 KB of transfer):
  // a chunk of one cell layer of a Hilbert grid is many short runs, and a
  // 2^k-aligned block of layers is long ones.
  auto flash = geom::load_geometry(nlohmann::json{{"kind", "flash"},       {"sector_size", 512},
                                                  {"capacity_sectors", 65536}, {"queues", 1},
                                                  {"latency_ms", 0.08},   {"bandwidth_mb_s", 1000},
                                                  {"name", "one-channel"}});
  std::mt19937_64 rng(31);
  Mount m = mount(formatted(*flash));
  ArraySchema s = make_schema({64, 64, 32}, "float64", "hilbert");
  s.cell = {4, 4, 4};
  Bytes model;
  std::shared_ptr<ArrayFile> a = small_chunked_array(m, "chosen", s, rng, &model);
  std::string msg;
  const DataView all = a->whole();
  nlohmann::json chosen;
  REQUIRE(a->plan(all, &chosen, &msg) == 0);

  ArrayContext fixed_ctx = m.ctx();  // the same array, read in chunks of kSmallChunk only
  fixed_ctx.chunk_bytes = kSmallChunk;
  fixed_ctx.max_chunk_scale = 1;
  std::shared_ptr<ArrayFile> fixed;
  REQUIRE(ArrayFile::open(fixed_ctx, a->ino(), s, &fixed, &msg) == 0);
  nlohmann::json base;
  REQUIRE(fixed->plan(all, &base, &msg) == 0);
  const auto num = [](const nlohmann::json& j, const char* k) { return j.at(k).get<double>(); };
  INFO("chosen " << chosen.dump().substr(0, 200) << "\nbase " << base.dump().substr(0, 200));
  CHECK(num(base, "chunks") == 16);
  CHECK((num(chosen, "chunks") == 8 || num(chosen, "chunks") == 4));
  CHECK(num(chosen, "requests") < num(base, "requests") / 2);
  CHECK(num(chosen, "modeled_ms") <= 0.9 * num(base, "modeled_ms"));
  CHECK(num(chosen, "bytes_read") <= num(base, "bytes_read"));  // fewer gaps read through
  // Both read the same bytes, the larger chunks with the requests planned.
  for (ArrayFile* f : {a.get(), fixed.get()}) {
    const nlohmann::json before = m.io->stats();
    // A reader's first piece starts the prefetch: three chunks of the
    // context's size ahead, and two of the larger ones, never one (one load
    // at a time leaves the device idle while it gathers).
    std::shared_ptr<const AlignedBuffer> keep;
    const std::byte* data = nullptr;
    std::size_t got = 0;
    REQUIRE(f->view_span(all, 0, 8, &keep, &data, &got, &msg) == 0);
    f->wait_for_prefetches();
    CHECK(f->chunk_stats().prefetched == (f == a.get() ? 2 : 3));
    CHECK(bytes_diff(read_view_bytes(*f, all, 0, model.size()), model) == "");
    f->wait_for_prefetches();
    const nlohmann::json after = m.io->stats();
    const nlohmann::json& plan = f == a.get() ? chosen : base;
    CHECK(after.at("requests").get<double>() - before.at("requests").get<double>() == num(plan, "requests"));
  }
  fixed->quiesce();
}

TEST_CASE("array file: mloc plans read through the gaps the volume's model says to, and only those",
          "[array_file][mloc]") {
  // One flash channel whose request costs as much as 100 KB of transfer:
  // the model reads through gaps of a few pieces (layouts/merge_gap.h). On
  // the toy disk it reads through none.
  auto flash = geom::load_geometry(nlohmann::json{{"kind", "flash"},       {"sector_size", 512},
                                                  {"capacity_sectors", 16384}, {"queues", 1},
                                                  {"latency_ms", 0.1},    {"bandwidth_mb_s", 1000},
                                                  {"name", "one-channel"}});
  auto disk = toy_disk();
  std::mt19937_64 rng(1777);
  std::size_t request_count[2] = {0, 0};  // flash, disk
  for (const geom::Geometry* g : {flash.get(), disk.get()}) {
    INFO(g->name());
    Mount m = mount(formatted(*g));
    ArraySchema s = make_schema({32, 32, 32}, "float64", "mloc");
    s.chunk = {8, 8, 8};
    auto a = create_array(m, "mloc", s);
    Bytes model = random_bytes(rng, a->size());
    REQUIRE(write_file(*a, 0, model) == 0);
    std::string msg;
    REQUIRE(a->settle(&msg) == 0);
    DataView box;
    box.selection = layouts::Selection({{4, 12, 1}, {0, 20, 1}, {9, 30, 1}});
    box.spelling = "box/4:16,0:20,9:30";
    nlohmann::json plan;
    REQUIRE(a->plan(box, &plan, &msg) == 0);
    const std::uint64_t gap = plan.at("merge_gap_sectors").get<std::uint64_t>();
    if (g == disk.get()) CHECK(gap == 0);
    else CHECK(gap > 0);
    // No two requests closer than the gap: they would have been one.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> requests;
    for (const auto& b : plan.at("batches"))
      for (const auto& r : b) requests.push_back({r.at(0).get<std::uint64_t>(), r.at(1).get<std::uint64_t>()});
    std::sort(requests.begin(), requests.end());
    for (std::size_t i = 1; i < requests.size(); ++i)
      CHECK(requests[i].first > requests[i - 1].first + requests[i - 1].second + gap);
    request_count[g == disk.get()] = requests.size();
    check_views(*a, s, model, rng);  // and the reads that follow the plan give the model's bytes
  }
  // The same pieces: joined through their gaps on the flash, apart on the disk.
  CHECK(request_count[1] > 10);
  CHECK(request_count[0] < request_count[1]);
}

TEST_CASE("array file: mloc views equal the model read whole in one piece and through many pieces",
          "[array_file][mloc]") {
  // A view read in one piece decodes its chunks straight into the result
  // (selected elements only); one read in many pieces decodes whole chunks
  // and keeps them for the next piece. Both must give the model's bytes.
  auto g = toy_disk();
  Mount m = mount(formatted(*g));
  std::mt19937_64 rng(1601);
  for (const char* dtype : {"float64", "int16"}) {
    INFO(dtype);
    ArraySchema s = make_schema({21, 13, 70}, dtype, "mloc");
    s.chunk = {4, 8, 64};  // last side a power of two; clipped chunks at every far edge
    auto a = create_array(m, std::string("mloc-") + dtype, s);
    Bytes model = random_bytes(rng, a->size());
    REQUIRE(write_file(*a, 0, model) == 0);
    std::string msg;
    REQUIRE(a->settle(&msg) == 0);  // sealed: reads come from the image
    REQUIRE(a->info()["mloc"].value("sealed", true));
    for (std::uint64_t chunk_bytes : {std::uint64_t(32) << 20, std::uint64_t(8) << 10}) {
      INFO("view pieces of " << chunk_bytes << " bytes");
      ArrayContext ctx = m.ctx();
      ctx.chunk_bytes = chunk_bytes;
      std::shared_ptr<ArrayFile> b;
      REQUIRE(ArrayFile::open(ctx, a->ino(), s, &b, &msg) == 0);
      check_views(*b, s, model, rng);
    }
  }
}
