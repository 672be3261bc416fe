// `mmfs-bench modeled`: the benchmark workloads (bench/workloads.h) on
// every mmfs layout and the library baselines (bench/baselines.h),
// timed by the geometry's service-time model — the modeled clock, which
// shows the Atlas, Cheetah and MEMS devices on any machine. The result is a
// JSON document (schema "mmfs-bench-modeled/1", described in
// bench/plot_workloads.py) from which the markdown and the plots are made.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "geometry/types.h"

namespace mmfs::bench {

struct WorkloadBenchOptions {
  std::vector<std::string> profiles = {"atlas10k3", "cheetah36es"};
  std::vector<std::uint64_t> shape = {1024, 1024, 256};
  std::string dtype = "float64";
  std::vector<std::string> layouts = {"naive", "zorder", "hilbert", "multimap"};
  std::vector<std::uint64_t> cell;      // every layout's cell; empty = the daemon's default
  unsigned runs = 15;                   // random beams per dimension and random cubes per p
  std::uint64_t seed = 2005;
  std::vector<double> cubes = {1, 5, 10};
  std::uint32_t plod = 2;               // bytes kept by the PLoD workloads; 0 = none
  bool baselines = true;
  std::uint64_t chunk_edge = 64;        // the chunked baseline's chunk edge
  geom::Lbn first_lbn = 0;              // where every target's space starts
  bool quick = false;                   // recorded in the JSON
  std::string command;                  // recorded in the JSON
};

// Throws std::invalid_argument / std::runtime_error for bad options (unknown
// profile, dtype or layout, a shape that does not fit). A target that cannot
// be placed on a profile (e.g. multimap on flash) is reported with its error
// and left out of that profile's results.
nlohmann::json run_workload_bench(const WorkloadBenchOptions& options);

// {"median", "min", "max", "runs"} of a list (the median of an even count is
// the mean of the middle two, as Python's statistics.median).
nlohmann::json summarize(std::vector<double> values);

}  // namespace mmfs::bench
