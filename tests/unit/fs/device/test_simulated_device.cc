// The `simulate` option's device: batches take at least their modeled time.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <random>

#include "fs/device/fault_device.h"
#include "fs/device/simulated_device.h"
#include "geometry/load.h"

using namespace mmfs;
using namespace mmfs::fs;

TEST_CASE("simulated device: data passes through, time follows the model", "[device][simulate]") {
  auto g = geom::load_geometry("atlas10k3");
  SimulatedDevice dev(std::make_unique<MemoryDevice>(64 << 20, 512), *g);
  AlignedBuffer w(4096), r(4096);
  std::memset(w.data(), 0x5a, 4096);
  REQUIRE(dev.write(686 * 512 * 10, w.data(), 4096) == 0);
  REQUIRE(dev.read(686 * 512 * 10, r.data(), 4096) == 0);
  CHECK(std::memcmp(w.data(), r.data(), 4096) == 0);

  // Random single-sector reads far apart: each costs a seek and rotational
  // latency in the model, and at least that much wall-clock time.
  std::mt19937_64 rng(4);
  std::vector<AlignedBuffer> bufs;
  std::vector<IoRequest> batch;
  for (int i = 0; i < 20; ++i) {
    bufs.emplace_back(512);
    batch.push_back({IoRequest::Op::Read, (rng() % ((64 << 20) / 512)) * 512, 512, bufs.back().data(), 0});
  }
  double before = dev.modeled_ms();
  auto t = std::chrono::steady_clock::now();
  for (auto& req : batch) REQUIRE(dev.submit(std::span<IoRequest>(&req, 1)) == 0);
  double wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
  double modeled = dev.modeled_ms() - before;
  CHECK(modeled > 20 * 1.0);  // at least a settle time each
  CHECK(wall >= modeled * 0.99);
}
