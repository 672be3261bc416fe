// Volumes for the volume and fsck unit tests: a small uniform disk, a
// device formatted on it, and opening one that must open. The plain-file and
// array tests (array_test_support.h) format and open theirs with these too.
#pragma once

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>

#include "fs/device/fault_device.h"
#include "fs/volume/volume.h"
#include "geometry/load.h"

namespace mmfs::fs::testing::volumes {

// A small uniform disk: 2 surfaces x 250 cylinders x 64 sectors = 15.6 MiB.
inline std::unique_ptr<geom::Geometry> small_disk() {
  return geom::load_geometry(nlohmann::json{{"kind", "disk"}, {"sector_size", 512}, {"cylinders", 250},
                                            {"surfaces", 2}, {"sectors_per_track", 64}, {"rpm", 10000},
                                            {"settle_ms", 1.0}, {"settle_cylinders", 4}, {"name", "small"}});
}

// A memory device of `bytes` formatted on `g` with a 4 MiB metadata region
// and `label`.
inline std::unique_ptr<MemoryDevice> formatted(const geom::Geometry& g, std::uint64_t bytes = 16 << 20,
                                               const std::string& label = "test") {
  auto dev = std::make_unique<MemoryDevice>(bytes, 512);
  FormatOptions opt;
  opt.meta_bytes = 4 << 20;
  opt.label = label;
  std::string msg;
  int r = format_volume(*dev, g, opt, nullptr, &msg);
  INFO(msg);
  REQUIRE(r == 0);
  return dev;
}

inline std::unique_ptr<Volume> open_ok(std::unique_ptr<BlockDevice> dev) {
  int err = 0;
  std::string msg;
  auto v = Volume::open(std::move(dev), &err, &msg);
  INFO(msg);
  REQUIRE(v);
  return v;
}

// A volume formatted on small_disk() and opened (it keeps no reference to the
// geometry it was formatted on).
inline std::unique_ptr<Volume> fresh_volume() {
  auto g = small_disk();
  return open_ok(formatted(*g));
}

}  // namespace mmfs::fs::testing::volumes
