// Decoding an mloc chunk straight into a selection's result (layouts/mloc.h,
// layouts/mloc_codec.h). Pure.
//
// A chunk's elements come out of its units bin by bin, in position order, so
// decoding one means a write per element at a brick position scattered over
// the whole brick. A view that needs only part of the chunk, and no other
// read will need the rest, is better served by writing the selected
// elements to their places in the result directly: no brick to fault in and
// fill, no copy of the selected part out of it, and no write at all for the
// elements outside the selection.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "layouts/mloc.h"
#include "layouts/mloc_codec.h"
#include "layouts/selection.h"

namespace mmfs::layouts {

// Where the brick positions of one chunk go in a selection's C-order result,
// in elements. A position is a brick line (every dimension but the last)
// and an offset along the last dimension; each has its part of the target,
// or kNowhere when the selection skips it.
class MlocSelectionTargets {
 public:
  MlocSelectionTargets(const MlocGrid& grid, const Selection& selection);
  // Points the tables at chunk `rank`; false when the selection holds none
  // of its elements.
  bool place(std::uint64_t rank);
  static constexpr std::uint64_t kNowhere = kMlocSkip;
  // The result index of brick position p, or a value >= kNowhere: by shift
  // and mask when power_of_two() (the chunk's last side is one), else by
  // division. Callers choose once per unit, outside their loops.
  std::uint64_t target(std::uint32_t p) const { return line_[p >> shift_] + last_[p & mask_]; }
  std::uint64_t target_divided(std::uint32_t p) const { return line_[p / last_size_] + last_[p % last_size_]; }
  bool power_of_two() const { return pow2_; }

 private:
  // Per dimension: the result offset of each brick coordinate of the chunk
  // placed last, or kNowhere.
  void fill_dimension(std::size_t d, std::uint64_t lo, std::vector<std::uint64_t>* out) const;

  const MlocGrid& grid_;
  const Selection& sel_;
  std::vector<std::uint64_t> stride_;  // of the result, per dimension (fixed ones count 1)
  std::vector<std::uint64_t> line_, last_;
  std::uint64_t last_size_ = 1, mask_ = 0;
  std::uint32_t shift_ = 0;
  bool pow2_ = false;
  std::vector<std::vector<std::uint64_t>> per_dim_;  // scratch
};

// As mloc_scatter, but element k goes to result index targets.target(positions[k])
// of `out` (itemsize bytes each), and elements the selection skips nowhere.
void mloc_scatter_selected(const MlocGrid& grid, std::span<const std::uint32_t> positions, std::uint32_t groups,
                           const std::byte* const* planes, const MlocSelectionTargets& targets, std::byte* out);

}  // namespace mmfs::layouts
