#include "layouts/quadrangle_array.h"

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace mmfs::layouts {

QuadrangleArrayLayout::QuadrangleArrayLayout(const geom::Geometry& geometry, CellGrid grid,
                                             std::vector<std::uint64_t> depth_cube)
    : Layout(geometry, std::move(grid)), members_(geometry, "layout 'quadrangle'") {
  // The primary always fills whole rows; its entry of the depth split is not a choice.
  if (depth_cube.size() == grid_.dims()) depth_cube[grid_.order()[0]] = 1;
  const auto& zones = members_.disk().zones();
  std::string first_error;
  // The outermost zone whose whole stripes hold the array; failing that, the
  // zone with the most stripes for the ones it needs (the allocator says ENOSPC).
  std::unique_ptr<AtroposVolume> best_volume;
  std::unique_ptr<QuadrangleLayout> best_quad;
  double best_fill = 0;
  for (std::uint32_t z = 0; z < zones.size(); ++z) {
    try {
      auto volume = std::make_unique<AtroposVolume>(members_.disk(), members_.devices(), spc_, z);
      auto quad = std::make_unique<QuadrangleLayout>(*volume, grid_, depth_cube);
      const std::uint64_t need = quad->space().stripes;
      if (need <= volume->stripes()) {
        volume_ = std::move(volume);
        quad_ = std::move(quad);
        break;
      }
      const double fill = double(volume->stripes()) / double(need);
      if (!best_volume || fill > best_fill) {
        best_fill = fill;
        best_quad = std::move(quad);  // before its volume goes
        best_volume = std::move(volume);
      }
    } catch (const std::exception& e) {  // the zone cannot hold a quadrangle of these cells
      if (first_error.empty()) first_error = e.what();
    }
  }
  if (!volume_) {
    volume_ = std::move(best_volume);
    quad_ = std::move(best_quad);
  }
  if (!volume_)
    throw std::invalid_argument(
        fmt::format("quadrangle layout: no zone of the disk '{}' takes the array ({}-sector cells): {}",
                    members_.disk().name(), spc_, first_error));
  zone_first_ = members_.zone_first_lbn(volume_->zone());
  stripe_sectors_ = std::uint64_t(volume_->depth()) * members_.devices() * volume_->stripe_unit_sectors();
}

SpaceRequest QuadrangleArrayLayout::space() const {
  SpaceRequest r;
  r.shape = SpaceShape::TrackGroups;
  r.groups = quad_->space().stripes;
  r.group_tracks = std::uint64_t(volume_->depth()) * members_.devices();
  r.sectors = r.groups * stripe_sectors_;
  r.min_track_sectors = volume_->stripe_unit_sectors();
  r.exact_track_sectors = volume_->stripe_unit_sectors();
  r.align_tracks = r.group_tracks;
  r.within = {zone_first_, zone_stripe_sectors()};
  return r;
}

void QuadrangleArrayLayout::place(std::vector<Extent> extents) {
  const std::uint64_t stripe_blocks = volume_->stripe_blocks();
  std::vector<VlbnRange> ranges;
  for (const Extent& e : extents) {
    const bool inside = e.start >= zone_first_ && e.sectors > 0 &&
                        e.start - zone_first_ <= zone_stripe_sectors() &&
                        e.sectors <= zone_stripe_sectors() - (e.start - zone_first_);
    if (!inside || (e.start - zone_first_) % stripe_sectors_ != 0 || e.sectors % stripe_sectors_ != 0)
      throw std::invalid_argument(fmt::format(
          "quadrangle layout: extent {}+{} is not whole quadrangle stripes of {} sectors ({} tracks of {}) inside "
          "zone {} (LBNs {}..{})",
          e.start, e.sectors, stripe_sectors_, std::uint64_t(volume_->depth()) * members_.devices(),
          volume_->stripe_unit_sectors(), volume_->zone(), zone_first_, zone_first_ + zone_stripe_sectors() - 1));
    const VlbnRange r{(e.start - zone_first_) / stripe_sectors_ * stripe_blocks,
                      e.sectors / stripe_sectors_ * stripe_blocks};
    // Stripes fill in the given order: join a range to the one before only when it continues it.
    if (!ranges.empty() && ranges.back().first + ranges.back().count == r.first)
      ranges.back().count += r.count;
    else
      ranges.push_back(r);
  }
  quad_->place(std::move(ranges));  // checks overlaps and the number of stripes
  extents_ = std::move(extents);
}

std::size_t QuadrangleArrayLayout::cell_runs(std::span<const std::uint64_t> cell, Run out[2]) const {
  VolumeRun run[2];
  quad_->cell_runs(cell, run);
  // A cell is inside one VLBN: b sectors of one member track, consecutive volume LBNs.
  out[0] = {volume_lbn_of_sector(run[0].sector), run[0].sectors};
  return 1;
}

std::uint64_t QuadrangleArrayLayout::batch_key(std::span<const std::uint64_t> cell) const {
  return quad_->batch_key(cell);
}

nlohmann::json QuadrangleArrayLayout::describe() const {
  nlohmann::json j = Layout::describe();
  const geom::QuadrangleParams& q = volume_->params();
  j.update(geom::to_json(q));
  j["p"] = members_.devices();
  j["zone"] = volume_->zone();
  j["zone_first_lbn"] = zone_first_;
  j["stripe_unit_sectors"] = volume_->stripe_unit_sectors();  // one track (§5.3)
  j["stripe_unit_blocks"] = volume_->stripe_unit_blocks();    // w
  j["stripe_tracks"] = std::uint64_t(q.d) * members_.devices();
  j["stripes"] = quad_->space().stripes;
  j["cube"] = quad_->cube();
  j["cells_per_block"] = quad_->cells_per_block();
  j["row_cells"] = quad_->row_cells();
  j["cubes"] = quad_->cubes();
  j["cubes_per_stripe"] = quad_->cubes_per_stripe();
  j["space_amplification"] = quad_->space_amplification();
  return j;
}

}  // namespace mmfs::layouts
