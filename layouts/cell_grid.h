// An array cut into cells: the unit a layout places (docs/reference.md §1, §4).
//
// Dimensions are numbered in C order (the last varies fastest). `order` is
// the dimension priority of docs/reference.md §4, most favoured first: order[0] is the
// primary (streaming) dimension, the paper's Dim_0.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "layouts/selection.h"
#include "util/align.h"

namespace mmfs::layouts {

class CellGrid {
 public:
  // Throws std::invalid_argument for empty/zero shapes, a cell of the wrong
  // rank or with a zero extent, an order that is not a permutation, or sizes
  // that overflow.
  CellGrid(std::vector<std::uint64_t> shape, std::uint32_t itemsize, std::vector<std::uint64_t> cell,
           std::vector<std::uint32_t> order);

  // The default cell (see docs/layouts.md): a brick of whole elements that
  // fills one sector, its sides powers of two, grown one dimension at a time in
  // priority order while the dimension still has room. It serves slices
  // along every dimension with the same read amplification.
  static std::vector<std::uint64_t> default_cell(std::span<const std::uint64_t> shape, std::uint32_t itemsize,
                                                 std::uint32_t sector_size, std::span<const std::uint32_t> order);
  // A cell shaped like the array (the default on flash): sides
  // powers of two, grown by doubling the side whose dimension has the most
  // room per cell (shape[d] / cell[d]; ties in priority order) until the cell
  // fills `cell_bytes`. A slice along d then reads cell[d] times its bytes and
  // cell[d] is proportional to shape[d], so every slice of the array reads
  // about as many bytes as the others, and every beam as many cells.
  static std::vector<std::uint64_t> proportional_cell(std::span<const std::uint64_t> shape, std::uint32_t itemsize,
                                                      std::uint32_t cell_bytes, std::span<const std::uint32_t> order);
  // How many bytes the default cell fills on a device of `sector_size`: a 4 KiB
  // unit (or one sector, when larger). Real devices and the page cache move 4
  // KiB at the cost of 512 bytes, so a slice needs a quarter of the requests
  // one-sector cells of a modeled disk would. The daemon and the modeled
  // benchmarks both ask this.
  static std::uint32_t default_cell_bytes(std::uint32_t sector_size) { return sector_size > 4096 ? sector_size : 4096; }
  // The default order: n-1, ..., 1, 0 (the C-order fastest dimension streams).
  static std::vector<std::uint32_t> default_order(std::size_t dims);

  std::size_t dims() const { return shape_.size(); }
  const std::vector<std::uint64_t>& shape() const { return shape_; }
  const std::vector<std::uint64_t>& cell() const { return cell_; }
  const std::vector<std::uint64_t>& grid() const { return grid_; }  // cells per dimension
  const std::vector<std::uint32_t>& order() const { return order_; }
  std::uint32_t itemsize() const { return itemsize_; }
  std::uint64_t cells() const { return cells_; }
  std::uint64_t elements() const { return elements_; }
  std::uint64_t cell_elements() const { return cell_elements_; }
  std::uint64_t cell_bytes() const { return cell_elements_ * itemsize_; }
  std::uint32_t sectors_per_cell(std::uint32_t sector_size) const {
    return std::uint32_t(util::div_up(cell_bytes(), sector_size));
  }
  // C-order linear index of a cell in the grid.
  std::uint64_t linear(std::span<const std::uint64_t> cell) const;
  // Its inverse: the grid coordinates of cell `linear` into `out` (dims() long).
  void coords(std::uint64_t linear, std::span<std::uint64_t> out) const;
  // The elements of the cells from `lo` to `hi` (grid coordinates, both
  // included), the last ones clipped at the array's edge.
  std::vector<DimRange> element_box(std::span<const std::uint64_t> lo, std::span<const std::uint64_t> hi) const;
  // The elements of cell `linear`.
  std::vector<DimRange> element_box(std::uint64_t linear) const;

 private:
  std::vector<std::uint64_t> shape_, cell_, grid_;
  std::vector<std::uint32_t> order_;
  std::uint32_t itemsize_;
  std::uint64_t cells_ = 1, elements_ = 1, cell_elements_ = 1;
};

std::string join(std::span<const std::uint64_t> v);

}  // namespace mmfs::layouts
