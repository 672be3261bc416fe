// The quadrangle layout of an array on an Atropos volume (Atropos §3.1,
// §3.3.3; layouts/atropos.h): the primary dimension streams along whole
// tracks of all p devices, the others along semi-sequential quadrangle
// columns.
//
// Not a Layout: Layout's runs are sectors of one device (Run has no device),
// and everything that consumes a Layout — its Geometry, merge_gap_sectors(),
// the I/O planner, allocate_linear() and SpaceRequest's tracks and zones —
// reads them as such. This layout's runs are in the volume's address space
// (volume sectors = vlbn*b + offset, see atropos.h) and AtroposVolume maps
// them to (device, DLBN); deriving from Layout would let a caller plan them
// as one device's sectors. The class keeps Layout's shape: space(), place(),
// cell_runs(), batch_key(), describe().
//
// Cells per block: a VLBN is b sectors (b grows by Eq. 3 to fill a
// revolution), so k = floor(b / sectors per cell) cells are packed along the
// primary dimension in each VLBN, never one across two.
//
// Cubes (as MultiMap's basic cubes): the grid is cut into cubes of
// L = w*p*k cells along order[0] (one row: w VLBNs on one track of each
// device, Atropos' rectangle) by K_1 x ... x K_{n-1} along order[1..n-1] with
// K_1*...*K_{n-1} = rows <= d. Inside a cube, order[0] runs along the row and
// the other dimensions are linearised over the cube's rows, order[1] fastest;
// so row (u_1, u_2, ...) = u_1 + K_1*(u_2 + K_2*...). floor(d / rows) cubes
// are stacked in the depth of one quadrangle stripe, and cubes are numbered in
// priority order (order[0] fastest) and stacked stripe after stripe.
//
// Device rotation (mmfs, beyond Atropos' Figure 3): a cube's rows start on
// device u mod p, u being the cube's index over the non-primary dimensions
// (its rows' blocks are rotated by u*w within the rectangle). Atropos puts
// column c of every row on the same device, so a beam along order[1] would
// read one device only; rotated, successive cubes of the beam sit on
// successive devices and the beam reads all p in parallel. A row still
// covers the whole rectangle (one track of every device), so the primary
// dimension keeps its streaming, and with p = 1 nothing changes.
//
// For 2-D arrays K_1 = min(d, extent): §3.3.3's mapping — a beam along
// order[0] reads whole tracks of all devices, one along order[1] reads one
// quadrangle column (one batch) per d cells.
//
// More than two dimensions: the depth is shared, MultiMap-style, by the
// non-primary dimensions — by default greedily in priority order (order[1]
// takes min(d, extent) rows, order[2] what is left of d, ...), or as given.
// Why: a quadrangle column is the only semi-sequential structure, and any
// subset of it read top-down still costs at most the one revolution of the
// whole column (skipped tracks become idle rotation), so every dimension with
// K > 1 reads K cells per batch. Giving the depth in priority order honours
// `order`: order[1] keeps the full 2-D behaviour, and a short order[1] leaves
// its unused rows to order[2] instead of wasting them (collapsing the trailing
// dimensions in C order would ignore `order` and waste those rows). An
// explicit split (e.g. 2 x 2 on d = 5) trades order[1]'s batches for
// order[2]'s.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "layouts/atropos.h"
#include "layouts/cell_grid.h"

namespace mmfs::layouts {

// A run of volume sectors (vlbn*b + offset): AtroposVolume::locate_sector maps it.
struct VolumeRun {
  std::uint64_t sector = 0;
  std::uint32_t sectors = 0;
  bool operator==(const VolumeRun&) const = default;
};

// The space the layout asks of its volume: `stripes` whole quadrangle stripes
// (each stripe_blocks VLBNs starting at a multiple of it), in any runs.
struct StripeRequest {
  std::uint64_t stripes = 0;
  std::uint64_t stripe_blocks = 0;
  std::uint64_t blocks() const { return stripes * stripe_blocks; }
};

class QuadrangleLayout {
 public:
  // `depth_cube`: per C-order dimension, the rows of the depth each dimension
  // takes (K); the primary's entry must be 1; each 1..extent, product <= d.
  // Empty = chosen greedily (see above). Throws std::invalid_argument for a
  // cell larger than a block or a bad depth_cube. `volume` must outlive it.
  QuadrangleLayout(const AtroposVolume& volume, CellGrid grid, std::vector<std::uint64_t> depth_cube = {});

  std::string name() const { return "quadrangle"; }
  const AtroposVolume& volume() const { return volume_; }
  const CellGrid& grid() const { return grid_; }
  std::uint32_t sectors_per_cell() const { return spc_; }
  std::uint32_t cells_per_block() const { return per_block_; }     // k
  std::uint64_t row_cells() const { return cube_[primary()]; }     // L = w*p*k
  // Per C-order dimension: L for the primary, K for the others.
  const std::vector<std::uint64_t>& cube() const { return cube_; }
  std::uint32_t cube_rows() const { return rows_; }
  std::uint32_t cubes_per_stripe() const { return cubes_per_stripe_; }
  std::uint64_t cubes() const { return cubes_; }

  StripeRequest space() const;
  // Accepts VLBN runs of whole stripes (each starting at a stripe boundary,
  // inside the volume, not overlapping) holding space().stripes in all;
  // throws std::invalid_argument otherwise. Stripes fill in the given order.
  void place(std::vector<VlbnRange> extents);
  const std::vector<VlbnRange>& extents() const { return extents_; }

  // The volume sectors of `cell` (grid coordinates, C order): always one run
  // of sectors_per_cell() inside one VLBN; returns 1. REQUIRES place().
  // Throws std::invalid_argument for a cell outside the grid.
  std::size_t cell_runs(std::span<const std::uint64_t> cell, VolumeRun out[2]) const;
  Vlbn cell_vlbn(std::span<const std::uint64_t> cell) const;

  // One batch per quadrangle (§3.1: a quadrangle's semi-sequential requests
  // are issued together): the key is the volume's quadrangle index.
  bool has_batch_groups() const { return true; }
  std::uint64_t batch_key(std::span<const std::uint64_t> cell) const;

  nlohmann::json describe() const;
  // Device sectors of the stripes asked for (residuals included) per sector of data.
  double space_amplification() const;

 private:
  std::uint32_t primary() const { return grid_.order()[0]; }
  void check_cell(std::span<const std::uint64_t> cell) const;
  std::vector<std::uint64_t> choose_depth_cube() const;
  void check_depth_cube(const std::vector<std::uint64_t>& k) const;
  Vlbn stripe_first_vlbn(std::uint64_t stripe) const;  // the layout's stripe-th stripe

  const AtroposVolume& volume_;
  CellGrid grid_;
  std::uint32_t spc_ = 0, per_block_ = 0, rows_ = 1, cubes_per_stripe_ = 1;
  std::vector<std::uint64_t> cube_, cube_stride_, row_stride_;  // per C-order dimension
  std::uint64_t cubes_ = 0;
  std::vector<VlbnRange> extents_;
  std::vector<std::uint64_t> stripes_before_;  // per extent: the layout's stripes in earlier extents
};

}  // namespace mmfs::layouts
