// The device of a volume of several devices (fs/device/striped_device.h),
// built straight over in-memory members: requests cut at volume tracks land
// on member t mod p at member track t / p; refused batches touch no member;
// RAID 1 writes both copies, balances reads between them and fails over
// (once, told to the listener); RAID 0 returns EIO for a lost member's data
// only; constructor refusals; targets split from a command line.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "fs/device/fault_device.h"
#include "fs/device/striped_device.h"
#include "geometry/load.h"
#include "geometry/striped.h"
#include "tests/unit/support/device_test_support.h"

using namespace mmfs::fs;
using namespace mmfs::fs::testing::devices;
using mmfs::geom::Lbn;

namespace {

constexpr std::uint32_t kSector = 512;
constexpr std::uint64_t kTrack = 8;  // sectors per track of the members

// p members of docs/reference.md §7's toy disk (1000 tracks of 8 sectors).
std::unique_ptr<mmfs::geom::StripedGeometry> toy_volume(std::uint32_t p) {
  auto disk = mmfs::geom::load_geometry(nlohmann::json{{"kind", "disk"},       {"sector_size", 512},
                                                       {"cylinders", 1000},    {"surfaces", 1},
                                                       {"sectors_per_track", 8}, {"rpm", 10000},
                                                       {"track_skew_sectors", 0}, {"settle_ms", 0.0},
                                                       {"settle_cylinders", 4}, {"conservatism_deg", 0}});
  return std::make_unique<mmfs::geom::StripedGeometry>(std::move(disk), p);
}

// The members' storage and switchable views of it, as a StripedDevice's targets.
struct Members {
  std::vector<std::unique_ptr<MemoryDevice>> disks;
  std::vector<SwitchableDevice*> views;
  explicit Members(std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) disks.push_back(std::make_unique<MemoryDevice>(8000 * kSector, kSector));
  }
  std::vector<MemberTarget> targets() {
    std::vector<MemberTarget> out;
    views.clear();
    for (std::size_t i = 0; i < disks.size(); ++i) {
      auto v = std::make_unique<SwitchableDevice>(disks[i].get());
      views.push_back(v.get());
      out.push_back({"disk" + std::to_string(i), std::move(v)});
    }
    return out;
  }
};

// Where volume sector v lives: volume track t = v / T on member t mod p, member track t / p.
struct Place {
  std::uint32_t member;
  std::uint64_t member_lbn;
};
Place place_of(Lbn v, std::uint32_t p) {
  const std::uint64_t t = v / kTrack;
  return {std::uint32_t(t % p), (t / p) * kTrack + v % kTrack};
}

std::uint64_t stat(const StripedDevice& d, std::uint32_t device, const char* field) {
  return d.stats().at(device).at(field).get<std::uint64_t>();
}

}  // namespace

TEST_CASE("striped device: each sector on member t mod p at member track t / p, read back whole",
          "[striped_device]") {
  const std::uint32_t p = 3;
  auto g = toy_volume(p);
  Members m(p);
  StripedDevice dev(m.targets(), *g, 0, g->capacity_sectors() * kSector);
  CHECK(dev.devices() == 3);
  CHECK(dev.raid() == 0);
  CHECK(dev.block_size() == kSector);
  CHECK(dev.size_bytes() == 3 * 8000 * kSector);
  // 37 sectors from the middle of volume track 0: pieces on every member.
  const Lbn first = 5;
  const std::size_t sectors = 37;
  AlignedBuffer data(sectors * kSector), back(sectors * kSector);
  std::mt19937_64 rng(8);
  fill_random(data.span(), rng);
  REQUIRE(dev.write(first * kSector, data.data(), std::uint32_t(sectors * kSector)) == 0);
  for (std::size_t s = 0; s < sectors; ++s) {
    const Place at = place_of(first + s, p);
    INFO("volume sector " << first + s);
    CHECK(std::memcmp(m.disks[at.member]->bytes().data() + at.member_lbn * kSector, data.data() + s * kSector,
                      kSector) == 0);
  }
  REQUIRE(dev.read(first * kSector, back.data(), std::uint32_t(sectors * kSector)) == 0);
  CHECK(equal(back.span(), data.span()));
  // Pieces: tracks 0 (3 sectors), 1, 2, 3, 4 (8 each) and 5 (2): members 0 1 2 0 1 2.
  std::uint64_t written = 0;
  for (std::uint32_t d = 0; d < p; ++d) {
    CHECK(stat(dev, d, "requests") == 4);  // two pieces written, two read
    written += stat(dev, d, "bytes_written");
    CHECK(dev.stats().at(d).at("state") == "ok");
    CHECK(dev.stats().at(d).at("target") == "disk" + std::to_string(d));
  }
  CHECK(written == sectors * kSector);
  CHECK(dev.flush() == 0);
}

TEST_CASE("striped device: a refused request fails with EINVAL and reaches no member", "[striped_device]") {
  auto g = toy_volume(2);
  Members m(2);
  StripedDevice dev(m.targets(), *g, 0, 100 * kTrack * kSector);  // the byte space may be less than the geometry's
  AlignedBuffer buf(4096);
  const std::uint64_t end = dev.size_bytes();
  std::vector<IoRequest> batch = {req(IoRequest::Op::Read, end, buf.data(), 512),           // past the end
                                  req(IoRequest::Op::Read, 100, buf.data(), 512),           // misaligned offset
                                  req(IoRequest::Op::Read, 0, buf.data(), 100),             // misaligned length
                                  req(IoRequest::Op::Read, 0, buf.data() + 1, 512),         // misaligned buffer
                                  req(IoRequest::Op::Read, 0, buf.data(), 0),               // empty
                                  req(IoRequest::Op::Read, end - 512, buf.data(), 1024)};  // across the end
  CHECK(dev.submit(batch) == EINVAL);
  for (const IoRequest& r : batch) CHECK(r.result == EINVAL);
  for (SwitchableDevice* v : m.views) CHECK(v->calls_ == 0);
  // A good request beside a bad one is served.
  std::vector<IoRequest> mixed = {req(IoRequest::Op::Read, 100, buf.data(), 512),
                                  req(IoRequest::Op::Read, 512, buf.data(), 512)};
  CHECK(dev.submit(mixed) == EINVAL);
  CHECK(mixed[0].result == EINVAL);
  CHECK(mixed[1].result == 0);
}

TEST_CASE("striped device: RAID 1 writes both copies, balances reads, and fails over once", "[striped_device]") {
  const std::uint32_t p = 2;
  auto g = toy_volume(p);
  Members m(2 * p);  // devices 2k and 2k+1 hold member k
  StripedDevice dev(m.targets(), *g, 1, g->capacity_sectors() * kSector);
  std::vector<std::pair<std::uint32_t, std::string>> told;
  dev.set_failure_listener([&](std::uint32_t d, const std::string& why) { told.push_back({d, why}); });
  const std::size_t n = 4 * p * kTrack;  // volume tracks 0..7: four whole tracks of each member
  AlignedBuffer data(n * kSector), back(n * kSector);
  std::mt19937_64 rng(9);
  fill_random(data.span(), rng);
  REQUIRE(dev.write(0, data.data(), std::uint32_t(n * kSector)) == 0);
  for (Lbn v = 0; v < n; ++v) {
    const Place at = place_of(v, p);
    for (std::uint32_t copy : {2 * at.member, 2 * at.member + 1})
      REQUIRE(std::memcmp(m.disks[copy]->bytes().data() + at.member_lbn * kSector, data.data() + v * kSector,
                          kSector) == 0);
  }
  // Reads of member 0's four tracks go two to each of its copies.
  std::vector<IoRequest> reads;
  for (std::uint64_t t = 0; t < 8; t += 2)
    reads.push_back(req(IoRequest::Op::Read, t * kTrack * kSector, back.data() + t * kTrack * kSector,
                        kTrack * kSector));
  const std::uint64_t before0 = stat(dev, 0, "requests"), before1 = stat(dev, 1, "requests");
  REQUIRE(dev.submit(reads) == 0);
  CHECK(stat(dev, 0, "requests") - before0 == 2);
  CHECK(stat(dev, 1, "requests") - before1 == 2);

  // Copy 1 of member 0 dies: reads come from copy 0, the failure is told once.
  m.views[1]->off_ = true;
  for (int i = 0; i < 3; ++i) {
    std::fill(back.span().begin(), back.span().end(), std::byte{0});
    REQUIRE(dev.read(0, back.data(), std::uint32_t(n * kSector)) == 0);
    CHECK(equal(back.span(), data.span()));
  }
  CHECK(dev.failed(1));
  CHECK(dev.failed_devices() == std::vector<std::uint32_t>{1});
  REQUIRE(told.size() == 1);
  CHECK(told[0].first == 1);
  CHECK(told[0].second == "a read failed: " + std::string(std::strerror(EIO)));
  CHECK(dev.stats().at(1).at("state") == "failed");
  // Writes now go to the healthy copy only; a flush skips the failed one.
  const std::uint64_t failed_requests = stat(dev, 1, "requests"), healthy_writes = stat(dev, 0, "bytes_written");
  REQUIRE(dev.write(0, data.data(), kTrack * kSector) == 0);
  CHECK(stat(dev, 1, "requests") == failed_requests);
  CHECK(stat(dev, 0, "bytes_written") == healthy_writes + kTrack * kSector);
  CHECK(dev.flush() == 0);
  // The last copy of a member is never taken out of service: its requests fail instead.
  m.views[0]->off_ = true;
  CHECK(dev.read(0, back.data(), kTrack * kSector) == EIO);
  CHECK_FALSE(dev.failed(0));
  CHECK(told.size() == 1);
  m.views[0]->off_ = false;
  CHECK(dev.read(0, back.data(), kTrack * kSector) == 0);
  // Member 1 is untouched by all this.
  CHECK(dev.read(kTrack * kSector, back.data(), kTrack * kSector) == 0);
}

TEST_CASE("striped device: RAID 0 returns EIO for a lost member's data only, and serves it again",
          "[striped_device]") {
  const std::uint32_t p = 3;
  auto g = toy_volume(p);
  Members m(p);
  StripedDevice dev(m.targets(), *g, 0, g->capacity_sectors() * kSector);
  bool told = false;
  dev.set_failure_listener([&](std::uint32_t, const std::string&) { told = true; });
  AlignedBuffer data(3 * kTrack * kSector), back(kTrack * kSector);
  std::mt19937_64 rng(10);
  fill_random(data.span(), rng);
  REQUIRE(dev.write(0, data.data(), 3 * kTrack * kSector) == 0);  // volume tracks 0, 1, 2: one per member
  m.views[1]->off_ = true;
  CHECK(dev.read(1 * kTrack * kSector, back.data(), kTrack * kSector) == EIO);
  CHECK(dev.read(0, back.data(), kTrack * kSector) == 0);
  CHECK(equal(back.span(), data.span().first(kTrack * kSector)));
  CHECK(dev.read(2 * kTrack * kSector, back.data(), kTrack * kSector) == 0);
  CHECK_FALSE(dev.failed(1));
  CHECK_FALSE(told);
  CHECK(dev.stats().at(1).at("state") == "errors");
  CHECK(dev.stats().at(1).at("reason") == "a read failed: " + std::string(std::strerror(EIO)));
  CHECK(dev.flush() == EIO);
  m.views[1]->off_ = false;
  REQUIRE(dev.read(1 * kTrack * kSector, back.data(), kTrack * kSector) == 0);
  CHECK(equal(back.span(), data.span().subspan(kTrack * kSector, kTrack * kSector)));
}

TEST_CASE("striped device: RAID 0 flushes a member recorded failed that is present; an absent one is no error",
          "[striped_device]") {
  const std::uint32_t p = 3;
  auto g = toy_volume(p);
  Members m(p);
  StripedDevice dev(m.targets(), *g, 0, g->capacity_sectors() * kSector, {1});
  CHECK(dev.failed(1));
  CHECK(dev.flush() == 0);
  // A flush that fails on it is an error (its writes are not durable)...
  m.views[1]->off_ = true;
  CHECK(dev.flush() == EIO);
  m.views[1]->off_ = false;
  // ... but the placeholder of a missing member (ENODEV) is not.
  std::vector<MemberTarget> targets = m.targets();
  targets[2] = {"(absent)", std::make_unique<AbsentDevice>(targets[2].device->size_bytes(), 512)};
  StripedDevice without(std::move(targets), *g, 0, g->capacity_sectors() * kSector, {2});
  CHECK(without.flush() == 0);
}

TEST_CASE("striped device: members that do not fit the geometry are refused", "[striped_device]") {
  auto g = toy_volume(2);
  const std::uint64_t bytes = g->capacity_sectors() * kSector;
  auto refusal = [&](std::uint32_t devices, std::uint32_t raid, std::uint64_t size,
                     const std::vector<std::uint32_t>& failed = {}, bool hole = false) {
    Members m(devices);
    auto targets = m.targets();
    if (hole) targets[0].device.reset();
    try {
      StripedDevice dev(std::move(targets), *g, raid, size, failed);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(refusal(2, 2, bytes) == "RAID level 2 is not supported (0 or 1)");
  CHECK(refusal(3, 0, bytes) == "a 2-member RAID 0 volume needs 2 devices, got 3");
  CHECK(refusal(2, 1, bytes) == "a 2-member RAID 1 volume needs 4 devices, got 2");
  CHECK(refusal(2, 0, bytes + kSector) == "the volume's byte space exceeds its geometry");
  CHECK(refusal(2, 0, bytes, {}, true) == "a member device is missing");
  CHECK(refusal(4, 1, bytes, {4}) == "a failed device index is out of range");
  CHECK(refusal(2, 0, bytes).empty());
  // Devices known failed are never used.
  Members m(4);
  StripedDevice dev(m.targets(), *g, 1, bytes, {2});
  CHECK(dev.failed_devices() == std::vector<std::uint32_t>{2});
  AlignedBuffer buf(kTrack * kSector);
  REQUIRE(dev.write(kTrack * kSector, buf.data(), kTrack * kSector) == 0);  // volume track 1: member 1
  CHECK(m.views[2]->calls_ == 0);
  CHECK(m.views[3]->calls_ == 1);
}

TEST_CASE("striped device: targets split at commas unless a file has the name; device failures", "[striped_device]") {
  CHECK(split_targets({"a,b", "c"}) == std::vector<std::string>{"a", "b", "c"});
  CHECK(split_targets({",a,,b,"}) == std::vector<std::string>{"a", "b"});
  CHECK(split_targets({"nbd://host/x"}) == std::vector<std::string>{"nbd://host/x"});
  CHECK(split_targets({}).empty());
  namespace fsys = std::filesystem;
  const fsys::path dir = fsys::temp_directory_path() / ("mmfs-split-" + std::to_string(::getpid()));
  fsys::create_directories(dir);
  const fsys::path odd = dir / "image,1";
  std::FILE* f = std::fopen(odd.c_str(), "w");
  REQUIRE(f);
  std::fclose(f);
  CHECK(split_targets({odd.string()}) == std::vector<std::string>{odd.string()});
  fsys::remove_all(dir);
  for (int e : {EIO, ENODEV, ENXIO, ENOTCONN, ESHUTDOWN, ECONNRESET, ETIMEDOUT, ENOMEDIUM}) CHECK(is_device_failure(e));
  for (int e : {0, EINVAL, ENOSPC, EFBIG, EACCES, ENOMEM}) CHECK_FALSE(is_device_failure(e));
}

TEST_CASE("striped device: RAID 0 member recorded lost while running is failed, still read, and its flush no error",
          "[striped_device]") {
  const std::uint32_t p = 2;
  auto g = toy_volume(p);
  Members m(p);
  StripedDevice dev(m.targets(), *g, 0, g->capacity_sectors() * kSector, {});
  m.views[1]->off_ = true;
  CHECK(dev.flush() == EIO);  // not recorded yet: its writes may not be durable
  CHECK_FALSE(dev.lost(1));
  dev.record_lost(1, "a metadata write failed");
  CHECK(dev.failed(1));
  CHECK(dev.lost(1));
  CHECK_FALSE(dev.lost(0));
  CHECK(dev.failed_devices() == std::vector<std::uint32_t>{1});
  CHECK(dev.stats().at(1).at("state") == "failed");
  CHECK(dev.flush() == 0);
  // Still in the request path: back, it serves its data.
  m.views[1]->off_ = false;
  AlignedBuffer data(2 * kTrack * kSector), back(2 * kTrack * kSector);
  std::memset(data.data(), 0x5a, data.size());
  REQUIRE(dev.write(0, data.data(), std::uint32_t(data.size())) == 0);
  REQUIRE(dev.read(0, back.data(), std::uint32_t(back.size())) == 0);
  CHECK(std::memcmp(back.data(), data.data(), data.size()) == 0);
  // RAID 1 keeps its own rule: record_lost is for RAID 0 only.
  Members twins(4);
  StripedDevice mirror(twins.targets(), *g, 1, g->capacity_sectors() * kSector, {});
  mirror.record_lost(1, "ignored");
  CHECK_FALSE(mirror.failed(1));
}
