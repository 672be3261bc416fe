// `mmfs-bench modeled`: runs the workload benchmark (workload_bench.h), adds
// the MultiMap Table 3 reproduction (modeled.h) when asked, writes
// DIR/mmfs-bench-modeled.{md,json} and draws the plots with
// bench/plot_workloads.py when python3 and matplotlib are there.
#pragma once

#include <string>

#include "bench/workload_bench.h"

namespace mmfs::bench {

struct ModeledCommand {
  WorkloadBenchOptions bench;
  bool with_table3 = true;
  std::string out_dir;  // empty: print only
  bool plot = true;
};

// Prints the markdown to stdout (notes about the plots to stderr); returns the exit status.
int run_modeled_command(const ModeledCommand& command);

}  // namespace mmfs::bench
