#include "tools/h5/import_tree.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "tools/h5/dimension_scales.h"
#include "tools/h5/h5_spec.h"
#include "tools/h5/h5_walk.h"
#include "tools/h5/tool_error.h"
#include "tools/h5/xattr_io.h"

namespace mmfs::h5 {

namespace {

bool is_directory(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Creates directory `dir` unless it exists; "" on success, else why not.
std::string make_directory(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) == 0) return {};
  const int e = errno;
  if (e == EEXIST && is_directory(dir)) return {};
  if (e == EEXIST) return fmt::format("{}: exists and is not a directory", dir);
  if (e == ENOENT) return fmt::format("{}: its parent directory does not exist", dir);
  return fmt::format("{}: mkdir: {}", dir, std::strerror(e));
}

H5O_type_t object_type(hid_t file, const std::string& file_name, const std::string& object) {
  H5O_info_t info;
  if (H5Oget_info_by_name2(file, object.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0) {
    H5Eclear2(H5E_DEFAULT);
    throw ToolError(ENOENT, fmt::format("{}:{}: no such dataset or group", file_name, object));
  }
  return info.type;
}

// Sets an HDF5 object's attributes as xattrs of `path`; what cannot be set is a note.
void copy_attributes(hid_t object, const std::string& path, const std::string& what, const ImportReporter& r) {
  ImportedAttributes attrs = attributes_to_xattrs(object);
  for (const auto& w : attrs.warnings) r.note(what, w);
  for (const auto& [name, value] : attrs.xattrs)
    if (auto res = set_xattr(path, name, value))
      r.note(what, fmt::format("attribute '{}': {}, skipped", name.substr(5), res.message));
}

bool is_placeholder(hid_t group, const std::string& name) {
  Dataset dataset(H5Dopen2(group, name.c_str(), H5P_DEFAULT), fmt::format("opening dataset {}", name));
  return is_netcdf_placeholder(dataset.get());
}

class TreeImport : public WalkVisitor {
 public:
  TreeImport(std::string file, std::string start, std::string dest, const ImportSettings& s, const ImportReporter& r)
      : file_(std::move(file)), start_(std::move(start)), dest_(std::move(dest)), settings_(s), reporter_(r) {}

  bool all_imported() const { return all_imported_; }

  bool enter_group(const std::string& path, hid_t group) override {
    const std::string dir = target(path);
    if (std::string why = make_directory(dir); !why.empty()) {
      problem(path, why + "; its contents are skipped");
      return false;
    }
    copy_attributes(group, dir, what(path), reporter_);
    return true;
  }

  void dataset(const std::string& path, hid_t group, const std::string& name) override {
    try {
      if (is_placeholder(group, name)) {
        if (reporter_.skipped) reporter_.skipped(path, "a netCDF dimension without a variable: not imported (its name is in the "
                                   "arrays' user.mmfs.dims, its length in their shapes)");
        return;
      }
      DatasetInfo info;
      const std::string dest = target(path);
      TransferStats stats = import_dataset(group, name, dest, settings_, path, info);
      for (const auto& w : stats.warnings) reporter_.note(what(path), w);
      reporter_.imported(path, dest, info, stats);
    } catch (const ToolError& e) {
      if (e.error() == EINTR) throw;  // Ctrl-C stops the whole import
      problem(path, e.what());
    } catch (const H5Error& e) {
      problem(path, e.what());
    }
  }

  void duplicate(const std::string& path, const std::string& first) override {
    reporter_.note(what(path), fmt::format("the same object as {}, not imported twice", first));
  }

  void unreachable(const std::string& path, const std::string& why) override { problem(path, why); }

 private:
  std::string what(const std::string& path) const { return file_ + ":" + path; }
  std::string target(const std::string& path) const {
    return dest_ + (start_ == "/" ? path : path.substr(start_.size()));
  }
  void problem(const std::string& path, const std::string& why) {
    all_imported_ = false;
    reporter_.problem(what(path), why);
  }

  std::string file_, start_, dest_;
  const ImportSettings& settings_;
  const ImportReporter& reporter_;
  bool all_imported_ = true;
};

class Lister : public WalkVisitor {
 public:
  Lister(std::string file, const ImportReporter& r) : file_(std::move(file)), reporter_(r) {}
  std::vector<ListedDataset> found;
  bool enter_group(const std::string&, hid_t) override { return true; }
  void dataset(const std::string& path, hid_t group, const std::string& name) override {
    Dataset dataset(H5Dopen2(group, name.c_str(), H5P_DEFAULT), fmt::format("opening dataset {}", path));
    found.push_back({path, inspect_dataset(dataset.get())});
  }
  void duplicate(const std::string& path, const std::string& first) override {
    reporter_.note(file_ + ":" + path, fmt::format("the same object as {}", first));
  }
  void unreachable(const std::string& path, const std::string& why) override {
    reporter_.note(file_ + ":" + path, why);
  }

 private:
  std::string file_;
  const ImportReporter& reporter_;
};

}  // namespace

File open_hdf5_file(const std::string& file, bool writable) {
  struct stat st{};
  if (::stat(file.c_str(), &st) != 0) {
    int e = errno;
    throw ToolError(e, fmt::format("{}: {}", file, std::strerror(e)));
  }
  if (S_ISDIR(st.st_mode)) throw ToolError(EISDIR, fmt::format("{}: is a directory, not an HDF5 file", file));
  htri_t is_hdf5 = H5Fis_hdf5(file.c_str());
  if (is_hdf5 == 0) throw ToolError(EINVAL, fmt::format("{}: not an HDF5 file", file));
  if (is_hdf5 < 0) throw_hdf5_error(file);
  File f(H5Fopen(file.c_str(), writable ? H5F_ACC_RDWR : H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!f) {
    std::string why = hdf5_error_text();
    throw ToolError(EIO, fmt::format("{}: cannot open{}", file, why.empty() ? "" : ": " + why));
  }
  return f;
}

bool run_import(const std::string& file_name, const std::string& object_arg, const std::string& dest_arg,
                const ImportSettings& settings, const ImportReporter& reporter) {
  std::string dest = dest_arg;  // without trailing slashes: children are joined with '/'
  while (dest.size() > 1 && dest.back() == '/') dest.pop_back();
  File file = open_hdf5_file(file_name, false);
  const std::string object = object_arg.empty() ? "/" : object_arg;
  const H5O_type_t type = object_type(file.get(), file_name, object);
  const std::string what = file_name + ":" + object;

  if (type == H5O_TYPE_DATASET) {
    // Errors name the dataset: "data.h5:/ds: reason".
    try {
      std::string target = dest;
      if (dest_arg.size() > 1 && dest_arg.back() == '/' && !is_directory(dest))
        throw ToolError(ENOENT, fmt::format("{}: no such directory", dest_arg));
      if (is_directory(dest)) {
        target += (target == "/" ? "" : "/") + object_basename(object);
      }
      DatasetInfo info;
      TransferStats stats = import_dataset(file.get(), object, target, settings, object, info);
      for (const auto& w : stats.warnings) reporter.note(what, w);
      reporter.imported(object, target, info, stats);
      return true;
    } catch (const ToolError& e) {
      throw ToolError(e.error(), what + ": " + e.what());
    } catch (const H5Error& e) {
      throw ToolError(EIO, what + ": " + e.what());
    }
  }
  if (type != H5O_TYPE_GROUP) throw ToolError(EINVAL, what + ": neither a dataset nor a group (a named datatype?)");

  if (std::string why = make_directory(dest); !why.empty()) throw ToolError(ENOTDIR, why);
  try {
    Group group(H5Gopen2(file.get(), object.c_str(), H5P_DEFAULT), "opening the group");
    copy_attributes(group.get(), dest, what, reporter);
    TreeImport tree(file_name, object, dest, settings, reporter);
    walk_hdf5(group.get(), object, tree);
    return tree.all_imported();
  } catch (const H5Error& e) {
    throw ToolError(EIO, file_name + ": " + e.what());
  }
}

std::vector<ListedDataset> list_datasets(const std::string& file_name, const std::string& object_arg,
                                         const ImportReporter& reporter) {
  File file = open_hdf5_file(file_name, false);
  const std::string object = object_arg.empty() ? "/" : object_arg;
  const H5O_type_t type = object_type(file.get(), file_name, object);
  if (type == H5O_TYPE_DATASET) {
    Dataset dataset(H5Dopen2(file.get(), object.c_str(), H5P_DEFAULT), "opening the dataset");
    return {ListedDataset{object, inspect_dataset(dataset.get())}};
  }
  if (type != H5O_TYPE_GROUP)
    throw ToolError(EINVAL, file_name + ":" + object + ": neither a dataset nor a group (a named datatype?)");
  Group group(H5Gopen2(file.get(), object.c_str(), H5P_DEFAULT), "opening the group");
  Lister lister(file_name, reporter);
  walk_hdf5(group.get(), object, lister);
  return std::move(lister.found);
}

std::string list_table(const std::vector<ListedDataset>& datasets) {
  std::vector<std::vector<std::string>> rows{{"PATH", "SHAPE", "DTYPE", "CHUNKS", "FILTERS", "IMPORTABLE"}};
  for (const auto& d : datasets) {
    const DatasetInfo& i = d.info;
    std::string shape = i.space == "simple" ? shape_text(i.shape) : i.space;
    std::string chunks = i.chunks.empty() ? i.storage : shape_text(i.chunks);
    std::string filters = i.filters.empty() ? "-" : fmt::format("{}", fmt::join(i.filters, ","));
    rows.push_back({d.path, shape, i.type, chunks, filters, i.importable() ? "yes" : "no: " + i.refusal});
  }
  std::vector<std::size_t> width(rows.front().size(), 0);
  for (const auto& r : rows)
    for (std::size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t c = 0; c < r.size(); ++c) {
      line += r[c];
      if (c + 1 < r.size()) line += std::string(width[c] - r[c].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace mmfs::h5
