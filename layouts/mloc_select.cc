#include "layouts/mloc_select.h"

#include <bit>
#include <stdexcept>

namespace mmfs::layouts {

MlocSelectionTargets::MlocSelectionTargets(const MlocGrid& grid, const Selection& selection)
    : grid_(grid), sel_(selection) {
  const std::size_t n = grid.dims();
  if (selection.dims().size() != n) throw std::invalid_argument("MlocSelectionTargets: the selection's rank differs");
  stride_.assign(n, 1);
  for (std::size_t d = n - 1; d-- > 0;) stride_[d] = stride_[d + 1] * selection.dims()[d + 1].count();
  last_size_ = grid.chunk()[n - 1];
  pow2_ = std::has_single_bit(last_size_);
  if (pow2_) {
    shift_ = std::uint32_t(std::countr_zero(last_size_));
    mask_ = last_size_ - 1;
  }
  std::uint64_t lines = 1;
  for (std::size_t d = 0; d + 1 < n; ++d) lines *= grid.chunk()[d];
  line_.resize(lines);
  per_dim_.resize(n);
}

void MlocSelectionTargets::fill_dimension(std::size_t d, std::uint64_t lo, std::vector<std::uint64_t>* out) const {
  const DimRange& r = sel_.dims()[d];
  const std::uint64_t side = grid_.chunk()[d], extent = grid_.shape()[d];
  out->assign(side, kNowhere);
  for (std::uint64_t x = 0; x < side; ++x) {
    const std::uint64_t g = lo + x;
    if (g >= extent || g < r.start || g >= r.stop || (g - r.start) % r.step != 0) continue;
    (*out)[x] = (g - r.start) / r.step * stride_[d];
  }
}

bool MlocSelectionTargets::place(std::uint64_t rank) {
  const std::size_t n = grid_.dims();
  const auto c = grid_.coords_of(rank);
  for (std::size_t d = 0; d < n; ++d) {
    fill_dimension(d, c[d] * grid_.chunk()[d], &per_dim_[d]);
    bool any = false;
    for (std::uint64_t v : per_dim_[d]) any |= v != kNowhere;
    if (!any) return false;
  }
  last_ = per_dim_[n - 1];
  // The lines in C order of the brick: an odometer over dimensions [0, n-1).
  std::vector<std::uint64_t> x(n, 0);
  for (std::uint64_t line = 0; line < line_.size(); ++line) {
    std::uint64_t t = 0;
    for (std::size_t d = 0; d + 1 < n; ++d) {
      const std::uint64_t part = per_dim_[d][x[d]];
      if (part == kNowhere) {
        t = kNowhere;
        break;
      }
      t += part;
    }
    line_[line] = t;
    for (std::size_t d = n - 1; d-- > 0;) {
      if (++x[d] < grid_.chunk()[d]) break;
      x[d] = 0;
    }
  }
  return true;
}

void mloc_scatter_selected(const MlocGrid& grid, std::span<const std::uint32_t> positions, std::uint32_t groups,
                           const std::byte* const* planes, const MlocSelectionTargets& targets, std::byte* out) {
  const MlocElementReader element(grid, positions.size(), groups, planes);
  const std::uint32_t* pos = positions.data();
  if (targets.power_of_two())
    mloc_place_elements(element, positions.size(), [&targets, pos](std::size_t k) { return targets.target(pos[k]); },
                        out);
  else
    mloc_place_elements(element, positions.size(),
                        [&targets, pos](std::size_t k) { return targets.target_divided(pos[k]); }, out);
}

}  // namespace mmfs::layouts
