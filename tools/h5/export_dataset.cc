#include "tools/h5/export_dataset.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>

#include "tools/h5/dtype_map.h"
#include "tools/h5/file_io.h"
#include "tools/h5/h5_spec.h"
#include "tools/h5/import_tree.h"
#include "tools/h5/interrupt.h"
#include "tools/h5/pipeline.h"
#include "tools/h5/progress.h"
#include "tools/h5/tool_error.h"
#include "tools/h5/transfer_tiling.h"
#include "tools/h5/xattr_io.h"

namespace mmfs::h5 {

namespace {

// What export_array created, undone in reverse unless the export completed.
// HDF5 cannot give the space of a deleted dataset back to the file (h5repack
// can), but the names are gone and the file is consistent.
struct Undo {
  File* file = nullptr;
  std::string file_name;
  bool created_file = false;
  std::vector<std::string> links;  // groups made and the dataset, in creation order
  bool done = false;

  ~Undo() {
    if (done) return;
    if (file && file->valid()) {
      for (auto it = links.rbegin(); it != links.rend(); ++it) H5Ldelete(file->get(), it->c_str(), H5P_DEFAULT);
      H5Eclear2(H5E_DEFAULT);
      file->reset();
    }
    if (created_file) ::unlink(file_name.c_str());
  }
};

bool link_exists(hid_t file, const std::string& path) {
  htri_t r = H5Lexists(file, path.c_str(), H5P_DEFAULT);
  if (r < 0) throw_hdf5_error(fmt::format("checking {}", path));
  return r > 0;
}

H5O_type_t type_at(hid_t file, const std::string& path) {
  H5O_info_t info;
  if (H5Oget_info_by_name2(file, path.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0) {
    H5Eclear2(H5E_DEFAULT);
    return H5O_TYPE_UNKNOWN;  // a dangling soft or external link
  }
  return info.type;
}

// The groups on the way to `object`, made where missing (recorded in `undo`).
void make_groups(hid_t file, const std::string& file_name, const std::string& object, Undo& undo) {
  for (std::size_t at = object.find('/', 1); at != std::string::npos; at = object.find('/', at + 1)) {
    const std::string prefix = object.substr(0, at);
    if (link_exists(file, prefix)) {
      if (type_at(file, prefix) != H5O_TYPE_GROUP)
        throw ToolError(ENOTDIR, fmt::format("{}:{}: exists and is not a group", file_name, prefix));
      continue;
    }
    Group g(H5Gcreate2(file, prefix.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
            fmt::format("creating group {}", prefix));
    undo.links.push_back(prefix);
  }
}

Plist creation_plist(const std::vector<std::uint64_t>& chunks, const ExportSettings& s) {
  Plist dcpl(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate(dataset create)");
  // Every element is written: filling the storage first would write it twice.
  check_ok(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER), "H5Pset_fill_time");
  if (!chunks.empty()) {
    std::vector<hsize_t> c(chunks.begin(), chunks.end());
    check_ok(H5Pset_chunk(dcpl.get(), static_cast<int>(c.size()), c.data()), "H5Pset_chunk");
  }
  if (s.shuffle) check_ok(H5Pset_shuffle(dcpl.get()), "H5Pset_shuffle");
  if (s.gzip >= 0) {
    if (H5Zfilter_avail(H5Z_FILTER_DEFLATE) <= 0)
      throw ToolError(ENOTSUP, "--gzip: this HDF5 library has no deflate filter");
    check_ok(H5Pset_deflate(dcpl.get(), static_cast<unsigned>(s.gzip)), "H5Pset_deflate");
  }
  return dcpl;
}

}  // namespace

Xattrs exported_xattrs(const std::string& array, std::vector<std::string>& warnings) {
  std::vector<std::string> names;
  if (auto r = list_xattrs(array, &names)) throw ToolError(r.error, array + ": " + r.message);
  Xattrs out;
  for (const auto& name : names) {
    if (name.rfind("user.", 0) != 0 || name.rfind("user.mmfs.", 0) == 0) continue;
    std::string value;
    if (auto r = get_xattr(array, name, &value)) {
      warnings.push_back(fmt::format("{}: {}, not exported", array, r.message));
      continue;
    }
    out.emplace_back(name, std::move(value));
  }
  return out;
}

TransferStats export_array(const ArraySource& src, const std::string& file_name, const std::string& object,
                           const ExportSettings& settings) {
  const auto t0 = std::chrono::steady_clock::now();
  TransferStats stats;
  stats.bytes = src.bytes;
  const std::uint32_t itemsize = src.dtype.itemsize;

  // Everything that can be refused before touching the HDF5 file.
  const std::vector<std::uint64_t> chunks = choose_chunks(settings.chunks, src.shape, itemsize);
  if ((settings.gzip >= 0 || settings.shuffle) && chunks.empty())
    throw ToolError(EINVAL, fmt::format("--gzip and --shuffle need chunked storage, and {}",
                                        src.shape.empty() ? "the dataset is a scalar (the view fixes every dimension)"
                                                          : "--chunks contiguous was given"));
  Fd fd(::open(src.path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    int e = errno;
    throw ToolError(e, io_error_text(src.path, "open", e));
  }
  ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);

  // The file, the groups, the dataset's name.
  File file;
  Undo undo;
  undo.file = &file;
  undo.file_name = file_name;
  struct stat st{};
  if (::stat(file_name.c_str(), &st) == 0) {
    file = open_hdf5_file(file_name, true);
  } else {
    if (errno != ENOENT) {
      int e = errno;
      throw ToolError(e, fmt::format("{}: {}", file_name, std::strerror(e)));
    }
    // HDF5's own message for a missing directory is a page of internals.
    const auto slash = file_name.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : file_name.substr(0, slash);
    if (::access(dir.c_str(), W_OK | X_OK) != 0) {
      int e = errno;
      throw ToolError(e, fmt::format("{}: cannot create: {}: {}", file_name, dir, std::strerror(e)));
    }
    file = File(H5Fcreate(file_name.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT));
    if (!file) {
      std::string why = hdf5_error_text();
      throw ToolError(EIO, fmt::format("{}: cannot create{}", file_name, why.empty() ? "" : ": " + why));
    }
    undo.created_file = true;
  }
  make_groups(file.get(), file_name, object, undo);
  std::string create_at = object;  // where the dataset is made; a temporary name when replacing one
  bool replacing = false;
  if (link_exists(file.get(), object)) {
    if (type_at(file.get(), object) != H5O_TYPE_DATASET)
      throw ToolError(EEXIST, fmt::format("{}:{}: exists and is not a dataset", file_name, object));
    if (!settings.force)
      throw ToolError(EEXIST, fmt::format("{}:{}: the dataset exists (--force replaces it)", file_name, object));
    // The old dataset stays until the new one is complete.
    replacing = true;
    create_at = object + ".mmfs-export-partial";
    if (link_exists(file.get(), create_at)) check_ok(H5Ldelete(file.get(), create_at.c_str(), H5P_DEFAULT), "H5Ldelete");
  }

  // The dataset.
  const hid_t type = hdf5_type_of(src.dtype);
  std::vector<hsize_t> dims(src.shape.begin(), src.shape.end());
  Dataspace space(dims.empty() ? H5Screate(H5S_SCALAR)
                               : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                  "H5Screate");
  Plist dcpl = creation_plist(chunks, settings);
  std::uint64_t chunk_bytes = chunks.empty() ? 0 : itemsize;
  for (auto c : chunks) chunk_bytes *= c;
  Plist dapl = transfer_dataset_access(chunk_bytes);
  Dataset dataset(H5Dcreate2(file.get(), create_at.c_str(), type, space.get(), H5P_DEFAULT, dcpl.get(), dapl.get()),
                  fmt::format("creating dataset {}", create_at));
  undo.links.push_back(create_at);

  // The data.
  const std::vector<std::uint64_t> tile_chunks =
      chunks.empty() ? std::vector<std::uint64_t>(src.shape.size(), 1) : chunks;
  const TransferTiling tiling(src.shape, itemsize, tile_chunks, settings.buffer_bytes);
  const std::size_t buffer_size = tiling.max_box_bytes();
  std::unique_ptr<std::byte[]> buf0(new std::byte[buffer_size]), buf1(new std::byte[buffer_size]);
  // The bar counts bytes read from SRC (the part that moves steadily); it
  // reaches 100% when the last box is read and ends when it is written.
  Progress progress(stderr, src.path, stats.bytes, settings.progress);
  std::uint64_t read = 0;

  // A box that is one C-order run of SRC is read from SRC. One made of
  // several runs (a chunk-aligned box narrower than SRC's trailing
  // dimensions) is read through the array's box view of the same elements
  // instead: the daemon then reads each cell of the box once and streams the
  // box's C-order bytes, where runs read one by one fetch every cell they
  // touch again for each run (measured on a multimap array: 64 runs of
  // 1 MiB, 3 MB/s; the same box as a view, 250+ MB/s).
  auto read_box = [&](std::uint64_t i, std::span<std::byte> buf) {  // worker thread: no HDF5 here
    check_interrupted();
    const Box b = tiling.box(i);
    auto read_piece = [&](int from, const std::string& path, std::span<std::byte> to, std::uint64_t offset) {
      const std::uint64_t before = read;
      PieceDone piece;
      if (settings.progress) piece = [&](std::uint64_t moved) { progress.update(before + moved); };
      read_fully(from, path, to, offset, piece);
      read += to.size();
    };
    if (tiling.run_count(b) == 1) {
      tiling.for_each_run(b, [&](const Run& r) {
        read_piece(fd.get(), src.path, buf.subspan(r.buffer_offset, r.length), r.array_offset);
      });
    } else {
      const std::string view = src.array + "@/" + box_view_path(src, b.start, b.count);
      Fd box_fd(::open(view.c_str(), O_RDONLY | O_CLOEXEC));
      if (box_fd.get() < 0) {
        int e = errno;
        throw ToolError(e, io_error_text(view, "open", e));
      }
      read_piece(box_fd.get(), view, buf.first(b.elements() * itemsize), 0);
    }
    progress.update(read);
  };
  auto write_box = [&](std::uint64_t i, std::span<std::byte> buf) {
    const Box b = tiling.box(i);
    if (dims.empty()) {
      check_ok(H5Dwrite(dataset.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), "writing the scalar");
    } else {
      std::vector<hsize_t> start(b.start.begin(), b.start.end()), count(b.count.begin(), b.count.end());
      check_ok(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
               "H5Sselect_hyperslab");
      Dataspace mem(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr), "H5Screate_simple");
      check_ok(H5Dwrite(dataset.get(), type, mem.get(), space.get(), H5P_DEFAULT, buf.data()),
               fmt::format("writing elements {}..+{}", fmt::join(start, ","), fmt::join(count, "x")));
    }
  };
  run_pipeline(tiling.box_count(), std::span(buf0.get(), buffer_size), std::span(buf1.get(), buffer_size), read_box,
               write_box, CallerRuns::Consumer);
  buf0.reset();
  buf1.reset();

  // Attributes (the array file's, not a view's), then the final names.
  if (!src.is_view) {
    Xattrs xattrs = exported_xattrs(src.array, stats.warnings);
    auto w = xattrs_to_attributes(dataset.get(), xattrs);
    stats.warnings.insert(stats.warnings.end(), w.begin(), w.end());
  }
  // A signal that came after the last read (the last writes, the
  // attributes) still undoes the export, as one during the reads does: past
  // here the old dataset is replaced.
  check_interrupted();
  dataset.close("closing the dataset");
  if (replacing) {
    check_ok(H5Ldelete(file.get(), object.c_str(), H5P_DEFAULT), fmt::format("removing the old {}", object));
    check_ok(H5Lmove(file.get(), create_at.c_str(), file.get(), object.c_str(), H5P_DEFAULT, H5P_DEFAULT),
             fmt::format("renaming {} to {}", create_at, object));
    undo.links.back() = object;
  }
  check_ok(H5Fflush(file.get(), H5F_SCOPE_GLOBAL), fmt::format("flushing {}", file_name));
  file.close(fmt::format("closing {}", file_name));
  undo.done = true;
  progress.finish();
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return stats;
}

}  // namespace mmfs::h5
