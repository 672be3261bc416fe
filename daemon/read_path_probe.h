// The daemon's own work on a cold view (issue 18; part of the host probe of
// `mmfs-geom measure` and `mkfs.mmfs -g measure`, host_probe.h). The
// throwaway FUSE mount there times the kernel's part of a view: lookups,
// open, read, release. What mmfs adds to it is timed here, by the daemon's
// own code on an in-memory volume of the measured geometry holding an array
// in the geometry's default layout, mounted afresh for every sample with the
// caches evicted (as a cold view after a fresh mount):
//   * the array's open (the lookup of A@ builds its placement) and the read
//     of a one-element box: the fixed part of every cold view;
//   * a box that fills most of the cells it touches and a beam that uses
//     little of them: from the two, what verifying a MiB of cells read costs
//     and what gathering a MiB of the result out of them costs.
// The in-memory device's own copies are timed and left out: on a real device
// the bytes arrive by DMA.
//
// Measured on the virtio machine of issue 18, the cold point view took
// 0.91 ms against 0.53 modeled before this probe: the array's open (0.13 ms)
// and the read's own work were missing, and a 102x102x26 box spent 0.8 ms
// gathering 2 MiB out of 392 cells while the model counted none.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mmfs::daemon {

struct ReadPathProbeOptions {
  int samples = 7;  // fresh mounts, each reading every view once
  bool verbose = false;
};

struct ReadPathProbeResult {
  double fixed_ms = 0;           // the array's open + a one-element view, median
  double verify_ms_per_mib = 0;  // per MiB of cells read
  double gather_ms_per_mib = 0;  // per MiB of the result
  // The samples, ms (each view's read without the in-memory device's copies).
  std::vector<double> open_ms, point_ms, cube_ms, beam_ms;
  // What the cube and the beam read and return, bytes (from their plans).
  std::uint64_t cube_read = 0, cube_useful = 0, beam_read = 0, beam_useful = 0, point_read = 0, point_useful = 0;
  double seconds = 0;
};

// `geometry`: the measured geometry's JSON (its capacity is replaced by a
// small in-memory volume's). 0, or an errno with *message.
int probe_read_path(const nlohmann::json& geometry, const ReadPathProbeOptions& options, ReadPathProbeResult* out,
                    std::string* message);

}  // namespace mmfs::daemon
