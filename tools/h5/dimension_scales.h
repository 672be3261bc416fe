// HDF5 dimension scales <-> mmfs dimension names (user.mmfs.dims), so that
// netCDF-4 files (which name their dimensions with dimension scales) keep
// their dimension names through mmfs-import and mmfs-export
// (docs/import-export.md, "Dimension names").
//
// Import: a dataset's name for dimension d is the name of the scale attached
// to d (netCDF-4's dimension name is the scale dataset's own name), else its
// HDF5 dimension label. A scale is its own dimension. netCDF-4 writes a
// dimension that has no variable as a placeholder scale (NAME "This is a
// netCDF dimension but not a netCDF variable. N"); it holds no data and is
// not imported: its name lives in the arrays' dims, its length in their
// shapes. The attributes that only encode this structure (the scales' CLASS
// and NAME, DIMENSION_LIST, REFERENCE_LIST, DIMENSION_LABELS, and the
// netCDF-4 library's _Netcdf4Dimid, _Netcdf4Coordinates, _NCProperties,
// _nc3_strict) are not copied as xattrs: export writes the structure anew.
//
// Export: in each group, every name used in an array's dims becomes a
// dimension scale — the 1-D dataset of that name in the group when there is
// one (a coordinate variable), else the one of an enclosing group (netCDF-4
// dimensions are visible in the groups below theirs), else a netCDF-4
// placeholder of that length — attached to each dataset's dimension of that
// name.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mmfs::h5 {

// The NAME netCDF-4 gives the scale of a dimension without a variable.
inline constexpr std::string_view kNetcdfPlaceholderPrefix = "This is a netCDF dimension but not a netCDF variable.";

// Whether attribute `name` of an object only encodes dimension-scale or
// netCDF-4 library structure (see the top of this file); `on_scale`: the
// object is a dimension scale (only then are CLASS and NAME structure).
bool is_structure_attribute(std::string_view name, bool on_scale);

bool is_dimension_scale(hid_t dataset);
// A netCDF-4 placeholder scale: a dimension without a variable.
bool is_netcdf_placeholder(hid_t dataset);

// The dimension names of `dataset` (its path in the file is `path`), one per
// dimension, or nullopt when it names none of them. A dimension with neither
// scale nor label is dim_D. Throws H5Error when the library fails.
std::optional<std::vector<std::string>> dimension_names(hid_t dataset, const std::string& path);

// The netCDF-4 placeholder NAME of a dimension of `length` elements.
std::string netcdf_placeholder_name(std::uint64_t length);

// Whether `dims` (as user.mmfs.dims reads) are the defaults dim_0, dim_1, ...
// that an array without names shows.
bool are_default_dims(const std::vector<std::string>& dims);

// One exported array of a group, for attach_dimension_scales.
struct ScaledDataset {
  std::string name;  // link name in the group
  std::vector<std::uint64_t> shape;
  std::vector<std::string> dims;  // one per dimension
};

// Makes and attaches the dimension scales of `datasets` (all in `group`, whose
// path in the file is `object`, each with names) as the top of this file
// says. A name with no dataset in the group is first looked for in the
// enclosing groups, nearest first, as netCDF-4 scopes dimensions: a 1-D
// dataset of that name and length there (a coordinate variable, or the
// placeholder that group's own export made) is the scale; a dataset there of
// another shape hides the ones further out. Only then is a placeholder made
// in the group. Enclosing groups must be exported first. Returns warnings (a
// name used with two lengths, a name taken by something that cannot be its
// scale). Throws H5Error when the library fails.
std::vector<std::string> attach_dimension_scales(hid_t group, const std::string& object,
                                                 const std::vector<ScaledDataset>& datasets);

}  // namespace mmfs::h5
