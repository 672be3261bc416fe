// Small member geometries for the striped-volume unit tests (geometry/striped.h,
// geometry/member_subset.h, fs/device/subset_device.h): every sector of a
// volume of a few of them can be checked by brute force.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>

#include "geometry/flash.h"
#include "geometry/load.h"
#include "geometry/memstore.h"
#include "tests/unit/support/mems_test_support.h"

namespace mmfs::geom::testing {

// Three zones of different track lengths, two surfaces, unequal skews: 150 sectors, 16 tracks.
inline nlohmann::json small_disk_json() {
  return {{"kind", "disk"},
          {"sector_size", 512},
          {"surfaces", 2},
          {"rpm", 10000},
          {"settle_ms", 0.3},
          {"settle_cylinders", 2},
          {"conservatism_deg", 10},
          {"head_switch_ms", 0.2},
          {"max_depth", 3},
          {"zones",
           {{{"cylinders", 3}, {"sectors_per_track", 12}, {"track_skew_sectors", 3}, {"cylinder_skew_sectors", 4}},
            {{"cylinders", 2}, {"sectors_per_track", 9}, {"track_skew_sectors", 2}, {"cylinder_skew_sectors", 3}},
            {{"cylinders", 3}, {"sectors_per_track", 7}, {"track_skew_sectors", 1}, {"cylinder_skew_sectors", 1}}}}};
}

inline FlashParams small_flash() {  // 100 pages in tracks of 8: the last track has 4
  FlashParams p;
  p.capacity_sectors = 100;
  p.track_sectors = 8;
  p.queues = 4;
  p.depth = 3;
  return p;
}

enum class Kind { Disk, Mems, Flash };

inline std::unique_ptr<Geometry> make_member(Kind kind) {
  switch (kind) {
    case Kind::Disk: return load_geometry(small_disk_json());
    case Kind::Mems: return std::make_unique<MemStore>(toy(1, 4));  // 108 sectors, equivalence over ±1 cylinder
    case Kind::Flash: return std::make_unique<Flash>(small_flash());
  }
  return nullptr;
}

inline const char* kind_name(Kind k) { return k == Kind::Disk ? "disk" : k == Kind::Mems ? "mems" : "flash"; }

}  // namespace mmfs::geom::testing
