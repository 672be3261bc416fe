#include "layouts/multimap.h"

#include "geometry/striped.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>

#include "util/align.h"

namespace mmfs::layouts {

std::vector<std::uint64_t> MultiMapLayout::choose_basic_cube(const CellGrid& grid, std::uint32_t spc,
                                                             std::uint64_t track_sectors, std::uint32_t depth,
                                                             std::uint64_t max_group_tracks) {
  const std::size_t n = grid.dims();
  const auto& order = grid.order();
  const auto& S = grid.grid();
  std::vector<std::uint64_t> k(n, 1);
  std::uint64_t units = std::max<std::uint64_t>(1, track_sectors / spc);
  // Eq. 1: K_0 <= T, with the primary extent split evenly into track-sized pieces.
  std::uint64_t s0 = S[order[0]];
  std::uint64_t k0 = s0 <= units ? s0 : util::div_up(s0, util::div_up(s0, units));
  k[order[0]] = k0;
  if (n == 1) return k;
  const std::uint64_t pack = std::max<std::uint64_t>(1, units / k0);
  const std::uint64_t sl = S[order[n - 1]];
  // Eq. 2 and 6: the whole last dimension, unless a cube would not fit in a zone.
  auto last_for = [&](std::uint64_t prod) {
    std::uint64_t max_last = std::max<std::uint64_t>(1, max_group_tracks / prod);
    return sl <= max_last ? sl : util::div_up(sl, util::div_up(sl, max_last));
  };

  // Eq. 3 for the middle dimensions: search the Pareto-optimal sizes
  // K = ceil(S / m) for every cube count m, under prod K <= D. The score is
  // (cubes along the middle dimensions: jumps) x (1 + 10 x wasted fraction of
  // the track groups, counting padding and packing slots left empty).
  std::vector<std::uint32_t> middle(order.begin() + 1, order.end() - 1);
  std::vector<std::uint64_t> best(middle.size(), 1), cur(middle.size(), 1);
  double best_score = INFINITY;
  auto smallest = [](const std::vector<std::uint64_t>& v) {
    return v.empty() ? UINT64_MAX : *std::min_element(v.begin(), v.end());
  };
  std::function<void(std::size_t, std::uint64_t, double)> search = [&](std::size_t i, std::uint64_t prod,
                                                                      double middle_cubes) {
    if (i == middle.size()) {
      std::uint64_t kl = last_for(prod);
      double cubes = middle_cubes * double(util::div_up(s0, k0)) * double(util::div_up(sl, kl));
      double slots = std::ceil(cubes / double(pack)) * double(pack);
      double cube_cells = double(k0) * double(prod) * double(kl);
      double cells = 1;
      for (std::uint64_t e : S) cells *= double(e);
      double waste = slots * cube_cells / cells - 1.0;
      double score = middle_cubes * (1.0 + 10.0 * waste);
      // Ties: the more balanced cube (larger smallest side), then the larger K
      // on the higher-priority dimension.
      bool tie = std::fabs(score - best_score) <= 1e-9 * std::max(1.0, score);
      if ((!tie && score < best_score) ||
          (tie && (smallest(cur) > smallest(best) || (smallest(cur) == smallest(best) && cur > best)))) {
        best_score = score;
        best = cur;
      }
      return;
    }
    std::uint64_t Si = S[middle[i]];
    std::uint64_t last = 0;
    for (std::uint64_t m = 1; m <= Si; ++m) {
      std::uint64_t K = util::div_up(Si, m);
      if (K == last) continue;
      last = K;
      if (prod * K > depth) continue;
      cur[i] = K;
      search(i + 1, prod * K, middle_cubes * double(util::div_up(Si, K)));
    }
  };
  search(0, 1, 1.0);
  std::uint64_t prod = 1;
  for (std::size_t i = 0; i < middle.size(); ++i) {
    k[middle[i]] = best[i];
    prod *= best[i];
  }
  k[order[n - 1]] = last_for(prod);
  return k;
}

MultiMapLayout::MultiMapLayout(const geom::Geometry& geometry, CellGrid grid, std::vector<std::uint64_t> basic_cube)
    : Layout(geometry, std::move(grid)) {
  const bool chosen = basic_cube.empty();  // (basic_cube is moved from below)
  const std::size_t n = grid_.dims();
  const auto& order = grid_.order();
  design_track_ = geometry_.track_length(0);
  std::uint32_t D = geometry_.depth();
  std::uint64_t zone_tracks = geometry_.largest_zone_tracks();
  if (n >= 2 && D == 0)
    throw std::invalid_argument(fmt::format("multimap: the device has no adjacent tracks (D = 0); use a linear layout"));
  if (std::uint64_t(spc_) > design_track_)
    throw std::invalid_argument(fmt::format("multimap: a cell of {} sectors does not fit a track of {} sectors",
                                            spc_, design_track_));
  if (basic_cube.empty()) {
    k_ = choose_basic_cube(grid_, spc_, design_track_, D, zone_tracks);
  } else {
    if (basic_cube.size() != n)
      throw std::invalid_argument(
          fmt::format("multimap: basic_cube has {} dimensions, the array has {}", basic_cube.size(), n));
    for (std::size_t d = 0; d < n; ++d) {
      if (basic_cube[d] == 0 || basic_cube[d] > grid_.grid()[d])
        throw std::invalid_argument(fmt::format(
            "multimap: basic_cube[{}] = {} must be in 1..{} (the cells along dimension {})", d, basic_cube[d],
            grid_.grid()[d], d));
    }
    if (basic_cube[order[0]] * spc_ > design_track_)
      throw std::invalid_argument(fmt::format(
          "multimap: basic_cube[{}] = {} cells of {} sectors exceeds the track length T = {} (Eq. 1)", order[0],
          basic_cube[order[0]], spc_, design_track_));
    std::uint64_t prod = 1;
    for (std::size_t i = 1; i + 1 < n; ++i) prod *= basic_cube[order[i]];
    if (prod > D)
      throw std::invalid_argument(fmt::format(
          "multimap: the middle dimensions of basic_cube multiply to {} > D = {} (Eq. 3)", prod, D));
    if (n >= 2 && prod * basic_cube[order[n - 1]] > zone_tracks)
      throw std::invalid_argument(fmt::format(
          "multimap: a basic cube of {} tracks does not fit in a zone of {} tracks (Eq. 6)",
          prod * basic_cube[order[n - 1]], zone_tracks));
    k_ = std::move(basic_cube);
  }

  pack_ = std::max<std::uint64_t>(1, design_track_ / (k_[order[0]] * spc_));
  // A volume of p striped members: a group holds p * pack_ cubes (see
  // below). A chosen cube so large that the array has fewer cubes would leave
  // members' tracks of the group empty, so the last dimension's K shrinks
  // until there are enough cubes (the group's total size stays what one cube
  // of the full K would take).
  if (const auto* striped = dynamic_cast<const geom::StripedGeometry*>(&geometry_);
      striped && striped->members() > 1 && chosen && n >= 2) {
    std::uint64_t others = 1;
    for (std::size_t i = 0; i + 1 < n; ++i) others *= util::div_up(grid_.grid()[order[i]], k_[order[i]]);
    const std::uint64_t want = util::div_up(pack_ * striped->members(), others);
    const std::uint32_t last = order[n - 1];
    if (want > 1) k_[last] = std::max<std::uint64_t>(1, util::div_up(grid_.grid()[last], want));
  }
  group_tracks_ = 1;
  hop_step_.assign(n, 0);
  for (std::size_t i = 1; i < n; ++i) {
    hop_step_[order[i]] = group_tracks_;
    group_tracks_ *= k_[order[i]];
  }
  cube_grid_.resize(n);
  cube_stride_.assign(n, 0);
  cubes_ = 1;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t d = order[i];
    cube_grid_[d] = util::div_up(grid_.grid()[d], k_[d]);
    cube_stride_[d] = cubes_;
    cubes_ *= cube_grid_[d];
  }
  // A volume of p striped members (geometry/striped.h): adjacent blocks are
  // p volume tracks apart (GETADJACENT stays on one member), so a group is
  // group_tracks_ member tracks on every member — group_tracks_ * p
  // consecutive volume tracks from a multiple of p — and holds p * pack_
  // cubes, successive cubes on successive members (MultiMap §4.5: each basic
  // cube on one disk, the cubes declustered over the disks).
  if (const auto* striped = dynamic_cast<const geom::StripedGeometry*>(&geometry_)) members_ = striped->members();
  groups_ = util::div_up(cubes_, pack_ * members_);
}

SpaceRequest MultiMapLayout::space() const {
  SpaceRequest r;
  r.shape = SpaceShape::TrackGroups;
  r.group_tracks = group_tracks_ * members_;
  r.groups = groups_;
  r.min_track_sectors = pack_ * k_[grid_.order()[0]] * spc_;
  r.sectors = groups_ * group_tracks_ * members_ * design_track_;
  if (members_ > 1) r.align_tracks = members_;
  return r;
}

void MultiMapLayout::place(std::vector<Extent> extents) {
  if (extents.size() != groups_)
    throw std::invalid_argument(
        fmt::format("multimap: needs {} track groups, was given {} extents", groups_, extents.size()));
  std::uint64_t row = pack_ * k_[grid_.order()[0]] * spc_;
  for (const Extent& e : extents) {
    geom::TrackBounds b = geometry_.track_boundaries(e.start);
    std::uint64_t T = b.length();
    if (b.low != e.start || e.sectors != group_tracks_ * members_ * T || T < row ||
        e.start + e.sectors > geometry_.zone_bounds(e.start).high + 1 || geometry_.track_of(e.start) % members_)
      throw std::invalid_argument(fmt::format(
          "multimap: extent {}+{} is not {} whole tracks of at least {} sectors in one zone, from a multiple of {}",
          e.start, e.sectors, group_tracks_ * members_, row, members_));
  }
  extents_ = std::move(extents);
}

std::uint64_t MultiMapLayout::cube_index(std::span<const std::uint64_t> cell) const {
  std::uint64_t q = 0;
  for (std::size_t d = 0; d < cell.size(); ++d) q += cell[d] / k_[d] * cube_stride_[d];
  return q;
}

// Cubes packed on the same tracks are read in one batch, so a beam along the
// primary dimension merges into one request per track.
std::uint64_t MultiMapLayout::batch_key(std::span<const std::uint64_t> cell) const {
  const std::uint64_t q = cube_index(cell);
  return q / (pack_ * members_) * members_ + q % members_;
}

std::size_t MultiMapLayout::cell_runs(std::span<const std::uint64_t> cell, Run out[2]) const {
  const auto& order = grid_.order();
  std::uint64_t q = cube_index(cell);
  const Extent& e = extents_[q / (pack_ * members_)];
  std::uint64_t T = geometry_.track_length(e.start);
  std::uint32_t d0 = order[0];
  // The cube's member (its first track of the group) and its place on that track.
  const std::uint64_t in_group = q % (pack_ * members_);
  const Lbn cube_track = e.start + in_group % members_ * T;
  // MAP (Fig. 11): along the track to x[0], then x[i] hops of K_1*...*K_{i-1} tracks.
  std::uint64_t start = (in_group / members_) * k_[d0] * spc_;
  Lbn lbn = cube_track + (start + (cell[d0] % k_[d0]) * spc_) % T;
  for (std::size_t i = 1; i < order.size(); ++i) {
    std::uint32_t d = order[i];
    std::uint64_t x = cell[d] % k_[d];
    if (x) lbn = geometry_.adjacent_n(lbn, std::uint32_t(hop_step_[d]), x);
  }
  // A multi-sector cell continues along the track and wraps at its end.
  geom::TrackBounds b = geometry_.track_boundaries(lbn);
  std::uint64_t first = std::min<std::uint64_t>(spc_, b.high - lbn + 1);
  out[0] = {lbn, std::uint32_t(first)};
  if (first == spc_) return 1;
  out[1] = {b.low, std::uint32_t(spc_ - first)};
  return 2;
}

double MultiMapLayout::space_amplification() const {
  double used = 0;
  for (const Extent& e : extents_) used += double(e.sectors);
  if (extents_.empty()) used = double(groups_ * group_tracks_ * members_ * design_track_);
  return used / double(grid_.cells() * spc_);
}

nlohmann::json MultiMapLayout::describe() const {
  nlohmann::json j = Layout::describe();
  j["basic_cube"] = k_;
  j["cubes"] = cubes_;
  j["cubes_per_track"] = pack_;
  j["tracks_per_cube"] = group_tracks_;
  j["track_groups"] = groups_;
  j["depth"] = geometry_.depth();
  j["space_amplification"] = space_amplification();
  return j;
}

}  // namespace mmfs::layouts
