#include "tools/h5/transfer_options.h"

#include "tools/h5/progress.h"

namespace mmfs::h5 {

bool TransferOptions::progress() const {
  return progress_wanted(progress_on ? 1 : progress_off ? -1 : 0, quiet);
}

void add_transfer_options(CLI::App& app, TransferOptions& options, const std::string& quiet_help) {
  app.add_option("--buffer", options.buffer_mib,
                 "Size of each of the two transfer buffers; peak memory is about twice this (default 64)")
      ->check(CLI::Range(1, 4096))
      ->type_name("MiB");
  auto* on = app.add_flag("--progress", options.progress_on,
                          "Show a progress bar on stderr (default: when stderr is a terminal)");
  app.add_flag("--no-progress", options.progress_off, "Never show a progress bar")->excludes(on);
  app.add_flag("-q,--quiet", options.quiet, quiet_help);
}

}  // namespace mmfs::h5
