// Atropos' get_rectangle on a volume geometry (Atropos §3.3.3-§3.3.4): the
// w*p blocks of an LBN's quadrangle row across all p devices, as volume
// LBNs, with the parameters an application needs to build efficient
// requests (p, w, d, b, N, H, R). Pure: reads the geometry only. The daemon
// is meant to serve it as /.mmfs/rectangle/LBN.
//
// The volume is a zoned disk (p = 1) or a StripedGeometry over one
// (geometry/striped.h); the Atropos volume is the one of the LBN's zone with
// the requested block size B (b >= B after Eq. 3; AtroposVolume), whose
// VLBNs are numbered from 0 at the zone's start (§3.3.1). The rectangle's
// row r of quadrangle stripe s is member track zone.first_track + s*d + r of
// every member; its w blocks fill the first w*b sectors of that track
// (rotated by r slots, §3.2.2), so the rectangle is p runs of w*b sectors on
// the consecutive volume tracks of that member track (one run of p*N
// sectors when R = 0).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "geometry/geometry.h"
#include "layouts/atropos.h"
#include "layouts/layout.h"

namespace mmfs::layouts {

struct Rectangle {
  geom::Lbn lbn = 0;            // the LBN asked about
  std::uint32_t block = 0;      // the requested block size B
  std::uint32_t zone = 0;       // member zone of the LBN
  std::uint32_t p = 1;          // devices
  geom::QuadrangleParams params;  // N, H, b, d, w, R of the zone
  Vlbn vlbn = 0;                // the LBN's VLBN in the zone's volume
  VlbnRange vlbns;              // the rectangle: w*p VLBNs from a multiple of w*p
  std::uint64_t stripe = 0;     // quadrangle stripe of the zone
  std::uint32_t row = 0;        // row (track) within the stripe, < d
  std::vector<geom::Lbn> blocks;  // volume LBN of each block, in VLBN order (b sectors each)
  std::vector<Extent> runs;       // the same sectors as ascending runs, contiguous ones joined
};

// Throws GeometryError: NotSupported when the volume's devices are not zoned
// disks; OutOfRange for an LBN past the volume, in a track's R residual
// sectors, or in the zone's last tracks that make no whole quadrangle;
// Invalid for a block of 0 or one that does not fit the zone's tracks.
Rectangle get_rectangle(const geom::Geometry& geometry, geom::Lbn lbn, std::uint32_t block);

// The same as JSON: {"lbn", "block", "zone", "p", "N", "H", "b", "d", "w", "R",
// "vlbn", "first_vlbn", "stripe", "row", "blocks": [LBN, ...],
// "runs": [[LBN, SECTORS], ...]}.
nlohmann::json rectangle_json(const geom::Geometry& geometry, geom::Lbn lbn, std::uint32_t block);

}  // namespace mmfs::layouts
