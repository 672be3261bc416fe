#include "layouts/mloc_select.h"

#include <bit>
#include <cstring>
#include <stdexcept>

#include "layouts/mloc_codec.h"

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

namespace {

template <class Word, bool kPow2>
void scatter_words(std::span<const std::uint32_t> positions, const MlocElementReader& element,
                   const MlocSelectionTargets& targets, std::byte* out) {
  // Locals, not the reader's members: a store through std::byte* may alias them.
  const std::array<const std::byte*, 8> src = element.sources();
  const std::array<std::uint32_t, 8> shift = element.shifts();
  const std::uint32_t kept = element.kept();
  const std::uint32_t* pos = positions.data();
  const std::size_t n = positions.size();
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t t = kPow2 ? targets.target(pos[i]) : targets.target_divided(pos[i]);
    if (t >= MlocSelectionTargets::kNowhere) continue;
    std::uint64_t v = 0;
    for (std::uint32_t j = 0; j < kept; ++j) v |= std::uint64_t(src[j][i]) << shift[j];
    const Word w = Word(v);
    std::memcpy(out + t * sizeof(Word), &w, sizeof w);
  }
}

template <class Word>
void scatter_words(std::span<const std::uint32_t> positions, const MlocElementReader& element,
                   const MlocSelectionTargets& targets, std::byte* out) {
  if (targets.power_of_two())
    scatter_words<Word, true>(positions, element, targets, out);
  else
    scatter_words<Word, false>(positions, element, targets, out);
}

}  // namespace

void mloc_scatter_selected(const MlocGrid& grid, std::span<const std::uint32_t> positions, std::uint32_t groups,
                           const std::byte* const* planes, const MlocSelectionTargets& targets, std::byte* out) {
  const MlocElementReader element(grid, positions.size(), groups, planes);
  switch (grid.itemsize()) {
    case 8: return scatter_words<std::uint64_t>(positions, element, targets, out);
    case 4: return scatter_words<std::uint32_t>(positions, element, targets, out);
    case 2: return scatter_words<std::uint16_t>(positions, element, targets, out);
    case 1: return scatter_words<std::uint8_t>(positions, element, targets, out);
  }
  const std::uint32_t item = grid.itemsize();
  for (std::size_t k = 0; k < positions.size(); ++k) {
    const std::uint64_t t = targets.target_divided(positions[k]);
    if (t < MlocSelectionTargets::kNowhere) element.write(k, out + t * item);
  }
}

}  // namespace mmfs::layouts
