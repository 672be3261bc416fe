// The command-line options mmfs-import and mmfs-export share: the transfer
// buffers, the progress bar and quiet mode (docs/import-export.md).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace mmfs::h5 {

struct TransferOptions {
  std::uint64_t buffer_mib = 64;
  bool progress_on = false, progress_off = false, quiet = false;

  std::uint64_t buffer_bytes() const { return buffer_mib << 20; }
  // Whether to draw the bar: forced either way, else when stderr is a terminal.
  bool progress() const;
};

// Adds --buffer, --progress, --no-progress and -q/--quiet to `app`;
// `quiet_help` says what quiet silences in this tool.
void add_transfer_options(CLI::App& app, TransferOptions& options, const std::string& quiet_help);

}  // namespace mmfs::h5
