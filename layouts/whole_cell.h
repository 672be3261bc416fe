// Whether a selection is exactly one whole cell of a grid: every dimension a
// step-1 range over one cell's full extent (a fixed index where the cell is
// one element thick counts). Its bytes are then the cell's brick, C order,
// so a reader can take the cell's sectors as the result (ArrayState reads
// such a selection straight into the caller's buffer). An edge cell that
// the array's shape clips is not whole: its brick is padded.
#pragma once

#include <cstdint>
#include <vector>

#include "layouts/cell_grid.h"
#include "layouts/selection.h"

namespace mmfs::layouts {

// The cell's grid coordinates into *cell when `selection` is one whole cell of `grid`; false otherwise.
bool whole_cell_of(const CellGrid& grid, const Selection& selection, std::vector<std::uint64_t>* cell);

}  // namespace mmfs::layouts
