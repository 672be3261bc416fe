// Measuring a real device for a fitted geometry (`mmfs-geom
// measure`, `mkfs.mmfs -g measure`): random O_DIRECT reads through io_uring
// at request sizes 512 B…4 MiB and queue depths 1…64, bursts of reads from
// an idle device (what a cold view's read is), a sequential stream, and
// single reads after idle time (what waking the device costs), within a time
// budget. Reads only: safe on a device that holds data.
// It drives its own ring rather than FileDevice, whose submit() waits for a
// whole batch: a probe keeps exactly `depth` reads in flight and times each.
//
// A regular file is measured where it holds data (SEEK_DATA): reading a hole
// would time the page allocator, not the device. When a file holds too little
// data (a fresh sparse image), a scratch file is written beside it, measured
// and removed; the result says so.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fs/device/block_device.h"
#include "geometry/flash_fit.h"

namespace mmfs::fs {

struct ProbeOptions {
  double seconds = 60;  // the whole measurement, scratch file included
  std::vector<std::uint32_t> sizes;   // bytes; empty: 512 B (or the logical block) … 4 MiB, ×4
  std::vector<std::uint32_t> depths;  // empty: 1, 4, 16, 64
  // In-flight bytes are capped (the depth of large reads shrinks to fit).
  std::uint64_t max_inflight_bytes = 64ull << 20;
  std::uint64_t min_data_bytes = 256ull << 20;   // less data in a file: use a scratch file
  std::uint64_t scratch_bytes = 1ull << 30;
  bool verbose = false;  // progress lines on stderr
  // Single reads of the smallest size, each after the device has been idle
  // this long: what waking it costs (wake_ms of the fitted geometry). A cold
  // view comes after a long idleness, and an idle device serves its first
  // read several times slower (docs/measurements.md, "Waking an idle
  // device"). At most a twentieth of the budget (at least 3 reads).
  std::uint32_t idle_reads = 15;
  double idle_gap_ms = 250;
  // Bursts, as a cold view's read is: `requests` reads of one size issued
  // together, at most burst_depth in flight (the daemon's default iodepth),
  // each burst after burst_gap_ms of idleness (longer than the model's 10 ms
  // before an idle device sleeps), repeated burst_repeats times (the median
  // is kept). The fit is made to them (geometry/flash_fit.h). Empty sizes:
  // 4 KiB, 32 KiB, 256 KiB and 4 MiB, each 1, 32 and up to 1,024 reads of at
  // most burst_bytes in all. A zero burst_repeats measures none.
  std::vector<std::uint32_t> burst_sizes;
  std::uint32_t burst_depth = kDefaultIodepth;
  std::uint64_t burst_bytes = 32ull << 20;
  double burst_gap_ms = 20;
  std::uint32_t burst_repeats = 3;
};

struct ProbeResult {
  std::string target;
  std::uint64_t device_bytes = 0;     // size of the target
  std::uint32_t logical_block = 512;  // O_DIRECT alignment
  std::uint64_t probed_bytes = 0;     // bytes of data the random reads were spread over
  bool scratch = false;               // measured through a scratch file beside the target
  std::vector<geom::ProbeSample> samples;
  // One per burst size and count: `requests` reads, `depth` in flight at
  // most, `seconds` the median burst (latency_ms unused).
  std::vector<geom::ProbeSample> bursts;
  double sequential_mb_s = 0;
  // Median latency of the smallest read after idle_gap_ms of idleness, and
  // back to back at depth 1; the difference (never below 0) is wake_ms.
  double idle_latency_ms = 0;
  double busy_latency_ms = 0;
  double wake_ms() const { return idle_latency_ms > busy_latency_ms ? idle_latency_ms - busy_latency_ms : 0.0; }
  double seconds = 0;                 // wall time of the whole measurement
};

// 0, or an errno with *message saying why (no O_DIRECT, io_uring refused, …).
int probe_device(const std::string& path, const ProbeOptions& options, ProbeResult* out, std::string* message);

// The flash geometry fitted to a probe: a JSON definition (name "measured")
// with its "measured" record, and a few lines for a person.
nlohmann::json measured_geometry(const ProbeResult& probe, std::string* summary);

}  // namespace mmfs::fs
