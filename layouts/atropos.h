// An Atropos logical volume over p identical disks (Schindler et al., FAST
// 2004, §3.1-§3.3): the pure mapping from volume blocks (VLBNs) to member
// devices' sectors (DLBNs). No I/O; nothing here is wired into the daemon yet.
//
// Parameters (§3.2, Eq. 1-5; geometry/quadrangle.h): a VLBN is b sectors; a
// quadrangle is d consecutive tracks of one device, w = floor(N/b) VLBNs per
// track, and the R = N - w*b residual sectors at the end of every track are
// never mapped (they keep d blocks readable in one revolution, §3.2.1).
//
// Zones (§3.3.1): N, and with it b, d and w, change from zone to zone, so a
// volume covers ONE zone of its members ("quadrangles with one w are grouped
// into one logical volume"). A device's zones give separate volumes, each
// numbered from VLBN 0 (AtroposVolume::per_zone); concatenating them zone
// after zone into one address space would mix block sizes. Tracks at the end
// of the zone that do not make a whole quadrangle are left unused.
//
// VLBN numbering (§3.1, Figure 3): quadrangle k lies on device k mod p; the p
// quadrangles k = s*p .. s*p+p-1 form quadrangle stripe s (device-local
// quadrangle s, zone tracks s*d .. s*d+d-1 on every device). Inside a stripe
// VLBNs run row-major across the devices: row r of the stripe is w*p
// contiguous VLBNs, w on track r of each device in turn —
//   vlbn = s*(d*w*p) + r*(w*p) + device*w + column.
// So sequential VLBNs stream whole tracks on all p devices (the stripe unit is
// one track, §5.3), and VLBNs w*p apart are the semi-sequential column of one
// quadrangle (0, 16, 32, ... in Figure 3).
//
// Rows inside a quadrangle (§3.2.2, Figure 4): row r's block in column c sits
// in slot (c + r) mod w of its track, at DLBN track_start + slot*b. DLBNs are
// numbered with the track skew H built in (sector 0 of a track is H sectors
// after the previous track's), so after reading column c on track r and
// switching heads (H sectors) the head is exactly at column c's block on track
// r+1: a column is d blocks read in one revolution (Eq. 1), plus R sectors
// when it wraps from slot w-1 to slot 0. Row 0 is not rotated, so a
// quadrangle's DLBN_Q (its lowest DLBN) is the block of its top-left VLBN.
// On Figure 4's disk (N = 21, H = 3, d = 4, b = 3 by Eq. 3) the column of
// VLBN 0 is DLBNs 0, 24, 48, 72, the semi-sequential set §3.2.2 names.
// H is the zone's track (head-switch) skew, as in Geometry::quadrangle; a
// larger cylinder skew inside a quadrangle costs the difference (Atropos
// models one H).
//
// Volume sectors: for sub-block addressing (a layout packs several cells into
// one VLBN) a volume sector is vlbn*b + offset, offset < b.
#pragma once

#include <cstdint>
#include <vector>

#include "geometry/geometry.h"
#include "geometry/zoned_disk.h"

namespace mmfs::layouts {

using Vlbn = std::uint64_t;

// A block (or sector) on one member device.
struct DeviceBlock {
  std::uint32_t device = 0;
  geom::Lbn dlbn = 0;
  bool operator==(const DeviceBlock&) const = default;
};

// `count` consecutive VLBNs from `first`.
struct VlbnRange {
  Vlbn first = 0;
  std::uint64_t count = 0;
  bool operator==(const VlbnRange&) const = default;
};

// Where a VLBN sits: quadrangle k (on device k mod p), row (track within the
// quadrangle, < d) and column (< w, before the row's rotation).
struct QuadrangleCoord {
  std::uint64_t quadrangle = 0;
  std::uint32_t row = 0;
  std::uint32_t column = 0;
  bool operator==(const QuadrangleCoord&) const = default;
};

class AtroposVolume {
 public:
  // `devices` (p >= 1) members, each of geometry `member`, using zone `zone`
  // with requested block size `block` sectors (b >= block after Eq. 3).
  // Throws GeometryError: NotSupported when `member` is not a zoned disk,
  // Invalid for p == 0, a block that does not fit a track, or a zone with
  // fewer than d tracks; OutOfRange for a zone index past the last.
  // `member` must outlive the volume.
  AtroposVolume(const geom::Geometry& member, std::uint32_t devices, std::uint32_t block, std::uint32_t zone = 0);

  // One volume per zone of `member` that holds at least one quadrangle of
  // `block`-sector blocks, zone 0 first. Throws GeometryError(Invalid) for
  // block == 0.
  static std::vector<AtroposVolume> per_zone(const geom::Geometry& member, std::uint32_t devices,
                                             std::uint32_t block);

  const geom::ZonedDisk& member() const { return disk_; }
  std::uint32_t devices() const { return p_; }
  std::uint32_t zone() const { return zone_; }
  const geom::QuadrangleParams& params() const { return q_; }

  std::uint32_t block_sectors() const { return q_.b; }       // b
  std::uint32_t width() const { return q_.w; }               // w: VLBNs per track
  std::uint32_t depth() const { return q_.d; }               // d: tracks per quadrangle
  std::uint32_t residual_sectors() const { return q_.R; }    // R: unused sectors per track
  // The stripe unit (§5.3): exactly one track of the zone, N sectors, of
  // which the w blocks (w*b sectors) hold data.
  std::uint32_t stripe_unit_sectors() const { return q_.N; }
  std::uint32_t stripe_unit_blocks() const { return q_.w; }
  std::uint64_t row_blocks() const { return std::uint64_t(q_.w) * p_; }           // a rectangle
  std::uint64_t quadrangle_blocks() const { return std::uint64_t(q_.w) * q_.d; }
  std::uint64_t stripe_blocks() const { return row_blocks() * q_.d; }

  std::uint64_t stripes() const { return stripes_; }                  // = quadrangles per device
  std::uint64_t quadrangles() const { return stripes_ * p_; }
  std::uint64_t blocks() const { return stripes_ * stripe_blocks(); } // VLBNs in the volume
  std::uint64_t sectors() const { return blocks() * q_.b; }          // volume sectors
  geom::Lbn zone_first_dlbn() const { return zone_first_; }

  // §3.2.2: the first DLBN of a VLBN's b sectors, and back. vlbn_of accepts
  // any DLBN inside a block. Both throw GeometryError(OutOfRange) for a VLBN
  // or DLBN outside the volume, a device >= p, or a residual DLBN.
  DeviceBlock locate(Vlbn vlbn) const;
  Vlbn vlbn_of(std::uint32_t device, geom::Lbn dlbn) const;
  // The device sector of a volume sector (vlbn*b + offset).
  DeviceBlock locate_sector(std::uint64_t volume_sector) const;

  QuadrangleCoord coord(Vlbn vlbn) const;
  Vlbn vlbn_at(const QuadrangleCoord& c) const;
  std::uint32_t device_of_quadrangle(std::uint64_t k) const { return std::uint32_t(k % p_); }
  // DLBN_Q: the lowest DLBN of quadrangle k (its top-left block).
  geom::Lbn quadrangle_first_dlbn(std::uint64_t k) const;

  // Atropos' get_rectangle: the w*p VLBNs of vlbn's row across all devices.
  VlbnRange get_rectangle(Vlbn vlbn) const;
  // Atropos' get_boundaries: the w VLBNs of vlbn's stripe unit (its track).
  VlbnRange get_boundaries(Vlbn vlbn) const;
  // The device sectors of that stripe unit: the w*b data sectors of the track
  // (a whole-track read; R residual sectors follow them).
  DeviceBlock track_first(Vlbn vlbn) const { return {coord_device(vlbn), track_dlbn(vlbn)}; }
  // The d VLBNs of vlbn's quadrangle column, top row first: the
  // semi-sequential blocks Atropos issues as one batch.
  std::vector<Vlbn> semi_sequential(Vlbn vlbn) const;

 private:
  void check(Vlbn vlbn) const;
  std::uint32_t coord_device(Vlbn vlbn) const;
  geom::Lbn track_dlbn(Vlbn vlbn) const;

  const geom::ZonedDisk& disk_;
  std::uint32_t p_ = 0;
  std::uint32_t zone_ = 0;
  geom::QuadrangleParams q_;
  geom::Lbn zone_first_ = 0;
  std::uint64_t stripes_ = 0;
};

}  // namespace mmfs::layouts
