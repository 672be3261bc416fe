#include "layouts/quadrangle.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "util/align.h"

namespace mmfs::layouts {

QuadrangleLayout::QuadrangleLayout(const AtroposVolume& volume, CellGrid grid, std::vector<std::uint64_t> depth_cube)
    : volume_(volume), grid_(std::move(grid)) {
  spc_ = grid_.sectors_per_cell(volume_.member().sector_size());
  if (spc_ > volume_.block_sectors())
    throw std::invalid_argument(fmt::format(
        "quadrangle layout: a cell of {} sectors does not fit the volume's {}-sector block (smaller cells, or a "
        "volume with a larger block)",
        spc_, volume_.block_sectors()));
  per_block_ = volume_.block_sectors() / spc_;

  if (depth_cube.empty()) depth_cube = choose_depth_cube();
  check_depth_cube(depth_cube);
  cube_ = std::move(depth_cube);
  cube_[primary()] = volume_.row_blocks() * per_block_;

  const std::size_t n = grid_.dims();
  const auto& order = grid_.order();
  cube_stride_.assign(n, 0);
  row_stride_.assign(n, 0);
  std::uint64_t cube_stride = 1, row_stride = 1;
  for (std::size_t j = 0; j < n; ++j) {
    const std::uint32_t dim = order[j];
    cube_stride_[dim] = cube_stride;
    cube_stride *= (grid_.grid()[dim] + cube_[dim] - 1) / cube_[dim];
    if (j == 0) continue;  // the primary runs along the row, not the depth
    row_stride_[dim] = row_stride;
    row_stride *= cube_[dim];
  }
  cubes_ = cube_stride;
  rows_ = std::uint32_t(row_stride);
  cubes_per_stripe_ = volume_.depth() / rows_;
}

std::vector<std::uint64_t> QuadrangleLayout::choose_depth_cube() const {
  std::vector<std::uint64_t> k(grid_.dims(), 1);
  std::uint64_t left = volume_.depth();
  for (std::size_t j = 1; j < grid_.dims(); ++j) {
    const std::uint32_t dim = grid_.order()[j];
    k[dim] = std::max<std::uint64_t>(1, std::min(grid_.grid()[dim], left));
    left /= k[dim];
  }
  return k;
}

void QuadrangleLayout::check_depth_cube(const std::vector<std::uint64_t>& k) const {
  if (k.size() != grid_.dims())
    throw std::invalid_argument(
        fmt::format("quadrangle layout: depth cube has {} entries, the array {} dimensions", k.size(), grid_.dims()));
  if (k[primary()] != 1)
    throw std::invalid_argument(fmt::format(
        "quadrangle layout: the primary dimension {} runs along the rows; its depth entry must be 1", primary()));
  std::uint64_t rows = 1;
  for (std::size_t dim = 0; dim < k.size(); ++dim) {
    if (k[dim] == 0 || k[dim] > grid_.grid()[dim])
      throw std::invalid_argument(fmt::format("quadrangle layout: depth entry {} of dimension {} must be in 1..{}",
                                              k[dim], dim, grid_.grid()[dim]));
    rows *= k[dim];
    if (rows > volume_.depth())
      throw std::invalid_argument(fmt::format("quadrangle layout: depth cube {} needs more than the {} rows of a "
                                              "quadrangle",
                                              join(k), volume_.depth()));
  }
}

StripeRequest QuadrangleLayout::space() const {
  return {util::div_up(cubes_, cubes_per_stripe_), volume_.stripe_blocks()};
}

void QuadrangleLayout::place(std::vector<VlbnRange> extents) {
  const std::uint64_t stripe = volume_.stripe_blocks();
  std::vector<std::uint64_t> before;
  std::uint64_t total = 0;
  for (const VlbnRange& e : extents) {
    if (e.count == 0 || e.first % stripe != 0 || e.count % stripe != 0 || e.first > volume_.blocks() ||
        e.count > volume_.blocks() - e.first)
      throw std::invalid_argument(
          fmt::format("quadrangle layout: extent {}+{} is not whole stripes of {} VLBNs inside the volume's {}",
                      e.first, e.count, stripe, volume_.blocks()));
    before.push_back(total);
    total += e.count / stripe;
  }
  std::vector<VlbnRange> sorted = extents;
  std::sort(sorted.begin(), sorted.end(), [](const VlbnRange& a, const VlbnRange& b) { return a.first < b.first; });
  for (std::size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i].first < sorted[i - 1].first + sorted[i - 1].count)
      throw std::invalid_argument(fmt::format("quadrangle layout: extents {}+{} and {}+{} overlap", sorted[i - 1].first,
                                              sorted[i - 1].count, sorted[i].first, sorted[i].count));
  if (total != space().stripes)
    throw std::invalid_argument(
        fmt::format("quadrangle layout: needs {} stripes, was given {}", space().stripes, total));
  extents_ = std::move(extents);
  stripes_before_ = std::move(before);
}

Vlbn QuadrangleLayout::stripe_first_vlbn(std::uint64_t stripe) const {
  // The last extent whose first stripe is at or before `stripe`.
  auto it = std::upper_bound(stripes_before_.begin(), stripes_before_.end(), stripe);
  const std::size_t i = std::size_t(it - stripes_before_.begin()) - 1;
  return extents_[i].first + (stripe - stripes_before_[i]) * volume_.stripe_blocks();
}

void QuadrangleLayout::check_cell(std::span<const std::uint64_t> cell) const {
  if (extents_.empty()) throw std::invalid_argument("quadrangle layout: cell asked before place()");
  bool inside = cell.size() == grid_.dims();
  for (std::size_t dim = 0; inside && dim < cell.size(); ++dim) inside = cell[dim] < grid_.grid()[dim];
  if (!inside)
    throw std::invalid_argument(
        fmt::format("quadrangle layout: cell {} is outside the grid {}", join(cell), join(grid_.grid())));
}

std::size_t QuadrangleLayout::cell_runs(std::span<const std::uint64_t> cell, VolumeRun out[2]) const {
  check_cell(cell);
  std::uint64_t cube = 0, row = 0;
  for (std::size_t dim = 0; dim < grid_.dims(); ++dim) {
    cube += cell[dim] / cube_[dim] * cube_stride_[dim];
    row += cell[dim] % cube_[dim] * row_stride_[dim];  // row_stride_ of the primary is 0
  }
  const std::uint64_t along_row = cell[primary()] % cube_[primary()];
  const std::uint64_t row_in_stripe = cube % cubes_per_stripe_ * rows_ + row;
  // Device rotation (see quadrangle.h): cube u of the other dimensions starts its rows on device u mod p.
  // Cubes are numbered primary fastest: the cube's index over the other dimensions is cube / (cubes along the primary).
  const std::uint64_t along_primary = (grid_.grid()[primary()] + cube_[primary()] - 1) / cube_[primary()];
  const std::uint64_t other_cubes = cube / along_primary;
  const std::uint64_t shift = other_cubes % volume_.devices() * volume_.width();
  const std::uint64_t block = (along_row / per_block_ + shift) % volume_.row_blocks();
  const Vlbn vlbn = stripe_first_vlbn(cube / cubes_per_stripe_) + row_in_stripe * volume_.row_blocks() + block;
  out[0] = {vlbn * volume_.block_sectors() + along_row % per_block_ * spc_, spc_};
  return 1;
}

Vlbn QuadrangleLayout::cell_vlbn(std::span<const std::uint64_t> cell) const {
  VolumeRun r[2];
  cell_runs(cell, r);
  return r[0].sector / volume_.block_sectors();
}

std::uint64_t QuadrangleLayout::batch_key(std::span<const std::uint64_t> cell) const {
  return volume_.coord(cell_vlbn(cell)).quadrangle;
}

double QuadrangleLayout::space_amplification() const {
  const double device_sectors = double(space().stripes) * volume_.devices() * volume_.depth() *
                                volume_.stripe_unit_sectors();
  return device_sectors / (double(grid_.cells()) * spc_);
}

nlohmann::json QuadrangleLayout::describe() const {
  return {{"layout", name()},
          {"cell", grid_.cell()},
          {"order", grid_.order()},
          {"sectors_per_cell", spc_},
          {"devices", volume_.devices()},
          {"zone", volume_.zone()},
          {"block_sectors", volume_.block_sectors()},
          {"width", volume_.width()},
          {"depth", volume_.depth()},
          {"residual_sectors", volume_.residual_sectors()},
          {"cells_per_block", per_block_},
          {"cube", cube_},
          {"cubes", cubes_},
          {"cubes_per_stripe", cubes_per_stripe_},
          {"stripes", space().stripes},
          {"extents", extents_.size()},
          {"space_amplification", space_amplification()}};
}

}  // namespace mmfs::layouts
