// One placement of an array's cells (fs/array/array_state.h) straight over an
// in-memory device: SectorBuffer's places of a plan's sectors; bytes written
// into dirty cells, written back and read in selections against the C-order
// model; an element's sector; a damaged cell is EIO naming it; clear();
// and, through an array file, reused cell buffers reading as zeros where
// nothing was written.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "fs/array/array_file.h"
#include "fs/array/array_state.h"
#include "fs/device/fault_device.h"
#include "fs/device/sector_io.h"
#include "fs/meta/cell_checksums.h"
#include "layouts/layout.h"
#include "tests/unit/support/array_test_support.h"
#include "tests/unit/support/fs_test_support.h"
#include "tests/unit/support/selection_test_support.h"
#include "tests/unit/support/write_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;
using namespace testing::arrays;
using namespace testing::writes;

namespace {

using layouts::CellGrid;
using layouts::Run;
using layouts::Selection;

std::vector<std::byte> random_model(std::mt19937_64& rng, std::size_t n) {
  std::vector<std::byte> b(n);
  for (auto& x : b) x = std::byte(rng());
  return b;
}

}  // namespace

TEST_CASE("sector buffer: a plan's requests in LBN order, back to back, found by LBN", "[array_state]") {
  layouts::IoPlan plan;
  plan.batches = {{{{300, 2}, {100, 3}}}, {{{200, 1}}}};
  SectorBuffer sb(plan, 512);
  CHECK(sb.sectors() == 6);
  const std::vector<SectorRun> runs = sb.runs();
  REQUIRE(runs.size() == 3);
  CHECK(runs[0].lbn == 100);
  CHECK(runs[1].lbn == 200);
  CHECK(runs[2].lbn == 300);
  CHECK(runs[1].buffer == runs[0].buffer + 3 * 512);  // 100..102, then 200, then 300..301
  CHECK(runs[2].buffer == runs[0].buffer + 4 * 512);
  CHECK(sb.at(100) == runs[0].buffer);
  CHECK(sb.at(102) == runs[0].buffer + 2 * 512);
  CHECK(sb.at(301) == runs[2].buffer + 512);
  const std::vector<SectorRun> second = sb.runs_of(plan.batches[1]);
  REQUIRE(second.size() == 1);
  CHECK(second[0].buffer == runs[1].buffer);
  std::vector<std::uint32_t> holding;
  sb.runs_holding(101, 200, &holding);  // 101..300
  CHECK(holding == std::vector<std::uint32_t>{0, 1, 2});
  holding.clear();
  sb.runs_holding(103, 97, &holding);  // 103..199: nothing
  CHECK(holding.empty());
  sb.runs_holding(302, 5, &holding);
  CHECK(holding.empty());
  // In the caller's scratch memory, grown when too small.
  AlignedBuffer scratch(512);
  SectorBuffer in_scratch(plan, 512, &scratch);
  CHECK(scratch.size() >= 6 * 512);
  CHECK(in_scratch.at(100) == scratch.data());
}

TEST_CASE("array state: written bytes are written back and read in selections as the model says",
          "[array_state]") {
  auto g = toy_disk();
  MemoryDevice dev(8 << 20, 512);
  SectorIo io(dev, *g);
  const CellGrid grid({20, 30}, 8, {4, 4}, {1, 0});  // 128-byte cells, one sector each, ragged at the edges
  auto layout = layouts::make_layout("hilbert", *g, grid);
  layout->place(layouts::allocate_linear(*g, layout->space(), 64));
  const std::uint64_t cells = grid.cells();
  ArrayState st(std::move(layout), CellChecksums::fresh(7, cells), CellChecksums::fresh(7, cells, 'a'), io);
  REQUIRE(st.bytes() == 20 * 30 * 8);
  CHECK_FALSE(st.holds_data());
  std::vector<std::byte> out(st.bytes(), std::byte{0x55});
  std::uint64_t bad = 0;
  REQUIRE(st.read_selection(Selection::all(grid.shape()), out.data(), &bad) == 0);
  CHECK(std::all_of(out.begin(), out.end(), [](std::byte b) { return b == std::byte{0}; }));  // nothing written

  std::mt19937_64 rng(17);
  const std::vector<std::byte> model = random_model(rng, st.bytes());
  // Written in pieces that cut elements and cells.
  for (std::uint64_t at = 0; at < model.size();) {
    const std::size_t n = std::min<std::size_t>(model.size() - at, 1 + rng() % 300);
    st.write_bytes(at, model.data() + at, n);
    at += n;
  }
  CHECK(st.has_dirty());
  CHECK(st.dirty_bytes() == cells * st.cell_storage());
  CHECK(st.cell_storage() == 512);
  REQUIRE(st.write_back(&bad, nullptr) == 0);
  CHECK_FALSE(st.has_dirty());
  CHECK(st.holds_data());
  REQUIRE(st.read_selection(Selection::all(grid.shape()), out.data(), &bad) == 0);
  CHECK(out == model);
  for (int k = 0; k < 30; ++k) {
    const Selection sel = layouts::testing::random_selection(grid, rng);
    std::vector<std::byte> got(sel.elements() * 8);
    REQUIRE(st.read_selection(sel, got.data(), &bad) == 0);
    CHECK(got == layouts::testing::brute(grid, model, sel));
  }
  // Each element's sector holds its bytes.
  for (std::uint64_t i : {0u, 7u, 19u})
    for (std::uint64_t j : {0u, 13u, 29u}) {
      geom::Lbn lbn = 0;
      std::uint32_t offset = 0;
      st.element_location(std::vector<std::uint64_t>{i, j}, &lbn, &offset);
      CHECK(std::memcmp(dev.bytes().data() + lbn * 512 + offset, model.data() + (i * 30 + j) * 8, 8) == 0);
    }
  // A damaged cell is EIO, naming it.
  geom::Lbn lbn = 0;
  std::uint32_t offset = 0;
  st.element_location(std::vector<std::uint64_t>{9, 9}, &lbn, &offset);
  dev.bytes()[lbn * 512 + offset] ^= std::byte{1};
  CHECK(st.read_selection(Selection::all(grid.shape()), out.data(), &bad) == EIO);
  CHECK(bad == grid.linear(std::vector<std::uint64_t>{2, 2}));
  // Cleared: every cell reads as zeros again, the damaged one too.
  st.clear();
  CHECK_FALSE(st.holds_data());
  REQUIRE(st.read_selection(Selection::all(grid.shape()), out.data(), &bad) == 0);
  CHECK(std::all_of(out.begin(), out.end(), [](std::byte b) { return b == std::byte{0}; }));
}

TEST_CASE("array state: the dirty cells' written bytes as runs of the array's bytes", "[array_state]") {
  auto g = toy_disk();
  MemoryDevice dev(8 << 20, 512);
  SectorIo io(dev, *g);
  std::mt19937_64 rng(23);
  for (const auto& [shape, cell] : {std::pair<std::vector<std::uint64_t>, std::vector<std::uint64_t>>{{20, 30}, {4, 4}},
                                   {{7, 9, 11}, {2, 4, 3}},
                                   {{50}, {8}}}) {
    const CellGrid grid(shape, 4, cell, CellGrid::default_order(shape.size()));
    auto layout = layouts::make_layout("naive", *g, grid);
    layout->place(layouts::allocate_linear(*g, layout->space(), 64));
    const std::uint64_t cells = grid.cells();
    ArrayState st(std::move(layout), CellChecksums::fresh(7, cells), CellChecksums::fresh(7, cells, 'a'), io);
    const std::vector<std::byte> model = random_model(rng, st.bytes());
    std::vector<bool> written(model.size(), false);
    // Scattered writes that cut elements and cells; some cells end up whole.
    for (int k = 0; k < 40; ++k) {
      const std::uint64_t at = rng() % model.size();
      const std::size_t len = std::min<std::size_t>(model.size() - at, 1 + rng() % 90);
      st.write_bytes(at, model.data() + at, len);
      std::fill(written.begin() + std::ptrdiff_t(at), written.begin() + std::ptrdiff_t(at + len), true);
    }
    std::vector<std::byte> seen(model.size(), std::byte{0});
    std::vector<bool> covered(model.size(), false);
    std::uint64_t last_end = 0, runs = 0;
    st.for_each_dirty_run([&](std::uint64_t offset, const std::byte* data, std::size_t length) {
      REQUIRE(offset + length <= model.size());
      std::memcpy(seen.data() + offset, data, length);
      for (std::size_t b = 0; b < length; ++b) {
        CHECK_FALSE(covered[offset + b]);  // no byte twice
        covered[offset + b] = true;
      }
      last_end = offset + length;
      ++runs;
    });
    INFO("shape " << shape.size() << "-D, " << runs << " runs, last ending at " << last_end);
    CHECK(covered == written);  // exactly the bytes written
    for (std::size_t b = 0; b < model.size(); ++b)
      if (written[b]) REQUIRE(seen[b] == model[b]);
  }
}

TEST_CASE("array state: a selection that is one whole cell is read straight into the caller's buffer",
          "[array_state]") {
  auto g = toy_disk();
  MemoryDevice dev(8 << 20, 512);
  SectorIo io(dev, *g);
  for (const char* name : {"naive", "hilbert", "zorder"}) {
    CAPTURE(name);
    // 8x16 float64 cells: 1 KiB, two sectors; 1x16 cells of another grid: a slice along dim 0 is one cell.
    for (const CellGrid& grid : {CellGrid({24, 32}, 8, {8, 16}, {1, 0}), CellGrid({6, 64}, 8, {1, 64}, {1, 0})}) {
      auto layout = layouts::make_layout(name, *g, grid);
      layout->place(layouts::allocate_linear(*g, layout->space(), 64));
      const std::uint64_t cells = grid.cells();
      ArrayState st(std::move(layout), CellChecksums::fresh(7, cells), CellChecksums::fresh(7, cells, 'a'), io);
      std::mt19937_64 rng(23);
      const std::vector<std::byte> model = random_model(rng, st.bytes());
      st.write_bytes(0, model.data(), model.size());
      std::uint64_t bad = 0;
      REQUIRE(st.write_back(&bad, nullptr) == 0);
      const std::uint64_t brick = grid.cell_bytes();
      for (std::uint64_t c = 0; c < cells; ++c) {
        const Selection sel(grid.element_box(c));
        const std::vector<std::byte> want = layouts::testing::brute(grid, model, sel);
        // Aligned: read in place, the scratch buffer never used.
        AlignedBuffer out(brick), scratch;
        std::uint64_t read = 0;
        REQUIRE(st.read_selection(sel, out.data(), &bad, {}, &read, &scratch) == 0);
        CHECK(std::memcmp(out.data(), want.data(), brick) == 0);
        CHECK(read == brick);
        CHECK(scratch.size() == 0);
        // Not aligned: through the sector buffer, the same bytes.
        std::vector<std::byte> plain(brick + 8);
        REQUIRE(st.read_selection(sel, plain.data() + 8, &bad, {}, nullptr, &scratch) == 0);
        CHECK(std::memcmp(plain.data() + 8, want.data(), brick) == 0);
        CHECK(scratch.size() >= brick);
      }
      if (grid.cell()[0] == 1) {  // a slice along dim 0 names the same cell
        const Selection slice = Selection::slice(grid.shape(), 0, 4);
        AlignedBuffer out(brick), scratch;
        REQUIRE(st.read_selection(slice, out.data(), &bad, {}, nullptr, &scratch) == 0);
        CHECK(std::memcmp(out.data(), model.data() + 4 * brick, brick) == 0);
        CHECK(scratch.size() == 0);
      }
      // A damaged cell read in place is EIO naming it, and reported to a repair.
      const std::uint64_t victim = cells / 2;
      Run r[2];
      std::vector<std::uint64_t> cc(grid.dims());
      grid.coords(victim, cc);
      st.layout().cell_runs(cc, r);
      dev.bytes()[r[0].lbn * 512 + 3] ^= std::byte{4};
      AlignedBuffer out(brick);
      std::vector<std::uint64_t> all_bad;
      CHECK(st.read_selection(Selection(grid.element_box(victim)), out.data(), &bad, {}, nullptr, nullptr,
                              &all_bad) == EIO);
      CHECK(bad == victim);
      CHECK(all_bad == std::vector<std::uint64_t>{victim});
      dev.bytes()[r[0].lbn * 512 + 3] ^= std::byte{4};
    }
  }
}

TEST_CASE("array file: cells written in part into reused buffers read as zeros where nothing was written",
          "[write_behind][array_file]") {
  // A write-back of finished cells only (the flusher's tick during a write)
  // keeps their buffers for the next cells, unclear; write_back clears the
  // bytes nobody wrote. Without that, old cells' bytes would show through.
  auto g = toy_disk();
  auto golden = formatted(*g);
  for (const char* layout : {"naive", "hilbert"}) {
    INFO("layout " << layout);
    Mount m = mount(copy_of(*golden));
    auto a = create_array(m, "reuse", make_schema({64, 64, 64}, "float64", layout));
    const std::uint64_t N = a->size();
    Bytes model(N, 0);
    std::mt19937_64 rng(11);
    std::string msg;
    // The first half, every byte (random, never zero-filled): its cells finish.
    Bytes half(N / 2);
    for (auto& x : half) x = std::uint8_t(1 + rng() % 255);
    REQUIRE(a->write(0, as_bytes(half), half.size(), &msg) == 0);
    std::copy(half.begin(), half.end(), model.begin());
    REQUIRE(a->flush_periodic(&msg) == 0);  // finished cells go out; their buffers stay for reuse
    // A few small pieces in the second half: new cells in those buffers, mostly unwritten.
    for (int i = 0; i < 40; ++i) {
      const std::uint64_t at = N / 2 + rng() % (N / 2 - 16);
      Bytes piece(1 + rng() % 16, 0);
      for (auto& x : piece) x = std::uint8_t(rng());
      REQUIRE(a->write(at, as_bytes(piece), piece.size(), &msg) == 0);
      std::copy(piece.begin(), piece.end(), model.begin() + std::ptrdiff_t(at));
    }
    REQUIRE(a->flush(true, &msg) == 0);
    Bytes got(N);
    std::size_t read = 0;
    REQUIRE(a->read(0, N, reinterpret_cast<std::byte*>(got.data()), &read, &msg) == 0);
    CHECK(differing(got, model) == 0);
    auto b = open_stored(m, a->ino());
    REQUIRE(b->read(0, N, reinterpret_cast<std::byte*>(got.data()), &read, &msg) == 0);
    CHECK(differing(got, model) == 0);
  }
}
