// The in-memory device and the crash/corruption model
// (fs/device/fault_device.h): MemoryDevice validates requests as a real
// device does; FaultInjectingDevice's crash images keep flushed writes and
// keep, lose or tear unflushed ones; events, fail_after and bit flips.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "fs/device/block_device.h"
#include "fs/device/fault_device.h"
#include "tests/unit/support/device_test_support.h"

using namespace mmfs::fs;
using namespace mmfs::fs::testing::devices;

namespace {

// A FaultInjectingDevice over a zeroed memory device of `blocks` 4 KiB blocks.
std::unique_ptr<FaultInjectingDevice> fault_device(std::uint64_t seed, std::uint64_t blocks = 64) {
  return std::make_unique<FaultInjectingDevice>(std::make_unique<MemoryDevice>(blocks * kBlock, kBlock), seed);
}

std::span<const std::byte> region(MemoryDevice& m, std::uint64_t block, std::uint64_t count) {
  return {m.bytes().data() + block * kBlock, count * kBlock};
}

enum class Outcome { Old, New, Torn };

// Which of the allowed outcomes `got` is, for a write of `now` over `old`:
// the old bytes, the new bytes, or a proper block prefix of the new bytes
// followed by the old rest. Fails the test on anything else.
Outcome classify(std::span<const std::byte> got, std::span<const std::byte> old, std::span<const std::byte> now) {
  if (equal(got, now)) return Outcome::New;
  if (equal(got, old)) return Outcome::Old;
  const std::size_t blocks = got.size() / kBlock;
  for (std::size_t k = 1; k < blocks; ++k) {
    const std::size_t cut = k * kBlock;
    if (equal(got.first(cut), now.first(cut)) && equal(got.subspan(cut), old.subspan(cut))) return Outcome::Torn;
  }
  FAIL("crash image holds bytes that are neither old, new, nor a torn prefix");
  return Outcome::Old;
}

}  // namespace

TEST_CASE("MemoryDevice: round trip and the same validation as a real device", "[device]") {
  MemoryDevice dev(1 << 20, 512);
  REQUIRE(dev.size_bytes() == 1 << 20);
  REQUIRE(dev.block_size() == 512);
  AlignedBuffer a(kBlock), b(kBlock);
  std::mt19937_64 rng(1);
  fill_random(a.span(), rng);
  REQUIRE(dev.write(512 * 7, a.data(), kBlock) == 0);
  REQUIRE(dev.read(512 * 7, b.data(), kBlock) == 0);
  REQUIRE(equal(a.span(), b.span()));
  REQUIRE(std::memcmp(dev.bytes().data() + 512 * 7, a.data(), kBlock) == 0);
  REQUIRE(dev.read(100, b.data(), 512) == EINVAL);
  REQUIRE(dev.read(0, b.data(), 100) == EINVAL);
  REQUIRE(dev.read(0, b.data() + 256, 512) == EINVAL);
  REQUIRE(dev.read(0, b.data() + 512, 512) == 0);  // buffers need block_size alignment only
  REQUIRE(dev.read(dev.size_bytes(), b.data(), 512) == EINVAL);
  REQUIRE(dev.write(dev.size_bytes() - 512, a.data(), 1024) == EINVAL);
  REQUIRE(dev.flush() == 0);
}

TEST_CASE("FaultInjectingDevice: crash images keep flushed writes; unflushed are kept, lost or torn", "[device]") {
  // A: blocks 0-5, flushed. B: blocks 4-11 (over the end of A), C: blocks 20-23; both unflushed.
  std::mt19937_64 rng(11);
  AlignedBuffer a(6 * kBlock), b(8 * kBlock), c(4 * kBlock);
  fill_random(a.span(), rng);
  fill_random(b.span(), rng);
  fill_random(c.span(), rng);
  std::map<Outcome, int> seen_b, seen_c;
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    auto dev = fault_device(seed);
    REQUIRE(dev->write(0, a.data(), 6 * kBlock) == 0);
    REQUIRE(dev->flush() == 0);
    {
      auto img = dev->crash_image();
      REQUIRE(equal(region(*img, 0, 6), a.span()));
    }
    std::vector<IoRequest> batch{req(IoRequest::Op::Write, 4 * kBlock, b.data(), 8 * kBlock),
                                 req(IoRequest::Op::Write, 20 * kBlock, c.data(), 4 * kBlock)};
    REQUIRE(dev->submit(batch) == 0);
    // Reads see every write at once.
    AlignedBuffer back(8 * kBlock);
    REQUIRE(dev->read(4 * kBlock, back.data(), 8 * kBlock) == 0);
    REQUIRE(equal(back.span(), b.span()));

    auto img = dev->crash_image();
    REQUIRE(equal(region(*img, 0, 4), a.span().first(4 * kBlock)));  // flushed, not overwritten
    std::vector<std::byte> old_b(8 * kBlock, std::byte{0});
    std::memcpy(old_b.data(), a.data() + 4 * kBlock, 2 * kBlock);
    std::vector<std::byte> old_c(4 * kBlock, std::byte{0});
    ++seen_b[classify(region(*img, 4, 8), old_b, b.span())];
    ++seen_c[classify(region(*img, 20, 4), old_c, c.span())];
    // Nothing else changed.
    REQUIRE(std::all_of(img->bytes().begin() + 12 * kBlock, img->bytes().begin() + 20 * kBlock,
                        [](std::byte x) { return x == std::byte{0}; }));
    REQUIRE(std::all_of(img->bytes().begin() + 24 * kBlock, img->bytes().end(),
                        [](std::byte x) { return x == std::byte{0}; }));
    // After a flush everything survives.
    REQUIRE(dev->flush() == 0);
    auto after = dev->crash_image();
    REQUIRE(equal(region(*after, 4, 8), b.span()));
    REQUIRE(equal(region(*after, 20, 4), c.span()));
    REQUIRE(equal(region(*after, 0, 4), a.span().first(4 * kBlock)));
  }
  for (auto o : {Outcome::Old, Outcome::New, Outcome::Torn}) {
    INFO("outcome " << static_cast<int>(o));
    REQUIRE(seen_b[o] > 0);
    REQUIRE(seen_c[o] > 0);
  }
  // Kept whole about half the time.
  REQUIRE(seen_b[Outcome::New] > 60);
  REQUIRE(seen_b[Outcome::New] < 140);
}

TEST_CASE("FaultInjectingDevice: overlapping unflushed writes undo correctly", "[device]") {
  // Durable: blocks 0-7 tagged 0x10..0x17. Unflushed: W1 = blocks 0-3 (0xA1),
  // W2 = blocks 2-5 (0xA2), W3 = block 3 (0xA3). Each crash image must be
  // one the model allows: the writes in some order, each kept, lost or torn.
  struct W {
    unsigned first, count;
    unsigned char tag;
  };
  const std::vector<W> writes{{0, 4, 0xA1}, {2, 4, 0xA2}, {3, 1, 0xA3}};
  using Tags = std::vector<unsigned char>;
  auto key = [](const Tags& t) {  // (a set of vectors trips GCC 12's -Wstringop-overread)
    std::uint64_t k = 0;
    for (unsigned char c : t) k = k << 8 | c;
    return k;
  };
  Tags durable(8);
  for (unsigned i = 0; i < 8; ++i) durable[i] = static_cast<unsigned char>(0x10 + i);

  std::set<std::uint64_t> allowed;
  std::vector<std::size_t> perm{0, 1, 2};
  do {
    // kept blocks per write: 0 (lost) .. count (whole)
    for (unsigned k0 = 0; k0 <= 4; ++k0)
      for (unsigned k1 = 0; k1 <= 4; ++k1)
        for (unsigned k2 = 0; k2 <= 1; ++k2) {
          const unsigned keep[3] = {k0, k1, k2};
          Tags t = durable;
          for (std::size_t w : perm) {
            for (unsigned b = 0; b < keep[w]; ++b) t[writes[w].first + b] = writes[w].tag;
          }
          allowed.insert(key(t));
        }
  } while (std::next_permutation(perm.begin(), perm.end()));

  std::set<std::uint64_t> seen;
  for (std::uint64_t seed = 0; seed < 300; ++seed) {
    auto dev = fault_device(seed, 8);
    AlignedBuffer init(8 * kBlock);
    for (unsigned i = 0; i < 8; ++i) fill(init.span().subspan(i * kBlock, kBlock), durable[i]);
    REQUIRE(dev->write(0, init.data(), 8 * kBlock) == 0);
    REQUIRE(dev->flush() == 0);
    for (const W& w : writes) {
      AlignedBuffer buf(w.count * kBlock);
      fill(buf.span(), w.tag);
      REQUIRE(dev->write(w.first * kBlock, buf.data(), w.count * kBlock) == 0);
    }
    auto img = dev->crash_image();
    Tags t(8);
    for (unsigned i = 0; i < 8; ++i) {
      auto blk = region(*img, i, 1);
      t[i] = static_cast<unsigned char>(blk[0]);
      REQUIRE(std::all_of(blk.begin(), blk.end(), [&](std::byte x) { return x == blk[0]; }));
    }
    INFO("seed " << seed);
    REQUIRE(allowed.count(key(t)) == 1);
    seen.insert(key(t));
  }
  REQUIRE(seen.count(key(durable)) == 1);  // all three lost: exactly the durable state
  Tags last = durable;                // all kept in issue order
  for (const W& w : writes)
    for (unsigned b = 0; b < w.count; ++b) last[w.first + b] = w.tag;
  REQUIRE(seen.count(key(last)) == 1);
  REQUIRE(seen.size() > 10);
}

TEST_CASE("FaultInjectingDevice: events, fail_after, bit flips", "[device]") {
  AlignedBuffer x(kBlock), y(kBlock), z(kBlock), back(kBlock);
  fill(x.span(), 0x01);
  fill(y.span(), 0x02);
  fill(z.span(), 0x03);

  SECTION("events count write requests and flushes") {
    auto dev = fault_device(1);
    REQUIRE(dev->events() == 0);
    std::vector<IoRequest> batch{req(IoRequest::Op::Write, 0, x.data(), kBlock),
                                 req(IoRequest::Op::Read, 0, back.data(), kBlock),
                                 req(IoRequest::Op::Write, kBlock, y.data(), kBlock),
                                 req(IoRequest::Op::Write, 3, z.data(), kBlock)};  // invalid: not an event
    REQUIRE(dev->submit(batch) == EINVAL);
    REQUIRE(dev->events() == 2);
    REQUIRE(dev->flush() == 0);
    REQUIRE(dev->events() == 3);
    REQUIRE(dev->read(0, back.data(), kBlock) == 0);
    REQUIRE(dev->events() == 3);
  }

  SECTION("after fail_after(n), later writes and flushes fail and change nothing") {
    for (std::uint64_t seed = 0; seed < 50; ++seed) {
      auto dev = fault_device(seed);
      dev->fail_after(3);
      REQUIRE(dev->write(0, x.data(), kBlock) == 0);  // 1
      REQUIRE(dev->flush() == 0);                      // 2
      REQUIRE(dev->write(kBlock, y.data(), kBlock) == 0);  // 3: the last one allowed
      std::vector<IoRequest> batch{req(IoRequest::Op::Write, 2 * kBlock, z.data(), kBlock),  // 4: dead
                                   req(IoRequest::Op::Write, 0, z.data(), kBlock)};          // 5
      REQUIRE(dev->submit(batch) == EIO);
      REQUIRE(batch[0].result == EIO);
      REQUIRE(batch[1].result == EIO);
      REQUIRE(dev->flush() == EIO);  // 6: Y stays unflushed
      REQUIRE(dev->events() == 6);
      // Reads still work and see no trace of the failed writes.
      REQUIRE(dev->read(0, back.data(), kBlock) == 0);
      REQUIRE(equal(back.span(), x.span()));
      REQUIRE(dev->read(2 * kBlock, back.data(), kBlock) == 0);
      REQUIRE(back.data()[0] == std::byte{0});
      auto img = dev->crash_image();
      REQUIRE(equal(region(*img, 0, 1), x.span()));
      REQUIRE(region(*img, 2, 1)[0] == std::byte{0});
      const auto yb = region(*img, 1, 1)[0];
      REQUIRE((yb == std::byte{0} || yb == std::byte{0x02}));
    }
  }

  SECTION("bit flips touch exactly one bit of each read, never the stored data") {
    auto dev = fault_device(5);
    AlignedBuffer data(4 * kBlock), got(4 * kBlock);
    std::mt19937_64 rng(9);
    fill_random(data.span(), rng);
    REQUIRE(dev->write(0, data.data(), 4 * kBlock) == 0);
    dev->set_read_bitflip_probability(1.0);
    for (int round = 0; round < 50; ++round) {
      std::vector<IoRequest> batch{req(IoRequest::Op::Read, 0, got.data(), 2 * kBlock),
                                   req(IoRequest::Op::Read, 2 * kBlock, got.data() + 2 * kBlock, 2 * kBlock)};
      REQUIRE(dev->submit(batch) == 0);
      for (int half = 0; half < 2; ++half) {
        int flipped = 0;
        for (std::size_t i = half * 2 * kBlock; i < (half + 1) * 2 * kBlock; ++i) {
          flipped += std::popcount(static_cast<unsigned>(std::to_integer<unsigned char>(got.data()[i] ^ data.data()[i])));
        }
        REQUIRE(flipped == 1);
      }
    }
    dev->set_read_bitflip_probability(0);
    REQUIRE(dev->read(0, got.data(), 4 * kBlock) == 0);
    REQUIRE(equal(got.span(), data.span()));
  }
}
