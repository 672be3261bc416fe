#include "geometry/geometry.h"

#include <fmt/format.h>

namespace mmfs::geom {

const char* to_string(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::Disk: return "disk";
    case DeviceKind::Mems: return "mems";
    case DeviceKind::Flash: return "flash";
  }
  return "?";
}

std::vector<Lbn> Geometry::equivalent(Lbn) const {
  throw GeometryError(ErrorKind::NotSupported,
                      fmt::format("equivalence classes exist only on MEMS devices, not on {} '{}'",
                                  to_string(kind()), name()));
}

Lbn Geometry::adjacent_n(Lbn lbn, std::uint32_t step, std::uint64_t count) const {
  for (std::uint64_t i = 0; i < count; ++i) lbn = adjacent(lbn, step);
  return lbn;
}

TrackBounds Geometry::zone_bounds(Lbn lbn) const {
  check_lbn(lbn);
  const TrackBounds t = track_boundaries(lbn);
  const std::uint64_t T = t.length();
  // Tracks of length T before and after lbn's, found by bisection (a zone is
  // a contiguous run of equal tracks).
  auto same = [&](Lbn start) {
    return start < capacity_sectors() && track_boundaries(start).low == start && track_length(start) == T;
  };
  std::uint64_t lo = 0, hi = t.low / T;  // tracks before lbn's that may belong
  while (lo < hi) {
    std::uint64_t mid = lo + (hi - lo + 1) / 2;
    if (same(t.low - mid * T)) lo = mid;
    else hi = mid - 1;
  }
  Lbn first = t.low - lo * T;
  lo = 0, hi = (capacity_sectors() - t.low) / T - 1;
  while (lo < hi) {
    std::uint64_t mid = lo + (hi - lo + 1) / 2;
    if (same(t.low + mid * T)) lo = mid;
    else hi = mid - 1;
  }
  return {first, t.low + (lo + 1) * T - 1};
}

bool Geometry::conflicting(Lbn a, Lbn b) const {
  check_lbn(a);
  check_lbn(b);
  return false;
}

QuadrangleParams Geometry::quadrangle(std::uint32_t) const {
  throw GeometryError(ErrorKind::NotSupported,
                      fmt::format("quadrangles exist only on disks, not on {} '{}'", to_string(kind()), name()));
}

void Geometry::check_lbn(Lbn lbn) const {
  if (lbn >= capacity_sectors())
    throw GeometryError(ErrorKind::OutOfRange,
                        fmt::format("LBN {} is beyond the capacity of {} ({} sectors, last LBN {})", lbn, name(),
                                    capacity_sectors(), capacity_sectors() - 1));
}

void Geometry::check_step(std::uint32_t step) const {
  if (step < 1 || step > depth())
    throw GeometryError(ErrorKind::Invalid,
                        fmt::format("step {} is outside 1..D = 1..{} for {}", step, depth(), name()));
}

}  // namespace mmfs::geom
