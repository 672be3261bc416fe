// Fitting the Flash model to measured samples (see flash_fit.h).
#include "geometry/flash_fit.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "geometry/service_time.h"
#include "util/align.h"
#include "util/stats.h"

namespace mmfs::geom {

namespace {

[[noreturn]] void invalid(const std::string& why) {
  throw GeometryError(ErrorKind::Invalid, fmt::format("measured geometry: {}", why));
}

// Sum of squared log errors of the model against the samples: a fit that is
// 2× off on a 10 µs read counts as much as one 2× off on a 40 ms read. With
// bursts, against the bursts alone: they are what a view's read does.
double misfit(const FlashParams& p, const std::vector<ProbeSample>& samples, const std::vector<ProbeSample>& bursts) {
  double sum = 0.0;
  for (const ProbeSample& s : bursts) {
    const double e = std::log(modeled_burst_ms(p, s.bytes, std::uint32_t(s.requests)) / (s.seconds * 1e3));
    sum += e * e;
  }
  if (!bursts.empty()) return sum;
  for (const ProbeSample& s : samples) {
    const double e = std::log(modeled_ms_per_request(p, s.bytes, s.depth) / s.ms_per_request());
    sum += e * e;
  }
  return sum;
}

std::vector<ProbeSample> usable(const std::vector<ProbeSample>& all) {
  std::vector<ProbeSample> out;
  for (const ProbeSample& s : all)
    if (s.requests > 0 && s.seconds > 0 && s.bytes > 0 && s.depth > 0) out.push_back(s);
  return out;
}

}  // namespace

std::vector<DepthLine> fit_depth_lines(const std::vector<ProbeSample>& samples) {
  std::map<std::uint32_t, std::vector<const ProbeSample*>> by_depth;
  for (const ProbeSample& s : samples)
    if (s.requests > 0 && s.seconds > 0) by_depth[s.depth].push_back(&s);
  std::vector<DepthLine> lines;
  for (const auto& [depth, group] : by_depth) {
    if (group.size() < 2) continue;
    // Least squares of ms per request against MB per request.
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (const ProbeSample* s : group) {
      const double x = s->bytes / 1e6, y = s->ms_per_request();
      sx += x;
      sy += y;
      sxx += x * x;
      sxy += x * y;
    }
    const double n = double(group.size());
    const double den = n * sxx - sx * sx;
    if (den <= 0) continue;
    DepthLine line;
    line.depth = depth;
    line.gamma_ms_per_mb = std::max(0.0, (n * sxy - sx * sy) / den);
    line.beta_ms = std::max(0.0, (sy - line.gamma_ms_per_mb * sx) / n);
    lines.push_back(line);
  }
  return lines;
}

namespace {

// `count` reads of `bytes` at spread-out offsets, served together by a fresh
// model of `params` (where they lie does not change what flash charges).
double serve_spread(const FlashParams& params, std::uint32_t bytes, std::uint32_t count) {
  FlashParams p = params;
  const std::uint64_t sectors = std::max<std::uint64_t>(1, util::div_up(bytes, p.sector_size));
  const std::uint64_t stride = sectors + 1;
  p.capacity_sectors = std::max<std::uint64_t>(p.capacity_sectors, stride * (std::uint64_t(count) + 1));
  Flash flash(p);
  auto model = flash.make_service_model();
  model->reset();  // an idle device: wake_ms on the batch, if the params have one
  std::vector<Request> batch;
  for (std::uint32_t i = 0; i < count; ++i) batch.push_back({i * stride, std::uint32_t(sectors)});
  return model->serve(batch);
}

}  // namespace

double modeled_ms_per_request(const FlashParams& params, std::uint32_t bytes, std::uint32_t depth) {
  FlashParams p = params;
  p.wake_ms = 0;  // a busy device: the probe keeps it so
  return serve_spread(p, bytes, depth) / depth;
}

double modeled_burst_ms(const FlashParams& params, std::uint32_t bytes, std::uint32_t requests) {
  return serve_spread(params, bytes, requests);  // from idle, wake_ms included, as a cold view pays it
}

std::uint32_t half_bandwidth_track(const FlashParams& p) {
  const double bytes = p.latency_ms * 1e-3 * p.bandwidth_mb_s * 1e6;  // n½ = latency · bandwidth
  const double sectors = std::max(1.0, bytes / p.sector_size);
  const double most = std::max(1.0, double(4u << 20) / p.sector_size);
  return std::uint32_t(std::min(most, std::exp2(std::round(std::log2(sectors)))));
}

FlashFit fit_flash(const std::vector<ProbeSample>& all, std::uint32_t sector_size, std::uint64_t capacity_sectors,
                   const std::vector<ProbeSample>& all_bursts, double wake_ms) {
  const std::vector<ProbeSample> samples = usable(all), bursts = usable(all_bursts);
  if (samples.empty()) invalid("no usable samples (every cell timed zero requests)");
  if (sector_size == 0 || capacity_sectors == 0) invalid("the target has no sectors");
  if (!(wake_ms >= 0) || std::isinf(wake_ms)) invalid("the wake time must be a finite number >= 0");

  FlashParams p;
  p.sector_size = sector_size;
  p.capacity_sectors = capacity_sectors;
  p.wake_ms = wake_ms;
  // Starting point: the latency of the smallest read at the lowest depth, and
  // the highest throughput any random cell reached. The bandwidth is searched
  // well below that peak: on a virtual disk the largest reads and the
  // sequential stream can come from the host's cache at several times what
  // the scattered reads of a view get, and a model priced by the fastest
  // sample reads every large view too fast. The sequential stream
  // is kept in the record (measured_json), not imposed on the fit.
  const auto lowest = std::min_element(samples.begin(), samples.end(), [](const auto& a, const auto& b) {
    return std::pair(a.depth, a.bytes) < std::pair(b.depth, b.bytes);
  });
  double peak_mb_s = 0;
  for (const ProbeSample& s : samples) peak_mb_s = std::max(peak_mb_s, s.bytes * s.requests / s.seconds / 1e6);
  const double base_latency = std::max(1e-4, lowest->ms_per_request() / std::max<std::uint32_t>(1, lowest->depth));
  p.latency_ms = base_latency;
  p.bandwidth_mb_s = peak_mb_s;

  // Coordinate descent over grids: the channels, then latency and bandwidth
  // together, until a round improves nothing; then a finer grid around the
  // best pair.
  std::vector<std::uint32_t> queues;
  for (std::uint32_t q = 1; q <= 256; q *= 2) queues.push_back(q);
  double best = std::numeric_limits<double>::infinity();
  auto try_params = [&](const FlashParams& c) {
    const double m = misfit(c, samples, bursts);
    if (m < best * (1 - 1e-12)) {
      best = m;
      p = c;
    }
  };
  // Latency from 0.2x to 1.4x the smallest read's time, bandwidth from 2x the
  // peak down to 1/32 of it in steps of 2^(1/8) (9 %).
  auto latency_bandwidth_grid = [&](const FlashParams& around, double lat_lo, double lat_step, int lat_steps,
                                    double bw_hi, double bw_ratio, int bw_steps) {
    for (int i = 0; i <= lat_steps; ++i)
      for (int k = 0; k <= bw_steps; ++k) {
        FlashParams c = around;
        c.latency_ms = lat_lo + lat_step * i;
        c.bandwidth_mb_s = bw_hi * std::pow(bw_ratio, -k);
        try_params(c);
      }
  };
  for (int round = 0; round < 4; ++round) {
    const double before = best;
    const FlashParams start = p;
    for (std::uint32_t q : queues) {
      FlashParams c = start;
      c.queues = q;
      try_params(c);
    }
    latency_bandwidth_grid(p, base_latency * 0.2, base_latency * 0.05, 24, peak_mb_s * 2.0, std::exp2(0.125), 48);
    if (!(best < before)) break;
  }
  const FlashParams coarse = p;
  latency_bandwidth_grid(coarse, coarse.latency_ms * 0.95, coarse.latency_ms * 0.01, 10,
                         coarse.bandwidth_mb_s * 1.06, 1.01, 12);

  // The model has no use for a track; layouts, striping and the scrubber
  // read in tracks, and get the request size that reaches half the
  // bandwidth (Hockney's n½).
  p.track_sectors = half_bandwidth_track(p);
  FlashFit fit;
  fit.params = p;
  fit.lines = fit_depth_lines(samples);
  std::vector<double> errors;
  for (const ProbeSample& s : samples)
    errors.push_back(std::abs(modeled_ms_per_request(p, s.bytes, s.depth) / s.ms_per_request() - 1.0) * 100.0);
  fit.median_error_pct = util::median(errors);
  fit.max_error_pct = *std::max_element(errors.begin(), errors.end());
  errors.clear();
  for (const ProbeSample& s : bursts)
    errors.push_back(
        std::abs(modeled_burst_ms(p, s.bytes, std::uint32_t(s.requests)) / (s.seconds * 1e3) - 1.0) * 100.0);
  if (!errors.empty()) {
    fit.burst_median_error_pct = util::median(errors);
    fit.burst_max_error_pct = *std::max_element(errors.begin(), errors.end());
  }
  return fit;
}

nlohmann::json measured_json(const FlashFit& fit, const std::vector<ProbeSample>& samples, double sequential_mb_s,
                             const std::vector<ProbeSample>& bursts) {
  auto round3 = [](double v) { return std::round(v * 1e3) / 1e3; };
  auto round6 = [](double v) { return std::round(v * 1e6) / 1e6; };
  nlohmann::json lines = nlohmann::json::array();
  for (const DepthLine& l : fit.lines)
    lines.push_back({{"depth", l.depth},
                     {"beta_ms", round6(l.beta_ms)},
                     {"gamma_ms_per_mb", round6(l.gamma_ms_per_mb)},
                     {"break_even_gap_bytes", std::llround(l.break_even_gap_bytes())}});
  // [bytes, depth, requests, ms per request, median latency ms]: compact, so
  // the whole measurement fits in the superblock beside the parameters.
  nlohmann::json cells = nlohmann::json::array();
  for (const ProbeSample& s : samples)
    cells.push_back({s.bytes, s.depth, s.requests, round6(s.ms_per_request()), round6(s.latency_ms)});
  nlohmann::json j = {
      {"sequential_mb_s", round3(sequential_mb_s)},
      {"lines", lines},
      {"cells_columns", {"bytes", "depth", "requests", "ms_per_request", "median_latency_ms"}},
      {"cells", cells},
      {"model_error_pct", {{"median", round3(fit.median_error_pct)}, {"max", round3(fit.max_error_pct)}}}};
  if (!bursts.empty()) {
    // [bytes, requests, depth, ms]: a burst from idle, as a view's read is.
    nlohmann::json b = nlohmann::json::array();
    for (const ProbeSample& s : bursts) b.push_back({s.bytes, s.requests, s.depth, round6(s.seconds * 1e3)});
    j["bursts_columns"] = {"bytes", "requests", "depth", "ms"};
    j["bursts"] = b;
    j["model_error_pct"]["bursts_median"] = round3(fit.burst_median_error_pct);
    j["model_error_pct"]["bursts_max"] = round3(fit.burst_max_error_pct);
  }
  return j;
}

}  // namespace mmfs::geom
