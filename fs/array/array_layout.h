// The layout an array's schema asks for (docs/reference.md §4): the cell grid (the
// schema's cell or the layout's default), the layout by name, or a table
// attribute's capsule part. ArrayFile places it over the array's extents; the
// scrub rebuilds it to know which sectors hold which cell.
#pragma once

#include <memory>

#include "fs/array/array_schema.h"
#include "geometry/geometry.h"
#include "layouts/layout.h"

namespace mmfs::fs {

// An mloc array's cells are its staging placement: naive, default cells.
// Throws std::invalid_argument when the schema does not fit the geometry or
// the layout.
std::unique_ptr<layouts::Layout> make_array_layout(const geom::Geometry& geometry, const ArraySchema& schema);

}  // namespace mmfs::fs
