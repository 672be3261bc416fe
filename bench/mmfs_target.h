// An mmfs array as the daemon places it (fs/array/array_file.cc ArrayFile::build):
// the schema's cell or the daemon's default brick, the default dimension
// order, the layout from layouts::make_layout and whole-track extents from the
// daemon's allocator (fs::Allocator) on an otherwise empty data area. Plans
// come from layouts::plan_selection with the daemon's options and are costed
// by layouts::model_plan, so plan(view).modeled_ms is what `A@/plan/VIEW`
// shows for an array with the same extents.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/target.h"
#include "geometry/geometry.h"
#include "layouts/layout.h"

namespace mmfs::bench {

struct MmfsArraySpec {
  std::string layout = "multimap";
  std::vector<std::uint64_t> shape;
  std::uint32_t itemsize = 8;
  std::vector<std::uint64_t> cell;    // empty = the daemon's default cell
  std::vector<std::uint32_t> order;   // empty = n-1, ..., 0 (docs/reference.md §4 default)
};

// The byte size the daemon's default cell fills: a 4 KiB device unit, or one
// sector when sectors are larger (layouts::CellGrid::default_cell_bytes, which the daemon uses).
std::uint32_t daemon_default_cell_bytes(const geom::Geometry& geometry);
// The cell the daemon gives an array without user.mmfs.cell.
std::vector<std::uint64_t> daemon_cell(const geom::Geometry& geometry, const MmfsArraySpec& spec);

// Allocated by fs::Allocator over [first_lbn, capacity) (a fresh volume whose
// data area starts at first_lbn; see `A@/lbn/0,...,0` of a mounted array).
// Throws std::invalid_argument / std::runtime_error when the layout or the
// space does not work out.
std::unique_ptr<Target> make_mmfs_target(const geom::Geometry& geometry, const MmfsArraySpec& spec,
                                         geom::Lbn first_lbn);
// Placed on given extents (e.g. a mounted array's, read from its metadata).
std::unique_ptr<Target> make_mmfs_target(const geom::Geometry& geometry, const MmfsArraySpec& spec,
                                         std::vector<layouts::Extent> extents);

}  // namespace mmfs::bench
