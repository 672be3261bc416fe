#include "layouts/atropos.h"

#include <fmt/format.h>

namespace mmfs::layouts {
namespace {

using geom::ErrorKind;
using geom::GeometryError;

const geom::ZonedDisk& as_disk(const geom::Geometry& g) {
  if (const auto* d = dynamic_cast<const geom::ZonedDisk*>(&g)) return *d;
  throw GeometryError(ErrorKind::NotSupported,
                      fmt::format("atropos: the geometry '{}' is not a disk (quadrangles need tracks and a head "
                                  "switch)",
                                  g.name()));
}

const geom::ZonedDisk::Zone& zone_at(const geom::ZonedDisk& disk, std::uint32_t zone) {
  if (zone >= disk.zones().size())
    throw GeometryError(ErrorKind::OutOfRange,
                        fmt::format("atropos: zone {} does not exist (the disk has {})", zone, disk.zones().size()));
  return disk.zones()[zone];
}

}  // namespace

AtroposVolume::AtroposVolume(const geom::Geometry& member, std::uint32_t devices, std::uint32_t block,
                             std::uint32_t zone)
    : disk_(as_disk(member)), p_(devices), zone_(zone) {
  if (p_ == 0) throw GeometryError(ErrorKind::Invalid, "atropos: a volume needs at least one device");
  const geom::ZonedDisk::Zone& z = zone_at(disk_, zone);
  q_ = geom::compute_quadrangle(z.spec.sectors_per_track, z.spec.track_skew_sectors, block);
  zone_first_ = z.first_lbn;
  stripes_ = z.tracks / q_.d;
  if (stripes_ == 0)
    throw GeometryError(ErrorKind::Invalid, fmt::format("atropos: zone {} has {} tracks, a quadrangle needs {}", zone,
                                                        z.tracks, q_.d));
}

std::vector<AtroposVolume> AtroposVolume::per_zone(const geom::Geometry& member, std::uint32_t devices,
                                                   std::uint32_t block) {
  const geom::ZonedDisk& disk = as_disk(member);
  if (block == 0) throw GeometryError(ErrorKind::Invalid, "atropos: the block size must be at least one sector");
  std::vector<AtroposVolume> out;
  for (std::uint32_t z = 0; z < disk.zones().size(); ++z) {
    const geom::ZonedDisk::Zone& zone = disk.zones()[z];
    if (block > zone.spec.sectors_per_track) continue;  // the zone's tracks are too short
    if (zone.tracks < geom::compute_quadrangle(zone.spec.sectors_per_track, zone.spec.track_skew_sectors, block).d)
      continue;
    out.emplace_back(member, devices, block, z);
  }
  return out;
}

void AtroposVolume::check(Vlbn vlbn) const {
  if (vlbn >= blocks())
    throw GeometryError(ErrorKind::OutOfRange,
                        fmt::format("atropos: VLBN {} is past the volume's {} blocks", vlbn, blocks()));
}

QuadrangleCoord AtroposVolume::coord(Vlbn vlbn) const {
  check(vlbn);
  const std::uint64_t stripe = vlbn / stripe_blocks();
  const std::uint64_t in_stripe = vlbn % stripe_blocks();
  const std::uint64_t in_row = in_stripe % row_blocks();
  QuadrangleCoord c;
  c.quadrangle = stripe * p_ + in_row / q_.w;
  c.row = std::uint32_t(in_stripe / row_blocks());
  c.column = std::uint32_t(in_row % q_.w);
  return c;
}

Vlbn AtroposVolume::vlbn_at(const QuadrangleCoord& c) const {
  if (c.quadrangle >= quadrangles() || c.row >= q_.d || c.column >= q_.w)
    throw GeometryError(ErrorKind::OutOfRange,
                        fmt::format("atropos: quadrangle {} row {} column {} is outside the volume ({} quadrangles "
                                    "of {} x {})",
                                    c.quadrangle, c.row, c.column, quadrangles(), q_.d, q_.w));
  const std::uint64_t stripe = c.quadrangle / p_;
  return stripe * stripe_blocks() + std::uint64_t(c.row) * row_blocks() + (c.quadrangle % p_) * q_.w + c.column;
}

geom::Lbn AtroposVolume::quadrangle_first_dlbn(std::uint64_t k) const {
  if (k >= quadrangles())
    throw GeometryError(ErrorKind::OutOfRange,
                        fmt::format("atropos: quadrangle {} is past the volume's {}", k, quadrangles()));
  // Device-local quadrangle k / p occupies the zone's tracks (k/p)*d onwards.
  return zone_first_ + (k / p_) * q_.d * std::uint64_t(q_.N);
}

std::uint32_t AtroposVolume::coord_device(Vlbn vlbn) const { return device_of_quadrangle(coord(vlbn).quadrangle); }

geom::Lbn AtroposVolume::track_dlbn(Vlbn vlbn) const {
  const QuadrangleCoord c = coord(vlbn);
  return quadrangle_first_dlbn(c.quadrangle) + std::uint64_t(c.row) * q_.N;
}

DeviceBlock AtroposVolume::locate(Vlbn vlbn) const {
  const QuadrangleCoord c = coord(vlbn);
  // Row r is rotated by r blocks so that a column steps b sectors per track
  // (the skew H already separates the tracks' sector 0s): see the header.
  const std::uint64_t slot = (std::uint64_t(c.column) + c.row) % q_.w;
  return {device_of_quadrangle(c.quadrangle),
          quadrangle_first_dlbn(c.quadrangle) + std::uint64_t(c.row) * q_.N + slot * q_.b};
}

DeviceBlock AtroposVolume::locate_sector(std::uint64_t volume_sector) const {
  if (volume_sector >= sectors())
    throw GeometryError(ErrorKind::OutOfRange, fmt::format("atropos: volume sector {} is past the volume's {}",
                                                           volume_sector, sectors()));
  DeviceBlock block = locate(volume_sector / q_.b);
  block.dlbn += volume_sector % q_.b;
  return block;
}

Vlbn AtroposVolume::vlbn_of(std::uint32_t device, geom::Lbn dlbn) const {
  if (device >= p_)
    throw GeometryError(ErrorKind::OutOfRange,
                        fmt::format("atropos: device {} is not a member (the volume has {})", device, p_));
  const std::uint64_t used_sectors = stripes_ * q_.d * std::uint64_t(q_.N);
  if (dlbn < zone_first_ || dlbn - zone_first_ >= used_sectors)
    throw GeometryError(ErrorKind::OutOfRange,
                        fmt::format("atropos: DLBN {} is outside the volume's DLBNs {}..{}", dlbn, zone_first_,
                                    zone_first_ + used_sectors - 1));
  const std::uint64_t track = (dlbn - zone_first_) / q_.N;
  const std::uint64_t sector = (dlbn - zone_first_) % q_.N;
  const std::uint64_t slot = sector / q_.b;
  if (slot >= q_.w)
    throw GeometryError(ErrorKind::OutOfRange,
                        fmt::format("atropos: DLBN {} is in the residual sectors of its track", dlbn));
  QuadrangleCoord c;
  c.quadrangle = track / q_.d * p_ + device;
  c.row = std::uint32_t(track % q_.d);
  c.column = std::uint32_t((slot + q_.w - c.row % q_.w) % q_.w);  // undo the row's rotation
  return vlbn_at(c);
}

VlbnRange AtroposVolume::get_rectangle(Vlbn vlbn) const {
  check(vlbn);
  return {vlbn - vlbn % row_blocks(), row_blocks()};
}

VlbnRange AtroposVolume::get_boundaries(Vlbn vlbn) const {
  check(vlbn);
  // Rows are w*p long and start at multiples of w*p, so a device's w VLBNs of a
  // row start at a multiple of w.
  return {vlbn - vlbn % q_.w, q_.w};
}

std::vector<Vlbn> AtroposVolume::semi_sequential(Vlbn vlbn) const {
  QuadrangleCoord c = coord(vlbn);
  std::vector<Vlbn> out;
  out.reserve(q_.d);
  for (c.row = 0; c.row < q_.d; ++c.row) out.push_back(vlbn_at(c));
  return out;
}

}  // namespace mmfs::layouts
