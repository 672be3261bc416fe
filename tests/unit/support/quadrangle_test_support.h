// Volumes for the Atropos, quadrangle layout and get_rectangle tests: a small
// zoned disk (R > 0 in both zones for one- and two-sector blocks), alone or
// striped over p members, and the Atlas 10K III.
#pragma once

#include <memory>
#include <vector>

#include "geometry/geometry.h"
#include "geometry/load.h"
#include "geometry/striped.h"
#include "geometry/zoned_disk.h"
#include "layouts/atropos.h"

namespace mmfs::layouts::testing {

// Zone 0: N = 47, H = 9 (B <= 2: d = 5, b = 2, w = 23, R = 1; B = 4: d = 4,
// b = 5, w = 9, R = 2); zone 1: N = 23, H = 3 (B = 1: d = 6, b = 1, w = 23,
// R = 0; B = 2: d = 5, b = 2, w = 11, R = 1). Two surfaces: zone 0 has 80
// tracks (16 stripes of d = 5, no tail), zone 1 has 122 (a tail for d = 4, 5).
// Track and cylinder skews are equal, as the quadrangle parameters assume.
inline geom::DiskParams small_disk_params(std::uint64_t zone0_cylinders = 40,
                                          std::uint64_t zone1_cylinders = 61) {
  geom::DiskParams p;
  p.surfaces = 2;
  p.zones.push_back({zone0_cylinders, 47, 9, 9});
  p.zones.push_back({zone1_cylinders, 23, 3, 3});
  return p;
}

// A volume: the disk itself (p = 0 here means "no striping wrapper") or
// StripedGeometry over it with p members.
inline std::unique_ptr<geom::Geometry> small_volume(std::uint32_t p,
                                                    const geom::DiskParams& params = small_disk_params()) {
  auto disk = std::make_unique<geom::ZonedDisk>(params);
  if (p == 0) return disk;
  return std::make_unique<geom::StripedGeometry>(std::move(disk), p);
}

inline std::unique_ptr<geom::Geometry> atlas_volume(std::uint32_t p) {
  auto disk = geom::load_geometry("atlas10k3");
  if (p == 0) return disk;
  return std::make_unique<geom::StripedGeometry>(std::move(disk), p);
}

// (member, member LBN) of a volume LBN, for a plain disk (member 0) or a striped volume.
struct MemberSector {
  std::uint32_t member = 0;
  geom::Lbn lbn = 0;
  bool operator==(const MemberSector&) const = default;
};
inline MemberSector member_sector(const geom::Geometry& g, geom::Lbn lbn) {
  if (const auto* s = dynamic_cast<const geom::StripedGeometry*>(&g)) {
    const auto m = s->locate(lbn);
    return {m.member, m.lbn};
  }
  return {0, lbn};
}

inline const geom::ZonedDisk& member_disk(const geom::Geometry& g) {
  if (const auto* s = dynamic_cast<const geom::StripedGeometry*>(&g))
    return dynamic_cast<const geom::ZonedDisk&>(s->member());
  return dynamic_cast<const geom::ZonedDisk&>(g);
}

inline std::uint32_t members_of(const geom::Geometry& g) {
  if (const auto* s = dynamic_cast<const geom::StripedGeometry*>(&g)) return s->members();
  return 1;
}

// The first DLBN of the track (stripe unit) of the volume's zone holding `dlbn`.
inline geom::Lbn track_start(const AtroposVolume& v, geom::Lbn dlbn) {
  return v.zone_first_dlbn() + (dlbn - v.zone_first_dlbn()) / v.stripe_unit_sectors() * v.stripe_unit_sectors();
}

}  // namespace mmfs::layouts::testing
