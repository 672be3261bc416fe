#include "tools/h5/dimension_scales.h"

#include <hdf5_hl.h>
#include <fmt/format.h>

#include <array>
#include <map>

#include "tools/h5/h5_spec.h"
#include "tools/h5/hdf5_handle.h"

namespace mmfs::h5 {

namespace {

// The scale's NAME attribute ("" when it has none).
std::string scale_name(hid_t dataset) {
  const ssize_t n = H5DSget_scale_name(dataset, nullptr, 0);
  if (n <= 0) {
    H5Eclear2(H5E_DEFAULT);
    return {};
  }
  std::string name(static_cast<std::size_t>(n) + 1, '\0');
  if (H5DSget_scale_name(dataset, name.data(), name.size()) < 0) {
    H5Eclear2(H5E_DEFAULT);
    return {};
  }
  name.resize(static_cast<std::size_t>(n));
  return name;
}

// The path of the object `id` in its file ("" when it has none).
std::string object_path(hid_t id) {
  const ssize_t n = H5Iget_name(id, nullptr, 0);
  if (n <= 0) return {};
  std::string path(static_cast<std::size_t>(n) + 1, '\0');
  H5Iget_name(id, path.data(), path.size());
  path.resize(static_cast<std::size_t>(n));
  return path;
}

herr_t first_scale(hid_t, unsigned, hid_t scale, void* data) {
  *static_cast<std::string*>(data) = object_basename(object_path(scale));
  return 1;  // the first attached scale names the dimension
}

std::string dimension_label(hid_t dataset, unsigned dim) {
  const ssize_t n = H5DSget_label(dataset, dim, nullptr, 0);
  if (n <= 0) {
    H5Eclear2(H5E_DEFAULT);
    return {};
  }
  std::string label(static_cast<std::size_t>(n) + 1, '\0');
  H5DSget_label(dataset, dim, label.data(), label.size());
  label.resize(static_cast<std::size_t>(n));
  return label;
}

int rank_of(hid_t dataset) {
  Dataspace space(H5Dget_space(dataset), "H5Dget_space");
  return H5Sget_simple_extent_ndims(space.get());
}

std::vector<std::uint64_t> shape_of(hid_t dataset) {
  Dataspace space(H5Dget_space(dataset), "H5Dget_space");
  const int rank = H5Sget_simple_extent_ndims(space.get());
  std::vector<hsize_t> dims(static_cast<std::size_t>(std::max(rank, 0)));
  if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return {dims.begin(), dims.end()};
}

}  // namespace

bool is_structure_attribute(std::string_view name, bool on_scale) {
  static constexpr std::array<std::string_view, 7> kAlways = {
      "DIMENSION_LIST", "REFERENCE_LIST", "DIMENSION_LABELS", "_Netcdf4Dimid",
      "_Netcdf4Coordinates", "_NCProperties", "_nc3_strict"};
  for (auto s : kAlways)
    if (name == s) return true;
  // CLASS and NAME are ordinary attribute names elsewhere (PyTables writes CLASS).
  return on_scale && (name == "CLASS" || name == "NAME");
}

bool is_dimension_scale(hid_t dataset) {
  const htri_t r = H5DSis_scale(dataset);
  if (r < 0) H5Eclear2(H5E_DEFAULT);
  return r > 0;
}

bool is_netcdf_placeholder(hid_t dataset) {
  return is_dimension_scale(dataset) && scale_name(dataset).starts_with(kNetcdfPlaceholderPrefix);
}

std::optional<std::vector<std::string>> dimension_names(hid_t dataset, const std::string& path) {
  const int rank = rank_of(dataset);
  if (rank <= 0) return std::nullopt;
  if (rank == 1 && is_dimension_scale(dataset)) return std::vector<std::string>{object_basename(path)};
  std::vector<std::string> names(static_cast<std::size_t>(rank));
  bool any = false;
  for (unsigned d = 0; d < static_cast<unsigned>(rank); ++d) {
    std::string name;
    const int scales = H5DSget_num_scales(dataset, d);
    if (scales > 0) {
      int idx = 0;
      if (H5DSiterate_scales(dataset, d, &idx, first_scale, &name) < 0) {
        H5Eclear2(H5E_DEFAULT);
        name.clear();
      }
    } else if (scales < 0) {
      H5Eclear2(H5E_DEFAULT);
    }
    if (name.empty()) name = dimension_label(dataset, d);
    any = any || !name.empty();
    names[d] = name.empty() ? fmt::format("dim_{}", d) : name;
  }
  if (!any) return std::nullopt;
  return names;
}

std::string netcdf_placeholder_name(std::uint64_t length) {
  return fmt::format("{}{:>10}", kNetcdfPlaceholderPrefix, length);
}

bool are_default_dims(const std::vector<std::string>& dims) {
  for (std::size_t d = 0; d < dims.size(); ++d)
    if (dims[d] != fmt::format("dim_{}", d)) return false;
  return true;
}

namespace {

// The groups enclosing `object` ("/a/b": "/a", "/"), nearest first.
std::vector<std::string> enclosing_groups(const std::string& object) {
  std::vector<std::string> out;
  std::string at = object;
  while (at != "/" && !at.empty()) {
    const std::size_t slash = at.rfind('/');
    at = slash == 0 || slash == std::string::npos ? "/" : at.substr(0, slash);
    out.push_back(at);
  }
  return out;
}

// The scale `name` of length `len` that an enclosing group of `object`
// gives (see attach_dimension_scales), made a scale if it was only a 1-D
// dataset; nullopt when none does.
std::optional<Dataset> enclosing_scale(hid_t group, const std::string& object, const std::string& name,
                                       std::uint64_t len) {
  for (const std::string& outer : enclosing_groups(object)) {
    const std::string path = (outer == "/" ? "/" : outer + "/") + name;
    const htri_t exists = H5Lexists(group, path.c_str(), H5P_DEFAULT);
    if (exists < 0) throw_hdf5_error(fmt::format("checking {}", path));
    if (exists == 0) continue;
    H5O_info_t info;
    if (H5Oget_info_by_name2(group, path.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0 ||
        info.type != H5O_TYPE_DATASET) {
      H5Eclear2(H5E_DEFAULT);
      return std::nullopt;  // a group of that name hides the enclosing ones
    }
    Dataset coord(H5Dopen2(group, path.c_str(), H5P_DEFAULT), fmt::format("opening {}", path));
    if (shape_of(coord.get()) != std::vector<std::uint64_t>{len}) return std::nullopt;
    if (!is_dimension_scale(coord.get()))
      check_ok(H5DSset_scale(coord.get(), name.c_str()), fmt::format("making {} a dimension scale", path));
    return coord;
  }
  return std::nullopt;
}

}  // namespace

std::vector<std::string> attach_dimension_scales(hid_t group, const std::string& object,
                                                 const std::vector<ScaledDataset>& datasets) {
  std::vector<std::string> warnings;
  // Each name's length, from every dataset that uses it.
  std::map<std::string, std::uint64_t> length;
  std::map<std::string, bool> conflicting;
  for (const auto& ds : datasets)
    for (std::size_t d = 0; d < ds.dims.size() && d < ds.shape.size(); ++d) {
      auto [it, fresh] = length.emplace(ds.dims[d], ds.shape[d]);
      if (!fresh && it->second != ds.shape[d] && !conflicting[ds.dims[d]]) {
        conflicting[ds.dims[d]] = true;
        warnings.push_back(fmt::format("dimension '{}' has length {} in one array and {} in {}: no dimension scale",
                                       ds.dims[d], it->second, ds.shape[d], ds.name));
      }
    }

  std::map<std::string, Dataset> scales;
  for (const auto& [name, len] : length) {
    if (conflicting[name]) continue;
    const htri_t exists = H5Lexists(group, name.c_str(), H5P_DEFAULT);
    if (exists < 0) throw_hdf5_error(fmt::format("checking {}", name));
    if (exists > 0) {
      H5O_info_t info;
      if (H5Oget_info_by_name2(group, name.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0 ||
          info.type != H5O_TYPE_DATASET) {
        H5Eclear2(H5E_DEFAULT);
        warnings.push_back(fmt::format("dimension '{}': the name is taken by a group: no dimension scale", name));
        continue;
      }
      Dataset coord(H5Dopen2(group, name.c_str(), H5P_DEFAULT), fmt::format("opening {}", name));
      if (shape_of(coord.get()) != std::vector<std::uint64_t>{len}) {
        warnings.push_back(fmt::format("dimension '{}': the dataset of that name is not 1-D of length {}: "
                                       "no dimension scale",
                                       name, len));
        continue;
      }
      if (!is_dimension_scale(coord.get()))
        check_ok(H5DSset_scale(coord.get(), name.c_str()), fmt::format("making {} a dimension scale", name));
      scales.emplace(name, std::move(coord));
      continue;
    }
    if (auto outer = enclosing_scale(group, object, name, len)) {
      scales.emplace(name, std::move(*outer));
      continue;
    }
    // A dimension without a variable, as netCDF-4 writes one: no data is
    // stored (reads give the fill value), only its length and its name.
    const hsize_t dims[1] = {len};
    Dataspace space(H5Screate_simple(1, dims, nullptr), "H5Screate_simple");
    Dataset placeholder(
        H5Dcreate2(group, name.c_str(), H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
        fmt::format("creating dimension {}", name));
    check_ok(H5DSset_scale(placeholder.get(), netcdf_placeholder_name(len).c_str()),
             fmt::format("making {} a dimension scale", name));
    scales.emplace(name, std::move(placeholder));
  }

  for (const auto& ds : datasets) {
    Dataset data(H5Dopen2(group, ds.name.c_str(), H5P_DEFAULT), fmt::format("opening {}", ds.name));
    if (is_dimension_scale(data.get())) continue;  // a scale is its own dimension; HDF5 attaches nothing to it
    for (std::size_t d = 0; d < ds.dims.size(); ++d) {
      auto it = scales.find(ds.dims[d]);
      if (it == scales.end()) continue;
      check_ok(H5DSattach_scale(data.get(), it->second.get(), static_cast<unsigned>(d)),
               fmt::format("attaching dimension '{}' to {}", ds.dims[d], ds.name));
    }
  }
  return warnings;
}

}  // namespace mmfs::h5
