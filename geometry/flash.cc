// Flash geometry and its service-time model: no positioning cost, a fixed
// per-request latency, and `queues` channels sharing the aggregate bandwidth.
#include "geometry/flash.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "geometry/json_fields.h"
#include "geometry/service_time.h"
#include "util/align.h"

namespace mmfs::geom {
namespace {

[[noreturn]] void invalid(const std::string& why) {
  throw GeometryError(ErrorKind::Invalid, fmt::format("flash geometry: {}", why));
}

// Every request pays one latency, on one channel, with its first page; its
// other pages are striped over the channels, each moving its bytes at
// bandwidth/queues (an SSD spreads a request's pages over its channels and
// dies). Requests go in batch order, first pages first: the latencies are
// spread over the channels, then the rest of each request fills the
// least-loaded channels to a common level. The batch ends with its busiest
// channel, and can never beat one latency plus the whole transfer at the
// aggregate bandwidth. A one-page request costs latency + page / (bandwidth /
// queues); many requests at depth cost latency / queues each plus their
// bytes at the aggregate bandwidth.
//
// The track plays no part: a latency per track-sized piece, as this model
// once charged, priced 1,212 requests of 12-60 KiB (half of them across a
// 32 KiB boundary) at twice 1,024 requests of 28 KiB, and the virtio disk of
// the virtio test disk read both in the same 22-25 ms. Fitted to the same probe, the
// model without it came within 10 % of the device time of the slices of
// five layouts (a few 4 MiB requests: within 45 %), against -41 to +13 %
// before (docs/geometry-format.md).
class FlashServiceModel final : public ServiceTimeModel {
 public:
  explicit FlashServiceModel(const Flash& g) : g_(g), p_(g.params()) {
    ms_per_byte_ = 1e3 / (p_.bandwidth_mb_s * 1e6);  // MB = 10^6 bytes
    page_ms_ = double(p_.sector_size) * ms_per_byte_ * p_.queues;
  }

  double serve(std::span<const Request> batch, std::vector<std::uint32_t>* order) override {
    const Lbn cap = g_.capacity_sectors();
    std::uint64_t sectors = 0;
    for (const Request& r : batch) {
      if (r.lbn >= cap || r.sectors > cap - r.lbn)
        throw GeometryError(ErrorKind::OutOfRange,
                            fmt::format("request {}:{} goes past the last LBN {} of {}", r.lbn, r.sectors, cap - 1,
                                        g_.name()));
      sectors += r.sectors;
    }
    if (batch.size() >= std::numeric_limits<std::uint32_t>::max())
      throw GeometryError(ErrorKind::Invalid, fmt::format("batch of {} requests is too large", batch.size()));
    if (order) {
      order->clear();
      done_.assign(batch.size(), Done{});
      for (std::uint32_t i = 0; i < batch.size(); ++i) done_[i].index = i;
    }
    if (sectors == 0) {
      if (order)
        for (std::uint32_t i = 0; i < batch.size(); ++i) order->push_back(i);
      return 0.0;
    }

    // Channel loads, ascending; only as many channels as pages matter.
    loads_.assign(std::min<std::uint64_t>(p_.queues, sectors), 0.0);
    for (std::size_t i = 0; i < batch.size(); ++i)
      if (batch[i].sectors > 0) {
        const double at = add_to_least_loaded(p_.latency_ms + page_ms_);
        if (order) done_[i].at = at;
      }
    for (std::size_t i = 0; i < batch.size(); ++i)
      if (batch[i].sectors > 1) {
        const double at = fill_least_loaded(double(batch[i].sectors - 1) * page_ms_);
        if (order) done_[i].at = std::max(done_[i].at, at);
      }
    double ms = std::max(loads_.back(), p_.latency_ms + double(sectors) * p_.sector_size * ms_per_byte_);
    if (asleep_) ms += p_.wake_ms;
    asleep_ = false;
    if (order) {
      std::stable_sort(done_.begin(), done_.end(), [](const Done& a, const Done& b) { return a.at < b.at; });
      for (const Done& d : done_) order->push_back(d.index);
    }
    clock_ += ms;
    return ms;
  }

  // From an idle device: the next batch pays for waking it.
  void reset() override {
    clock_ = 0.0;
    asleep_ = true;
  }
  // Flash has no head to place; only validates lbn.
  void place_at(Lbn lbn) override { (void)g_.track_of(lbn); }
  void idle(double ms) override {
    if (!(ms >= 0.0) || std::isinf(ms))
      throw GeometryError(ErrorKind::Invalid, fmt::format("idle time must be a finite number >= 0, got {}", ms));
    clock_ += ms;
    if (ms >= kSleepAfterIdleMs) asleep_ = true;
  }
  double clock_ms() const override { return clock_; }

 private:
  struct Done {
    double at = 0.0;  // when the request's last piece completes
    std::uint32_t index = 0;
  };
  const Flash& g_;
  const FlashParams& p_;
  // Idle this long, the device pays wake_ms again. An idle device
  // serves its first read slower (docs/measurements.md, "Waking an idle
  // device"), and most of the cost is there by
  // 10 ms. Shorter waits (a striped member waiting for the slowest) are not
  // sleep.
  static constexpr double kSleepAfterIdleMs = 10.0;

  // Adds `ms` to the least-loaded channel; returns its new load.
  double add_to_least_loaded(double ms) {
    const double load = loads_.front() + ms;
    auto to = std::upper_bound(loads_.begin() + 1, loads_.end(), load);
    std::move(loads_.begin() + 1, to, loads_.begin());
    *(to - 1) = load;
    return load;
  }
  // Spreads `ms` of work over the least-loaded channels, raising them to one
  // level (water-filling); returns that level.
  double fill_least_loaded(double ms) {
    double sum = 0.0;
    std::size_t k = 0;
    double level = 0.0;
    while (k < loads_.size()) {
      sum += loads_[k++];
      level = (sum + ms) / double(k);
      if (k == loads_.size() || level <= loads_[k]) break;
    }
    std::fill(loads_.begin(), loads_.begin() + std::ptrdiff_t(k), level);
    return level;
  }

  double ms_per_byte_ = 0.0;
  double page_ms_ = 0.0;  // one sector on one channel
  double clock_ = 0.0;
  bool asleep_ = true;  // a new model is an idle device
  std::vector<double> loads_;  // channel loads, ascending, reused between batches
  std::vector<Done> done_;     // per request, only when `order` is asked for
};

}  // namespace

Flash::Flash(const FlashParams& params) : p_(params) {
  if (p_.sector_size == 0) invalid("'sector_size' must be positive");
  if (p_.capacity_sectors == 0) invalid("'capacity_sectors' must be positive");
  if (p_.capacity_sectors > (std::uint64_t(1) << 63) / p_.sector_size)
    invalid(fmt::format("'capacity_sectors' {} of {} bytes is too large", p_.capacity_sectors, p_.sector_size));
  if (p_.track_sectors == 0) invalid("'track_sectors' must be positive");
  if (p_.queues == 0) invalid("'queues' must be positive");
  if (p_.depth == 0) invalid("'depth' must be positive");
  if (!(p_.latency_ms >= 0.0) || std::isinf(p_.latency_ms))
    invalid(fmt::format("'latency_ms' must be a finite number >= 0, got {}", p_.latency_ms));
  if (!(p_.bandwidth_mb_s > 0.0) || std::isinf(p_.bandwidth_mb_s))
    invalid(fmt::format("'bandwidth_mb_s' must be positive, got {}", p_.bandwidth_mb_s));
  if (!(p_.wake_ms >= 0.0) || std::isinf(p_.wake_ms))
    invalid(fmt::format("'wake_ms' must be a finite number >= 0, got {}", p_.wake_ms));
  for (auto [name, v] : {std::pair{"request_ms", p_.host.request_ms}, std::pair{"ms_per_mib", p_.host.ms_per_mib},
                         std::pair{"verify_ms_per_mib", p_.host.verify_ms_per_mib},
                         std::pair{"gather_ms_per_mib", p_.host.gather_ms_per_mib}})
    if (!(v >= 0.0) || std::isinf(v)) invalid(fmt::format("'host.{}' must be a finite number >= 0, got {}", name, v));
}

std::unique_ptr<Flash> Flash::from_json(const nlohmann::json& j) {
  const std::string where;
  if (!j.is_object()) invalid("the geometry must be a JSON object");
  // "profile", "name" and "notes" are the loader's business (geometry/load.cc).
  jsonf::reject_unknown(j, where,
                        {"kind", "profile", "name", "notes", "sector_size", "capacity_sectors", "track_sectors",
                         "queues", "latency_ms", "bandwidth_mb_s", "wake_ms", "depth", "host", "measured"});
  if (auto it = j.find("kind"); it != j.end() && !(it->is_string() && it->get<std::string>() == "flash"))
    throw GeometryError(ErrorKind::Invalid,
                        fmt::format("geometry field 'kind': expected \"flash\", got {}", it->dump()));

  constexpr std::uint64_t u32 = UINT32_MAX;
  const FlashParams d;  // defaults for the optional fields
  FlashParams f;
  f.sector_size = std::uint32_t(jsonf::optional_uint(j, "sector_size", where, d.sector_size, 1, u32));
  f.capacity_sectors = jsonf::required_uint(j, "capacity_sectors", where, 1, std::uint64_t(1) << 62);
  f.track_sectors = std::uint32_t(jsonf::optional_uint(j, "track_sectors", where, d.track_sectors, 1, u32));
  f.queues = std::uint32_t(jsonf::optional_uint(j, "queues", where, d.queues, 1, u32));
  f.latency_ms = jsonf::optional_double(j, "latency_ms", where, d.latency_ms);
  f.bandwidth_mb_s = jsonf::optional_double(j, "bandwidth_mb_s", where, d.bandwidth_mb_s, 1e-9);
  f.wake_ms = jsonf::optional_double(j, "wake_ms", where, d.wake_ms);
  f.depth = std::uint32_t(jsonf::optional_uint(j, "depth", where, d.depth, 1, u32));
  if (auto it = j.find("host"); it != j.end()) {
    if (!it->is_object()) invalid("'host' must be an object (what a read costs the machine: request_ms, ms_per_mib)");
    const std::string in = "host";
    jsonf::reject_unknown(*it, in, {"request_ms", "ms_per_mib", "verify_ms_per_mib", "gather_ms_per_mib"});
    f.host.request_ms = jsonf::optional_double(*it, "request_ms", in, 0.0);
    f.host.ms_per_mib = jsonf::optional_double(*it, "ms_per_mib", in, 0.0);
    f.host.verify_ms_per_mib = jsonf::optional_double(*it, "verify_ms_per_mib", in, 0.0);
    f.host.gather_ms_per_mib = jsonf::optional_double(*it, "gather_ms_per_mib", in, 0.0);
  }
  auto flash = std::make_unique<Flash>(f);
  if (auto it = j.find("measured"); it != j.end()) {
    if (!it->is_object()) invalid("'measured' must be an object (what mmfs-geom measure recorded)");
    flash->set_measured(*it);
  }
  return flash;
}

std::uint64_t Flash::tracks() const { return util::div_up(p_.capacity_sectors, p_.track_sectors); }

std::uint64_t Flash::track_of(Lbn lbn) const {
  check_lbn(lbn);
  return lbn / p_.track_sectors;
}

// The last track may be short: it ends at the last LBN.
TrackBounds Flash::track_boundaries(Lbn lbn) const {
  const std::uint64_t low = track_of(lbn) * p_.track_sectors;
  return {low, std::min<Lbn>(low + p_.track_sectors, p_.capacity_sectors) - 1};
}

double Flash::skew(Lbn lbn) const {
  check_lbn(lbn);
  return 0.0;
}

std::uint32_t Flash::depth() const { return p_.depth; }

Lbn Flash::adjacent(Lbn lbn, std::uint32_t step) const {
  check_lbn(lbn);
  check_step(step);
  const Lbn target = lbn + std::uint64_t(step) * p_.track_sectors;
  if (target >= p_.capacity_sectors)
    throw GeometryError(ErrorKind::OutOfRange,
                        fmt::format("adjacent({}, {}): LBN {} is past the last LBN {} of {}", lbn, step, target,
                                    p_.capacity_sectors - 1, name()));
  return target;
}

// In closed form: MultiMap's MAP hops once per cell coordinate, and hop by
// hop its plan of a 2 MiB slice (4,096 cells) took 14 ms, three quarters of
// it in these hops and their checks.
Lbn Flash::adjacent_n(Lbn lbn, std::uint32_t step, std::uint64_t count) const {
  check_lbn(lbn);
  if (count == 0) return lbn;
  check_step(step);
  const std::uint64_t hop = std::uint64_t(step) * p_.track_sectors;
  const std::uint64_t hops_that_fit = (p_.capacity_sectors - 1 - lbn) / hop;
  if (count > hops_that_fit) return adjacent(lbn + hops_that_fit * hop, step);  // throws as the hop by hop walk does
  return lbn + count * hop;
}

nlohmann::json Flash::definition() const {
  nlohmann::json j = {{"kind", "flash"},
          {"sector_size", p_.sector_size},
          {"capacity_sectors", p_.capacity_sectors},
          {"track_sectors", p_.track_sectors},
          {"queues", p_.queues},
          {"latency_ms", p_.latency_ms},
          {"bandwidth_mb_s", p_.bandwidth_mb_s},
          {"depth", p_.depth}};
  if (p_.wake_ms > 0) j["wake_ms"] = p_.wake_ms;  // older definitions stay as they were
  if (!p_.host.empty()) {
    j["host"] = {{"request_ms", p_.host.request_ms}, {"ms_per_mib", p_.host.ms_per_mib}};
    // Written only when measured, so a geometry from before them reads back as it was.
    if (p_.host.verify_ms_per_mib > 0) j["host"]["verify_ms_per_mib"] = p_.host.verify_ms_per_mib;
    if (p_.host.gather_ms_per_mib > 0) j["host"]["gather_ms_per_mib"] = p_.host.gather_ms_per_mib;
  }
  if (!measured_.is_null()) j["measured"] = measured_;
  return j;
}

nlohmann::json Flash::info() const {
  nlohmann::json j = definition();
  j["profile"] = name();
  j["capacity_bytes"] = p_.capacity_sectors * p_.sector_size;
  j["tracks"] = tracks();
  j["depth"] = depth();
  j["skew_deg"] = 0;
  j["parallelism"] = p_.queues;
  return j;
}

std::unique_ptr<ServiceTimeModel> Flash::make_service_model() const {
  return std::make_unique<FlashServiceModel>(*this);
}

}  // namespace mmfs::geom
