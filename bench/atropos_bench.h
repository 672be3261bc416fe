// `mmfs-bench atropos`: the Atropos paper's figures (shared/papers/002_*,
// §5.2-§5.3) in modeled time, through mmfs's geometry, quadrangle layout,
// planner and striped volume model:
// * Table 2: the quadrangle parameters (Dmax, b, R) of every built-in disk
//   profile's outermost zone beside the paper's row for that disk.
// * Figure 7: access efficiency against I/O size on one disk's outer zone —
//   track-based (traxtent) access, semi-sequential quadrangle access (d = 4)
//   and the naive layout's d random pieces — and the one-revolution knee.
// * Figure 8: a random 8 KB read: contiguous, and in the other major with
//   the quadrangle layout (d = 2, 4: the record's cells planned by the
//   layout and the planner as the daemon plans them) and the naive layout.
// * §5.3: a sequential scan of a 4-disk volume with stripe units of 64 KiB,
//   256 KiB and the exact track.
// * Scaling: a 2 GiB array in the quadrangle layout on 1, 2 and 4 striped
//   members; the primary-dimension scan and the semi-sequential
//   other-dimension slice.
// Every response time is the geometry model's, from a random head position
// and rotational phase (a random earlier request), averaged over samples.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace mmfs::bench {

struct AtroposBenchOptions {
  std::string profile = "atlas10k3";  // the disk of Figures 7-8, §5.3 and the scaling
  std::uint32_t samples = 2000;       // random requests averaged per point
  std::uint64_t seed = 2004;
  std::uint64_t scan_mib = 512;       // §5.3: bytes scanned
  double host_gap_ms = 0.1;           // §5.3: the host's turnaround between one I/O and the next
  std::uint64_t array_mib = 2048;     // scaling: the array's size
  std::string command;                // recorded in the report
};

struct AtroposBenchReport {
  std::string markdown;
  nlohmann::json json;
};

AtroposBenchReport run_atropos_bench(const AtroposBenchOptions& options);

}  // namespace mmfs::bench
