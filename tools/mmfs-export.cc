// mmfs-export: copies an array file in a mounted mmfs, or any data view of
// one, into an HDF5 dataset, or a whole directory tree into an HDF5 file
// (docs/reference.md §8, docs/import-export.md). Command-line glue: the work
// is in tools/h5/ (array_source.h, export_dataset.h, export_tree.h).
//
// Exit status 0 on success, 1 on any error ("mmfs-export: WHAT: reason" on
// stderr); a failed export removes the dataset it was creating.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>

#include "tools/h5/array_source.h"
#include "tools/h5/chunk_choice.h"
#include "tools/h5/export_dataset.h"
#include "tools/h5/export_tree.h"
#include "tools/h5/h5_spec.h"
#include "tools/h5/hdf5_handle.h"
#include "tools/h5/interrupt.h"
#include "tools/h5/progress.h"
#include "tools/h5/transfer_options.h"
#include "tools/h5/tool_error.h"

#ifndef MMFS_VERSION
#define MMFS_VERSION "unknown"
#endif

namespace {

using namespace mmfs::h5;

// Whether a path goes through an array's views (a component `A@`): its
// directories (A@/slice, ...) are views to refuse, not trees to export.
bool below_a_view(const std::string& path) {
  std::size_t from = 0;
  for (;;) {
    const auto slash = path.find('/', from);
    const std::string_view part(path.data() + from, (slash == std::string::npos ? path.size() : slash) - from);
    if (part.size() > 1 && part.back() == '@') return true;
    if (slash == std::string::npos) return false;
    from = slash + 1;
  }
}

int run(int argc, char** argv) {
  CLI::App app{
      "Copies an array file of a mounted mmfs, or any data view of one, into an HDF5 dataset. The dataset has\n"
      "the view's shape (a slice drops its dimension, a box its fixed ones; a box fixing every dimension gives\n"
      "a scalar) and the array's dtype, little-endian. An array file's user.* xattrs (not user.mmfs.*) become\n"
      "the dataset's attributes, typed as user.hdf5.types records (strings otherwise, variable-length UTF-8).\n"
      "SRC a directory: the whole tree into FILE.h5 (or FILE.h5:/GROUP): directories become groups, array\n"
      "files datasets, and the arrays' dimension names (user.mmfs.dims) dimension scales, as netCDF-4 has them.",
      "mmfs-export"};
  app.set_version_flag("--version", std::string("mmfs-export ") + MMFS_VERSION);

  std::string src, dest, chunks_text = "auto";
  int gzip = -1;
  bool shuffle = false, force = false;
  app.add_option("SRC", src,
                 "An array file in a mounted mmfs, or a data view of one: A@/slice/D/I, A@/box/SEL, A@/plod/K, "
                 "A@/plod/K@/slice/D/I, A@/plod/K@/box/SEL; or a directory (the whole tree)")
      ->required()
      ->type_name("PATH");
  app.add_option("DEST", dest,
                 "FILE.h5:/PATH/TO/DATASET: the file is created when missing, opened read-write otherwise; "
                 "missing groups are created; an existing dataset is an error unless --force. For a directory "
                 "SRC: FILE.h5 (the root group) or FILE.h5:/GROUP")
      ->required()
      ->type_name("FILE.h5:/PATH");
  app.add_option("--chunks", chunks_text,
                 "Dataset storage: auto (chunks of about 1 MiB shaped like the dataset, each no longer than its "
                 "dimension), contiguous, or explicit lengths C0,C1,... (default auto)")
      ->type_name("auto|contiguous|C0,C1,...");
  app.add_option("--gzip", gzip, "Deflate filter at LEVEL 0..9 (needs chunks)")
      ->check(CLI::Range(0, 9))
      ->type_name("LEVEL");
  app.add_flag("--shuffle", shuffle, "Byte-shuffle filter before deflate (needs chunks)");
  app.add_flag("--force", force, "Replace an existing dataset (the old one stays until the new one is complete)");
  TransferOptions transfer;
  add_transfer_options(app, transfer, "No summary line, no progress bar (errors and warnings still show)");
  app.footer(
      "Output: one line on stdout, e.g.\n"
      "  exported /mnt/a@/slice/0/5 -> out.h5:/a5: 200x300 float64, 0.5 MB in 0.01 s (48.0 MB/s)\n"
      "Errors: 'mmfs-export: WHAT: reason' on stderr, exit status 1. SRC that is not an array file or a data\n"
      "view (info, lbn, plan views, plain files, directories) is refused with EINVAL.\n"
      "Examples:\n"
      "  mmfs-export /mnt/mmfs/temp out.h5:/temp\n"
      "  mmfs-export --gzip 4 --shuffle '/mnt/mmfs/temp@/box/0:10,:,5' out.h5:/sub/temp_box\n"
      "  mmfs-export /mnt/mmfs/temp@/plod/2 out.h5:/temp_2bytes\n"
      "  mmfs-export /mnt/mmfs/run1 run1.h5          (the directory tree, netCDF-4 dimensions included)\n"
      "See docs/import-export.md.");
  CLI11_PARSE(app, argc, argv);

  silence_hdf5_errors();
  install_interrupt_handler();
  auto chunks = parse_chunk_option(chunks_text);
  if (!chunks) {
    fmt::print(stderr,
               "mmfs-export: --chunks '{}': expected auto, contiguous, or positive lengths C0,C1,... (one per "
               "dimension)\n",
               chunks_text);
    return 1;
  }
  ExportSettings settings;
  settings.chunks = *chunks;
  settings.gzip = gzip;
  settings.shuffle = shuffle;
  settings.force = force;
  settings.buffer_bytes = transfer.buffer_bytes();
  settings.progress = transfer.progress();

  struct stat st{};
  if (::stat(src.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && !below_a_view(src)) {
    // DEST is FILE.h5 or FILE.h5:/GROUP.
    H5Spec tree{dest, "/"};
    if (auto at = dest.rfind(":/"); at != std::string::npos && at > 0) tree = {dest.substr(0, at), dest.substr(at + 1)};
    while (tree.object.size() > 1 && tree.object.back() == '/') tree.object.pop_back();
    TreeExportReporter reporter;
    reporter.exported = [&](const ArraySource& s, const std::string& dataset, const TransferStats& stats) {
      if (!transfer.quiet) fmt::print("exported {} -> {}: {}\n", s.path, dataset, transfer_summary(s.shape, s.dtype.name, stats));
      std::fflush(stdout);
    };
    reporter.note = [](const std::string& what, const std::string& note) {
      fmt::print(stderr, "mmfs-export: {}: warning: {}\n", what, note);
    };
    try {
      export_tree(src, tree.file, tree.object, settings, reporter);
    } catch (const H5Error& e) {
      throw ToolError(EIO, tree.file + ": " + e.what());
    }
    return 0;
  }

  ArraySource source = resolve_source(src);  // a missing SRC is named before a malformed DEST
  auto spec = split_export_dest(dest);
  if (!spec) {
    fmt::print(stderr, "mmfs-export: {}: DEST must be FILE.h5:/PATH/TO/DATASET\n", dest);
    return 1;
  }
  const std::string what = spec->file + ":" + spec->object;

  TransferStats stats;
  try {
    stats = export_array(source, spec->file, spec->object, settings);
  } catch (const H5Error& e) {
    throw ToolError(EIO, what + ": " + e.what());
  }
  for (const auto& w : stats.warnings) fmt::print(stderr, "mmfs-export: {}: warning: {}\n", what, w);
  if (!transfer.quiet) fmt::print("exported {} -> {}: {}\n", src, what, transfer_summary(source.shape, source.dtype.name, stats));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "mmfs-export: {}\n", e.what());
    return 1;
  }
}
