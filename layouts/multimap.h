// MultiMap (Shao et al., CMU-PDL-05-102, §4): the primary dimension runs along
// a track, every other dimension along sequences of adjacent blocks, so that
// neighbours in every dimension are one settle time apart.
//
// The array is cut into basic cubes K_0 x ... x K_{n-1} (in priority order)
// under Eq. 1-3: K_0 cells fit a track, K_1*...*K_{n-2} <= D, K_{n-1} <= S_{n-1}.
// A basic cube occupies K_1*...*K_{n-1} consecutive tracks of one zone; when
// K_0 is shorter than a track, floor(T / K_0) cubes are packed side by side on
// the same tracks (§4.5). Cubes are linearized in dimension-priority order.
// Inside a cube a cell is placed by MAP (Fig. 11) on Geometry::adjacent.
#pragma once

#include "layouts/layout.h"

namespace mmfs::layouts {

class MultiMapLayout final : public Layout {
 public:
  // `basic_cube` is per C-order dimension, in cells; empty = chosen (see
  // choose_basic_cube). Throws std::invalid_argument, saying which equation is
  // violated, when a given cube breaks Eq. 1-3.
  MultiMapLayout(const geom::Geometry& geometry, CellGrid grid, std::vector<std::uint64_t> basic_cube = {});

  std::string name() const override { return "multimap"; }
  SpaceRequest space() const override;
  void place(std::vector<Extent> extents) override;
  std::size_t cell_runs(std::span<const std::uint64_t> cell, Run out[2]) const override;
  bool has_batch_groups() const override { return true; }
  std::uint64_t batch_key(std::span<const std::uint64_t> cell) const override;
  nlohmann::json describe() const override;

  // K per C-order dimension, in cells.
  const std::vector<std::uint64_t>& basic_cube() const { return k_; }
  std::uint64_t cubes_per_track() const { return pack_; }
  std::uint64_t tracks_per_group() const { return group_tracks_; }
  std::uint64_t groups() const { return groups_; }
  // Sectors of device space per sector of data (>= 1): internal fragmentation.
  double space_amplification() const;

  // The basic cube the layout chooses for `grid` on a device with track
  // length `track_sectors` and depth `depth` (priority-order dims):
  // K_0 = the primary extent split evenly into track-sized pieces; the middle
  // dimensions minimise (number of cubes) x (1 + 10 x padding fraction) under
  // prod <= D, which trades jumps between cubes against wasted sectors;
  // K_{n-1} = the whole last dimension, split only when a cube would not fit a zone.
  static std::vector<std::uint64_t> choose_basic_cube(const CellGrid& grid, std::uint32_t sectors_per_cell,
                                                      std::uint64_t track_sectors, std::uint32_t depth,
                                                      std::uint64_t max_group_tracks);

 private:
  std::uint64_t cube_index(std::span<const std::uint64_t> cell) const;

  std::vector<std::uint64_t> k_;           // per C-order dimension
  std::vector<std::uint64_t> cube_grid_;   // cubes per C-order dimension
  std::vector<std::uint64_t> cube_stride_; // per C-order dimension, priority order fastest
  std::vector<std::uint64_t> hop_step_;    // per C-order dimension: tracks per step (0 for the primary)
  std::uint64_t pack_ = 1, group_tracks_ = 1, groups_ = 0, cubes_ = 0;
  std::uint64_t members_ = 1;  // striped members of the volume (geometry/striped.h)
  std::uint64_t design_track_ = 0;
};

}  // namespace mmfs::layouts
