// A directory tree of a mounted mmfs into an HDF5 file (mmfs-export DIR
// FILE.h5[:/GROUP]; docs/import-export.md, "A whole tree"): every directory
// becomes a group with its user.* xattrs as attributes, every array file a
// dataset (export_dataset.h, each moved as a single export moves it), and
// the arrays' dimension names dimension scales attached to them
// (dimension_scales.h), so netCDF-4 readers see the dimensions mmfs-import
// found. Plain files, symlinks and the mount's .mmfs directory are left out
// with a note.
#pragma once

#include <functional>
#include <string>

#include "tools/h5/array_source.h"
#include "tools/h5/export_dataset.h"

namespace mmfs::h5 {

struct TreeExportReporter {
  // An array file exported: its path, the dataset ("FILE:/PATH"), the summary.
  std::function<void(const ArraySource&, const std::string& dataset, const TransferStats&)> exported;
  // Not an error: a file left out, an attribute or a scale not written.
  std::function<void(const std::string& what, const std::string& note)> note;
};

// Exports directory `dir` into group `group` ("/" for the root) of `file`,
// created when missing (and removed again when the export fails). An existing
// dataset of the same name is an error unless settings.force. Throws
// ToolError or H5Error with the reason.
void export_tree(const std::string& dir, const std::string& file, const std::string& group,
                 const ExportSettings& settings, const TreeExportReporter& reporter);

}  // namespace mmfs::h5
