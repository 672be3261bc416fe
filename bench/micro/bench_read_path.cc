// Micro-benchmarks of the array read path's CPU stages (Catch2 BENCHMARK; not
// part of CI): gathering cells into a C-order chunk and verifying their
// checksums, on the chunk a full read of the issue-5 array loads (32 MiB of
// float64 1024x1024x256 in default 8x8x8 cells).
// Run: build/bench/mmfs-read-path-bench --benchmark-samples 20
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <random>

#include "fs/device/block_device.h"
#include "fs/meta/cell_checksums.h"
#include "layouts/cell_copy.h"
#include "layouts/curve_order.h"
#include "layouts/selection_chunks.h"

using namespace mmfs::layouts;

namespace {

// Gathers every cell `sel` touches from `cells` (bricks in grid order) into `out`.
// With `verify`, each cell's checksum is computed first, as the daemon does.
void gather_all(const CellGrid& g, const std::vector<std::byte>& cells, const Selection& sel, std::byte* out,
                bool verify, SelectionGather::Stores stores = SelectionGather::Stores::cached) {
  SelectionGather gather(g, sel, stores);
  std::uint64_t sum = 0;
  for_each_touched_cell(gather.touched(), [&](std::span<const std::uint64_t> cc) {
    const std::byte* cell = cells.data() + g.linear(cc) * g.cell_bytes();
    if (verify) sum ^= mmfs::fs::cell_checksum({cell, g.cell_bytes()});
    gather.copy(cc, cell, out);
  });
  if (sum == 1) out[0] = std::byte{1};  // keeps the checksums from being optimised away
}

struct ChunkCase {
  const char* name;
  std::vector<std::uint64_t> shape, cell;
  std::uint32_t itemsize;
};

}  // namespace

TEST_CASE("gather one 32 MiB chunk of a full read") {
  const std::vector<ChunkCase> cases = {
      {"float64 1024x1024x256, cell 8x8x8", {1024, 1024, 256}, {8, 8, 8}, 8},
      {"float32 1024x1024x256, cell 8x8x16", {1024, 1024, 256}, {8, 8, 16}, 4},
      {"int16 4096x4096, cell 32x64", {4096, 4096}, {32, 64}, 2},
      {"float64 64x64x64x64, cell 4x4x4x8", {64, 64, 64, 64}, {4, 4, 4, 8}, 8},
  };
  for (const auto& c : cases) {
    CellGrid g(c.shape, c.itemsize, c.cell, CellGrid::default_order(c.shape.size()));
    SelectionChunks chunks(Selection::all(g.shape()), g, 32ull << 20);
    Selection part = chunks.selection(0);
    std::uint64_t bytes = part.elements() * g.itemsize();
    // Only the first cells of the grid are read; the rest of the buffer is never touched.
    std::vector<std::byte> cells(g.cells() * g.cell_bytes() / (g.grid()[0]) * ((part.dims()[0].stop + c.cell[0] - 1) / c.cell[0]));
    std::mt19937_64 rng(1);
    for (auto& b : cells) b = std::byte(rng());
    // Page-aligned, as the daemon's chunk buffers are (streamed stores need whole lines).
    mmfs::fs::AlignedBuffer out(bytes, mmfs::fs::AlignedBuffer::Uninitialized{});
    std::memset(out.data(), 0, bytes);
    const std::string mib = std::to_string(bytes >> 20) + " MiB";
    BENCHMARK(std::string(c.name) + ": gather " + mib) {
      gather_all(g, cells, part, out.data(), false);
      return out.data()[bytes / 2];
    };
    BENCHMARK(std::string(c.name) + ": verify + gather " + mib) {
      gather_all(g, cells, part, out.data(), true);
      return out.data()[bytes / 2];
    };
    BENCHMARK(std::string(c.name) + ": verify + gather, streamed stores " + mib) {
      gather_all(g, cells, part, out.data(), true, SelectionGather::Stores::streamed);
      return out.data()[bytes / 2];
    };
  }
}

TEST_CASE("gather a 128 MiB chunk of 16x16x4 float64 cells: cell by cell or by lines") {
  // The flash volumes' default cell: rows of 32 bytes, half a cache line of
  // the result. Cells arrive in the layout's order, not the grid's: shuffled
  // here, the far end of that.
  CellGrid g({1024, 1024, 256}, 8, {16, 16, 4}, CellGrid::default_order(3));
  SelectionChunks chunks(Selection::all(g.shape()), g, 128ull << 20);
  const Selection part = chunks.selection(0);
  const std::uint64_t bytes = part.elements() * g.itemsize();
  SelectionGather probe(g, part, SelectionGather::Stores::streamed);
  const auto& t = probe.touched();
  REQUIRE(probe.gathers_lines());
  std::vector<std::vector<std::uint64_t>> coords;
  for_each_touched_cell(t, [&](std::span<const std::uint64_t> cc) { coords.emplace_back(cc.begin(), cc.end()); });
  std::vector<std::byte> cells(coords.size() * g.cell_bytes());
  std::mt19937_64 rng(3);
  for (auto& b : cells) b = std::byte(rng());
  std::vector<std::size_t> arrival(coords.size());
  for (std::size_t i = 0; i < arrival.size(); ++i) arrival[i] = i;
  // The order a Hilbert layout of the whole grid reads them in.
  std::vector<std::size_t> hilbert = arrival;
  {
    const HilbertOrder curve(g.grid());
    std::vector<std::uint64_t> rank(coords.size());
    for (std::size_t i = 0; i < coords.size(); ++i) rank[i] = curve.rank(coords[i]);
    std::sort(hilbert.begin(), hilbert.end(), [&](std::size_t a, std::size_t b) { return rank[a] < rank[b]; });
  }
  std::shuffle(arrival.begin(), arrival.end(), rng);
  mmfs::fs::AlignedBuffer out(bytes, mmfs::fs::AlignedBuffer::Uninitialized{});
  std::memset(out.data(), 0, bytes);
  const auto streamed = SelectionGather::Stores::streamed;
  // Cell i of `coords` is at cells[i]: the grid's order, as C order of the touched.
  BENCHMARK("cell by cell, grid order") {
    SelectionGather gather(g, part, streamed);
    for (std::size_t i = 0; i < coords.size(); ++i) gather.copy(coords[i], cells.data() + i * g.cell_bytes(), out.data());
    return out.data()[bytes / 2];
  };
  BENCHMARK("cell by cell, shuffled arrival") {
    SelectionGather gather(g, part, streamed);
    for (std::size_t i : arrival) gather.copy(coords[i], cells.data() + i * g.cell_bytes(), out.data());
    return out.data()[bytes / 2];
  };
  // As the daemon does: each cell verified as it arrives, then copied alone
  // or (take) with its line once the line's last cell has arrived.
  for (const auto& [name, order] : {std::pair<const char*, const std::vector<std::size_t>*>{"shuffled", &arrival},
                                    {"Hilbert", &hilbert}}) {
    for (const bool by_lines : {false, true}) {
      BENCHMARK(std::string(by_lines ? "verify + by lines, " : "verify + cell by cell, ") + name + " arrival") {
        SelectionGather gather(g, part, streamed);
        std::uint64_t x = 0;
        for (std::size_t i : *order) {
          const std::byte* cell = cells.data() + i * g.cell_bytes();
          x ^= mmfs::fs::cell_checksum({cell, g.cell_bytes()});
          if (by_lines) gather.take(coords[i], cell, out.data());
          else gather.copy(coords[i], cell, out.data());
        }
        return x;
      };
    }
  }
  BENCHMARK("by lines of cells") {
    SelectionGather gather(g, part, streamed);
    const std::size_t width = t[2].size();
    std::vector<const std::byte*> line(width);
    for (std::size_t i = 0; i < coords.size(); i += width) {
      for (std::size_t j = 0; j < width; ++j) line[j] = cells.data() + (i + j) * g.cell_bytes();
      gather.copy_line(coords[i], line, out.data());
    }
    return out.data()[bytes / 2];
  };
}

TEST_CASE("checksum one 32 MiB chunk of 4 KiB cells") {
  std::vector<std::byte> buf(32u << 20), copy(32u << 20);
  std::mt19937_64 rng(2);
  for (auto& b : buf) b = std::byte(rng());
  BENCHMARK("memcpy of 32 MiB (the memory's floor)") {
    std::memcpy(copy.data(), buf.data(), buf.size());
    return copy[12345];
  };
  BENCHMARK("XXH3 of 8192 cells of 4 KiB") {
    std::uint32_t x = 0;
    for (std::size_t at = 0; at < buf.size(); at += 4096) x ^= mmfs::fs::cell_checksum({buf.data() + at, 4096});
    return x;
  };
}
