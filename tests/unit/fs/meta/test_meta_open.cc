// Opening the metadata store (fs/meta/meta_open.cc) with the second copy of
// version 2 regions: every single-block corruption is survived with no loss
// and repaired from the twin; a structure lost in both copies is refused,
// and salvage keeps the longest consistent prefix; open() reads the live
// metadata, not the log area.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstdio>
#include <random>
#include <set>

#include "tests/unit/support/meta_test_support.h"

using namespace mmfs_test_meta;

namespace {

struct Opened {
  std::unique_ptr<MetaStore> store;
  int err = 0;
  std::string msg;
  MetaOpenReport report;
};

Opened open_with(BlockDevice& dev, const MetaOpenOptions& options) {
  Opened o;
  o.store = MetaStore::open(dev, kCrashRegion, &o.err, &o.msg, options, &o.report);
  return o;
}

std::unique_ptr<MemoryDevice> image_of(const std::vector<std::byte>& bytes) {
  auto img = std::make_unique<MemoryDevice>(kDeviceBytes);
  img->bytes() = bytes;
  return img;
}

// Flips 8 bytes at `at` (the damage: 8 bytes of one used block).
void damage(std::vector<std::byte>& bytes, std::uint64_t at, std::mt19937_64& rng) {
  for (int i = 0; i < 8; ++i) bytes[at + i] ^= static_cast<std::byte>(1 + rng() % 255);
}

// Counts the bytes read through it.
class CountingDevice final : public BlockDevice {
 public:
  explicit CountingDevice(BlockDevice& inner) : inner_(inner) {}
  std::uint64_t size_bytes() const override { return inner_.size_bytes(); }
  std::uint32_t block_size() const override { return inner_.block_size(); }
  int submit(std::span<IoRequest> batch) override {
    for (const IoRequest& r : batch)
      if (r.op == IoRequest::Op::Read) read_bytes += r.length;
    return inner_.submit(batch);
  }
  int flush() override { return inner_.flush(); }
  std::uint64_t read_bytes = 0;

 private:
  BlockDevice& inner_;
};

std::uint64_t blocks(std::uint64_t bytes) { return (bytes + 4095) / 4096; }

}  // namespace

TEST_CASE("meta: every single-block corruption of a version 2 region is survived with no loss",
          "[meta][corrupt][redundancy]") {
  const CorruptionImage image = build_corruption_image(2);
  const meta::RegionHeader& geo = image.geo;
  REQUIRE(geo.copies() == 2);
  const std::uint64_t R = kCrashRegion.offset, stride = geo.copy_stride();
  const Map expected = [&] {
    Model m = image.run.base;
    for (const WriteBatch& b : image.run.batches) m.apply(b);
    return m.m;
  }();

  // Blocks (relative to a copy) whose damage must be reported: the header, the
  // newest checkpoint, every live chunk but the last (whose copies may differ
  // after an interrupted write, so a difference there is repaired silently).
  std::set<std::uint64_t> reported;
  reported.insert(0);
  const std::uint64_t ck_at = geo.slot_offset[image.newest] / 4096;
  for (std::uint64_t b = 0; b < blocks(meta::kCheckpointHeaderSize + image.slot_header(image.newest).payload_length);
       ++b)
    reported.insert(ck_at + b);
  for (std::size_t i = 0; i + 1 < image.chunks.size(); ++i)
    for (std::uint64_t b = 0; b < blocks(image.chunks[i].second); ++b)
      reported.insert((geo.log_offset + image.chunks[i].first) / 4096 + b);

  std::mt19937_64 rng(2026);
  std::uint64_t trials = 0, problems_reported = 0;
  for (int copy = 0; copy < 2; ++copy) {
    for (std::uint64_t block = 0; block < stride / 4096; ++block) {
      for (int pattern = 0; pattern < 2; ++pattern) {
        const std::uint64_t in_block = pattern == 0 ? 0 : (rng() % (4096 - 8));
        const std::uint64_t at = R + copy * stride + block * 4096 + in_block;
        INFO("copy " << copy << ", block " << block << " of the copy, byte " << in_block);
        std::vector<std::byte> bytes = image.good;
        damage(bytes, at, rng);
        ++trials;

        // A mount that does not repair: the whole state.
        auto img = image_of(bytes);
        Opened plain = open_with(*img, {});
        INFO("open: errno " << plain.err << ": " << plain.msg);
        REQUIRE(plain.store);
        CHECK(dump(*plain.store) == expected);
        plain.store.reset();

        // mmfsck -n: the damage is found (where it must be), nothing changes.
        Opened check = open_with(*img, {.verify_copies = true});
        REQUIRE(check.store);
        CHECK(dump(*check.store) == expected);
        if (pattern == 0 && reported.count(block)) CHECK(!check.report.problems.empty());
        if (!check.report.problems.empty()) ++problems_reported;
        check.store.reset();
        CHECK(img->bytes() == bytes);

        // A mount (which verifies and repairs), then a check finds both
        // copies whole: damage to the other copy of the same block is
        // survived too.
        Opened fixed = open_with(*img, {.repair = true, .verify_copies = true});
        REQUIRE(fixed.store);
        CHECK(dump(*fixed.store) == expected);
        fixed.store.reset();
        Opened after = open_with(*img, {.verify_copies = true});
        REQUIRE(after.store);
        CHECK(after.report.problems.empty());
        std::vector<std::byte> twin_damaged = img->bytes();
        damage(twin_damaged, at + (copy == 0 ? stride : -stride), rng);
        auto img2 = image_of(twin_damaged);
        Opened twin = open_with(*img2, {});
        INFO("twin open: errno " << twin.err << ": " << twin.msg);
        REQUIRE(twin.store);
        CHECK(dump(*twin.store) == expected);
      }
    }
  }
  std::printf("meta redundancy: %llu single-block corruptions (every block of both copies, 2 places each), all "
              "opened with the full state; %llu reported by a check, every one repaired\n",
              static_cast<unsigned long long>(trials), static_cast<unsigned long long>(problems_reported));
  CHECK(problems_reported >= reported.size() * 2);
}

TEST_CASE("meta: a structure lost in both copies is refused; salvage keeps the prefix before it",
          "[meta][corrupt][redundancy]") {
  const CorruptionImage image = build_corruption_image(2);
  const meta::RegionHeader& geo = image.geo;
  const std::uint64_t R = kCrashRegion.offset, stride = geo.copy_stride();
  const std::size_t all = image.run.batches.size();
  std::mt19937_64 rng(7);
  // Damages [off, off+len) of a copy, in both copies.
  auto both = [&](std::uint64_t off, std::uint64_t len) {
    std::vector<std::byte> bytes = image.good;
    for (int c = 0; c < 2; ++c) damage(bytes, R + c * stride + off + rng() % (len - 8), rng);
    return bytes;
  };
  Run any = image.run;
  any.last_synced = 0;  // any prefix is a consistent state

  SECTION("a chunk in the middle of the log") {
    const auto& chunk = image.chunks[image.chunks.size() / 2];
    auto img = image_of(both(geo.log_offset + chunk.first, chunk.second));
    Opened refused = open_with(*img, {});
    CHECK(!refused.store);
    CHECK(refused.err == EUCLEAN);
    CHECK(refused.msg.find("corrupt in both copies") != std::string::npos);
    CHECK(refused.msg.find("mmfsck -y") != std::string::npos);
    // mmfsck -n: still refused, nothing written.
    const std::vector<std::byte> before = img->bytes();
    CHECK(!open_with(*img, {.verify_copies = true}).store);
    CHECK(img->bytes() == before);

    Opened salvaged = open_with(*img, {.repair = true, .verify_copies = true, .salvage = true});
    INFO("salvage: errno " << salvaged.err << ": " << salvaged.msg);
    REQUIRE(salvaged.store);
    const std::size_t k = check_prefix(any, dump(*salvaged.store), "salvaged");
    CHECK(k < all);
    CHECK(salvaged.report.lost_batches >= 1);
    REQUIRE(!salvaged.report.problems.empty());
    CHECK(salvaged.report.problems[0].find("lost") != std::string::npos);
    CHECK(!salvaged.report.repairs.empty());
    const Map kept = dump(*salvaged.store);
    // The salvaged prefix is the durable state now: it opens plainly and takes new batches.
    WriteBatch more;
    more.put("after-salvage", "yes");
    REQUIRE(salvaged.store->apply(more) == 0);
    REQUIRE(salvaged.store->sync() == 0);
    salvaged.store.reset();
    Opened again = open_with(*img, {.verify_copies = true});
    INFO("reopen: errno " << again.err << ": " << again.msg);
    REQUIRE(again.store);
    CHECK(again.report.problems.empty());
    Map want = kept;
    want["after-salvage"] = "yes";
    CHECK(dump(*again.store) == want);
  }
  SECTION("the newest checkpoint, with chunks after it") {
    const std::uint64_t len = meta::kCheckpointHeaderSize + image.slot_header(image.newest).payload_length;
    auto img = image_of(both(geo.slot_offset[image.newest], len));
    Opened refused = open_with(*img, {});
    CHECK(!refused.store);
    CHECK(refused.err == EUCLEAN);
    Opened salvaged = open_with(*img, {.repair = true, .salvage = true});
    REQUIRE(salvaged.store);
    CHECK(check_prefix(any, dump(*salvaged.store), "salvaged") < all);
    salvaged.store.reset();
    Opened again = open_with(*img, {.verify_copies = true});
    REQUIRE(again.store);
    CHECK(again.report.problems.empty());
  }
  SECTION("the last chunk: an older prefix, as after a torn write") {
    const auto& chunk = image.chunks.back();
    auto img = image_of(both(geo.log_offset + chunk.first, chunk.second));
    Opened o = open_with(*img, {});
    REQUIRE(o.store);
    CHECK(check_prefix(any, dump(*o.store), "last chunk lost") < all);
  }
  SECTION("the older checkpoint or a stale log block: the full state") {
    const int older = 1 - image.newest;
    std::vector<std::byte> bytes = both(geo.slot_offset[older], 4096);
    std::uint64_t stale = 0;
    while (image.live[stale]) ++stale;
    for (int c = 0; c < 2; ++c) damage(bytes, R + c * stride + geo.log_offset + stale * 4096, rng);
    auto img = image_of(bytes);
    Opened o = open_with(*img, {});
    REQUIRE(o.store);
    Run exact = image.run;
    CHECK(check_prefix(exact, dump(*o.store), "older slot") == all);
  }
  SECTION("the region header") {
    auto img = image_of(both(0, meta::kRegionHeaderSize));
    Opened o = open_with(*img, {.repair = true, .salvage = true});
    CHECK(!o.store);
    CHECK(o.err == EUCLEAN);
    CHECK(o.msg.find("both copies") != std::string::npos);
  }
}

TEST_CASE("meta: open reads the live metadata, not the whole log area", "[meta][redundancy]") {
  // A 256 MiB region: 64 MiB of log (32 MiB per copy in version 2), far
  // more than the 4 MiB smallest window.
  const MetaRegion region{0, 256 << 20};
  for (std::uint32_t version : {1u, 2u}) {
    INFO("format version " << version);
    MemoryDevice mem((256 << 20) + (1 << 20));
    REQUIRE(MetaStore::format(mem, region, version) == 0);
    const meta::RegionHeader geo = region_header(mem, region);
    std::mt19937_64 rng(version);
    Model model;
    {
      auto s = open_ok(mem, region);
      // About 12 MiB of log writes, 3 KiB of state: the window forces checkpoints long before the log is full.
      for (int i = 0; i < 3000; ++i) {
        WriteBatch b;
        b.put(num("k", i % 8), random_bytes(rng, 300, 400));
        REQUIRE(s->apply(b) == 0);
        model.apply(b);
        REQUIRE(s->sync() == 0);
      }
      const MetaStats st = s->stats();
      if (version == 2) {
        CHECK(st.checkpoints >= 2);
        CHECK(st.log_bytes_used <= meta::kMinLogWindow);
      }
    }
    CountingDevice counted(mem);
    int err = 0;
    std::string msg;
    auto s = MetaStore::open(counted, region, &err, &msg, {.repair = true, .verify_copies = true});
    REQUIRE(s);
    CHECK(dump(*s) == model.m);
    // Replay keeps the state's checkpoint size without walking the map.
    std::uint64_t state_bytes = meta::kCheckpointHeaderSize;
    for (const auto& [k, v] : model.m) state_bytes += meta::checkpoint_entry_bytes(k.size(), v.size());
    CHECK(s->stats().state_bytes == state_bytes);
    std::printf("meta open, version %u region of 256 MiB (log %llu KiB per copy): read %llu KiB\n", version,
                static_cast<unsigned long long>(geo.log_length >> 10),
                static_cast<unsigned long long>(counted.read_bytes >> 10));
    if (version == 1) CHECK(counted.read_bytes >= geo.log_length);
    // Replay and the scan for lost chunks read the window in both copies
    // (in 1 MiB reads), plus the headers and both copies of the checkpoint.
    if (version == 2) CHECK(counted.read_bytes <= 4 * meta::kMinLogWindow + (2 << 20));
  }
}
