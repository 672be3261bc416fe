// The space the daemon's allocator gives the first array of a fresh volume:
// every target of `mmfs-bench modeled` is placed as if it were alone on the
// device, starting at the same LBN, so they are compared on equal ground.
#pragma once

#include <vector>

#include "geometry/geometry.h"
#include "layouts/layout.h"

namespace mmfs::bench {

// fs::Allocator over [first_lbn, capacity) serving one request. Throws
// std::runtime_error (ENOSPC) when the space does not fit there.
std::vector<layouts::Extent> allocate_fresh(const geom::Geometry& geometry, const layouts::SpaceRequest& request,
                                            geom::Lbn first_lbn);

}  // namespace mmfs::bench
