// mmfs-import's work, command line aside: one dataset, or a group (the whole
// file for "/") as a directory tree, or --list. Results and problems go to a
// reporter, so the front end decides what to print.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tools/h5/dataset_info.h"
#include "tools/h5/import_dataset.h"

namespace mmfs::h5 {

struct ImportReporter {
  // A dataset imported: its path in the file, the array file, the summary.
  std::function<void(const std::string& object, const std::string& dest, const DatasetInfo&, const TransferStats&)>
      imported;
  // Something not imported (skipped dataset, failed dataset): WHAT, reason.
  std::function<void(const std::string& what, const std::string& reason)> problem;
  // Not an error: an attribute skipped, a link to an object already imported.
  std::function<void(const std::string& what, const std::string& note)> note;
  // Left out by design (a netCDF dimension without a variable): WHAT, why.
  std::function<void(const std::string& what, const std::string& why)> skipped;
};

// Imports `object` ("" or "/" for the whole file, a group, or a dataset) of
// HDF5 file `file` into `dest` (see docs/import-export.md). Returns false
// when anything was not imported (every such thing was reported). Errors
// that stop everything (the file cannot be opened, DEST cannot be created)
// throw ToolError/H5Error; WHAT for them is the caller's.
bool run_import(const std::string& file, const std::string& object, const std::string& dest,
                const ImportSettings& settings, const ImportReporter& reporter);

struct ListedDataset {
  std::string path;
  DatasetInfo info;
};
// Every dataset at or below `object` of `file`, in walk order.
std::vector<ListedDataset> list_datasets(const std::string& file, const std::string& object,
                                         const ImportReporter& reporter);
// The table --list prints: aligned columns, one line per dataset.
std::string list_table(const std::vector<ListedDataset>& datasets);

// Opens an HDF5 file read-only (or read-write), explaining a missing file or
// one that is not HDF5 in plain words. Throws ToolError.
File open_hdf5_file(const std::string& file, bool writable);

}  // namespace mmfs::h5
