#include "layouts/layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "layouts/capsule.h"
#include "layouts/linear_layouts.h"
#include "layouts/merge_gap.h"
#include "layouts/multimap.h"
#include "layouts/quadrangle_array.h"

namespace mmfs::layouts {

Layout::Layout(const geom::Geometry& geometry, CellGrid grid)
    : geometry_(geometry), grid_(std::move(grid)), spc_(grid_.sectors_per_cell(geometry.sector_size())) {}

nlohmann::json Layout::describe() const {
  return {{"layout", name()},
          {"cell", grid_.cell()},
          {"order", grid_.order()},
          {"sectors_per_cell", spc_},
          {"extents", extents_.size()}};
}

std::uint32_t Layout::merge_gap_sectors() const {
  std::call_once(merge_gap_once_, [this] { merge_gap_ = layouts::merge_gap_sectors(geometry_, spc_, kPlanDepth); });
  return merge_gap_;
}

std::uint32_t Layout::merge_gap_sectors(std::uint32_t request_sectors) const {
  if (request_sectors == spc_) return merge_gap_sectors();
  std::lock_guard lock(merge_gaps_mu_);
  for (const auto& [sectors, gap] : merge_gaps_)
    if (sectors == request_sectors) return gap;
  const std::uint32_t gap = layouts::merge_gap_sectors(geometry_, request_sectors, kPlanDepth);
  merge_gaps_.push_back({request_sectors, gap});
  return gap;
}

std::unique_ptr<Layout> make_layout(const std::string& name, const geom::Geometry& geometry, CellGrid grid,
                                    std::vector<std::uint64_t> basic_cube) {
  if (name == "naive") return std::make_unique<NaiveLayout>(geometry, std::move(grid));
  if (name == "zorder") return std::make_unique<ZOrderLayout>(geometry, std::move(grid), "zorder");
  if (name == "hilbert") return std::make_unique<HilbertLayout>(geometry, std::move(grid), "hilbert");
  if (name == "multimap") return std::make_unique<MultiMapLayout>(geometry, std::move(grid), std::move(basic_cube));
  if (name == "quadrangle")
    return std::make_unique<QuadrangleArrayLayout>(geometry, std::move(grid), std::move(basic_cube));
  if (name == "capsule") return std::make_unique<CapsuleLayout>(geometry, std::move(grid));
  throw std::invalid_argument(
      fmt::format("unknown layout '{}' (this build has naive, zorder, hilbert, multimap, quadrangle, capsule)",
                  name));
}

std::vector<Extent> allocate_linear(const geom::Geometry& g, const SpaceRequest& req, Lbn first_lbn,
                                    Lbn* next_free) {
  std::vector<Extent> out;
  Lbn cap = g.capacity_sectors();
  if (first_lbn >= cap) throw std::invalid_argument("allocation starts beyond the device");
  Lbn at = g.track_boundaries(first_lbn).low;
  if (at < first_lbn) at = g.track_boundaries(first_lbn).high + 1;
  if (req.shape == SpaceShape::Runs) {
    // One run of whole tracks.
    Lbn end = at + req.sectors;
    if (end > cap) throw std::invalid_argument("not enough space on the device");
    if (end < cap) {
      auto b = g.track_boundaries(end);
      if (b.low != end) end = b.high + 1;
    }
    out.push_back({at, req.sectors});
    if (next_free) *next_free = end;
    return out;
  }
  const Lbn within_end = req.within.start + req.within.sectors;  // when req.within.sectors > 0
  if (req.within.sectors && at < req.within.start) {
    at = req.within.start;
    if (at < cap && g.track_boundaries(at).low != at) at = g.track_boundaries(at).high + 1;
  }
  for (std::uint64_t i = 0; i < req.groups; ++i) {
    while (true) {
      if (at >= cap) throw std::invalid_argument("not enough space on the device for the track groups");
      if (req.within.sectors && at >= within_end)
        throw std::invalid_argument("not enough space in the requested range for the track groups");
      std::uint64_t T = g.track_length(at);
      std::uint64_t t0 = g.track_of(at);
      std::uint64_t last_track = t0 + req.group_tracks - 1;
      if (last_track >= g.tracks()) throw std::invalid_argument("not enough tracks on the device");
      if (req.exact_track_sectors || req.align_tracks || req.within.sectors) {
        const geom::TrackBounds zone = g.zone_bounds(at);
        const Lbn zone_end = req.within.sectors ? std::min<Lbn>(zone.high + 1, within_end) : zone.high + 1;
        if ((req.exact_track_sectors && T != req.exact_track_sectors) || at + req.group_tracks * T > zone_end) {
          at = zone.high + 1;  // this zone cannot hold the group from here
          continue;
        }
        if (const std::uint64_t al = req.align_tracks) {
          const std::uint64_t rel = t0 - g.track_of(zone.low);
          if (rel % al) {
            // To the next aligned track (uniform tracks within the zone), or the next zone.
            const Lbn aligned = at + (al - rel % al) * T;
            at = aligned + req.group_tracks * T <= zone_end ? aligned : zone.high + 1;
            continue;
          }
        }
      }
      // The group must lie in one zone with long enough tracks.
      bool one_zone = at + req.group_tracks * T <= g.zone_bounds(at).high + 1;
      if (const std::uint64_t bt = req.boundary_tracks; bt && req.group_tracks <= bt &&
                                                        t0 / bt != (t0 + req.group_tracks - 1) / bt) {
        at += ((t0 / bt + 1) * bt - t0) * T;  // to the next boundary (uniform tracks within the zone)
        continue;
      }
      if (one_zone && T >= req.min_track_sectors) {
        out.push_back({at, req.group_tracks * T});
        at += req.group_tracks * T;
        break;
      }
      // Skip to the next track and try again (crossing into the next zone).
      at = g.track_boundaries(at).high + 1;
    }
  }
  if (next_free) *next_free = at;
  return out;
}

}  // namespace mmfs::layouts
