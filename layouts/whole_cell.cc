#include "layouts/whole_cell.h"

namespace mmfs::layouts {

bool whole_cell_of(const CellGrid& grid, const Selection& selection, std::vector<std::uint64_t>* cell) {
  const std::vector<DimRange>& dims = selection.dims();
  if (dims.size() != grid.dims()) return false;
  cell->resize(grid.dims());
  for (std::size_t d = 0; d < grid.dims(); ++d) {
    const DimRange& r = dims[d];
    const std::uint64_t c = grid.cell()[d];
    if (r.step != 1 || r.stop < r.start || r.start % c != 0 || r.stop - r.start != c || r.stop > grid.shape()[d])
      return false;
    (*cell)[d] = r.start / c;
  }
  return true;
}

}  // namespace mmfs::layouts
