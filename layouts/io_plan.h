// The device requests a view needs (docs/reference.md §5 `A@/plan/VIEW`), built from a
// layout without enumerating more than the cells the view touches.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <vector>

#include "geometry/geometry.h"
#include "geometry/service_time.h"
#include "layouts/layout.h"
#include "layouts/selection.h"

namespace mmfs::layouts {

class TouchedRuns;  // layouts/touched_runs.h

struct IoBatch {
  std::vector<geom::Request> requests;
};

struct IoPlan {
  std::vector<IoBatch> batches;
  std::uint64_t cells = 0;         // cells touched
  std::uint64_t requests = 0;      // after merging contiguous sectors
  std::uint64_t sectors = 0;
  std::uint64_t bytes_read = 0;    // sectors x sector size
  std::uint64_t bytes_useful = 0;  // selected elements x itemsize
  std::uint32_t merge_gap_sectors = 0;  // gaps up to this were read through
  double modeled_ms = 0;           // from an idle device (model_plan)
  // Only the blocks of a cell that hold the selection are read (PlanOptions
  // block_sectors), because the model served that faster than whole cells,
  // which it would serve in whole_cells_ms (-1: no cell was cut, so there was
  // no choice to make).
  bool partial_cells = false;
  double whole_cells_ms = -1;
  nlohmann::json to_json() const;
};

// How requests of layouts without batch groups reach the device.
enum class IssueOrder {
  Lbn,        // sorted by LBN (what mmfs does)
  Selection,  // in the selection's order, primary dimension fastest (the MultiMap
              // paper's storage manager fetching Naive and Hilbert cells)
};

struct PlanOptions {
  IssueOrder order = IssueOrder::Lbn;
  // Requests of layouts without batch groups are issued this many at a time
  // (the device queue the firmware's scheduler sees); 1 = one after another.
  std::uint32_t queue_depth = Layout::kPlanDepth;
  // Join requests of one batch group across gaps the volume's model says are
  // cheaper to read than to skip (Layout::merge_gap_sectors); false: only
  // contiguous sectors are joined.
  bool merge_gaps = true;
  // A cell's checksum blocks, in sectors (fs/meta/cell_checksums.h; they tile its
  // sectors). When the selection holds only some blocks of some cells, a plan
  // reading just those blocks is built beside the whole cells' and the one
  // the volume's model serves faster from an idle device is returned (both
  // modeled; IoPlan partial_cells says which). 0: whole cells only.
  std::uint32_t block_sectors = 0;
  // Where to keep the runs of the cells the selection touches, for a read
  // that gathers them after planning (layouts/touched_runs.h); prepared here.
  TouchedRuns* runs = nullptr;
};

IoPlan plan_selection(const Layout& layout, const Selection& selection, const PlanOptions& options = {});
// An arbitrary set of cells (grid coordinates, dims() values per cell, flattened).
IoPlan plan_cells(const Layout& layout, std::span<const std::uint64_t> cells_flat, std::uint64_t useful_bytes,
                  const PlanOptions& options = {});

// One plan for several plans read together (the attributes of a table, each
// its own layout): their requests sorted by LBN, overlapping or contiguous ones
// joined, issued `queue_depth` at a time. Counts add up.
IoPlan combine_plans(std::span<const IoPlan> plans, std::uint32_t sector_size,
                     std::uint32_t queue_depth = Layout::kPlanDepth);

// The plans of the pieces of one read issued one after another (the chunks a
// long view is read in, fs/array/array_file.h): batches in order, counts and
// modeled times added. Each part must be modeled already. The result cuts
// cells if any part did; whole_cells_ms is then the parts' whole-cell times
// (their modeled time where a part had no choice).
IoPlan concatenate_plans(std::vector<IoPlan>&& parts);

// Serves the plan's batches in order on `model` and returns the time in ms.
// `gap_ms` is the host's round trip between one batch's completion and the
// next batch's arrival, during which the device idles (and the platter turns).
double serve_plan(const IoPlan& plan, geom::ServiceTimeModel& model, double gap_ms = 0);
// The same from an idle device; stores it in plan.modeled_ms.
double model_plan(IoPlan& plan, const geom::Geometry& geometry);

// The time a read served in `parts` takes with the machine's costs
// (geom::HostCost), a pipeline of three stages as the daemon's chunks go
// through it: the device reads the parts one after another (each part's
// modeled_ms); a part's cells are then verified and gathered (bytes_read x
// verify_ms_per_mib + bytes_useful x gather_ms_per_mib); then its result is
// handed to the reader (bytes_useful x ms_per_mib), each stage working on
// one part while the one before it works on the next; plus the read's fixed
// cost. Within a part the cells of each batch (queue_depth requests; a batch
// group of more, such as a basic cube's, counts as its requests / kPlanDepth
// waves) are worked on once the batch has arrived (batches taken as arriving
// evenly over the part's device time): the work starts with the first and ends no
// sooner than the last batch's share after the device is done. A part of one
// batch adds it all; a part of many hides most of its work behind the device
// (docs/measurements.md, "Work hidden behind a part's batches"). Each part must
// be modeled already. With an empty HostCost: the parts' device times added.
double modeled_read_ms(std::span<const IoPlan> parts, const geom::HostCost& host);

}  // namespace mmfs::layouts
