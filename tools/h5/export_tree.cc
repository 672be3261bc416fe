#include "tools/h5/export_tree.h"

#include <dirent.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "fs/array/array_schema.h"
#include "tools/h5/attributes.h"
#include "tools/h5/dimension_scales.h"
#include "tools/h5/h5_walk.h"
#include "tools/h5/hdf5_handle.h"
#include "tools/h5/import_tree.h"
#include "tools/h5/tool_error.h"
#include "tools/h5/xattr_io.h"

namespace mmfs::h5 {

namespace {

struct TreeDir {
  std::string path;    // on the mount
  std::string object;  // the group
};

struct TreeArray {
  std::string path;
  std::string name;       // the dataset's link name in its group
  std::size_t group = 0;  // index into TreePlan::dirs
};

struct TreePlan {
  std::vector<TreeDir> dirs;  // parents before children
  std::vector<TreeArray> arrays;
};

std::vector<std::string> sorted_names(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) {
    int e = errno;
    throw ToolError(e, fmt::format("{}: {}", dir, std::strerror(e)));
  }
  std::vector<std::string> names;
  while (dirent* ent = ::readdir(d)) {
    std::string name = ent->d_name;
    if (name != "." && name != "..") names.push_back(std::move(name));
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

bool has_shape(const std::string& path) {
  std::string shape;
  return !get_xattr(path, "user.mmfs.shape", &shape);
}

void collect(std::size_t at, TreePlan& plan, const TreeExportReporter& reporter) {
  const TreeDir dir = plan.dirs[at];  // a copy: the vector grows below
  for (const std::string& name : sorted_names(dir.path)) {
    const std::string path = dir.path + "/" + name;
    if (name == ".mmfs") continue;  // the mount's control files
    struct stat st{};
    if (::lstat(path.c_str(), &st) != 0) {
      reporter.note(path, fmt::format("{}; not exported", std::strerror(errno)));
    } else if (S_ISLNK(st.st_mode)) {
      reporter.note(path, "a symbolic link: not exported");
    } else if (S_ISDIR(st.st_mode)) {
      plan.dirs.push_back({path, child_path(dir.object, name)});
      collect(plan.dirs.size() - 1, plan, reporter);
    } else if (S_ISREG(st.st_mode) && has_shape(path)) {
      plan.arrays.push_back({path, name, at});
    } else {
      reporter.note(path, "not an array file: not exported");
    }
  }
}

// Removes the HDF5 file export_tree created unless it completed.
struct RemoveUnlessDone {
  std::string file;
  bool armed = false, done = false;
  ~RemoveUnlessDone() {
    if (armed && !done) ::unlink(file.c_str());
  }
};

Group open_or_create_group(hid_t file, const std::string& object) {
  if (object == "/") return Group(H5Gopen2(file, "/", H5P_DEFAULT), "opening the root group");
  const htri_t exists = H5Lexists(file, object.c_str(), H5P_DEFAULT);
  if (exists > 0) {
    H5O_info_t info;
    if (H5Oget_info_by_name2(file, object.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0 ||
        info.type != H5O_TYPE_GROUP) {
      H5Eclear2(H5E_DEFAULT);
      throw ToolError(ENOTDIR, fmt::format("{}: exists and is not a group", object));
    }
    return Group(H5Gopen2(file, object.c_str(), H5P_DEFAULT), fmt::format("opening group {}", object));
  }
  H5Eclear2(H5E_DEFAULT);
  Plist lcpl(H5Pcreate(H5P_LINK_CREATE), "H5Pcreate(link create)");
  check_ok(H5Pset_create_intermediate_group(lcpl.get(), 1), "H5Pset_create_intermediate_group");
  return Group(H5Gcreate2(file, object.c_str(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT),
               fmt::format("creating group {}", object));
}

}  // namespace

void export_tree(const std::string& dir_arg, const std::string& file_name, const std::string& group,
                 const ExportSettings& settings, const TreeExportReporter& reporter) {
  std::string dir = dir_arg;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  struct stat st{};
  if (::stat(dir.c_str(), &st) != 0) {
    int e = errno;
    throw ToolError(e, fmt::format("{}: {}", dir, std::strerror(e)));
  }
  if (!S_ISDIR(st.st_mode)) throw ToolError(ENOTDIR, fmt::format("{}: not a directory", dir));

  // Everything is found and checked before the HDF5 file is touched.
  TreePlan plan;
  plan.dirs.push_back({dir, group});
  collect(0, plan, reporter);
  std::vector<ArraySource> sources;
  sources.reserve(plan.arrays.size());
  for (const auto& a : plan.arrays) sources.push_back(resolve_source(a.path));

  RemoveUnlessDone cleanup{file_name};
  if (::stat(file_name.c_str(), &st) != 0) {
    if (errno != ENOENT) {
      int e = errno;
      throw ToolError(e, fmt::format("{}: {}", file_name, std::strerror(e)));
    }
    File created(H5Fcreate(file_name.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT));
    if (!created) {
      std::string why = hdf5_error_text();
      throw ToolError(EIO, fmt::format("{}: cannot create{}", file_name, why.empty() ? "" : ": " + why));
    }
    cleanup.armed = true;
    created.close(fmt::format("closing {}", file_name));
  }

  // The groups and their attributes.
  {
    File file = open_hdf5_file(file_name, true);
    for (const auto& d : plan.dirs) {
      Group g = open_or_create_group(file.get(), d.object);
      std::vector<std::string> warnings;
      Xattrs xattrs = exported_xattrs(d.path, warnings);
      auto w = xattrs_to_attributes(g.get(), xattrs);
      warnings.insert(warnings.end(), w.begin(), w.end());
      for (const auto& text : warnings) reporter.note(file_name + ":" + d.object, text);
    }
    file.close(fmt::format("closing {}", file_name));
  }

  // The datasets, one export each.
  for (std::size_t i = 0; i < sources.size(); ++i) {
    const std::string object = child_path(plan.dirs[plan.arrays[i].group].object, plan.arrays[i].name);
    TransferStats stats = export_array(sources[i], file_name, object, settings);
    for (const auto& w : stats.warnings) reporter.note(file_name + ":" + object, w);
    reporter.exported(sources[i], file_name + ":" + object, stats);
  }

  // The dimension scales, group by group.
  std::map<std::size_t, std::vector<ScaledDataset>> named;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    std::string text;
    if (get_xattr(plan.arrays[i].path, "user.mmfs.dims", &text)) continue;  // an older volume: no names
    // Parsed as the daemon parses the attribute (fs/array/array_schema.h).
    fs::ArraySchema names;
    if (fs::set_schema_attr(names, "dims", text)) continue;
    std::vector<std::string> dims = std::move(names.dims);
    // Names that are not identifiers: user.hdf5.dims (where user.mmfs.dims is not set).
    if (are_default_dims(dims) && !get_xattr(plan.arrays[i].path, std::string(fs::kHdf5DimsXattr), &text))
      if (auto kept = fs::decode_hdf5_dims(text, sources[i].array_shape.size())) dims = std::move(*kept);
    if (dims.size() != sources[i].array_shape.size() || are_default_dims(dims)) continue;
    named[plan.arrays[i].group].push_back({plan.arrays[i].name, sources[i].array_shape, std::move(dims)});
  }
  if (!named.empty()) {
    File file = open_hdf5_file(file_name, true);
    for (const auto& [at, datasets] : named) {
      Group g(H5Gopen2(file.get(), plan.dirs[at].object.c_str(), H5P_DEFAULT),
              fmt::format("opening group {}", plan.dirs[at].object));
      for (const auto& w : attach_dimension_scales(g.get(), plan.dirs[at].object, datasets))
        reporter.note(file_name + ":" + plan.dirs[at].object, w);
    }
    check_ok(H5Fflush(file.get(), H5F_SCOPE_GLOBAL), fmt::format("flushing {}", file_name));
    file.close(fmt::format("closing {}", file_name));
  }
  cleanup.done = true;
}

}  // namespace mmfs::h5
