// Service-time model of a zoned disk (docs/reference.md §7 (b)).
//
// The platter turns continuously: the angle under the heads at time t is
// t / revolution (mod 1), zero at reset(). A request costs the seek (or head
// switch) to its first track, the rotational wait until a useful sector passes
// under the head, and the media transfer; requests spanning tracks switch heads
// or cylinders in between. With zero-latency firmware a track segment is read
// from wherever the head lands and completed on the next pass, so a whole
// track costs one revolution whatever the landing angle (Atropos §2.2).
// Within a batch the firmware serves the request with the shortest
// positioning time first (SPTF) among the first `queue_depth` pending ones.
#pragma once

#include <vector>

#include "geometry/service_time.h"
#include "geometry/zoned_disk.h"

namespace mmfs::geom {

class DiskServiceModel final : public ServiceTimeModel {
 public:
  explicit DiskServiceModel(const ZonedDisk& disk);

  double serve(std::span<const Request> batch, std::vector<std::uint32_t>* order = nullptr) override;
  void reset() override;
  void place_at(Lbn lbn) override;
  void idle(double ms) override { clock_ += ms; }
  double clock_ms() const override { return clock_; }

  // Seek/switch time plus rotational wait from the current state until the
  // first sector of a request at `lbn` can be transferred (the SPTF metric).
  double positioning_ms(Lbn lbn) const;
  std::uint64_t cylinder() const { return cylinder_; }
  std::uint32_t surface() const { return surface_; }

 private:
  struct Pending {
    ZonedDisk::Location first;
    Request request;
    std::uint32_t index = 0;
  };
  double move_ms(const ZonedDisk::Location& to) const;
  // Where the head is relative to the start of a `count`-sector segment at
  // `loc` after moving there: in sectors from the segment's first sector, [0, T).
  double landing_sectors(const ZonedDisk::Location& loc, double arrival_ms) const;
  // Rotation, in sectors, from arriving at `arrival_ms` until the `count`
  // sectors from loc are read (zero-latency aware).
  double rotation_sectors(const ZonedDisk::Location& loc, std::uint32_t count, double arrival_ms) const;
  double positioning_ms(const ZonedDisk::Location& loc, std::uint32_t count) const;
  void serve_segment(const ZonedDisk::Location& loc, std::uint32_t count);
  void serve_request(const Pending& p);

  const ZonedDisk& disk_;
  double rev_ms_;
  std::uint64_t cylinder_ = 0;
  std::uint32_t surface_ = 0;
  double clock_ = 0;
  std::vector<Pending> pending_;     // reused across batches
  std::vector<std::uint32_t> window_;
};

}  // namespace mmfs::geom
