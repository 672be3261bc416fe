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
