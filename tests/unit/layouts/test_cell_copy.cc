// C order <-> cells (layouts/cell_copy.h) against brute force, without a
// device (view chunking is in test_selection_chunks.cc).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <random>
#include <stdexcept>

#include "layouts/cell_copy.h"
#include "tests/unit/support/selection_test_support.h"

using namespace mmfs::layouts;
using namespace mmfs::layouts::testing;

namespace {

// Cells of `g` as bricks (C order inside), filled from a C-order array by scattering.
std::vector<std::byte> to_cells(const CellGrid& g, const std::vector<std::byte>& array, std::mt19937_64& rng) {
  std::vector<std::byte> cells(g.cells() * g.cell_bytes(), std::byte{0});
  // Random piece sizes, cutting elements and cells.
  std::uint64_t pos = 0, total = array.size();
  while (pos < total) {
    std::uint64_t n = std::min<std::uint64_t>(total - pos, 1 + rng() % 97);
    for_each_cell_segment(g, pos, n,
                          [&](std::uint64_t linear, std::span<const std::uint64_t>, std::uint64_t at,
                              std::uint64_t from, std::uint64_t take) {
                            std::memcpy(cells.data() + linear * g.cell_bytes() + at, array.data() + pos + from, take);
                          });
    pos += n;
  }
  return cells;
}

// Every cell of the product of `touched` (a coordinate list per dimension), in C order.
std::vector<std::vector<std::uint64_t>> touched_cells(const std::vector<std::vector<std::uint64_t>>& touched) {
  std::vector<std::vector<std::uint64_t>> out;
  for_each_touched_cell(touched, [&](std::span<const std::uint64_t> cc) { out.emplace_back(cc.begin(), cc.end()); });
  return out;
}

// The result is written at a 64-byte boundary (as the daemon's buffers are),
// so that streamed stores of whole cache lines are taken where rows allow.
std::vector<std::byte> gathered(const CellGrid& g, const std::vector<std::byte>& cells, const Selection& sel,
                                SelectionGather::Stores stores = SelectionGather::Stores::cached) {
  const std::size_t bytes = sel.elements() * g.itemsize();
  std::vector<std::byte> area(bytes + 64, std::byte{0x5a});
  std::byte* out = area.data() + (64 - reinterpret_cast<std::uintptr_t>(area.data()) % 64) % 64;
  {
    SelectionGather gather(g, sel, stores);
    for (const auto& cc : touched_cells(gather.touched()))
      gather.copy(cc, cells.data() + g.linear(cc) * g.cell_bytes(), out);
  }  // the gather's end fences streamed stores
  return {out, out + bytes};
}

}  // namespace

TEST_CASE("cell copy: scatter then gather equals numpy-style indexing of the C-order array", "[cell_copy]") {
  std::mt19937_64 rng(7);
  struct Case {
    std::vector<std::uint64_t> shape, cell;
    std::uint32_t itemsize;
  };
  std::vector<Case> cases = {{{37}, {8}, 8},           {{9, 10, 11}, {4, 4, 4}, 8}, {{3, 5, 4, 6}, {2, 3, 1, 4}, 2},
                             {{1, 7, 1}, {1, 2, 1}, 4}, {{5, 6}, {5, 6}, 1},        {{2, 3, 1, 4, 5}, {1, 2, 1, 2, 3}, 4},
                             // rows of 64 bytes (the default float64 cell), 8, 16, 128 and 256
                             // (copied by fixed-size moves), and rows contiguous in cell and result
                             {{16, 24, 20}, {8, 8, 8}, 8}, {{6, 10}, {2, 8}, 1}, {{9, 12}, {3, 4}, 4},
                             {{4, 8, 40}, {2, 2, 16}, 8}, {{5, 7, 32}, {1, 3, 32}, 8}, {{3, 8, 8}, {1, 8, 8}, 4},
                             // rows of 64, 128 and 256 bytes at line-aligned result strides (streamed)
                             {{4, 16, 16}, {2, 4, 8}, 8}, {{3, 8, 64}, {3, 2, 16}, 8}, {{2, 4, 128}, {1, 2, 32}, 8}};
  for (const auto& c : cases) {
    std::vector<std::uint32_t> order(c.shape.size());
    for (std::size_t d = 0; d < order.size(); ++d) order[d] = std::uint32_t(order.size() - 1 - d);
    CellGrid g(c.shape, c.itemsize, c.cell, order);
    std::vector<std::byte> array(g.elements() * c.itemsize);
    for (auto& b : array) b = std::byte(rng());
    auto cells = to_cells(g, array, rng);
    const auto streamed = SelectionGather::Stores::streamed;
    CHECK(gathered(g, cells, Selection::all(g.shape())) == array);
    CHECK(gathered(g, cells, Selection::all(g.shape()), streamed) == array);
    for (int k = 0; k < 30; ++k) {
      Selection sel = random_selection(g, rng);
      const auto expect = brute(g, array, sel);
      CHECK(gathered(g, cells, sel) == expect);
      CHECK(gathered(g, cells, sel, streamed) == expect);
    }
    // byte_in_cell agrees with the scatter.
    std::vector<std::uint64_t> x(g.dims()), cc;
    for (std::size_t d = 0; d < g.dims(); ++d) x[d] = rng() % g.shape()[d];
    std::uint64_t lin = 0;
    for (std::size_t d = 0; d < g.dims(); ++d) lin = lin * g.shape()[d] + x[d];
    std::uint64_t at = byte_in_cell(g, x, &cc);
    CHECK(std::memcmp(cells.data() + g.linear(cc) * g.cell_bytes() + at, array.data() + lin * c.itemsize,
                      c.itemsize) == 0);
  }
}

TEST_CASE("cell copy: lines of cells gather what cells do, cells taken in any order, some transient", "[cell_copy]") {
  std::mt19937_64 rng(11);
  struct Case {
    std::vector<std::uint64_t> shape, cell;
    std::uint32_t itemsize;
  };
  // Rows shorter than a cache line: 32 bytes (the default float64 cell of
  // flash volumes), 8 bytes, 20 bytes (not whole 16-byte units), 2-D, and
  // cells cut by the array's edge.
  const std::vector<Case> cases = {{{16, 24, 20}, {8, 8, 4}, 8}, {{9, 10, 11}, {4, 4, 4}, 8},
                                   {{3, 5, 4, 6}, {2, 3, 1, 4}, 2}, {{5, 7, 33}, {1, 3, 5}, 4},
                                   {{6, 40}, {2, 2}, 8}};
  const auto streamed = SelectionGather::Stores::streamed;
  for (const auto& c : cases) {
    CAPTURE(c.shape, c.cell);
    CellGrid g(c.shape, c.itemsize, c.cell, CellGrid::default_order(c.shape.size()));
    std::vector<std::byte> array(g.elements() * c.itemsize);
    for (auto& b : array) b = std::byte(rng());
    const auto cells = to_cells(g, array, rng);
    for (int k = 0; k < 40; ++k) {
      Selection sel = k == 0 ? Selection::all(g.shape()) : random_selection(g, rng);
      // The last dimension taken with step 1 across at least two cells.
      std::vector<DimRange> dims = sel.dims();
      const std::size_t L = dims.size() - 1;
      const std::uint64_t cl = c.cell[L], sl = c.shape[L];
      dims[L] = {rng() % cl, std::min(sl, cl + 1 + rng() % (sl - cl)), 1, false};
      sel = Selection(dims);
      CAPTURE(k);
      const std::size_t bytes = sel.elements() * g.itemsize();
      std::vector<std::byte> area(bytes + 64, std::byte{0x5a});
      std::byte* out = area.data() + (64 - reinterpret_cast<std::uintptr_t>(area.data()) % 64) % 64;
      {
        SelectionGather gather(g, sel, streamed);
        REQUIRE(gather.gathers_lines());
        CHECK_FALSE(SelectionGather(g, sel).gathers_lines());  // a cached result: cells one by one
        // Every cell taken once, in a random order (as requests arrive). A
        // quarter come from a scratch buffer that is overwritten right after
        // (a cell put together from two pieces): those are copied at once.
        auto order = touched_cells(gather.touched());
        std::shuffle(order.begin(), order.end(), rng);
        std::vector<std::byte> scratch(g.cell_bytes());
        for (const auto& cc : order) {
          const std::byte* cell = cells.data() + g.linear(cc) * g.cell_bytes();
          if (rng() % 4 == 0) {
            std::copy(cell, cell + g.cell_bytes(), scratch.begin());
            gather.take(cc, scratch.data(), out, true);
            std::fill(scratch.begin(), scratch.end(), std::byte{0xee});
          } else {
            gather.take(cc, cell, out);
          }
        }
      }
      CHECK(std::vector<std::byte>(out, out + bytes) == brute(g, array, sel));
      CHECK(area.back() == std::byte{0x5a});  // nothing past the result
    }
  }
  // Lines pay only for rows shorter than a cache line, a last dimension
  // taken whole-step across cells, and a streamed result.
  CellGrid wide({8, 64}, 8, {4, 8}, CellGrid::default_order(2));  // rows of 64 bytes
  CHECK_FALSE(SelectionGather(wide, Selection::all(wide.shape()), streamed).gathers_lines());
  CellGrid narrow({8, 64}, 8, {4, 4}, CellGrid::default_order(2));
  CHECK(SelectionGather(narrow, Selection::all(narrow.shape()), streamed).gathers_lines());
  CHECK_FALSE(SelectionGather(narrow, Selection({{0, 8, 1, false}, {0, 64, 2, false}}), streamed).gathers_lines());
  CHECK_FALSE(SelectionGather(narrow, Selection({{0, 8, 1, false}, {5, 6, 1, true}}), streamed).gathers_lines());
  CHECK_FALSE(SelectionGather(narrow, Selection({{0, 8, 1, false}, {4, 8, 1, false}}), streamed).gathers_lines());
}

TEST_CASE("cell segments of long ranges map every byte as per-byte division does", "[cell_copy]") {
  // for_each_cell_segment steps its coordinates as an odometer across lines
  // and dimensions; every byte of ranges of any length and alignment must
  // land where dividing its own offset puts it, with the cell's coordinates.
  std::mt19937_64 rng(11);
  struct Case {
    std::vector<std::uint64_t> shape, cell;
    std::uint32_t itemsize;
  };
  const std::vector<Case> cases = {{{37}, {8}, 8},           {{9, 10, 11}, {4, 4, 4}, 8}, {{3, 5, 4, 6}, {2, 3, 1, 4}, 2},
                                   {{1, 7, 1}, {1, 2, 1}, 4}, {{5, 6}, {5, 6}, 1},        {{6, 9, 8}, {4, 4, 3}, 4},
                                   {{2, 3, 1, 4, 5}, {1, 2, 1, 2, 3}, 4}};
  for (const auto& c : cases) {
    const std::vector<std::uint32_t> order = CellGrid::default_order(c.shape.size());
    const CellGrid g(c.shape, c.itemsize, c.cell, order);
    const std::uint64_t total = g.elements() * c.itemsize;
    auto expect = [&](std::uint64_t byte, std::vector<std::uint64_t>* cc) {
      std::vector<std::uint64_t> x(g.dims());
      std::uint64_t e = byte / c.itemsize;
      for (std::size_t d = g.dims(); d-- > 0;) {
        x[d] = e % c.shape[d];
        e /= c.shape[d];
      }
      return byte_in_cell(g, x, cc) + byte % c.itemsize;
    };
    for (int k = 0; k < 60; ++k) {
      const std::uint64_t offset = k == 0 ? 0 : rng() % total;
      const std::uint64_t length = k == 0 ? total : 1 + rng() % (total - offset);
      std::uint64_t next = 0;
      bool ok = true;
      for_each_cell_segment(g, offset, length,
                            [&](std::uint64_t linear, std::span<const std::uint64_t> cc, std::uint64_t at,
                                std::uint64_t from, std::uint64_t take) {
                              ok = ok && from == next && take > 0 && g.linear(cc) == linear;
                              for (std::uint64_t b = 0; ok && b < take; ++b) {
                                std::vector<std::uint64_t> want_cc;
                                const std::uint64_t want_at = expect(offset + from + b, &want_cc);
                                ok = want_at == at + b && g.linear(want_cc) == linear;
                              }
                              next = from + take;
                            });
      INFO("shape case with " << c.shape.size() << " dims, offset " << offset << ", length " << length);
      CHECK(ok);
      CHECK(next == length);
    }
  }
}

TEST_CASE("cell rows cover each cell's elements inside the array once, where per-element math puts them",
          "[cell_copy]") {
  // for_each_cell_row is the inverse of for_each_cell_segment one cell at a
  // time: every in-array element of the cell is in exactly one row, at the
  // brick byte byte_in_cell gives and the array byte its C-order index gives.
  struct Case {
    std::vector<std::uint64_t> shape, cell;
    std::uint32_t itemsize;
  };
  const std::vector<Case> cases = {{{37}, {8}, 8}, {{9, 10, 11}, {4, 4, 4}, 8}, {{3, 5, 4, 6}, {2, 3, 1, 4}, 2},
                                   {{1, 7, 1}, {1, 2, 1}, 4}, {{5, 6}, {5, 6}, 1}};
  for (const auto& c : cases) {
    const CellGrid g(c.shape, c.itemsize, c.cell, CellGrid::default_order(c.shape.size()));
    std::vector<int> seen(g.elements(), 0);
    std::vector<std::uint64_t> cc(g.dims());
    for (std::uint64_t linear = 0; linear < g.cells(); ++linear) {
      g.coords(linear, cc);
      for_each_cell_row(g, cc, [&](std::uint64_t in_cell, std::uint64_t in_array, std::uint64_t bytes) {
        REQUIRE(bytes % c.itemsize == 0);
        for (std::uint64_t b = 0; b < bytes; b += c.itemsize) {
          const std::uint64_t element = (in_array + b) / c.itemsize;
          REQUIRE(element < g.elements());
          ++seen[element];
          std::vector<std::uint64_t> x(g.dims()), owner;
          std::uint64_t e = element;
          for (std::size_t d = g.dims(); d-- > 0;) {
            x[d] = e % c.shape[d];
            e /= c.shape[d];
          }
          CHECK(byte_in_cell(g, x, &owner) == in_cell + b);
          CHECK(owner == cc);
        }
      });
    }
    CHECK(std::all_of(seen.begin(), seen.end(), [](int k) { return k == 1; }));
  }
}
