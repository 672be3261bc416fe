#include "layouts/selection_chunks.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "util/align.h"

namespace mmfs::layouts {

SelectionChunks::SelectionChunks(const Selection& selection, const CellGrid& grid, std::uint64_t budget)
    : sel_(selection) {
  const auto& dims = sel_.dims();
  for (std::size_t d = 0; d < dims.size(); ++d)
    if (!dims[d].fixed) result_dims_.push_back(d);
  const std::uint64_t I = grid.itemsize();
  if (result_dims_.empty()) {
    scalar_ = true;
    inner_ = I;
    return;
  }
  // Bytes of one index along each result dimension.
  std::vector<std::uint64_t> in(result_dims_.size());
  std::uint64_t s = I;
  for (std::size_t j = result_dims_.size(); j-- > 0;) {
    in[j] = s;
    s *= dims[result_dims_[j]].count();
  }
  k_ = 0;
  while (in[k_] > budget && k_ + 1 < result_dims_.size()) ++k_;
  inner_ = in[k_];
  const DimRange& r = dims[result_dims_[k_]];
  const std::uint64_t n = r.count();
  rows_ = std::max<std::uint64_t>(1, budget / inner_);
  // Whole cells along that dimension, so neighbouring chunks do not read the same cells.
  const std::uint64_t per_cell = util::div_up(grid.cell()[result_dims_[k_]], r.step);
  if (rows_ > per_cell) rows_ -= rows_ % per_cell;
  rows_ = std::min(rows_, n);
  chunks_k_ = util::div_up(n, rows_);
  std::uint64_t prefix = 1;
  for (std::size_t j = 0; j < k_; ++j) prefix *= dims[result_dims_[j]].count();
  chunks_ = prefix * chunks_k_;
  row_span_ = n * inner_;
}

std::uint64_t SelectionChunks::offset(std::uint64_t c) const {
  if (scalar_) return 0;
  return (c / chunks_k_) * row_span_ + (c % chunks_k_) * rows_ * inner_;
}

std::uint64_t SelectionChunks::index_at(std::uint64_t byte) const {
  if (scalar_) return 0;
  return (byte / row_span_) * chunks_k_ + (byte % row_span_) / (rows_ * inner_);
}

std::uint64_t choose_chunk_budget(std::uint64_t base, std::uint64_t max_scale, std::uint64_t total, double gain,
                                  const std::function<double(std::uint64_t)>& cost_per_byte) {
  if (total <= base) return base;
  std::uint64_t best = base;
  double best_cost = cost_per_byte(base);
  // Up to the first size that holds the whole result.
  for (std::uint64_t b = 2 * base; b <= max_scale * base && b / 2 < total; b *= 2) {
    const double c = cost_per_byte(b);
    if (c < gain * best_cost) {
      best = b;
      best_cost = c;
    }
  }
  return best;
}

Selection SelectionChunks::selection(std::uint64_t c) const {
  // Past the end the index arithmetic below would wrap into the first chunks.
  if (c >= count()) throw std::out_of_range("chunk " + std::to_string(c) + " of " + std::to_string(count()));
  std::vector<DimRange> dims = sel_.dims();
  if (scalar_) return Selection(dims);
  std::uint64_t p = c / chunks_k_, q = c % chunks_k_;
  for (std::size_t j = k_; j-- > 0;) {
    DimRange& r = dims[result_dims_[j]];
    const std::uint64_t n = r.count();
    const std::uint64_t x = r.start + (p % n) * r.step;
    p /= n;
    r = DimRange{x, x + 1, 1, true};
  }
  DimRange& r = dims[result_dims_[k_]];
  const std::uint64_t start = r.start + q * rows_ * r.step;
  const std::uint64_t stop = std::min(r.stop, start + rows_ * r.step);
  r = DimRange{start, stop, r.step, false};
  return Selection(dims);
}

}  // namespace mmfs::layouts
