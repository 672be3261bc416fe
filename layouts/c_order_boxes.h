// Runs of C-order elements as boxes, and the cells of a grid a box touches:
// what a write of bytes [offset, offset + length) of an array reaches in
// another placement's grid (an array's copies, fs/array/array_file_copies.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "layouts/cell_grid.h"
#include "layouts/selection.h"

namespace mmfs::layouts {

// Calls `emit` with boxes (one step-1 DimRange per dimension, none fixed)
// that together hold exactly the C-order elements [first, last) of an
// array of `shape`, disjoint, in C order: at most 2 per dimension.
void c_order_boxes(std::span<const std::uint64_t> shape, std::uint64_t first, std::uint64_t last,
                   const std::function<void(const std::vector<DimRange>&)>& emit);

// Calls `emit(first, count)` for the runs of consecutive C-order cell
// numbers of `grid` whose cells `box` touches (one run per row of cells
// along the last dimension).
void touched_cell_runs(const CellGrid& grid, std::span<const DimRange> box,
                       const std::function<void(std::uint64_t, std::uint64_t)>& emit);

}  // namespace mmfs::layouts
