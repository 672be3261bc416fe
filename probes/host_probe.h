// Measuring what a read costs this machine besides the device
// (geom::HostCost, the "host" of a measured geometry), for `mmfs-geom
// measure` and `mkfs.mmfs -g measure`: two probes, which measure_host_into
// runs one after the other and whose figures add_host_cost joins.
//
// The host probe (this file, probe_host): the kernel's and the reader's
// part. It mounts a throwaway FUSE filesystem of its own that serves bytes
// from memory (throwaway_mount.h), configured as the daemon configures its
// mount (1 MiB reads, 4 MiB read-ahead, the page cache, several request
// threads), and times through it:
//   * cold reads of a tiny file three directories deep, as a view is
//     (A@/box/SEL): the lookups, the open, one read, the close; each on a
//     fresh mount after an idle gap, as a cold view (a mount's first
//     requests cost more than its later ones);
//   * reads of a large file in 8 MiB calls: handing a result to a reader,
//     which can cost more per MiB than a fast disk (docs/measurements.md,
//     "Handing a result to the reader").
// Reads land in a buffer mapped for each, as a reader that makes an array of
// the result has.
//
// The read-path probe (read_path_probe.h): the daemon's own work on a cold
// view (the lookups of its views, the array's open, verifying and gathering
// cells), timed by the daemon's own code. It is separate because it is the
// daemon: it runs in an executable of its own that links the daemon's core,
// mmfs-read-path-probe, which measure_host_into starts as a child process
// (read_path_client.h), so the programs that measure a machine link no
// daemon code. The host probe uses none of the daemon, and the two share
// only the throwaway mounts.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "geometry/geometry.h"

namespace mmfs::probes {

struct HostProbeOptions {
  int cold_reads = 9;      // of the tiny file, each on a fresh mount after idle_gap_ms
  double idle_gap_ms = 50;
  int streams = 3;         // large files read, each once
  std::uint64_t stream_bytes = 64ull << 20;
  bool verbose = false;    // progress lines on stderr
};

struct HostProbeResult {
  geom::HostCost cost;                // medians
  std::vector<double> cold_read_ms;   // each cold read
  std::vector<double> stream_ms;      // each large file's read
  std::uint64_t stream_bytes = 0;
  double seconds = 0;
};

// 0, or an errno with *message saying why (no /dev/fuse, the mount refused);
// the throwaway mount is gone either way.
int probe_host(const HostProbeOptions& options, HostProbeResult* out, std::string* message);

struct ReadPathProbeResult;

// Adds the result to a measured geometry's JSON: "host" (what the model
// uses) and measured.host (the samples); and a line for a person. With
// `read_path`, its cold view through the daemon is request_ms and its
// per-MiB costs join the host.
void add_host_cost(const HostProbeResult& result, const ReadPathProbeResult* read_path, nlohmann::json* geometry,
                   std::string* summary);

// probe_host with the default options and the read-path probe on the
// geometry (in mmfs-read-path-probe: run_read_path_probe), then
// add_host_cost; when the machine cannot mount FUSE, the geometry is left
// without a host (a line says why); when the read path cannot be timed
// (mmfs-read-path-probe is missing or fails), the host has the FUSE part only.
void measure_host_into(nlohmann::json* geometry, std::string* summary, bool verbose);

}  // namespace mmfs::probes
