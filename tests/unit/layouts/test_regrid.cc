// A box rearranged block by block along a grid (layouts/regrid.h): against
// the blocks enumerated one by one (grid cells in C order, each block's
// elements in C order), for boxes of 1 to 4 dimensions, grids finer and
// coarser than the box, cells cut by the box's edges, and item sizes from
// 1 to 16 bytes; and each block found where regrid_block says.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "layouts/regrid.h"

using namespace mmfs::layouts;

namespace {

// The elements of `box` in C order, each as its coordinates.
std::vector<std::vector<std::uint64_t>> c_order(const std::vector<DimRange>& box) {
  std::vector<std::vector<std::uint64_t>> out;
  std::vector<std::uint64_t> x(box.size());
  for (std::size_t d = 0; d < box.size(); ++d) x[d] = box[d].start;
  while (true) {
    out.push_back(x);
    std::size_t d = box.size();
    while (d-- > 0) {
      if (++x[d] < box[d].stop) break;
      x[d] = box[d].start;
    }
    if (d == std::size_t(-1)) return out;
  }
}

struct Expected {
  std::vector<std::byte> bytes;
  std::vector<std::pair<std::vector<std::uint64_t>, RegridBlock>> blocks;  // a corner of each, and where it lies
};

// The rearranged bytes built the slow way: for each grid cell the box
// touches (C order), the box's elements inside it (C order).
Expected brute(const std::vector<DimRange>& box, const std::vector<std::uint64_t>& grid, std::uint32_t item,
               const std::vector<std::byte>& src) {
  const auto elements = c_order(box);
  std::vector<DimRange> cells;
  for (std::size_t d = 0; d < box.size(); ++d)
    cells.push_back({box[d].start / grid[d], (box[d].stop - 1) / grid[d] + 1, 1, false});
  Expected e;
  for (const auto& cell : c_order(cells)) {
    std::vector<DimRange> block;
    for (std::size_t d = 0; d < box.size(); ++d)
      block.push_back({std::max(box[d].start, cell[d] * grid[d]), std::min(box[d].stop, (cell[d] + 1) * grid[d]), 1,
                       false});
    const std::uint64_t at = e.bytes.size();
    const auto inside = c_order(block);
    for (const auto& x : inside) {
      const auto pos = std::find(elements.begin(), elements.end(), x) - elements.begin();
      e.bytes.insert(e.bytes.end(), src.begin() + pos * item, src.begin() + (pos + 1) * item);
    }
    e.blocks.push_back({inside.back(), {at, inside.size() * item}});
  }
  return e;
}

}  // namespace

TEST_CASE("regrid puts each grid cell's part of a box in one run, in C order of the cells", "[regrid]") {
  std::mt19937_64 rng(29);
  for (int k = 0; k < 300; ++k) {
    const std::size_t rank = 1 + rng() % 4;
    std::vector<DimRange> box;
    std::vector<std::uint64_t> grid;
    std::uint64_t elements = 1;
    for (std::size_t d = 0; d < rank; ++d) {
      const std::uint64_t start = rng() % 9, count = 1 + rng() % (rank <= 2 ? 12 : 6);
      box.push_back({start, start + count, 1, false});
      grid.push_back(1 + rng() % 8);
      elements *= count;
    }
    const std::uint32_t item = std::vector<std::uint32_t>{1, 2, 4, 8, 16, 3}[rng() % 6];
    std::vector<std::byte> src(elements * item), dst(src.size(), std::byte{0xee});
    for (auto& b : src) b = std::byte(rng());
    const Selection sel(box);
    regrid(sel, grid, item, src.data(), dst.data());
    const Expected want = brute(box, grid, item, src);
    INFO("rank " << rank << " item " << item);
    REQUIRE(dst == want.bytes);
    if (regrid_keeps_order(sel, grid)) CHECK(dst == src);
    for (const auto& [corner, block] : want.blocks) {
      const RegridBlock got = regrid_block(sel, grid, item, corner);
      CHECK(got.offset == block.offset);
      CHECK(got.bytes == block.bytes);
    }
  }
}

TEST_CASE("a Zarr chunk one element thin is one run of a layer of cells, rearranged", "[regrid]") {
  // The case regrid exists for: chunks 4x6x1 inside the 4x6x8 box of a layer.
  const Selection layer({{0, 4, 1, false}, {0, 6, 1, false}, {8, 16, 1, false}});
  const std::vector<std::uint64_t> chunk{4, 6, 1};
  std::vector<double> src(4 * 6 * 8), dst(src.size());
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = double(i);
  regrid(layer, chunk, sizeof(double), reinterpret_cast<const std::byte*>(src.data()),
         reinterpret_cast<std::byte*>(dst.data()));
  for (std::uint64_t z = 8; z < 16; ++z) {
    const std::uint64_t at[3] = {0, 0, z};
    const RegridBlock b = regrid_block(layer, chunk, sizeof(double), at);
    REQUIRE(b.bytes == 4 * 6 * sizeof(double));
    REQUIRE(b.offset == (z - 8) * 4 * 6 * sizeof(double));
    for (std::uint64_t i = 0; i < 24; ++i) CHECK(dst[(z - 8) * 24 + i] == src[i * 8 + (z - 8)]);
  }
}

TEST_CASE("regrid keeps the order of a box thin along its first dimension only", "[regrid]") {
  const Selection rows({{8, 16, 1, false}, {0, 40, 1, false}, {0, 24, 1, false}});
  CHECK(regrid_keeps_order(rows, std::vector<std::uint64_t>{1, 40, 24}));
  CHECK(regrid_keeps_order(rows, std::vector<std::uint64_t>{3, 64, 24}));
  CHECK_FALSE(regrid_keeps_order(rows, std::vector<std::uint64_t>{1, 20, 24}));
  CHECK_FALSE(regrid_keeps_order(rows, std::vector<std::uint64_t>{1, 40, 1}));
  const Selection offset({{0, 4, 1, false}, {30, 34, 1, false}});
  CHECK(regrid_keeps_order(offset, std::vector<std::uint64_t>{1, 32}) == false);  // 30:34 crosses 32
  CHECK(regrid_keeps_order(offset, std::vector<std::uint64_t>{1, 40}));
}

TEST_CASE("regrid refuses boxes and grids it cannot rearrange", "[regrid]") {
  std::vector<std::byte> buf(64);
  const std::vector<std::uint64_t> grid{2, 2};
  CHECK_THROWS_AS(regrid(Selection({{0, 4, 2, false}, {0, 2, 1, false}}), grid, 1, buf.data(), buf.data() + 32),
                  std::invalid_argument);
  CHECK_THROWS_AS(regrid(Selection({{0, 4, 1, false}, {3, 4, 1, true}}), grid, 1, buf.data(), buf.data() + 32),
                  std::invalid_argument);
  CHECK_THROWS_AS(regrid(Selection({{0, 4, 1, false}, {0, 2, 1, false}}), std::vector<std::uint64_t>{2, 0}, 1,
                         buf.data(), buf.data() + 32),
                  std::invalid_argument);
  CHECK_THROWS_AS(regrid(Selection({{0, 4, 1, false}}), grid, 1, buf.data(), buf.data() + 32), std::invalid_argument);
  const std::uint64_t outside[2] = {4, 0};
  CHECK_THROWS_AS(regrid_block(Selection({{0, 4, 1, false}, {0, 2, 1, false}}), grid, 1, outside),
                  std::invalid_argument);
}
