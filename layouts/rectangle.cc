#include "layouts/rectangle.h"

#include <fmt/format.h>

#include <algorithm>

#include "layouts/atropos_members.h"

namespace mmfs::layouts {

using geom::ErrorKind;
using geom::GeometryError;

Rectangle get_rectangle(const geom::Geometry& geometry, geom::Lbn lbn, std::uint32_t block) {
  const AtroposMembers members(geometry, "get_rectangle");
  if (block == 0)
    throw GeometryError(ErrorKind::Invalid, "get_rectangle: the block size must be at least one sector");
  if (lbn >= geometry.capacity_sectors())
    throw GeometryError(ErrorKind::OutOfRange, fmt::format("get_rectangle: LBN {} is past the volume's last LBN {}",
                                                           lbn, geometry.capacity_sectors() - 1));
  const DeviceBlock at = members.member_of(lbn);
  Rectangle r;
  r.lbn = lbn;
  r.block = block;
  r.zone = members.disk().locate(at.dlbn).zone;
  r.p = members.devices();
  const AtroposVolume volume(members.disk(), r.p, block, r.zone);
  r.params = volume.params();
  // Throws OutOfRange for a residual sector or a track past the zone's whole quadrangles.
  r.vlbn = volume.vlbn_of(at.device, at.dlbn);
  r.vlbns = volume.get_rectangle(r.vlbn);
  const QuadrangleCoord c = volume.coord(r.vlbn);
  r.stripe = c.quadrangle / r.p;
  r.row = c.row;
  r.blocks.reserve(r.vlbns.count);
  for (Vlbn v = r.vlbns.first; v < r.vlbns.first + r.vlbns.count; ++v)
    r.blocks.push_back(members.volume_lbn(volume.locate(v)));
  std::vector<geom::Lbn> sorted = r.blocks;
  std::sort(sorted.begin(), sorted.end());
  for (geom::Lbn b : sorted) {
    if (!r.runs.empty() && r.runs.back().start + r.runs.back().sectors == b)
      r.runs.back().sectors += r.params.b;
    else
      r.runs.push_back({b, r.params.b});
  }
  return r;
}

nlohmann::json rectangle_json(const geom::Geometry& geometry, geom::Lbn lbn, std::uint32_t block) {
  const Rectangle r = get_rectangle(geometry, lbn, block);
  nlohmann::json runs = nlohmann::json::array();
  for (const Extent& e : r.runs) runs.push_back({e.start, e.sectors});
  return {{"lbn", r.lbn},
          {"block", r.block},
          {"zone", r.zone},
          {"p", r.p},
          {"N", r.params.N},
          {"H", r.params.H},
          {"b", r.params.b},
          {"d", r.params.d},
          {"w", r.params.w},
          {"R", r.params.R},
          {"vlbn", r.vlbn},
          {"first_vlbn", r.vlbns.first},
          {"stripe", r.stripe},
          {"row", r.row},
          {"blocks", r.blocks},
          {"runs", std::move(runs)}};
}

}  // namespace mmfs::layouts
