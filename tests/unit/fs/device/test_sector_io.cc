// SectorIo: runs split into device requests and batches, and the read that
// tells each run as soon as all of it has arrived.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "fs/device/block_device.h"
#include "fs/device/fault_device.h"
#include "fs/device/sector_io.h"
#include "geometry/flash.h"

using namespace mmfs;
using namespace mmfs::fs;

TEST_CASE("SectorIo: read tells each run once, when all its requests have arrived", "[sector_io]") {
  constexpr std::uint32_t kSector = 4096;
  geom::FlashParams params;
  params.sector_size = kSector;
  params.capacity_sectors = (96ull << 20) / kSector;
  geom::Flash geometry(params);
  MemoryDevice dev(params.capacity_sectors * kSector);
  std::mt19937_64 rng(7);
  for (auto& b : dev.bytes()) b = std::byte(rng());
  SectorIo io(dev, geometry);

  // 1,500 one-sector runs (more than one device call of 1,024 requests),
  // then a run of 80 MiB (two requests: at most 64 MiB each) and an empty one.
  std::vector<SectorRun> runs;
  const std::uint64_t small = 1500, big = (80ull << 20) / kSector;
  AlignedBuffer buf((small + big) * kSector, AlignedBuffer::Uninitialized{});
  for (std::uint64_t i = 0; i < small; ++i) runs.push_back({2 * i, 1, buf.data() + i * kSector});
  runs.push_back({2 * small, big, buf.data() + small * kSector});
  runs.push_back({0, 0, buf.data()});
  std::vector<int> told(runs.size(), 0);
  bool bytes_there = true;
  const auto requests_before = io.stats()["requests"].get<std::uint64_t>();
  REQUIRE(io.read(runs, [&](std::size_t k) {
    ++told[k];
    const SectorRun& r = runs[k];
    bytes_there = bytes_there && std::memcmp(r.buffer, dev.bytes().data() + r.lbn * kSector, r.sectors * kSector) == 0;
  }) == 0);
  REQUIRE(bytes_there);
  for (std::size_t k = 0; k < runs.size(); ++k) REQUIRE(told[k] == 1);
  REQUIRE(io.stats()["requests"].get<std::uint64_t>() - requests_before == small + 2);

  // A failing run is never told; the others still are.
  runs = {{0, 1, buf.data()}, {params.capacity_sectors, 1, buf.data() + kSector}, {4, 2, buf.data() + 2 * kSector}};
  told.assign(runs.size(), 0);
  REQUIRE(io.read(runs, [&](std::size_t k) { ++told[k]; }) == EINVAL);
  REQUIRE(told == std::vector<int>{1, 0, 1});
}

TEST_CASE("SectorIo: stats put the device's real time beside the model's", "[sector_io]") {
  geom::FlashParams params;
  params.capacity_sectors = 4096;
  geom::Flash geometry(params);
  MemoryDevice dev(params.capacity_sectors * params.sector_size);
  SectorIo io(dev, geometry);
  AlignedBuffer buf(64 * params.sector_size);
  std::vector<SectorRun> runs{{0, 64, buf.data()}};
  REQUIRE(io.read(runs) == 0);
  const auto s = io.stats();
  REQUIRE(s["modeled_ms"].get<double>() > 0);
  REQUIRE(s["device_ms"].get<double>() > 0);
  REQUIRE(s["device_busy_ms"].get<double>() > 0);
  REQUIRE(s["device_busy_ms"].get<double>() <= s["device_ms"].get<double>() + 1e-9);
}
