// Flash geometry: no positioning cost. A "track" is the optimal request size;
// every block is adjacent to every other, so adjacent(l, s) = l + s*track.
#pragma once

#include <nlohmann/json.hpp>

#include "geometry/geometry.h"

namespace mmfs::geom {

struct FlashParams {
  std::uint32_t sector_size = 4096;     // page / logical block size
  Lbn capacity_sectors = 1ull << 28;    // 1 TiB of 4 KiB pages
  std::uint32_t track_sectors = 32;     // optimal request size ("track"), 128 KiB
  std::uint32_t queues = 32;            // requests served in parallel
  double latency_ms = 0.08;             // per-request latency
  double bandwidth_mb_s = 2000.0;       // aggregate bandwidth, MB = 10^6 bytes
  // Added to the first batch served by an idle device: what waking it costs
  // (a virtual disk's I/O thread, an SSD's power state, the host's halted
  // CPU taking the completion). `mmfs-geom measure` times it.
  double wake_ms = 0.0;
  std::uint32_t depth = 128;            // D offered to layouts
  HostCost host;                        // "host": what the machine adds (measured only)
};

class Flash final : public Geometry {
 public:
  explicit Flash(const FlashParams& params);
  static std::unique_ptr<Flash> from_json(const nlohmann::json& j);
  const FlashParams& params() const { return p_; }
  // What `mmfs-geom measure` recorded when it fitted these parameters
  // (geometry/flash_fit.h); null for a profile or a hand-written file.
  const nlohmann::json& measured() const { return measured_; }
  void set_measured(nlohmann::json m) { measured_ = std::move(m); }

  DeviceKind kind() const override { return DeviceKind::Flash; }
  std::uint32_t sector_size() const override { return p_.sector_size; }
  Lbn capacity_sectors() const override { return p_.capacity_sectors; }
  std::uint64_t tracks() const override;
  std::uint64_t track_of(Lbn lbn) const override;
  TrackBounds track_boundaries(Lbn lbn) const override;
  double skew(Lbn lbn) const override;
  double adjacency_angle() const override { return 0.0; }
  std::uint32_t depth() const override;
  Lbn adjacent(Lbn lbn, std::uint32_t step) const override;
  Lbn adjacent_n(Lbn lbn, std::uint32_t step, std::uint64_t count) const override;
  std::uint32_t parallelism() const override { return p_.queues; }
  nlohmann::json definition() const override;
  nlohmann::json info() const override;
  std::unique_ptr<ServiceTimeModel> make_service_model() const override;
  HostCost host_cost() const override { return p_.host; }

 private:
  FlashParams p_;
  nlohmann::json measured_;
};

}  // namespace mmfs::geom
