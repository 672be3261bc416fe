// Where each cell of an array goes on the device (ARCHITECTURE.md, "layouts/").
//
// A layout is built in two steps: construction decides its parameters and
// states what space it needs (space()); place() hands it the extents the
// allocator chose. From then on cell_runs() gives the device sectors of any
// cell. Layouts are pure: they read the geometry, never the device.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "geometry/geometry.h"
#include "layouts/cell_grid.h"

namespace mmfs::layouts {

using geom::Lbn;

// A run of device sectors handed to a layout.
struct Extent {
  Lbn start = 0;
  std::uint64_t sectors = 0;
  bool operator==(const Extent&) const = default;
};

// What kind of space a layout asks the allocator for.
enum class SpaceShape {
  Runs,         // any track-aligned runs (traxtents); `sectors` in all
  TrackGroups,  // `groups` runs of exactly `group_tracks` consecutive tracks, each
                // inside one zone whose tracks hold at least `min_track_sectors`
};

struct SpaceRequest {
  SpaceShape shape = SpaceShape::Runs;
  std::uint64_t sectors = 0;          // total sectors needed (Runs), or groups*group_tracks*T
  std::uint64_t group_tracks = 0;     // TrackGroups
  std::uint64_t groups = 0;           // TrackGroups
  std::uint64_t min_track_sectors = 0;
  // TrackGroups: when non-zero, a group of at most this many tracks never
  // straddles a multiple of it (a MEMS cylinder, whose tracks share
  // equivalence classes: a capsule band inside one stays one parallel access).
  std::uint64_t boundary_tracks = 0;
  // Runs: the layout places whole units of this many sectors (a cell) in
  // each extent, never one across two; a run's tail shorter than a unit is
  // slack, not space.
  std::uint64_t unit_sectors = 1;
  // TrackGroups, for layouts whose parameters belong to one zone (Atropos
  // quadrangle stripes, layouts/quadrangle_array.h). Zero/empty = no rule
  // (the behaviour of every other layout):
  // * align_tracks: a group starts at a track whose index, counted from the
  //   first track of its zone, is a multiple of this;
  // * exact_track_sectors: only zones whose tracks hold exactly this many
  //   sectors (min_track_sectors still applies);
  // * within: every group lies inside [within.start, within.start +
  //   within.sectors) (sectors == 0: anywhere).
  std::uint64_t align_tracks = 0;
  std::uint64_t exact_track_sectors = 0;
  Extent within{};
};

// A run of sectors a cell occupies (a cell spans one run, or two when it
// wraps around the end of a track).
struct Run {
  Lbn lbn = 0;
  std::uint32_t sectors = 0;
};

class Layout {
 public:
  Layout(const geom::Geometry& geometry, CellGrid grid);
  virtual ~Layout() = default;

  virtual std::string name() const = 0;
  const geom::Geometry& geometry() const { return geometry_; }
  const CellGrid& grid() const { return grid_; }
  std::uint32_t sectors_per_cell() const { return spc_; }

  virtual SpaceRequest space() const = 0;
  // Accepts the allocator's extents; throws std::invalid_argument when they do
  // not satisfy space().
  virtual void place(std::vector<Extent> extents) = 0;
  const std::vector<Extent>& extents() const { return extents_; }

  // The sectors of `cell` (grid coordinates, C-order dimension numbering).
  // Returns the number of runs written to `out` (1 or 2). REQUIRES place().
  virtual std::size_t cell_runs(std::span<const std::uint64_t> cell, Run out[2]) const = 0;
  Lbn cell_lbn(std::span<const std::uint64_t> cell) const {
    Run r[2];
    cell_runs(cell, r);
    return r[0].lbn;
  }

  // Cells with equal batch keys are issued to the device as one batch
  // (MultiMap: one basic cube; Atropos: one quadrangle). Layouts without such
  // structure return false from has_batch_groups().
  virtual bool has_batch_groups() const { return false; }
  virtual std::uint64_t batch_key(std::span<const std::uint64_t>) const { return 0; }

  // The layout's parameters for A@/info (cell, basic cube, ...).
  virtual nlohmann::json describe() const;

  // The widest gap between two of this layout's requests that the volume's
  // model says is cheaper to read through than to leave (layouts/merge_gap.h),
  // for requests of one cell issued `kPlanDepth` at a time. Computed once.
  std::uint32_t merge_gap_sectors() const;
  // The same for requests of `request_sectors` (a cell's checksum blocks read
  // alone, layouts/cell_blocks.h). Computed once per size.
  std::uint32_t merge_gap_sectors(std::uint32_t request_sectors) const;
  static constexpr std::uint32_t kPlanDepth = 16;

 protected:
  const geom::Geometry& geometry_;
  CellGrid grid_;
  std::uint32_t spc_;
  std::vector<Extent> extents_;

 private:
  mutable std::once_flag merge_gap_once_;
  mutable std::uint32_t merge_gap_ = 0;
  mutable std::mutex merge_gaps_mu_;
  mutable std::vector<std::pair<std::uint32_t, std::uint32_t>> merge_gaps_;  // (request sectors, gap)
};

// Builds a layout by name ("naive", "zorder", "hilbert", "multimap", "quadrangle",
// "capsule"). `basic_cube` is read by multimap (its basic cube) and quadrangle
// (the depth split of the non-primary dimensions, layouts/quadrangle_array.h);
// empty = chosen by the layout.
std::unique_ptr<Layout> make_layout(const std::string& name, const geom::Geometry& geometry, CellGrid grid,
                                    std::vector<std::uint64_t> basic_cube = {});

// A simple allocator for modeled runs and tests: hands out the space a layout
// asks for from `first_lbn` upwards (track-aligned), skipping zone ends that
// would split a track group (and, for TrackGroups, tracks the request's
// align_tracks / exact_track_sectors / within rule out). Returns the extents
// and the first free LBN after.
std::vector<Extent> allocate_linear(const geom::Geometry& geometry, const SpaceRequest& request, Lbn first_lbn,
                                    Lbn* next_free = nullptr);

}  // namespace mmfs::layouts
