// One HDF5 dataset into one new array file on an mmfs mount (docs/reference.md §4 order):
// create the empty file, set the schema xattrs given on the command line, then
// user.mmfs.dtype and user.mmfs.shape, stream the data in chunk-aligned boxes
// (transfer_tiling.h) through two buffers (pipeline.h), set the attributes
// (attributes.h), fsync. Anything failing on the way removes the file.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tools/h5/attributes.h"
#include "tools/h5/dataset_info.h"
#include "tools/h5/hdf5_handle.h"

namespace mmfs::h5 {

struct ImportSettings {
  Xattrs schema;                          // user.mmfs.layout/order/cell/basic_cube, set in this order
  bool force = false;                     // replace an existing file
  std::uint64_t buffer_bytes = 64 << 20;  // each of the two transfer buffers
  bool progress = false;
};

struct TransferStats {
  std::uint64_t bytes = 0;
  double seconds = 0;
  std::vector<std::string> warnings;  // attributes skipped, one line each
};

// The dataset access plist for transfers of a dataset whose chunks hold
// `chunk_bytes` (0: not chunked): its chunk cache setting (see the .cc file).
Plist transfer_dataset_access(std::uint64_t chunk_bytes);

// Imports dataset `name` of `loc` to the array file `dest`: inspects it,
// refuses it (ToolError EINVAL, the reason) when it cannot be imported, else
// reopens it with the transfer access properties and moves it. `label`
// names the dataset on the progress bar. Throws ToolError (or H5Error) with
// the reason; `dest` is then gone. `info` receives what the dataset is.
TransferStats import_dataset(hid_t loc, const std::string& name, const std::string& dest,
                             const ImportSettings& settings, const std::string& label, DatasetInfo& info);

// "100x200 float32, 80.0 MB in 0.52 s (153.8 MB/s)"
std::string transfer_summary(const std::vector<std::uint64_t>& shape, const std::string& dtype,
                             const TransferStats& stats);

}  // namespace mmfs::h5
