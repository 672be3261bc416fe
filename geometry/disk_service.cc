#include "geometry/disk_service.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace mmfs::geom {
namespace {

// Tolerance, in sectors, for "the head arrives exactly at a sector boundary":
// adjacent blocks are placed exactly W after their source, and floating-point
// noise must not turn an on-time arrival into a full-revolution miss.
constexpr double kOnTime = 1e-6;

double frac(double x) { return x - std::floor(x); }

}  // namespace

DiskServiceModel::DiskServiceModel(const ZonedDisk& disk) : disk_(disk), rev_ms_(disk.revolution_ms()) {}

void DiskServiceModel::reset() {
  cylinder_ = 0;
  surface_ = 0;
  clock_ = 0;
}

void DiskServiceModel::place_at(Lbn lbn) {
  if (lbn >= disk_.capacity_sectors())
    throw GeometryError(ErrorKind::OutOfRange, fmt::format("LBN {} is beyond the capacity of the device", lbn));
  ZonedDisk::Location loc = disk_.locate(lbn);
  cylinder_ = loc.cylinder;
  surface_ = loc.surface;
  // Advance the clock to the next instant the start of `lbn` is under the head.
  double target = frac(loc.track_start_rev + double(loc.sector) / loc.track_length);
  double now = frac(clock_ / rev_ms_);
  clock_ += frac(target - now) * rev_ms_;
}

double DiskServiceModel::move_ms(const ZonedDisk::Location& to) const {
  std::uint64_t dc = to.cylinder > cylinder_ ? to.cylinder - cylinder_ : cylinder_ - to.cylinder;
  double switch_ms = to.surface != surface_ ? disk_.params().head_switch_ms : 0.0;
  if (dc == 0) return switch_ms;
  return std::max(disk_.seek_profile().seek_ms(dc), switch_ms);
}

double DiskServiceModel::landing_sectors(const ZonedDisk::Location& loc, double arrival_ms) const {
  double head = frac(arrival_ms / rev_ms_);
  double start = loc.track_start_rev + double(loc.sector) / loc.track_length;
  double p = frac(head - start) * loc.track_length;
  // Arriving a hair early counts as arriving on time.
  if (p > loc.track_length - kOnTime) p = 0;
  return p;
}

double DiskServiceModel::rotation_sectors(const ZonedDisk::Location& loc, std::uint32_t count,
                                          double arrival_ms) const {
  double T = loc.track_length;
  double p = landing_sectors(loc, arrival_ms);
  if (p <= kOnTime) return count;
  if (disk_.params().zero_latency && p < count) {
    // Landed inside the segment: read from the next boundary s to the end,
    // come round, and read the first s sectors: T - p + s in all.
    return T - p + std::ceil(p - kOnTime);
  }
  return (T - p) + count;  // wait for the segment to come round, then read it
}

double DiskServiceModel::positioning_ms(const ZonedDisk::Location& loc, std::uint32_t count) const {
  // The SPTF metric: everything but media transfer until the request's first
  // track segment is done. With zero-latency reads, landing inside a segment
  // is not free: the rest of the segment costs most of a revolution.
  count = std::min<std::uint32_t>(count, loc.track_length - loc.sector);
  double move = move_ms(loc) + disk_.params().overhead_ms;
  double sectors = rotation_sectors(loc, count, clock_ + move);
  return move + (sectors - count) * rev_ms_ / loc.track_length;
}

double DiskServiceModel::positioning_ms(Lbn lbn) const {
  if (lbn >= disk_.capacity_sectors())
    throw GeometryError(ErrorKind::OutOfRange, fmt::format("LBN {} is beyond the capacity of the device", lbn));
  return positioning_ms(disk_.locate(lbn), 1);
}

void DiskServiceModel::serve_segment(const ZonedDisk::Location& loc, std::uint32_t count) {
  double arrival = clock_ + move_ms(loc);
  clock_ = arrival + rotation_sectors(loc, count, arrival) * rev_ms_ / loc.track_length;
  cylinder_ = loc.cylinder;
  surface_ = loc.surface;
}

void DiskServiceModel::serve_request(const Pending& p) {
  clock_ += disk_.params().overhead_ms;
  Lbn lbn = p.request.lbn;
  std::uint32_t left = p.request.sectors;
  ZonedDisk::Location loc = p.first;
  while (true) {
    std::uint32_t here = std::min<std::uint32_t>(left, loc.track_length - loc.sector);
    serve_segment(loc, here);
    left -= here;
    if (left == 0) break;
    lbn += here;
    loc = disk_.locate(lbn);
  }
}

double DiskServiceModel::serve(std::span<const Request> batch, std::vector<std::uint32_t>* order) {
  // Validate the whole batch before touching any state.
  pending_.clear();
  for (std::uint32_t i = 0; i < batch.size(); ++i) {
    const Request& r = batch[i];
    if (r.sectors == 0 || r.lbn >= disk_.capacity_sectors() || disk_.capacity_sectors() - r.lbn < r.sectors)
      throw GeometryError(ErrorKind::OutOfRange,
                          fmt::format("request {}:{} does not lie within the device's {} sectors", r.lbn,
                                      r.sectors, disk_.capacity_sectors()));
    pending_.push_back({disk_.locate(r.lbn), r, i});
  }
  if (order) order->clear();
  double start = clock_;
  std::size_t next = 0;
  window_.clear();
  std::size_t depth = std::max<std::uint32_t>(1, disk_.params().queue_depth);
  while (next < pending_.size() && window_.size() < depth) window_.push_back(std::uint32_t(next++));
  while (!window_.empty()) {
    std::size_t best = 0;
    if (window_.size() > 1) {
      double best_ms = positioning_ms(pending_[window_[0]].first, pending_[window_[0]].request.sectors);
      for (std::size_t w = 1; w < window_.size(); ++w) {
        const Pending& c = pending_[window_[w]];
        double ms = positioning_ms(c.first, c.request.sectors);
        if (ms < best_ms) best_ms = ms, best = w;
      }
    }
    const Pending& chosen = pending_[window_[best]];
    serve_request(chosen);
    if (order) order->push_back(chosen.index);
    // Keep submission order among the waiting requests (ties go to the oldest).
    window_.erase(window_.begin() + std::ptrdiff_t(best));
    if (next < pending_.size()) window_.push_back(std::uint32_t(next++));
  }
  return clock_ - start;
}

}  // namespace mmfs::geom
