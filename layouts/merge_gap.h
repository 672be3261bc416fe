// When reading through a gap beats issuing another request (plans
// chosen by cost). Two requests `gap` sectors apart can be served as one that
// also reads the gap: that pays the gap's transfer and saves a request. Which
// is cheaper is the volume's service model's call — a disk passes over a
// short gap on the same track anyway, flash pays per request and per byte as
// measured (`mmfs-geom measure`) — never a fixed constant.
#pragma once

#include <cstdint>

#include "geometry/geometry.h"

namespace mmfs::layouts {

// The widest gap, in sectors, worth reading through to join two requests of
// `request_sectors` each when requests reach the device `depth` at a time:
// the largest power-of-two gap (or 0) at which the model serves the joined
// requests no slower than the separate ones, averaged over several places on
// the device. At most `limit_sectors`.
std::uint32_t merge_gap_sectors(const geom::Geometry& geometry, std::uint32_t request_sectors, std::uint32_t depth,
                                std::uint32_t limit_sectors = 1024);

}  // namespace mmfs::layouts
