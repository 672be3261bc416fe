// Array files (fs/array/array_file.h, fs/array/array_state.h, docs/reference.md §4-5): the write path
// with its dirty-cell cache against a byte model for every implemented
// layout, views (slice, box, plod) against a brute-force extraction, zeroing,
// EFBIG, schema changes with relayout, ENOSPC, concurrent readers, and the
// conversion of a plain file into an array. Crash consistency and damage:
// test_array_file_crash.cc; the chunked read path: test_array_file_read.cc.
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
