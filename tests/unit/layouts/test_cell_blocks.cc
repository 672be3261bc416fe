// Which checksum blocks of a cell hold a selection (layouts/cell_blocks.h),
// against a brute-force walk over every element of the cell.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <random>
#include <span>
#include <vector>

#include "layouts/cell_blocks.h"
#include "layouts/cell_grid.h"
#include "layouts/selection.h"
#include "tests/unit/support/selection_test_support.h"

using namespace mmfs;
using namespace mmfs::layouts;
using namespace mmfs::layouts::testing;

namespace {

// Every selected element of cell `cc`, its bytes' blocks marked.
BlockMask brute_mask(const CellGrid& g, const Selection& sel, std::span<const std::uint64_t> cc,
                     std::uint64_t block_bytes, std::uint32_t per_cell) {
  BlockMask m;
  m.words.assign((per_cell + 63) / 64, 0);
  const std::size_t n = g.dims();
  std::vector<std::uint64_t> local(n, 0);
  for (;;) {
    bool selected = true;
    std::uint64_t offset = 0;
    for (std::size_t d = 0; d < n; ++d) {
      const std::uint64_t x = cc[d] * g.cell()[d] + local[d];
      const DimRange& r = sel.dims()[d];
      selected = selected && x < g.shape()[d] && x >= r.start && x < r.stop && (x - r.start) % r.step == 0;
      offset = offset * g.cell()[d] + local[d];
    }
    if (selected)
      for (std::uint64_t byte = offset * g.itemsize(); byte < (offset + 1) * g.itemsize(); ++byte)
        m.set(std::uint32_t(std::min<std::uint64_t>(byte / block_bytes, per_cell - 1)));
    std::size_t d = n;
    for (;;) {
      if (d == 0) return m;
      --d;
      if (++local[d] < g.cell()[d]) break;
      local[d] = 0;
    }
  }
}

}  // namespace

TEST_CASE("cell blocks: the blocks of a cell holding a selection equal brute force", "[partial_cells]") {
  std::mt19937_64 rng(1818);
  for (int trial = 0; trial < 1000; ++trial) {
    const std::size_t n = 1 + rng() % 4;
    std::vector<std::uint64_t> shape(n), cell(n);
    for (std::size_t d = 0; d < n; ++d) {
      shape[d] = 1 + rng() % 14;
      cell[d] = 1 + rng() % shape[d];
    }
    const std::uint32_t itemsize = 1u << (rng() % 4);
    std::vector<std::uint32_t> order = CellGrid::default_order(n);
    CellGrid g(shape, itemsize, cell, order);
    const std::uint64_t brick = g.cell_bytes();
    const std::uint64_t want_blocks = 1 + rng() % std::min<std::uint64_t>(brick, 70);
    std::uint64_t block = (brick + want_blocks - 1) / want_blocks;
    // Half the trials with a power of two (sector multiples, as volumes
    // have), which CellBlocks finds by shifting instead of dividing.
    if (trial % 2) block = std::bit_ceil(block);
    const std::uint32_t per_cell = std::uint32_t((brick + block - 1) / block);
    std::vector<DimRange> dims;
    for (std::size_t d = 0; d < n; ++d) dims.push_back(random_range(rng, shape[d]));
    Selection sel(dims);
    INFO("trial " << trial << " brick " << brick << " block " << block << " per cell " << per_cell);
    CellBlocks blocks(g, sel, block, per_cell);
    std::vector<std::vector<std::uint64_t>> touched(n);
    for (std::size_t d = 0; d < n; ++d) touched[d] = cells_touched(dims[d], cell[d]);
    std::vector<std::size_t> idx(n, 0);
    std::vector<std::uint64_t> cc(n);
    for (;;) {
      for (std::size_t d = 0; d < n; ++d) cc[d] = touched[d][idx[d]];
      const BlockMask& got = blocks.of(cc);
      const BlockMask want = brute_mask(g, sel, cc, block, per_cell);
      REQUIRE(got.words == want.words);
      REQUIRE(got.count == want.count);
      REQUIRE(blocks.full(got) == (want.count == per_cell));
      std::size_t d = n;
      bool done = true;
      while (d-- > 0) {
        if (++idx[d] < touched[d].size()) {
          done = false;
          break;
        }
        idx[d] = 0;
      }
      if (done) break;
    }
  }
}
