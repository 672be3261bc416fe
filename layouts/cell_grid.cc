#include "layouts/cell_grid.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <stdexcept>

namespace mmfs::layouts {
namespace {

std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b, const char* what) {
  std::uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) throw std::invalid_argument(fmt::format("{} overflows 64 bits", what));
  return r;
}

}  // namespace

std::string join(std::span<const std::uint64_t> v) {
  return fmt::format("{}", fmt::join(v, ","));
}

std::vector<std::uint32_t> CellGrid::default_order(std::size_t dims) {
  std::vector<std::uint32_t> o(dims);
  for (std::size_t i = 0; i < dims; ++i) o[i] = std::uint32_t(dims - 1 - i);
  return o;
}

std::vector<std::uint64_t> CellGrid::default_cell(std::span<const std::uint64_t> shape, std::uint32_t itemsize,
                                                  std::uint32_t sector_size, std::span<const std::uint32_t> order) {
  std::vector<std::uint64_t> cell(shape.size(), 1);
  std::uint64_t budget = std::max<std::uint64_t>(1, sector_size / std::max<std::uint32_t>(1, itemsize));
  std::uint64_t used = 1;
  // Double one side at a time, cycling through the dimensions in priority
  // order, skipping dimensions the cell already spans: a balanced brick.
  bool grew = true;
  while (grew) {
    grew = false;
    for (std::uint32_t d : order) {
      if (cell[d] >= shape[d]) continue;
      std::uint64_t side = std::min(cell[d] * 2, shape[d]);
      std::uint64_t next = used / cell[d] * side;
      if (next > budget) continue;
      used = next;
      cell[d] = side;
      grew = true;
    }
  }
  return cell;
}

std::vector<std::uint64_t> CellGrid::proportional_cell(std::span<const std::uint64_t> shape, std::uint32_t itemsize,
                                                       std::uint32_t cell_bytes, std::span<const std::uint32_t> order) {
  std::vector<std::uint64_t> cell(shape.size(), 1);
  const std::uint64_t budget = std::max<std::uint64_t>(1, cell_bytes / std::max<std::uint32_t>(1, itemsize));
  std::uint64_t used = 1;
  for (;;) {
    // The dimension with the most room per cell side that can still double.
    std::size_t best = shape.size();
    for (std::uint32_t d : order) {
      if (cell[d] * 2 > shape[d] || used * 2 > budget) continue;
      // shape[d] / cell[d] > shape[b] / cell[b], without division.
      if (best == shape.size() || shape[d] * cell[best] > shape[best] * cell[d]) best = d;
    }
    if (best == shape.size()) break;
    cell[best] *= 2;
    used *= 2;
  }
  return cell;
}

CellGrid::CellGrid(std::vector<std::uint64_t> shape, std::uint32_t itemsize, std::vector<std::uint64_t> cell,
                   std::vector<std::uint32_t> order)
    : shape_(std::move(shape)), cell_(std::move(cell)), order_(std::move(order)), itemsize_(itemsize) {
  if (shape_.empty() || shape_.size() > 16) throw std::invalid_argument("shape must have 1 to 16 dimensions");
  if (itemsize_ == 0) throw std::invalid_argument("itemsize must be positive");
  if (cell_.size() != shape_.size())
    throw std::invalid_argument(fmt::format("cell has {} dimensions, shape has {}", cell_.size(), shape_.size()));
  if (order_.size() != shape_.size())
    throw std::invalid_argument(fmt::format("order has {} dimensions, shape has {}", order_.size(), shape_.size()));
  std::vector<bool> seen(shape_.size(), false);
  for (std::uint32_t d : order_) {
    if (d >= shape_.size() || seen[d])
      throw std::invalid_argument("order must be a permutation of 0.." + std::to_string(shape_.size() - 1));
    seen[d] = true;
  }
  grid_.resize(shape_.size());
  for (std::size_t d = 0; d < shape_.size(); ++d) {
    if (shape_[d] == 0) throw std::invalid_argument("shape extents must be positive");
    if (cell_[d] == 0) throw std::invalid_argument("cell extents must be positive");
    grid_[d] = (shape_[d] + cell_[d] - 1) / cell_[d];
    cells_ = checked_mul(cells_, grid_[d], "the number of cells");
    elements_ = checked_mul(elements_, shape_[d], "the number of elements");
    cell_elements_ = checked_mul(cell_elements_, cell_[d], "the cell size");
  }
  checked_mul(elements_, itemsize_, "the array's byte size");
  checked_mul(cell_elements_, itemsize_, "the cell's byte size");
}

std::uint64_t CellGrid::linear(std::span<const std::uint64_t> cell) const {
  std::uint64_t r = 0;
  for (std::size_t d = 0; d < grid_.size(); ++d) r = r * grid_[d] + cell[d];
  return r;
}

void CellGrid::coords(std::uint64_t linear, std::span<std::uint64_t> out) const {
  for (std::size_t d = grid_.size(); d-- > 0;) {
    out[d] = linear % grid_[d];
    linear /= grid_[d];
  }
}

std::vector<DimRange> CellGrid::element_box(std::span<const std::uint64_t> lo, std::span<const std::uint64_t> hi) const {
  std::vector<DimRange> box(dims());
  for (std::size_t d = 0; d < dims(); ++d)
    box[d] = DimRange{lo[d] * cell_[d], std::min(shape_[d], (hi[d] + 1) * cell_[d]), 1, false};
  return box;
}

std::vector<DimRange> CellGrid::element_box(std::uint64_t linear) const {
  std::vector<std::uint64_t> at(dims());
  coords(linear, at);
  return element_box(at, at);
}

}  // namespace mmfs::layouts
