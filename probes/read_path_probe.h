// The read-path probe: the daemon's own work on a cold view (docs/daemon.md; the
// second of the two probes of `mmfs-geom measure` and `mkfs.mmfs -g measure`,
// host_probe.h, which says what the first times), timed by the daemon's own
// code on a volume in memory of the measured geometry holding a 256x256x64
// float64 array in the geometry's default layout, opened afresh for every
// sample with the caches evicted (as a cold view after a fresh mount):
//   * a one-element view read through FUSE from the daemon's Filesystem on a
//     temporary mount, as a reader reads A@/box/I,J,K: the lookups (that of
//     A@ opens the array), the open, the read, the release; the fixed part
//     of every cold view;
//   * without FUSE (ArrayFile), a box that fills most of the cells it
//     touches and one element of every cell of a plane, less a one-element
//     box: from the two, what verifying a MiB of cells read costs and what
//     gathering a MiB of the result out of them costs. The in-memory
//     device's copies are timed and left out: a real device's bytes arrive
//     by DMA.
//
// Without it the model missed the array's open and the read's own work
// (docs/measurements.md, "The daemon's own work on a cold view").
//
// Why it is separate from the host probe: it runs the daemon's own code (its
// Filesystem and FUSE operations, ArrayFile) and so links the daemon's core.
// It runs in an executable of its own, mmfs-read-path-probe
// (read_path_probe_main.cc), which the host probe starts as a child process
// (read_path_client.h): mkfs.mmfs and mmfs-geom link none of the daemon. It
// uses nothing of the host probe; both mount through throwaway_mount.h.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mmfs::probes {

struct ReadPathProbeOptions {
  int samples = 7;  // fresh mounts, each reading every view once
  bool verbose = false;
};

struct ReadPathProbeResult {
  double cold_view_ms = 0;       // a one-element view through FUSE on a fresh mount, median
  double verify_ms_per_mib = 0;  // per MiB of cells read
  double gather_ms_per_mib = 0;  // per MiB of the result
  // The samples, ms: the view through FUSE; the array's open and each view's
  // read without FUSE and without the in-memory device's copies.
  std::vector<double> view_ms, open_ms, point_ms, cube_ms, beam_ms;
  // What the cube and the beam read and return, bytes (from their plans).
  std::uint64_t cube_read = 0, cube_useful = 0, beam_read = 0, beam_useful = 0, point_read = 0, point_useful = 0;
  double seconds = 0;
};

// `geometry`: the measured geometry's JSON (its capacity is replaced by a
// small in-memory volume's). 0, or an errno with *message. In this process:
// only mmfs-read-path-probe links it; others call run_read_path_probe
// (read_path_client.h).
int probe_read_path(const nlohmann::json& geometry, const ReadPathProbeOptions& options, ReadPathProbeResult* out,
                    std::string* message);

}  // namespace mmfs::probes
