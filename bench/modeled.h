// mmfs-bench's modeled mode: the MultiMap paper's §5 experiments rerun on a
// modeled disk, every query planned by the real layouts and costed by the
// geometry's service-time model.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mmfs::bench {

struct ModeledOptions {
  std::vector<std::string> profiles = {"atlas10k3", "cheetah36es"};
  std::vector<std::string> layouts = {"naive", "hilbert", "multimap"};
  unsigned runs = 15;          // random queries per beam direction / cube size
  std::uint64_t seed = 2005;
  bool quick = false;          // smaller datasets, for tests
  // The host's round trip between dependent requests (one batch completing,
  // the next arriving), during which the platter keeps turning. 0.1 ms is a
  // SCSI command turnaround at queue depth 1; the model has no read-ahead cache.
  double host_gap_ms = 0.1;
};

// How the benchmark's queries reach the device.
enum class Discipline {
  Paper,  // the paper's storage manager: Naive and Hilbert requests issued one
          // at a time in LBN order; MultiMap's basic cubes batched (§4.5)
  Mmfs,   // mmfs's planner: every layout's requests sorted by LBN, linear
          // layouts 16 at a time, MultiMap one batch per basic cube
};

// One query kind's result for one layout on one profile.
struct QueryResult {
  std::string dataset;  // "3-D" or "4-D"
  std::string query;    // "Dim_0" ... or "1%" / "6^4" ...
  bool per_cell = false;  // beams: ms per cell; cubes: total ms
  std::string layout;
  Discipline discipline = Discipline::Paper;
  double mean_ms = 0, stdev_ms = 0;
  double analytic_ms = -1;  // App. A model with this geometry's parameters (naive, multimap)
  double bytes_read = 0, bytes_useful = 0;
};

struct ModeledReport {
  std::vector<std::string> profiles;
  std::vector<std::pair<std::string, std::vector<QueryResult>>> results;  // per profile
  nlohmann::json setup;  // geometry and layout parameters used
  nlohmann::json to_json() const;
  std::string to_markdown() const;
};

ModeledReport run_multimap_experiments(const ModeledOptions& options);

}  // namespace mmfs::bench
