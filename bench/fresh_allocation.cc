#include "bench/fresh_allocation.h"

#include <fmt/format.h>

#include <stdexcept>

#include "fs/meta/allocator.h"

namespace mmfs::bench {

std::vector<layouts::Extent> allocate_fresh(const geom::Geometry& geometry, const layouts::SpaceRequest& request,
                                            geom::Lbn first_lbn) {
  if (first_lbn >= geometry.capacity_sectors())
    throw std::invalid_argument(fmt::format("first LBN {} is beyond the device's {} sectors", first_lbn,
                                            geometry.capacity_sectors()));
  fs::Allocator allocator(geometry, first_lbn, geometry.capacity_sectors());
  std::vector<layouts::Extent> extents;
  if (allocator.allocate(request, &extents))
    throw std::runtime_error(fmt::format("{} sectors do not fit the device from LBN {} ({} sectors free)",
                                         request.sectors, first_lbn, allocator.free_sectors()));
  return extents;
}

}  // namespace mmfs::bench
