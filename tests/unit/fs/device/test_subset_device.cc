// SubsetDevice (fs/device/subset_device.h): a member set's own byte space
// over the volume's device. Every byte written through it lands at the
// volume sector the set maps it to (geometry/member_subset.h), nothing
// lands on the other members, reads come back whole, and a batch's requests
// are reported done once each.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstring>
#include <random>
#include <vector>

#include "fs/device/fault_device.h"
#include "fs/device/subset_device.h"
#include "geometry/load.h"
#include "geometry/member_subset.h"
#include "geometry/striped.h"
#include "tests/unit/support/striped_test_support.h"

using namespace mmfs;

namespace {

// The striped tests' small zoned disk (512-byte sectors), striped over 4 members.
std::unique_ptr<geom::StripedGeometry> volume_geometry() {
  return std::make_unique<geom::StripedGeometry>(geom::load_geometry(geom::testing::small_disk_json()), 4);
}

}  // namespace

TEST_CASE("a member set's device writes and reads its sectors where the set maps them", "[subset_device]") {
  auto volume = volume_geometry();
  const std::uint32_t ss = volume->sector_size();
  fs::MemoryDevice disk(volume->capacity_sectors() * ss, ss);
  geom::MemberSubset set(*volume, {3, 1});
  fs::SubsetDevice dev(disk, set);
  REQUIRE(dev.size_bytes() == set.geometry().capacity_sectors() * ss);
  const std::uint64_t sectors = set.geometry().capacity_sectors();

  // Fill the whole sub-volume in random requests, one batch at a time; sector s holds bytes (s * 7 + k).
  fs::AlignedBuffer expect(dev.size_bytes());
  for (std::size_t i = 0; i < dev.size_bytes(); ++i) expect.data()[i] = std::byte((i / ss) * 7 + i % ss);
  std::mt19937_64 rng(3);
  std::uint64_t at = 0;
  while (at < sectors) {
    std::vector<fs::IoRequest> batch;
    for (int k = 0; k < 3 && at < sectors; ++k) {
      const std::uint64_t n = std::min<std::uint64_t>(sectors - at, 1 + rng() % 40);
      fs::IoRequest r;
      r.op = fs::IoRequest::Op::Write;
      r.offset = at * ss;
      r.length = std::uint32_t(n * ss);
      r.buffer = expect.data() + at * ss;
      batch.push_back(r);
      at += n;
    }
    std::vector<int> done(batch.size(), 0);
    REQUIRE(dev.submit_streaming(batch, [&](std::size_t i) { ++done[i]; }) == 0);
    for (int d : done) REQUIRE(d == 1);
  }
  // Every sub-sector is at its volume sector; the members outside the set are untouched.
  for (std::uint64_t s = 0; s < sectors; ++s)
    REQUIRE(std::memcmp(disk.bytes().data() + set.to_parent(s) * ss, expect.data() + s * ss, ss) == 0);
  for (geom::Lbn v = 0; v < volume->capacity_sectors(); ++v)
    if (!set.contains(v))
      for (std::uint32_t b = 0; b < ss; ++b) REQUIRE(disk.bytes()[v * ss + b] == std::byte{0});
  // Random reads come back whole.
  for (int trial = 0; trial < 100; ++trial) {
    const std::uint64_t first = rng() % sectors, n = 1 + rng() % (sectors - first);
    fs::AlignedBuffer got(n * ss);
    REQUIRE(dev.read(first * ss, got.data(), std::uint32_t(n * ss)) == 0);
    REQUIRE(std::memcmp(got.data(), expect.data() + first * ss, n * ss) == 0);
  }
}

TEST_CASE("a member set's device refuses requests off its sectors and reports each request", "[subset_device]") {
  auto volume = volume_geometry();
  const std::uint32_t ss = volume->sector_size();
  fs::MemoryDevice disk(volume->capacity_sectors() * ss, ss);
  geom::MemberSubset set(*volume, {2});
  fs::SubsetDevice dev(disk, set);
  fs::AlignedBuffer buf(4 * ss);
  std::memset(buf.data(), 0x5a, 4 * ss);
  std::vector<fs::IoRequest> batch(4);
  for (auto& r : batch) {
    r.op = fs::IoRequest::Op::Write;
    r.buffer = buf.data();
  }
  batch[0].offset = 0, batch[0].length = 2 * ss;             // fine
  batch[1].offset = 100, batch[1].length = ss;               // not a sector
  batch[2].offset = dev.size_bytes() - ss, batch[2].length = 2 * ss;  // past the end
  batch[3].offset = ss, batch[3].length = 0;                 // empty
  std::vector<int> done(batch.size(), 0);
  CHECK(dev.submit_streaming(batch, [&](std::size_t i) { ++done[i]; }) == EINVAL);
  CHECK(batch[0].result == 0);
  CHECK(batch[1].result == EINVAL);
  CHECK(batch[2].result == EINVAL);
  CHECK(batch[3].result == EINVAL);
  CHECK(done == std::vector<int>{1, 0, 0, 0});
  // Only the good request wrote, on member 2.
  std::size_t written = 0;
  for (std::byte b : disk.bytes()) written += b == std::byte{0x5a};
  CHECK(written == 2 * ss);
  CHECK(disk.bytes()[set.to_parent(0) * ss] == std::byte{0x5a});
}
