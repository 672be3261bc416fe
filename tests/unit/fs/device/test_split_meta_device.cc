// SplitMetaDevice (fs/device/split_meta_device.h): the metadata region of a
// RAID 0 volume, whole stripes, with copy 0 on the even members and copy 1
// on the odd ones. Checked sector by sector on small striped volumes of 2, 3
// and 4 members: where every byte of each copy lands, that the two copies
// never share a member, and the degraded form (a lost copy read from its
// twin, its writes dropped).
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstring>
#include <optional>
#include <random>
#include <span>
#include <set>
#include <vector>

#include "fs/device/fault_device.h"
#include "fs/device/split_meta_device.h"
#include "geometry/load.h"
#include "geometry/striped.h"
#include "tests/unit/support/striped_test_support.h"

using namespace mmfs;
using fs::IoRequest;
using fs::SplitMetaDevice;

namespace {

std::vector<std::byte> random_block(std::mt19937_64& rng, std::size_t n) {
  std::vector<std::byte> out(n);
  for (auto& b : out) b = std::byte(rng());
  return out;
}

int write_at(fs::BlockDevice& d, std::uint64_t off, const std::vector<std::byte>& data) {
  fs::AlignedBuffer buf(data.size());
  std::memcpy(buf.data(), data.data(), data.size());
  return d.write(off, buf.data(), std::uint32_t(data.size()));
}

std::vector<std::byte> read_at(fs::BlockDevice& d, std::uint64_t off, std::size_t n, int* rc = nullptr) {
  fs::AlignedBuffer buf(n);
  const int r = d.read(off, buf.data(), std::uint32_t(n));
  if (rc) *rc = r;
  return {buf.data(), buf.data() + n};
}

}  // namespace

TEST_CASE("split metadata: the region is whole stripes and each copy lies on its own members", "[split_meta]") {
  for (std::uint32_t p : {2u, 3u, 4u}) {
    INFO(p << " members");
    geom::StripedGeometry g(geom::load_geometry(geom::testing::small_disk_json()), p);
    const std::uint64_t ss = g.sector_size();
    // From the second member track (12 sectors), each copy at least 4 KiB.
    std::uint64_t offset = 0, length = 0;
    SplitMetaDevice::region_for(g, 12, 4096, &offset, &length);
    CHECK(offset == p * 12 * ss);
    const SplitMetaDevice::Layout l = SplitMetaDevice::layout_of(g, offset, length);
    CHECK(l.first_lbn == 12);
    CHECK(l.copy_bytes >= 4096);
    CHECK(l.copy_bytes % 4096 == 0);
    CHECK_THROWS(SplitMetaDevice::layout_of(g, offset + ss, length - ss));  // not whole stripes
    fs::MemoryDevice volume(g.capacity_sectors() * ss, 512);
    SplitMetaDevice dev(volume, g, l);
    REQUIRE(dev.size_bytes() == 2 * l.copy_bytes);
    // Each sector of the device, written alone, changes exactly one volume
    // sector: inside the region, on a member of its copy's parity, never
    // one another sector changed.
    std::set<geom::Lbn> seen;
    std::mt19937_64 rng(p);
    for (std::uint64_t s = 0; s < dev.size_bytes() / ss; ++s) {
      const std::vector<std::byte> before = volume.bytes();
      const auto data = random_block(rng, ss);
      REQUIRE(write_at(dev, s * ss, data) == 0);
      std::vector<geom::Lbn> changed;
      for (geom::Lbn v = 0; v < g.capacity_sectors(); ++v)
        if (std::memcmp(before.data() + v * ss, volume.bytes().data() + v * ss, ss) != 0) changed.push_back(v);
      REQUIRE(changed.size() == 1);
      const geom::Lbn v = changed[0];
      CHECK(v * ss >= offset);
      CHECK(v * ss < offset + length);
      const int copy = int(s * ss / l.copy_bytes);
      CHECK(int(g.locate(v).member % 2) == copy);
      CHECK(seen.insert(v).second);
      CHECK(read_at(dev, s * ss, ss) == data);
    }
  }
}

TEST_CASE("split metadata: requests across copies and members; bad requests refused", "[split_meta]") {
  geom::StripedGeometry g(geom::load_geometry(geom::testing::small_disk_json()), 4);
  std::uint64_t offset = 0, length = 0;
  SplitMetaDevice::region_for(g, 12, 8192, &offset, &length);
  fs::MemoryDevice volume(g.capacity_sectors() * 512, 512);
  SplitMetaDevice dev(volume, g, SplitMetaDevice::layout_of(g, offset, length));
  std::mt19937_64 rng(5);
  const auto all = random_block(rng, dev.size_bytes());
  REQUIRE(write_at(dev, 0, all) == 0);  // one request spanning both copies and every member
  CHECK(read_at(dev, 0, all.size()) == all);
  fs::AlignedBuffer buf(1024);
  std::vector<IoRequest> bad{{IoRequest::Op::Read, 100, 512, buf.data(), 0},
                             {IoRequest::Op::Read, dev.size_bytes() - 512, 1024, buf.data(), 0},
                             {IoRequest::Op::Read, 0, 512, buf.data(), 0}};
  CHECK(dev.submit(bad) == EINVAL);
  CHECK(bad[0].result == EINVAL);
  CHECK(bad[1].result == EINVAL);
  CHECK(bad[2].result == 0);
}

TEST_CASE("split metadata: degraded, the lost copy reads its twin and its writes are dropped", "[split_meta]") {
  geom::StripedGeometry g(geom::load_geometry(geom::testing::small_disk_json()), 4);
  std::uint64_t offset = 0, length = 0;
  SplitMetaDevice::region_for(g, 12, 4096, &offset, &length);
  const SplitMetaDevice::Layout l = SplitMetaDevice::layout_of(g, offset, length);
  fs::MemoryDevice volume(g.capacity_sectors() * 512, 512);
  std::mt19937_64 rng(9);
  const auto first = random_block(rng, l.copy_bytes);
  {
    SplitMetaDevice whole(volume, g, l);
    REQUIRE(write_at(whole, 0, first) == 0);
    REQUIRE(write_at(whole, l.copy_bytes, first) == 0);
  }
  CHECK(SplitMetaDevice::copy_on(1) == 1);
  CHECK(SplitMetaDevice::copy_on(2) == 0);
  SplitMetaDevice lost1(volume, g, l, 1);
  const std::vector<std::byte> before = volume.bytes();
  const auto next = random_block(rng, l.copy_bytes);
  // The store writes both copies; only copy 0's sectors change.
  REQUIRE(write_at(lost1, l.copy_bytes, next) == 0);
  CHECK(volume.bytes() == before);
  REQUIRE(write_at(lost1, 0, next) == 0);
  CHECK(read_at(lost1, l.copy_bytes, l.copy_bytes) == next);  // the twin's bytes
  CHECK(read_at(lost1, 0, l.copy_bytes) == next);
  // Copy 1's own sectors still hold what they held before the loss.
  SplitMetaDevice whole(volume, g, l);
  CHECK(read_at(whole, l.copy_bytes, l.copy_bytes) == first);  // copy 1 as it was
}

namespace {

// The volume's device with one member gone: every request touching a sector
// of `bad` fails with EIO, and so does the flush.
class MemberGone final : public fs::BlockDevice {
 public:
  MemberGone(fs::MemoryDevice& base, const geom::StripedGeometry& g) : base_(base), g_(g) {}
  std::uint64_t size_bytes() const override { return base_.size_bytes(); }
  std::uint32_t block_size() const override { return base_.block_size(); }
  int submit(std::span<IoRequest> batch) override {
    int first = 0;
    for (IoRequest& r : batch) {
      const geom::Lbn a = r.offset / g_.sector_size(), b = (r.offset + r.length) / g_.sector_size();
      bool gone = false;
      for (geom::Lbn x = a; x < b && !gone; ++x) gone = bad >= 0 && g_.locate(x).member == std::uint32_t(bad);
      r.result = gone ? EIO : base_.submit({&r, 1});
      if (r.result && !first) first = r.result;
    }
    return first;
  }
  int flush() override { return bad >= 0 ? EIO : 0; }
  int bad = -1;

 private:
  fs::MemoryDevice& base_;
  const geom::StripedGeometry& g_;
};

}  // namespace

TEST_CASE("split metadata: a member failing under both copies drops its copy once the volume records it",
          "[split_meta]") {
  geom::StripedGeometry g(geom::load_geometry(geom::testing::small_disk_json()), 4);
  std::uint64_t offset = 0, length = 0;
  SplitMetaDevice::region_for(g, 12, 4096, &offset, &length);
  const SplitMetaDevice::Layout l = SplitMetaDevice::layout_of(g, offset, length);
  fs::MemoryDevice memory(g.capacity_sectors() * 512, 512);
  MemberGone volume(memory, g);
  std::mt19937_64 rng(11);
  const auto first = random_block(rng, l.copy_bytes);
  {
    SplitMetaDevice whole(volume, g, l);
    REQUIRE(write_at(whole, 0, first) == 0);
    REQUIRE(write_at(whole, l.copy_bytes, first) == 0);
  }
  volume.bad = 3;  // a member of copy 1's set
  const auto next = random_block(rng, l.copy_bytes);
  std::vector<std::optional<std::uint32_t>> told;

  SECTION("the volume cannot record it: the write fails, both copies are kept") {
    SplitMetaDevice dev(volume, g, l);
    dev.set_member_failed([&](std::optional<std::uint32_t> m, int e) {
      told.push_back(m);
      CHECK(e == EIO);
      return std::optional<std::uint32_t>();
    });
    CHECK(write_at(dev, l.copy_bytes, next) == EIO);
    CHECK(dev.lost() == -1);
    CHECK(dev.flush() == EIO);
    CHECK(told == std::vector<std::optional<std::uint32_t>>{3u, std::nullopt});
  }
  SECTION("recorded: the copy is dropped, the write stands on the other copy") {
    SplitMetaDevice dev(volume, g, l);
    dev.set_member_failed([&](std::optional<std::uint32_t> m, int) {
      told.push_back(m);
      return std::optional<std::uint32_t>(3u);
    });
    // A failed read drops nothing: it is no sign the copy went stale.
    int rc = 0;
    (void)read_at(dev, l.copy_bytes, l.copy_bytes, &rc);
    CHECK(rc == EIO);
    CHECK(told.empty());
    // The store writes both copies, copy 0 first: it lands; copy 1's fails on
    // member 3, which the volume records, and is done again without copy 1.
    REQUIRE(write_at(dev, 0, next) == 0);
    REQUIRE(write_at(dev, l.copy_bytes, next) == 0);
    CHECK(told == std::vector<std::optional<std::uint32_t>>{3u});
    CHECK(dev.lost() == 1);
    CHECK(read_at(dev, l.copy_bytes, l.copy_bytes) == next);  // from copy 0
    CHECK(read_at(dev, 0, l.copy_bytes) == next);
    // A flush still fails below on member 3; the metadata's flush stands on the others.
    CHECK(dev.flush() == 0);
    CHECK(told == std::vector<std::optional<std::uint32_t>>{3u, std::nullopt});
    // Copy 1's sectors off member 3 were not written again: the copy is stale, and never read.
    volume.bad = -1;
    SplitMetaDevice whole(volume, g, l);
    CHECK(read_at(whole, 0, l.copy_bytes) == next);
    CHECK(read_at(whole, l.copy_bytes, l.copy_bytes) != next);
  }
  SECTION("a flush that fails finds its member through the volume") {
    SplitMetaDevice dev(volume, g, l);
    dev.set_member_failed([&](std::optional<std::uint32_t> m, int) {
      told.push_back(m);
      return std::optional<std::uint32_t>(2u);  // the volume flushed each member: member 2 failed
    });
    CHECK(dev.flush() == 0);
    CHECK(told == std::vector<std::optional<std::uint32_t>>{std::nullopt});
    CHECK(dev.lost() == 0);
  }
}
