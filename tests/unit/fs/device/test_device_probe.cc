// The device probe (fs/device/device_probe.h): a file measured by reads only,
// within its budget, through a scratch file when sparse, with clear errors
// for what is neither a device nor a file; and the measured geometry it
// fits, which loads, keeps its record and fits in a superblock.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "fs/device/device_probe.h"
#include "fs/meta/superblock.h"
#include "geometry/flash.h"
#include "geometry/load.h"
#include "tests/unit/support/flash_fit_test_support.h"
#include "tests/unit/support/geometry_errors.h"

using namespace mmfs::geom;
using testing::samples_of;

TEST_CASE("flash fit: a measured geometry loads, keeps its record, and fits in a superblock") {
  FlashParams truth;
  truth.capacity_sectors = 1ull << 20;
  const auto samples = samples_of(truth);
  mmfs::fs::ProbeResult probe;
  probe.target = "/dev/example";
  probe.device_bytes = truth.capacity_sectors * 4096;
  probe.logical_block = 512;
  probe.samples = samples;
  probe.idle_latency_ms = 0.31;  // the first read after idle time
  probe.busy_latency_ms = 0.06;
  std::string summary;
  const nlohmann::json j = mmfs::fs::measured_geometry(probe, &summary);
  CHECK(summary.find("latency") != std::string::npos);
  CHECK(summary.find("idle device") != std::string::npos);
  CHECK(j["wake_ms"] == Approx(0.25));
  CHECK(j["measured"]["idle_read"]["median_latency_ms"] == Approx(0.31));
  auto g = load_geometry(j);
  CHECK(g->name() == "measured");
  CHECK(g->sector_size() == 4096);
  CHECK(g->capacity_sectors() == truth.capacity_sectors);
  CHECK(dynamic_cast<const Flash&>(*g).params().wake_ms == Approx(0.25));
  const nlohmann::json def = g->definition();
  REQUIRE(def.contains("measured"));
  CHECK(def["measured"]["cells"].size() == samples.size());
  CHECK(def["measured"]["target"] == "/dev/example");
  // The definition round-trips and fits in the superblock with room to spare.
  CHECK(load_geometry(def)->definition() == def);
  mmfs::fs::Superblock sb;
  sb.geometry_json = def.dump();
  std::vector<std::byte> block(mmfs::fs::kSuperblockBytes);
  CHECK_NOTHROW(mmfs::fs::encode_superblock(sb, block));
  // A malformed record is refused, naming the field.
  nlohmann::json bad = def;
  bad["measured"] = 3;
  CHECK(testing::message_of([&] { load_geometry(bad); }).find("measured") != std::string::npos);
}

TEST_CASE("device probe: measures a file with data, reads only, within its budget") {
  namespace fsys = std::filesystem;
  const fsys::path dir = fsys::temp_directory_path() / ("mmfs-probe-" + std::to_string(::getpid()));
  fsys::create_directories(dir);
  const fsys::path file = dir / "data";
  {
    std::vector<char> chunk(1 << 20);
    std::mt19937 rng(1);
    for (char& c : chunk) c = char(rng());
    FILE* f = std::fopen(file.c_str(), "wb");
    REQUIRE(f);
    for (int i = 0; i < 16; ++i) REQUIRE(std::fwrite(chunk.data(), 1, chunk.size(), f) == chunk.size());
    std::fclose(f);
  }
  const auto before = fsys::last_write_time(file);
  mmfs::fs::ProbeOptions opt;
  opt.seconds = 2;
  opt.sizes = {4096, 65536, 1u << 20};
  opt.depths = {1, 4};
  opt.min_data_bytes = 8 << 20;  // 16 MiB of data is enough here
  mmfs::fs::ProbeResult r;
  std::string message;
  const int err = mmfs::fs::probe_device(file.string(), opt, &r, &message);
  if (err == EINVAL) {  // a temp directory without O_DIRECT (tmpfs)
    fsys::remove_all(dir);
    WARN("no O_DIRECT in the temp directory, probe not exercised: " << message);
    return;
  }
  REQUIRE(err == 0);
  CHECK_FALSE(r.scratch);
  CHECK(r.device_bytes == 16u << 20);
  CHECK(r.probed_bytes == 16u << 20);
  CHECK(r.samples.size() == 6);
  for (const auto& s : r.samples) {
    CHECK(s.requests > 0);
    CHECK(s.seconds > 0);
  }
  CHECK(r.sequential_mb_s > 0);
  // Reads after idle time, against the smallest back-to-back read.
  CHECK(r.idle_latency_ms > 0);
  CHECK(r.busy_latency_ms == r.samples.front().latency_ms);  // 4 KiB at depth 1
  CHECK(r.wake_ms() == std::max(0.0, r.idle_latency_ms - r.busy_latency_ms));
  // Bursts from idle: 4 KiB, 32 KiB and 256 KiB reads 1, 32 and 1,024 at a
  // time (at most 32 MiB), 4 MiB reads 1 and 8 at a time; at most 4 MiB in
  // flight here (the arena of 1 MiB reads 4 deep), and at most the daemon's
  // default queue depth.
  const std::vector<std::pair<std::uint32_t, std::uint64_t>> want = {
      {4096, 1}, {4096, 32}, {4096, 1024}, {32768, 1}, {32768, 32}, {32768, 1024},
      {262144, 1}, {262144, 32}, {262144, 128}, {4u << 20, 1}, {4u << 20, 8}};
  REQUIRE(r.bursts.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    CHECK(r.bursts[i].bytes == want[i].first);
    CHECK(r.bursts[i].requests == want[i].second);
    CHECK(r.bursts[i].depth ==
          std::min<std::uint64_t>({mmfs::fs::kDefaultIodepth, want[i].second, (4u << 20) / want[i].first}));
    CHECK(r.bursts[i].seconds > 0);
  }
  const nlohmann::json fitted = mmfs::fs::measured_geometry(r, nullptr);
  CHECK(fitted["measured"]["bursts"].size() == want.size());
  CHECK(fitted["measured"]["model_error_pct"].contains("bursts_median"));
  CHECK(r.seconds < 6);
  CHECK(fsys::last_write_time(file) == before);
  CHECK(fsys::file_size(file) == 16u << 20);

  // A sparse file is measured through a scratch file that is gone afterwards.
  const fsys::path sparse = dir / "sparse";
  {
    FILE* f = std::fopen(sparse.c_str(), "wb");
    REQUIRE(f);
    std::fclose(f);
    fsys::resize_file(sparse, 1ull << 30);
  }
  opt.scratch_bytes = 32 << 20;
  REQUIRE(mmfs::fs::probe_device(sparse.string(), opt, &r, &message) == 0);
  CHECK(r.scratch);
  CHECK(r.probed_bytes == 32u << 20);
  CHECK(r.device_bytes == 1ull << 30);
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fsys::directory_iterator(dir)) ++entries;
  CHECK(entries == 2);  // data and sparse: no scratch file left

  // Neither a device nor a file: a clear error.
  CHECK(mmfs::fs::probe_device(dir.string(), opt, &r, &message) == ENOTBLK);
  CHECK(message.find("neither") != std::string::npos);
  CHECK(mmfs::fs::probe_device((dir / "missing").string(), opt, &r, &message) == ENOENT);
  fsys::remove_all(dir);
}
