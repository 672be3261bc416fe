// The quadrangle layout as a Layout (docs/reference.md §4 `user.mmfs.layout=quadrangle`;
// Atropos, FAST 2004, §3.1-§3.3 and §5; docs/layouts.md "quadrangle").
//
// QuadrangleLayout (layouts/quadrangle.h) places cells in an Atropos volume's
// address space (VLBNs of one zone, AtroposVolume). This class runs it on a
// volume geometry and reports plain volume LBNs, so that ArrayFile, the I/O
// planner and the allocator use it like any other layout:
// * a single zoned disk (p = 1): (device 0, DLBN) is the LBN itself;
// * a StripedGeometry over a zoned disk (geometry/striped.h): p members;
//   (device k, DLBN) is StripedGeometry::volume_lbn(k, DLBN).
// MEMS and flash volumes are refused with GeometryError(NotSupported).
//
// Why that works: on a StripedGeometry volume track t lives on member t mod p
// as member track t / p, so member track m of every member is the p
// consecutive volume tracks [m*p, m*p + p) — Atropos' rectangle, one row of
// a quadrangle stripe — and quadrangle stripe s of zone z (member tracks
// z.first_track + s*d .. + d-1 on every member) is the d*p consecutive volume
// tracks starting at volume track p*(z.first_track + s*d). A cell never
// leaves one VLBN (b sectors of one member track), hence one run of
// consecutive volume LBNs.
//
// Zone (§3.3.1): an array lives in ONE zone, since N — and with it b, d and
// w — changes from zone to zone. The layout takes the outermost zone (the
// fastest, and where the allocator hands out space first) whose whole
// quadrangle stripes can hold the array. When none can, it takes the zone
// that comes closest; the allocator then fails with ENOSPC. Whether the zone
// has free stripes is the allocator's answer: the zone is chosen from the
// geometry alone (a layout never sees the free map).
//
// Block size: the requested Atropos block is one cell (B = sectors per
// cell, the smallest block a cell fits); Eq. 3-4 then give d = Dmax(B) and
// grow b to fill the revolution, and k = floor(b / sectors per cell) cells
// are packed along the primary dimension in each block (QuadrangleLayout).
// On the Atlas 10K III's outer zone every B up to 26 gives d = 5, b = 26.
//
// Depth split: `depth_cube` (user.mmfs.basic_cube) is QuadrangleLayout's
// depth cube — per C-order dimension, the quadrangle rows a non-primary
// dimension takes (product <= d; empty = greedy in priority order, see
// quadrangle.h). The primary's entry is ignored (set to 1): the primary
// always fills whole rows of w*p*k cells. A split is part of "can hold": a
// zone whose d is smaller than the split's product is passed over.
//
// Space: whole quadrangle stripes, one SpaceRequest group each: d*p
// consecutive volume tracks of exactly N sectors, starting at a volume track
// whose index counted from the zone's first track is a multiple of d*p (so a
// member track that is a multiple of d from the zone's first, on member 0),
// all inside the zone's whole stripes. The residual R sectors of every track
// and the zone's last tracks that make no whole stripe are never used.
//
// Batches: one per quadrangle (§3.1: a quadrangle's semi-sequential
// requests are issued together): batch_key is the volume's quadrangle index.
#pragma once

#include <memory>

#include "layouts/atropos.h"
#include "layouts/atropos_members.h"
#include "layouts/layout.h"
#include "layouts/quadrangle.h"

namespace mmfs::layouts {

class QuadrangleArrayLayout final : public Layout {
 public:
  // Throws GeometryError(NotSupported) for a volume whose devices are not
  // zoned disks; std::invalid_argument for a cell no track can hold or a bad
  // depth cube (see QuadrangleLayout).
  QuadrangleArrayLayout(const geom::Geometry& geometry, CellGrid grid, std::vector<std::uint64_t> depth_cube = {});

  std::string name() const override { return "quadrangle"; }
  SpaceRequest space() const override;
  // Accepts whole, aligned stripes of the layout's zone (see above), in any
  // order and runs, space().groups in all; stripes fill in the given order.
  void place(std::vector<Extent> extents) override;
  std::size_t cell_runs(std::span<const std::uint64_t> cell, Run out[2]) const override;
  bool has_batch_groups() const override { return true; }
  std::uint64_t batch_key(std::span<const std::uint64_t> cell) const override;
  nlohmann::json describe() const override;

  const AtroposMembers& members() const { return members_; }
  const AtroposVolume& volume() const { return *volume_; }
  const QuadrangleLayout& quadrangles() const { return *quad_; }
  std::uint32_t zone() const { return volume_->zone(); }
  std::uint32_t devices() const { return members_.devices(); }
  // The zone's first volume LBN, and the volume sectors of one stripe (d*p*N)
  // and of the zone's whole stripes.
  geom::Lbn zone_first_lbn() const { return zone_first_; }
  std::uint64_t stripe_sectors() const { return stripe_sectors_; }
  std::uint64_t zone_stripe_sectors() const { return volume_->stripes() * stripe_sectors_; }
  // The volume LBN of an Atropos volume sector (vlbn*b + offset).
  geom::Lbn volume_lbn_of_sector(std::uint64_t volume_sector) const {
    return members_.volume_lbn(volume_->locate_sector(volume_sector));
  }

 private:
  AtroposMembers members_;
  std::unique_ptr<AtroposVolume> volume_;
  std::unique_ptr<QuadrangleLayout> quad_;
  geom::Lbn zone_first_ = 0;
  std::uint64_t stripe_sectors_ = 0;
};

}  // namespace mmfs::layouts
