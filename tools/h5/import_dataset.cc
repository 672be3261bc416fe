#include "tools/h5/import_dataset.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>

#include <nlohmann/json.hpp>

#include "fs/array/array_schema.h"
#include "tools/h5/dimension_scales.h"
#include "tools/h5/dtype_map.h"
#include "tools/h5/file_io.h"
#include "tools/h5/interrupt.h"
#include "tools/h5/pipeline.h"
#include "tools/h5/progress.h"
#include "tools/h5/tool_error.h"
#include "tools/h5/transfer_tiling.h"
#include "tools/h5/xattr_io.h"

namespace mmfs::h5 {

namespace {

// Removes the array file being created unless the import completed. Declared
// before the file descriptor, so the descriptor is closed first: unlinking an
// open file on a FUSE mount only renames it to a hidden name.
class RemoveUnlessDone {
 public:
  explicit RemoveUnlessDone(std::string path) : path_(std::move(path)) {}
  ~RemoveUnlessDone() {
    if (armed_ && !done_) ::unlink(path_.c_str());
  }
  void arm() { armed_ = true; }
  void done() { done_ = true; }

 private:
  std::string path_;
  bool armed_ = false, done_ = false;
};

void set_or_throw(int fd, const std::string& dest, const std::string& name, const std::string& value) {
  if (auto r = set_xattr(fd, name, value)) {
    std::string text = fmt::format("{}: {}={}: {}", dest, name, value, std::strerror(r.error));
    if (std::string why = daemon_explanation(dest, r.error); !why.empty()) text += "; mmfs: " + why;
    throw ToolError(r.error, text);
  }
}

}  // namespace

Plist transfer_dataset_access(std::uint64_t chunk_bytes) {
  Plist dapl(H5Pcreate(H5P_DATASET_ACCESS), "H5Pcreate(dataset access)");
  // A chunk cache of one chunk. The boxes are aligned to the chunks, so each
  // chunk is touched by exactly one H5Dread/H5Dwrite call, which reads and
  // decompresses (or compresses and writes) it whole: a chunk is never
  // wanted again, and a larger cache would only add to the peak memory. But
  // the cache must hold one chunk: an unfiltered chunk too big for the cache
  // is moved by HDF5 directly between the file and the box buffer, one
  // contiguous row at a time — for 64x64x64 chunks in a box 4096 elements
  // wide, 4096 system calls of 256 bytes per chunk — where a cached one is
  // read or written in one piece. (Filtered chunks always pass through a
  // chunk-sized buffer.) w0 = 1: wholly read or written chunks go first.
  const std::size_t bytes = std::max<std::uint64_t>(chunk_bytes, 1 << 20);
  check_ok(H5Pset_chunk_cache(dapl.get(), 521, bytes, 1.0), "H5Pset_chunk_cache");
  return dapl;
}

std::string transfer_summary(const std::vector<std::uint64_t>& shape, const std::string& dtype,
                             const TransferStats& stats) {
  const double mb = static_cast<double>(stats.bytes) / 1e6;
  const double rate = stats.seconds > 0 ? mb / stats.seconds : 0.0;
  return fmt::format("{} {}, {:.1f} MB in {:.2f} s ({:.1f} MB/s)", shape_text(shape), dtype, mb, stats.seconds, rate);
}

TransferStats import_dataset(hid_t loc, const std::string& name, const std::string& dest,
                             const ImportSettings& settings, const std::string& label, DatasetInfo& info) {
  const auto t0 = std::chrono::steady_clock::now();
  {
    Dataset probe(H5Dopen2(loc, name.c_str(), H5P_DEFAULT), "opening the dataset");
    info = inspect_dataset(probe.get());
  }  // closed: HDF5 would reuse its access properties for a second open
  if (!info.importable()) throw ToolError(EINVAL, info.refusal);
  const fs::Dtype dtype = *info.dtype;
  std::uint64_t chunk_bytes = info.chunks.empty() ? 0 : dtype.itemsize;
  for (auto c : info.chunks) chunk_bytes *= c;
  Plist dapl = transfer_dataset_access(chunk_bytes);
  Dataset opened(H5Dopen2(loc, name.c_str(), dapl.get()), "opening the dataset");
  const hid_t dataset = opened.get();
  TransferStats stats;
  stats.bytes = info.bytes();

  struct stat st{};
  if (::lstat(dest.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw ToolError(EISDIR, fmt::format("{}: is a directory", dest));
    if (!settings.force)
      throw ToolError(EEXIST, fmt::format("{}: {} (--force replaces it)", dest, std::strerror(EEXIST)));
    if (::unlink(dest.c_str()) != 0) {
      int e = errno;
      throw ToolError(e, io_error_text(dest, "remove", e));
    }
  }

  RemoveUnlessDone cleanup(dest);
  Fd fd(::open(dest.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0) {
    int e = errno;
    throw ToolError(e, io_error_text(dest, "create", e));
  }
  cleanup.arm();

  // Schema: the layout's parameters first, then the dtype, and the shape last:
  // setting the shape creates the array (docs/reference.md §4), and with the dtype already
  // in place the volume reserves the array's real size (a float64 default
  // would ask for up to 8 times too much and fail with ENOSPC for nothing).
  for (const auto& [attr, value] : settings.schema) set_or_throw(fd.get(), dest, attr, value);
  set_or_throw(fd.get(), dest, "user.mmfs.dtype", dtype.name);
  set_or_throw(fd.get(), dest, "user.mmfs.shape", fmt::format("{}", fmt::join(info.shape, ",")));
  if (::fstat(fd.get(), &st) != 0 || static_cast<std::uint64_t>(st.st_size) != stats.bytes)
    throw ToolError(ENOTSUP, fmt::format("{}: setting user.mmfs.shape did not make an array file of {} bytes "
                                         "(is it on an mmfs mount?)",
                                         dest, stats.bytes));

  // Dimension names (netCDF-4's dimension scales). Names user.mmfs.dims
  // refuses (not identifiers: netCDF-4 takes any) are kept in user.hdf5.dims;
  // two alike lose the names, not the array.
  if (auto names = dimension_names(dataset, label)) {
    const std::string text = fmt::format("{}", fmt::join(*names, ","));
    if (auto r = set_xattr(fd.get(), "user.mmfs.dims", text)) {
      const std::string list = nlohmann::json(*names).dump();
      const bool keepable = r.error == EINVAL && fs::decode_hdf5_dims(list, names->size());
      auto kept = keepable ? set_xattr(fd.get(), std::string(fs::kHdf5DimsXattr), list) : r;
      if (kept) {
        std::string why = daemon_explanation(dest, r.error);
        stats.warnings.push_back(fmt::format("dimension names {}: {}{}, not set", text, std::strerror(r.error),
                                             why.empty() ? "" : "; mmfs: " + why));
      }
    }
  }

  // The data.
  const TransferTiling tiling(info.shape, dtype.itemsize, info.transfer_chunks(), settings.buffer_bytes);
  const std::size_t buffer_size = tiling.max_box_bytes();
  std::unique_ptr<std::byte[]> buf0(new std::byte[buffer_size]), buf1(new std::byte[buffer_size]);
  Dataspace file_space(H5Dget_space(dataset), "H5Dget_space");
  const hid_t mem_type = hdf5_type_of(dtype);
  Progress progress(stderr, label, stats.bytes, settings.progress);
  std::uint64_t written = 0;  // consumer thread only

  auto read_box = [&](std::uint64_t i, std::span<std::byte> buf) {
    check_interrupted();
    const Box b = tiling.box(i);
    std::vector<hsize_t> start(b.start.begin(), b.start.end()), count(b.count.begin(), b.count.end());
    check_ok(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
             "H5Sselect_hyperslab");
    Dataspace mem_space(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr), "H5Screate_simple");
    check_ok(H5Dread(dataset, mem_type, mem_space.get(), file_space.get(), H5P_DEFAULT, buf.data()),
             fmt::format("reading elements {}..+{}", fmt::join(start, ","), fmt::join(count, "x")));
  };
  auto write_box = [&](std::uint64_t i, std::span<std::byte> buf) {
    const Box b = tiling.box(i);
    tiling.for_each_run(b, [&](const Run& r) {
      const std::uint64_t before = written;
      // Pieces only when a bar is shown: one call per run is cheapest.
      PieceDone piece;
      if (settings.progress) piece = [&](std::uint64_t moved) { progress.update(before + moved); };
      write_fully(fd.get(), dest, buf.subspan(r.buffer_offset, r.length), r.array_offset, piece);
      written += r.length;
    });
    progress.update(written);
  };
  run_pipeline(tiling.box_count(), std::span(buf0.get(), buffer_size), std::span(buf1.get(), buffer_size), read_box,
               write_box, CallerRuns::Producer);
  buf0.reset();
  buf1.reset();

  // Attributes, then durability.
  ImportedAttributes attrs = attributes_to_xattrs(dataset);
  stats.warnings.insert(stats.warnings.end(), attrs.warnings.begin(), attrs.warnings.end());
  for (const auto& [xattr, value] : attrs.xattrs)
    if (auto r = set_xattr(fd.get(), xattr, value))
      stats.warnings.push_back(fmt::format("attribute '{}': {}, skipped", xattr.substr(5), r.message));
  // A signal that came after the last read (the writes, the attributes or
  // the fsync, which places the whole array) still undoes the import: the
  // array is kept only if none came before it is complete.
  check_interrupted();
  if (::fsync(fd.get()) != 0) {
    int e = errno;
    throw ToolError(e, io_error_text(dest, "fsync", e));
  }
  check_interrupted();
  fd.close(dest);
  progress.finish();
  cleanup.done();
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return stats;
}

}  // namespace mmfs::h5
