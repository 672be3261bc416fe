#include "layouts/cell_blocks.h"

#include <algorithm>
#include <bit>

#include "util/align.h"

namespace mmfs::layouts {

CellBlocks::CellBlocks(const CellGrid& grid, const Selection& selection, std::uint64_t block_bytes,
                       std::uint32_t per_cell)
    : grid_(grid), sel_(selection), block_bytes_(std::max<std::uint64_t>(block_bytes, 1)),
      per_cell_(std::max<std::uint32_t>(per_cell, 1)), key_(2 * grid.dims()) {
  all_.words.assign((per_cell_ + 63) / 64, 0);
  for (std::uint32_t b = 0; b < per_cell_; ++b) all_.set(b);
}

const BlockMask& CellBlocks::of(std::span<const std::uint64_t> cc) {
  const std::size_t n = grid_.dims();
  const auto& C = grid_.cell();
  const auto& dims = sel_.dims();
  bool empty = false, whole = true;
  for (std::size_t d = 0; d < n; ++d) {
    const DimRange& R = dims[d];
    const std::uint64_t lo = cc[d] * C[d], hi = std::min(lo + C[d], grid_.shape()[d]);
    std::uint64_t f = std::max(lo, R.start);
    const std::uint64_t stop = std::min(hi, R.stop);
    std::uint64_t count;
    if (R.step == 1) {  // most views: no division per cell
      count = f < stop ? stop - f : 0;
    } else {
      if ((f - R.start) % R.step) f += R.step - (f - R.start) % R.step;
      count = f < stop ? util::div_up(stop - f, R.step) : 0;
    }
    key_[2 * d] = f - lo;
    key_[2 * d + 1] = count;
    empty = empty || count == 0;
    // Every element of the cell along d (a cell cut by the array's edge
    // holds padding there, whose blocks a lookup decides).
    whole = whole && f == lo && stop == lo + C[d] && (R.step == 1 || C[d] == 1);
  }
  if (whole) return all_;
  if (empty) std::fill(key_.begin(), key_.end(), 0);
  auto it = masks_.find(key_);
  if (it != masks_.end()) return it->second;
  std::vector<std::uint64_t> first(n), count(n);
  for (std::size_t d = 0; d < n; ++d) {
    first[d] = key_[2 * d];
    count[d] = key_[2 * d + 1];
  }
  return masks_.emplace(key_, compute(first, count)).first->second;
}

BlockMask CellBlocks::compute(std::span<const std::uint64_t> first, std::span<const std::uint64_t> count) const {
  BlockMask m;
  m.words.assign((per_cell_ + 63) / 64, 0);
  const std::size_t n = grid_.dims();
  for (std::size_t d = 0; d < n; ++d)
    if (count[d] == 0) return m;
  if (per_cell_ == 1) {
    m.set(0);
    return m;
  }
  const auto& C = grid_.cell();
  const auto& dims = sel_.dims();
  const std::uint64_t I = grid_.itemsize();
  std::vector<std::uint64_t> stride(n, 1);  // elements, within the brick
  for (std::size_t d = n - 1; d-- > 0;) stride[d] = stride[d + 1] * C[d + 1];
  const std::size_t L = n - 1;
  const std::uint64_t step_l = dims[L].step;
  // Rows come in ascending byte order (C order, positive steps), so a row
  // ending before `marked_to` (the end of the last block marked) adds
  // nothing, and blocks are found by division only when one is marked: a
  // cell's rows are many more than its blocks.
  const bool shift = (block_bytes_ & (block_bytes_ - 1)) == 0;
  const unsigned log2_block = shift ? unsigned(std::countr_zero(block_bytes_)) : 0;
  auto block_of = [&](std::uint64_t byte) { return shift ? byte >> log2_block : byte / block_bytes_; };
  std::uint64_t marked_to = 0;
  auto mark = [&](std::uint64_t from_byte, std::uint64_t last_byte) {
    if (last_byte < marked_to) return;
    const std::uint64_t last = std::min<std::uint64_t>(block_of(last_byte), per_cell_ - 1);
    for (std::uint64_t b = block_of(std::max(from_byte, marked_to)); b <= last; ++b) m.set(std::uint32_t(b));
    marked_to = (last + 1) * block_bytes_;
  };
  // Every row (a run along the last dimension) of the selection in the cell,
  // by an odometer over the others whose row offset (elements) follows it;
  // done as soon as every block is marked.
  std::vector<std::uint64_t> i(n, 0), advance(n, 0), rewind(n, 0);
  std::uint64_t row = 0;
  for (std::size_t d = 0; d < L; ++d) {
    row += first[d] * stride[d];
    advance[d] = dims[d].step * stride[d];
    rewind[d] = (count[d] - 1) * advance[d];
  }
  const std::uint64_t span = (count[L] - 1) * step_l * I + I - 1;  // a row's first byte to its last
  for (;;) {
    const std::uint64_t a = (row + first[L]) * I;
    if (step_l * I <= block_bytes_) {
      mark(a, a + span);  // consecutive elements are closer than a block: no block between them is skipped
    } else if (a + span >= marked_to) {
      for (std::uint64_t k = 0; k < count[L]; ++k) mark(a + k * step_l * I, a + k * step_l * I + I - 1);
    }
    if (m.count == per_cell_) return m;
    std::size_t d = L;
    for (;;) {
      if (d == 0) return m;
      --d;
      if (++i[d] < count[d]) {
        row += advance[d];
        break;
      }
      i[d] = 0;
      row -= rewind[d];
    }
  }
}

}  // namespace mmfs::layouts
