// A box's C-order bytes rearranged block by block along a regular grid, so
// that each grid cell's part of the box is one contiguous run.
//
// Why: a Zarr reader's chunk thinner than the array's cells (1024x1024x1
// over 32x32x8 cells) is read from the box of whole cells around it
// (fs/array/view_types.h, DataView::within), and its neighbours take their
// bytes from the same box. In the box's C order such a chunk is one element
// out of every eight: picking it out costs a pass over the whole box per
// chunk, eight passes for the eight chunks of a layer. Rearranged once, in
// one pass, each chunk is a single copy.
//
// The grid has cells of `grid[d]` elements along dimension d, aligned at 0
// (a Zarr chunk grid). A box's blocks are its intersections with the grid's
// cells, in C order of the cells; each block holds its elements in C order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "layouts/selection.h"

namespace mmfs::layouts {

// Where a block lies in a rearranged box: bytes [offset, offset + bytes).
struct RegridBlock {
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
};

// Rearranges `src`, the C-order bytes of `box` (step 1, no fixed
// dimensions, elements of `itemsize` bytes), into `dst` block by block along
// `grid` (one entry per dimension, each > 0). `dst` and `src` do not overlap
// and both hold box.elements() * itemsize bytes. Reads `src` once, in order.
void regrid(const Selection& box, std::span<const std::uint64_t> grid, std::uint32_t itemsize, const std::byte* src,
            std::byte* dst);

// True when rearranging `box` along `grid` changes nothing: the box lies in
// one cell of the grid along every dimension after the first, so its blocks
// are already runs of its C order.
bool regrid_keeps_order(const Selection& box, std::span<const std::uint64_t> grid);

// The block of `box`, rearranged along `grid`, that lies in the grid cell
// holding element `at` (array coordinates; inside `box`): its elements are
// the cell's elements in `box`, in C order.
RegridBlock regrid_block(const Selection& box, std::span<const std::uint64_t> grid, std::uint32_t itemsize,
                         std::span<const std::uint64_t> at);

}  // namespace mmfs::layouts
