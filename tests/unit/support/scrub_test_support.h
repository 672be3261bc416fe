// The scrub's toy owner map (fs/scrub/scrub_map.h), shared by the owner map's
// and the scrub engine's unit tests.
#pragma once

#include <memory>
#include <utility>

#include "fs/scrub/scrub_map.h"

namespace mmfs::fs::testing {

// A map of 1,000 sectors: metadata [0, 100), data [100, 1000) free, and an
// array (ino 7, "/t/a") of 4 cells of 3 sectors: cell c at 200 + 10c, except
// cell 2, split in two runs (300..301 and 400).
inline std::unique_ptr<OwnerMap> toy_map() {
  auto map = std::make_unique<OwnerMap>(1000, 512);
  map->add_region(OwnerKind::Metadata, 0, 100);
  map->add_region(OwnerKind::Free, 100, 900);
  ScrubObject a;
  a.kind = OwnerKind::ArrayCell;
  a.ino = 7;
  a.path = "/t/a";
  a.unit_sectors = 3;
  a.units = 4;
  a.checked_bytes = 1500;  // the brick: the padding past it is not checksummed
  a.pieces = {{0, 200, 3}, {3, 210, 3}, {6, 300, 2}, {8, 400, 1}, {9, 230, 3}};
  map->add_object(std::move(a));
  map->seal();
  return map;
}

}  // namespace mmfs::fs::testing
