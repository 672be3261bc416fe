#include "layouts/linear_layouts.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace mmfs::layouts {
namespace {

std::vector<std::uint64_t> in_priority_order(const CellGrid& g) {
  std::vector<std::uint64_t> e;
  for (std::uint32_t d : g.order()) e.push_back(g.grid()[d]);
  return e;
}

}  // namespace

LinearLayout::LinearLayout(const geom::Geometry& geometry, CellGrid grid) : Layout(geometry, std::move(grid)) {}

SpaceRequest LinearLayout::space() const {
  SpaceRequest r;
  r.shape = SpaceShape::Runs;
  r.sectors = grid_.cells() * spc_;
  r.unit_sectors = spc_;  // place() counts whole cells per extent
  return r;
}

void LinearLayout::place(std::vector<Extent> extents) {
  std::vector<std::uint64_t> first(extents.size() + 1, 0);
  for (std::size_t i = 0; i < extents.size(); ++i) first[i + 1] = first[i] + extents[i].sectors / spc_;
  if (first.back() < grid_.cells())
    throw std::invalid_argument(fmt::format("{} layout: extents hold {} cells of {} sectors, the array has {}",
                                            name(), first.back(), spc_, grid_.cells()));
  extents_ = std::move(extents);
  first_slot_ = std::move(first);
}

std::size_t LinearLayout::cell_runs(std::span<const std::uint64_t> cell, Run out[2]) const {
  std::uint64_t r = rank(cell);
  // The extent holding slot r: the last one whose first slot is <= r.
  auto it = std::upper_bound(first_slot_.begin(), first_slot_.end(), r);
  std::size_t e = std::size_t(it - first_slot_.begin()) - 1;
  out[0] = {extents_[e].start + (r - first_slot_[e]) * spc_, spc_};
  return 1;
}

NaiveLayout::NaiveLayout(const geom::Geometry& geometry, CellGrid grid) : LinearLayout(geometry, std::move(grid)) {
  stride_.assign(grid_.dims(), 0);
  std::uint64_t s = 1;
  for (std::uint32_t d : grid_.order()) {
    stride_[d] = s;
    s *= grid_.grid()[d];
  }
}

std::uint64_t NaiveLayout::rank(std::span<const std::uint64_t> cell) const {
  std::uint64_t r = 0;
  for (std::size_t d = 0; d < cell.size(); ++d) r += cell[d] * stride_[d];
  return r;
}

template <typename Curve>
CurveLayout<Curve>::CurveLayout(const geom::Geometry& geometry, CellGrid grid, std::string name)
    : LinearLayout(geometry, std::move(grid)), curve_(in_priority_order(grid_)), name_(std::move(name)) {}

template <typename Curve>
std::uint64_t CurveLayout<Curve>::rank(std::span<const std::uint64_t> cell) const {
  std::uint64_t c[16];
  for (std::size_t i = 0; i < grid_.dims(); ++i) c[i] = cell[grid_.order()[i]];
  return curve_.rank(std::span<const std::uint64_t>(c, grid_.dims()));
}

template class CurveLayout<ZOrder>;
template class CurveLayout<HilbertOrder>;

}  // namespace mmfs::layouts
