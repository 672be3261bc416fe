// The zarr.json documents of the Zarr v3 view (docs/reference.md §5, the
// Zarr v3 core specification): an array's, whose chunks are the files the
// view path grammar names (fs/paths/view_path.h, `zarr/`), and a group's.
// Pure: the daemon passes in the schema and the attributes.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fs/array/array_schema.h"

namespace mmfs::fs {

// The metadata of an array of `schema` read in chunks of `chunk`: a regular
// chunk grid, the default chunk key encoding with '/', the bytes codec
// (little-endian, as mmfs stores elements), fill value 0 (what an unwritten
// element reads as, and what pads an edge chunk), dimension_names from
// user.mmfs.dims (or dim_0, ...), and `attributes`.
// `names`: the dimension names when user.mmfs.dims is not set (kHdf5DimsXattr's), or null.
nlohmann::json zarr_array_metadata(const ArraySchema& schema, std::span<const std::uint64_t> chunk,
                                   const nlohmann::json& attributes,
                                   const std::vector<std::string>* names = nullptr);

// The metadata of a group (a directory's arrays).
nlohmann::json zarr_group_metadata(const nlohmann::json& attributes);

// An xattr value as a Zarr attribute: its JSON when it is a JSON document
// (as mmfs-import writes HDF5 attributes), else the text itself.
nlohmann::json zarr_attribute_value(std::string_view value);

}  // namespace mmfs::fs
