// Layouts that linearize the cell grid along a curve and fill their extents
// in that order: naive (dimension-priority order), Z-order and Hilbert.
#pragma once

#include <memory>

#include "layouts/curve_order.h"
#include "layouts/layout.h"

namespace mmfs::layouts {

// Maps a rank along the curve to device sectors through the extents.
class LinearLayout : public Layout {
 public:
  LinearLayout(const geom::Geometry& geometry, CellGrid grid);
  SpaceRequest space() const override;
  void place(std::vector<Extent> extents) override;
  std::size_t cell_runs(std::span<const std::uint64_t> cell, Run out[2]) const override;
  // The cell's position along the layout's curve, in [0, cells).
  virtual std::uint64_t rank(std::span<const std::uint64_t> cell) const = 0;

 private:
  std::vector<std::uint64_t> first_slot_;  // cumulative cell slots before each extent
};

// The paper's Naive: cells in dimension-priority order, order[0] varying fastest.
class NaiveLayout final : public LinearLayout {
 public:
  NaiveLayout(const geom::Geometry& geometry, CellGrid grid);
  std::string name() const override { return "naive"; }
  std::uint64_t rank(std::span<const std::uint64_t> cell) const override;

 private:
  std::vector<std::uint64_t> stride_;  // per C-order dimension
};

// Z-order and Hilbert: the curves rank cells with dimensions taken in
// priority order, so order[0] plays the role of the curve's dimension 0.
template <typename Curve>
class CurveLayout final : public LinearLayout {
 public:
  CurveLayout(const geom::Geometry& geometry, CellGrid grid, std::string name);
  std::string name() const override { return name_; }
  std::uint64_t rank(std::span<const std::uint64_t> cell) const override;

 private:
  Curve curve_;
  std::string name_;
};

using ZOrderLayout = CurveLayout<ZOrder>;
using HilbertLayout = CurveLayout<HilbertOrder>;

}  // namespace mmfs::layouts
