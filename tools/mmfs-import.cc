// mmfs-import: copies HDF5 datasets into a mounted mmfs as array files
// (docs/reference.md §8, docs/import-export.md). Command-line glue: the work is in
// tools/h5/ (import_tree.h).
//
// Exit status 0 when everything was imported, 1 on any error or skipped
// dataset; messages are "mmfs-import: WHAT: reason" on stderr.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>

#include "tools/h5/hdf5_handle.h"
#include "tools/h5/h5_spec.h"
#include "tools/h5/import_tree.h"
#include "tools/h5/interrupt.h"
#include "tools/h5/progress.h"
#include "tools/h5/transfer_options.h"
#include "tools/h5/tool_error.h"

#ifndef MMFS_VERSION
#define MMFS_VERSION "unknown"
#endif

namespace {

using namespace mmfs::h5;

bool file_exists(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode);
}

int run(int argc, char** argv) {
  CLI::App app{
      "Copies HDF5 datasets into a mounted mmfs as array files (docs/reference.md §4): one dataset to one array file, or a\n"
      "whole file (or group) to a directory tree, groups as directories. Each array is created with the\n"
      "schema xattrs given here, then user.mmfs.dtype and user.mmfs.shape, then its data in C order, then\n"
      "fsync; HDF5 attributes become user.* xattrs (user.hdf5.types records their types).\n"
      "Integers of 1, 2, 4, 8 bytes and IEEE floats of 4, 8 bytes, either byte order, are accepted.",
      "mmfs-import"};
  app.set_version_flag("--version", std::string("mmfs-import ") + MMFS_VERSION);

  std::string source, dest, layout, order, cell, basic_cube;
  bool list = false, force = false;
  app.add_option("SOURCE", source,
                 "FILE.h5:/PATH/TO/DATASET (one dataset, or a group), or FILE.h5 (the whole file). An existing "
                 "file's name is taken whole (names may hold ':'); otherwise it is split at the last ':' "
                 "followed by '/'")
      ->required()
      ->type_name("FILE.h5[:/PATH]");
  app.add_option("DEST", dest,
                 "One dataset: the array file to create (in DEST when it is an existing directory, under the "
                 "dataset's name). A whole file or group: the directory to fill (created when missing; its "
                 "parent must exist). Not needed with --list")
      ->type_name("PATH");
  app.add_option("--layout", layout, "user.mmfs.layout of the new arrays (default: the volume's, multimap)")
      ->type_name("L");
  app.add_option("--order", order, "user.mmfs.order: dimension priority, most favoured first, e.g. 2,0,1")
      ->type_name("O");
  app.add_option("--cell", cell, "user.mmfs.cell: cell shape in elements, one per dimension")->type_name("C");
  app.add_option("--basic-cube", basic_cube, "user.mmfs.basic_cube: MultiMap basic cube K per dimension, in cells")
      ->type_name("K");
  app.add_flag("--list", list,
               "List the datasets (path, shape, dtype, chunks, filters, importable or why not); import nothing");
  app.add_flag("--force", force, "Replace an existing array file at the destination (otherwise: error, EEXIST)");
  TransferOptions transfer;
  add_transfer_options(app, transfer, "No per-dataset lines, no progress bar (errors and warnings still show)");
  app.footer(
      "Output: one line per dataset on stdout, e.g.\n"
      "  imported /g/ds -> DEST/g/ds: 100x200 float32, 80.0 MB in 0.52 s (153.8 MB/s)\n"
      "Errors: 'mmfs-import: WHAT: reason' on stderr, exit status 1; a dataset that fails part way leaves\n"
      "no file behind. In a whole-file import, datasets that cannot be imported are skipped with a message,\n"
      "the rest are imported, and the exit status is 1.\n"
      "Examples:\n"
      "  mmfs-import --list data.h5\n"
      "  mmfs-import data.h5:/climate/temp /mnt/mmfs/temp\n"
      "  mmfs-import --layout hilbert data.h5 /mnt/mmfs/data\n"
      "See docs/import-export.md.");
  CLI11_PARSE(app, argc, argv);

  silence_hdf5_errors();
  install_interrupt_handler();
  const H5Spec spec = split_import_source(source, file_exists);
  ImportReporter reporter;
  reporter.imported = [&](const std::string& object, const std::string& target, const DatasetInfo& info,
                          const TransferStats& stats) {
    if (!transfer.quiet)
      fmt::print("imported {} -> {}: {}\n", object, target, transfer_summary(info.shape, info.dtype->name, stats));
    std::fflush(stdout);
  };
  reporter.problem = [](const std::string& what, const std::string& why) {
    fmt::print(stderr, "mmfs-import: {}: {}\n", what, why);
  };
  reporter.note = [](const std::string& what, const std::string& note) {
    fmt::print(stderr, "mmfs-import: {}: warning: {}\n", what, note);
  };

  reporter.skipped = [&](const std::string& object, const std::string& why) {
    if (!transfer.quiet) fmt::print("skipped {}: {}\n", object, why);
    std::fflush(stdout);
  };

  if (list) {
    auto datasets = list_datasets(spec.file, spec.object, reporter);
    std::fputs(list_table(datasets).c_str(), stdout);
    return 0;
  }
  if (dest.empty()) {
    fmt::print(stderr, "mmfs-import: DEST is required (except with --list); see --help\n");
    return 1;
  }
  ImportSettings settings;
  if (!layout.empty()) settings.schema.emplace_back("user.mmfs.layout", layout);
  if (!order.empty()) settings.schema.emplace_back("user.mmfs.order", order);
  if (!cell.empty()) settings.schema.emplace_back("user.mmfs.cell", cell);
  if (!basic_cube.empty()) settings.schema.emplace_back("user.mmfs.basic_cube", basic_cube);
  settings.force = force;
  settings.buffer_bytes = transfer.buffer_bytes();
  settings.progress = transfer.progress();
  return run_import(spec.file, spec.object, dest, settings, reporter) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "mmfs-import: {}\n", e.what());
    return 1;
  }
}
