// Fitting a flash geometry to measurements of a real device
// (`mmfs-geom measure`). Pure: the samples come from fs/device/device_probe.h.
//
// Two fits are made from the same samples:
//  * per queue depth, the bitmap paper's Figure 7 line t = β·requests + γ·bytes
//    (least squares of the time per request against its size), which says
//    what a gap costs: merging two requests across g bytes pays γ·g and saves
//    β, so gaps under β/γ are worth reading;
//  * the parameters of the Flash service model (latency, bandwidth, channels)
//    that best reproduce every sample when the model serves the same
//    requests: the planner and `A@/plan` then predict with the device's own
//    numbers. The track (optimal request size) is the size that reaches half
//    the fitted bandwidth.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "geometry/flash.h"

namespace mmfs::geom {

// One measured cell: `requests` random reads of `bytes` each, `depth` kept in
// flight, took `seconds`; `latency_ms` is the median submit-to-completion time
// of one request.
struct ProbeSample {
  std::uint32_t bytes = 0;
  std::uint32_t depth = 1;
  std::uint64_t requests = 0;
  double seconds = 0;
  double latency_ms = 0;
  double ms_per_request() const { return requests ? seconds * 1e3 / double(requests) : 0.0; }
};

struct DepthLine {
  std::uint32_t depth = 1;
  double beta_ms = 0;           // per request
  double gamma_ms_per_mb = 0;   // per 10^6 bytes
  double break_even_gap_bytes() const { return gamma_ms_per_mb > 0 ? beta_ms / gamma_ms_per_mb * 1e6 : 0; }
};

struct FlashFit {
  FlashParams params;
  std::vector<DepthLine> lines;  // one per measured depth, ascending
  // |model − measured| / measured over the samples, in percent.
  double median_error_pct = 0;
  double max_error_pct = 0;
  // The same over the bursts (0 without bursts).
  double burst_median_error_pct = 0;
  double burst_max_error_pct = 0;
};

// The per-depth lines of `samples` (depths with fewer than two sizes are left out).
std::vector<DepthLine> fit_depth_lines(const std::vector<ProbeSample>& samples);

// The model's time per request for a sample's pattern: `depth` reads of
// `bytes` at spread-out offsets served together, divided by depth.
double modeled_ms_per_request(const FlashParams& params, std::uint32_t bytes, std::uint32_t depth);

// The model's time for a burst: `requests` reads of `bytes` at spread-out
// offsets served together by an idle device (wake_ms included), as the
// requests of a cold view's plan are.
double modeled_burst_ms(const FlashParams& params, std::uint32_t bytes, std::uint32_t requests);

// Hockney's n½ of `p`: the request size whose transfer takes as long as its
// latency (latency · bandwidth), in sectors, rounded to a power of two, one
// sector to 4 MiB.
std::uint32_t half_bandwidth_track(const FlashParams& p);

// Fits the Flash parameters to the random-read samples. `sector_size` and
// `capacity_sectors` describe the target. The sequential stream is not a
// bound: views read scattered pieces, and a host's cache can stream several
// times faster than it serves them. With `bursts` (a ProbeSample each:
// `requests` reads of `bytes` issued together on an idle device, at most
// `depth` in flight, `seconds` from the first submission to the last
// completion), the parameters are fitted to the bursts alone, with
// `wake_ms` the idle device's cost: a view's read is a burst, which a device
// may serve well below what steady random reads of the same size promise
// (docs/measurements.md, "Bursts"). The steady samples are
// still recorded and give the per-depth lines. Throws GeometryError(Invalid)
// when the samples cannot be fitted (none, or no positive times).
FlashFit fit_flash(const std::vector<ProbeSample>& samples, std::uint32_t sector_size,
                   std::uint64_t capacity_sectors, const std::vector<ProbeSample>& bursts = {},
                   double wake_ms = 0);

// The "measured" object a measured geometry carries (docs/geometry-format.md).
nlohmann::json measured_json(const FlashFit& fit, const std::vector<ProbeSample>& samples, double sequential_mb_s,
                             const std::vector<ProbeSample>& bursts = {});

}  // namespace mmfs::geom
