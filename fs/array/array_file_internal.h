// Helpers shared by the files that implement ArrayFile (fs/array/array_file*.cc),
// not part of its interface.
#pragma once

#include <nlohmann/json.hpp>
#include <roaring/roaring.hh>

#include <span>

#include "fs/array/array_schema.h"
#include "geometry/geometry.h"
#include "layouts/c_order_boxes.h"

namespace mmfs::fs::detail {

inline bool is_mloc(const ArraySchema& s) { return s.layout == "mloc"; }

// Adds to *cells the cells of `grid` that the element box `box` touches
// (layouts::touched_cell_runs, one range per row of cells).
inline void add_touched_cells(const layouts::CellGrid& grid, std::span<const layouts::DimRange> box, Roaring* cells) {
  layouts::touched_cell_runs(grid, box,
                             [cells](std::uint64_t first, std::uint64_t count) { cells->addRange(first, first + count); });
}

// On a geometry that knows the machine's costs (a measured one), a view's
// plan predicts the read, not only its device time: modeled_ms becomes the
// whole read (layouts::modeled_read_ms), device_ms the device's part and
// host_ms what the machine adds to it.
inline void add_host_time(const geom::HostCost& host, double device_ms, double read_ms, nlohmann::json* plan) {
  if (host.empty()) return;
  (*plan)["device_ms"] = device_ms;
  (*plan)["host_ms"] = read_ms - device_ms;
  (*plan)["modeled_ms"] = read_ms;
}

}  // namespace mmfs::fs::detail
