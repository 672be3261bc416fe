// One array file or view into one HDF5 dataset: create the dataset (chunks,
// filters), stream SRC's C-order bytes in boxes aligned to the dataset's
// chunks (transfer_tiling.h) through two buffers, reading mmfs on a worker
// thread while the calling thread compresses and writes HDF5 (pipeline.h),
// then the attributes (attributes.h). A failure removes what was created:
// the dataset, the groups made for it, and the file when it was new.
#pragma once

#include <cstdint>
#include <string>

#include "tools/h5/array_source.h"
#include "tools/h5/chunk_choice.h"
#include "tools/h5/import_dataset.h"

namespace mmfs::h5 {

struct ExportSettings {
  ChunkOption chunks;                     // --chunks
  int gzip = -1;                          // deflate level 0..9; -1: none
  bool shuffle = false;
  bool force = false;                     // replace an existing dataset
  std::uint64_t buffer_bytes = 64 << 20;  // each of the two transfer buffers
  bool progress = false;
};

// The user.* xattrs of a file or directory that become its HDF5 attributes
// (not user.mmfs.*); ones that cannot be read are warnings. Throws ToolError
// when the list cannot be read.
Xattrs exported_xattrs(const std::string& path, std::vector<std::string>& warnings);

// Exports `src` to dataset `object` ("/a/b/ds") of HDF5 file `file`. Throws
// ToolError or H5Error with the reason.
TransferStats export_array(const ArraySource& src, const std::string& file, const std::string& object,
                           const ExportSettings& settings);

}  // namespace mmfs::h5
