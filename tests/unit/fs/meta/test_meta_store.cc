// The metadata store (fs/meta/meta_store.h): basics, group commit, checkpoints,
// crash consistency at random cut points (fs/device/fault_device.h), corruption,
// speed. The decoders' robustness is tested in test_meta_codec.cc.
#include <catch2/catch.hpp>
#include <xxhash.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "fs/device/block_device.h"
#include "fs/device/fault_device.h"
#include "fs/meta/meta_codec.h"
#include "fs/meta/meta_store.h"

using namespace mmfs::fs;

#include "tests/unit/support/meta_test_support.h"

using namespace mmfs_test_meta;

// ---------------------------------------------------------------------------

TEST_CASE("meta: format, apply, sync, reopen, scan, stats", "[meta]") {
  MemoryDevice dev(kDeviceBytes);
  const MetaRegion region{4096 * 4, 512 * 1024};
  REQUIRE(MetaStore::format(dev, region) == 0);

  {
    auto s = open_ok(dev, region);
    CHECK(dump(*s).empty());
    CHECK(s->stats().state_bytes == meta::kCheckpointHeaderSize);
    std::uint64_t seq = 0;
    for (int i = 0; i < 10; ++i) {
      WriteBatch b;
      b.put(num("d/1/f", i), std::to_string(100 + i));
      b.put(num("i/", 100 + i), num("inode ", i));
      REQUIRE(s->apply(b, &seq) == 0);
      CHECK(seq == static_cast<std::uint64_t>(i + 1));
    }
    WriteBatch b;
    b.del("d/1/f3");
    b.del("i/103");
    b.del("no/such/key");
    b.put("d/2/g", "x");
    b.del("d/2/g");           // later ops of a batch see earlier ones
    b.put("d/2/h", "first");
    b.put("d/2/h", "second");
    REQUIRE(s->apply(b, &seq) == 0);
    CHECK(seq == 11);
    CHECK(s->apply(WriteBatch{}, &seq) == 0);  // empty: nothing to do
    CHECK(seq == 11);

    CHECK(s->get("d/1/f3") == std::nullopt);
    CHECK(s->get("d/2/g") == std::nullopt);
    CHECK(s->get("d/2/h") == "second");
    CHECK(s->get("i/105") == "inode 5");

    MetaStats st = s->stats();
    CHECK(st.batches_applied == 11);
    CHECK(st.batches_durable == 0);
    CHECK(st.flushes == 0);
    REQUIRE(s->sync() == 0);
    st = s->stats();
    CHECK(st.batches_durable == 11);
    CHECK(st.flushes == 1);
    CHECK(st.log_writes == 1);
    CHECK(st.flushes < st.batches_applied);
    CHECK(st.log_bytes_used == 4096);
    CHECK(st.log_bytes_total == region_header(dev, region).log_length);
    const Map all = dump(*s);
    CHECK(st.state_bytes == meta::checkpoint_bytes(meta::StateMap(all.begin(), all.end())));
    REQUIRE(s->sync() == 0);  // nothing new: no flush
    CHECK(s->stats().flushes == 1);

    // Scan: ascending order, prefix filtering, early stop.
    std::vector<std::string> ks;
    s->scan("d/1/", [&](std::string_view k, std::string_view) {
      ks.emplace_back(k);
      return true;
    });
    CHECK(ks == std::vector<std::string>{"d/1/f0", "d/1/f1", "d/1/f2", "d/1/f4", "d/1/f5", "d/1/f6", "d/1/f7",
                                         "d/1/f8", "d/1/f9"});
    int visited = 0;
    s->scan("i/", [&](std::string_view, std::string_view) { return ++visited < 3; });
    CHECK(visited == 3);
    CHECK(dump(*s, "zz").empty());
    CHECK(dump(*s, "d/2").size() == 1);

    // Reopen (the first store stays alive, nothing unsynced).
    auto r = open_ok(dev, region);
    CHECK(dump(*r) == all);
    CHECK(r->stats().state_bytes == st.state_bytes);

    // Unsynced batches are not on disk.
    WriteBatch u;
    u.put("unsynced", "1");
    REQUIRE(s->apply(u) == 0);
    CHECK(dump(*open_ok(dev, region)) == all);
    REQUIRE(s->checkpoint() == 0);
    CHECK(s->stats().checkpoints == 1);
    CHECK(s->stats().log_bytes_used == 0);
    auto after = open_ok(dev, region);
    CHECK(after->get("unsynced") == "1");
    // Continues the sequence numbers of the store it was opened from.
    WriteBatch n;
    n.put("next", "1");
    REQUIRE(after->apply(n, &seq) == 0);
    CHECK(seq == 13);
  }

  // Misuse and non-metadata regions.
  int err = 0;
  std::string msg;
  CHECK(MetaStore::format(dev, MetaRegion{100, 512 * 1024}) == EINVAL);
  CHECK(MetaStore::format(dev, MetaRegion{0, 32 * 1024}) == EINVAL);
  CHECK(MetaStore::format(dev, MetaRegion{kDeviceBytes - 64 * 1024, 128 * 1024}) == EINVAL);
  CHECK(MetaStore::open(dev, MetaRegion{4096, 512 * 1024}, &err, &msg) == nullptr);
  CHECK(err == EUCLEAN);
  CHECK(msg.find("magic") != std::string::npos);
  CHECK(MetaStore::open(dev, MetaRegion{4096 * 4, 256 * 1024}, &err, &msg) == nullptr);
  CHECK(err == EUCLEAN);  // same header, different length
  CHECK(msg.find("region length") != std::string::npos);

  // The smallest region works.
  MemoryDevice small(64 * 1024);
  REQUIRE(MetaStore::format(small, MetaRegion{0, 64 * 1024}) == 0);
  auto s = open_ok(small, MetaRegion{0, 64 * 1024});
  for (int i = 0; i < 200; ++i) {
    WriteBatch b;
    b.put(num("k", i % 20), std::string(300, static_cast<char>('a' + i % 26)));
    REQUIRE(s->apply(b) == 0);
    REQUIRE(s->sync() == 0);
  }
  CHECK(s->stats().checkpoints > 0);
  CHECK(dump(*open_ok(small, MetaRegion{0, 64 * 1024})) == dump(*s));
}

TEST_CASE("meta: group commit, 8 threads x 2000 batches", "[meta]") {
  MemoryDevice mem(8 << 20);
  const MetaRegion region{0, 8 << 20};
  REQUIRE(MetaStore::format(mem, region) == 0);
  SlowFlushDevice dev(mem, std::chrono::microseconds(100));
  auto s = open_ok(dev, region);

  constexpr int kThreads = 8, kBatches = 2000;
  std::atomic<int> errors{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kBatches; ++i) {
        WriteBatch b;
        b.put(num("t", t) + num("/", i), std::string(20, 'v'));
        if (i % 2 == 1) b.del(num("t", t) + num("/", i - 1));
        if (s->apply(b) != 0 || s->sync() != 0) ++errors;
        // Its own batch is durable now: the durable count covers it.
        if (s->stats().batches_durable < static_cast<std::uint64_t>(i + 1)) ++errors;
      }
    });
  }
  std::thread reader([&] {  // readers run alongside (shared lock)
    std::uint64_t seen = 0;
    while (!done) {
      s->scan("t3/", [&](std::string_view, std::string_view) { return ++seen % 100 != 0; });
      (void)s->get("t0/1998");
    }
  });
  for (auto& th : threads) th.join();
  done = true;
  reader.join();
  CHECK(errors == 0);
  const MetaStats st = s->stats();
  INFO("flushes " << st.flushes << ", log writes " << st.log_writes << ", checkpoints " << st.checkpoints);
  std::printf("meta group commit: %d batches, %llu flushes (%llu log writes, %llu checkpoints)\n",
              kThreads * kBatches, static_cast<unsigned long long>(st.flushes),
              static_cast<unsigned long long>(st.log_writes), static_cast<unsigned long long>(st.checkpoints));
  CHECK(st.batches_applied == kThreads * kBatches);
  CHECK(st.batches_durable == kThreads * kBatches);
  // Sharing is scheduling-dependent (a sanitizer build shares less), so the
  // bound only proves that flushes are shared at all, not how well.
  CHECK(st.flushes < kThreads * kBatches / 2);
  const Map all = dump(*s);
  CHECK(all.size() == kThreads * kBatches / 2);
  CHECK(dump(*open_ok(mem, region)) == all);
}

TEST_CASE("meta: checkpoints and log wrap-around, state limit", "[meta]") {
  MemoryDevice dev(kDeviceBytes);
  const std::uint32_t version = GENERATE(1u, 2u);
  // Version 2 keeps two copies: twice the region for the same slots and log.
  const MetaRegion region{0, version * 256u * 1024};
  INFO("format version " << version);
  REQUIRE(MetaStore::format(dev, region, version) == 0);
  const meta::RegionHeader geo = region_header(dev, region);
  std::mt19937_64 rng(7);
  Model model;
  auto s = open_ok(dev, region);
  std::uint64_t logged = 0;
  for (int i = 0; i < 6000; ++i) {
    WriteBatch b;
    const int n = 1 + static_cast<int>(rng() % 4);
    for (int j = 0; j < n; ++j) {
      const std::string key = num("k", rng() % 300);
      if (rng() % 5 == 0) {
        b.del(key);
      } else {
        b.put(key, random_bytes(rng, 10, 200));
      }
    }
    REQUIRE(s->apply(b) == 0);
    model.apply(b);
    logged += meta::log_batch_bytes(b);
    if (rng() % 3 == 0) REQUIRE(s->sync() == 0);
    if (i % 1500 == 1499) {
      REQUIRE(s->sync() == 0);
      CHECK(dump(*open_ok(dev, region)) == model.m);
    }
  }
  REQUIRE(s->sync() == 0);
  const MetaStats st = s->stats();
  INFO("log " << geo.log_length << " bytes, batches encoded " << logged << " bytes, checkpoints " << st.checkpoints);
  CHECK(logged > 10 * geo.log_length);
  CHECK(st.checkpoints >= 10);
  CHECK(st.log_bytes_used <= st.log_bytes_total);
  CHECK(dump(*s) == model.m);
  CHECK(dump(*open_ok(dev, region)) == model.m);

  // A batch larger than the whole log: a checkpoint makes it durable.
  {
    WriteBatch big;
    for (int j = 0; j < 300; ++j) big.del(num("k", j));
    for (int j = 0; j < 160; ++j) big.put(num("big", j), std::string(400, 'b'));
    REQUIRE(meta::log_batch_bytes(big) > geo.log_length);
    const std::uint64_t before = s->stats().checkpoints;
    REQUIRE(s->apply(big) == 0);
    REQUIRE(s->sync() == 0);
    model.apply(big);
    CHECK(s->stats().checkpoints == before + 1);
    CHECK(dump(*open_ok(dev, region)) == model.m);
  }

  // Fill the state up to the slot size: ENOSPC, nothing applied.
  int refused = 0;
  for (int i = 0; i < 1000 && refused == 0; ++i) {
    WriteBatch b;
    const std::string key = num("fill", i);
    b.put(key, std::string(3000, 'f'));
    b.del("k1");
    const MetaStats before = s->stats();
    const int rc = s->apply(b);
    if (rc == ENOSPC) {
      ++refused;
      CHECK(dump(*s) == model.m);
      CHECK(s->stats().state_bytes == before.state_bytes);
      CHECK(s->stats().batches_applied == before.batches_applied);
      CHECK(before.state_bytes + meta::checkpoint_entry_bytes(key.size(), 3000) > geo.slot_length);
    } else {
      REQUIRE(rc == 0);
      model.apply(b);
      CHECK(s->stats().state_bytes <= geo.slot_length);
    }
    REQUIRE(s->sync() == 0);
  }
  CHECK(refused == 1);
  CHECK(s->checkpoint() == 0);  // a full state still fits its slot
  CHECK(dump(*open_ok(dev, region)) == model.m);
  // Deleting makes room again; a batch that shrinks the state is accepted even when full.
  WriteBatch shrink;
  shrink.del("fill0");
  shrink.put("fill0b", std::string(1000, 'g'));
  REQUIRE(s->apply(shrink) == 0);
  model.apply(shrink);
  REQUIRE(s->sync() == 0);
  CHECK(dump(*open_ok(dev, region)) == model.m);
  // Empty keys and values are fine.
  WriteBatch empty_kv;
  empty_kv.put(std::string(), std::string());
  REQUIRE(s->apply(empty_kv) == 0);
  model.apply(empty_kv);
  REQUIRE(s->sync() == 0);
  CHECK(dump(*open_ok(dev, region)) == model.m);
}

TEST_CASE("meta: crash consistency at random cut points", "[meta][crash]") {
  const int kCutPoints = 1000;
  const int kBatches = 300, kLaterBatches = 100;
  std::uint64_t total_events = 0, mid_checkpoint = 0, mid_log = 0, cut_after_end = 0, exact = 0, later = 0;
  std::uint64_t later_incarnations = 0, later_exact = 0, checkpoints = 0, reopened_mid_ckpt_new = 0;
  std::uint64_t auto_checkpoints = 0, wraps = 0;
  for (int cp = 0; cp < kCutPoints; ++cp) {
    const std::uint64_t seed = 1000 + cp;
    INFO("cut point #" << cp << " seed " << seed);
    std::mt19937_64 rng(seed * 7919);

    auto formatted = [&] {
      auto mem = std::make_unique<MemoryDevice>(kDeviceBytes);
      REQUIRE(MetaStore::format(*mem, kCrashRegion) == 0);
      return mem;
    };
    auto mem0 = formatted();
    const meta::RegionHeader geo = region_header(*mem0, kCrashRegion);
    const std::uint64_t slot_lo = kCrashRegion.offset + geo.slot_offset[0];
    const std::uint64_t slot_hi = kCrashRegion.offset + geo.slot_offset[1] + geo.slot_length;

    // Dry run: how many events the workload makes, which are checkpoint writes.
    std::uint64_t events = 0;
    std::vector<std::uint64_t> ckpt_events;
    {
      FaultInjectingDevice fault(std::move(mem0), seed);
      TapDevice tap(fault, slot_lo, slot_hi);
      auto s = open_ok(tap, kCrashRegion);
      FsWorkload work(seed);
      Run run;
      drive(*s, work, run, kBatches, seed);
      REQUIRE(!run.failed);
      events = fault.events();
      ckpt_events = tap.checkpoint_write_events;
      checkpoints += s->stats().checkpoints;
      auto_checkpoints += s->stats().checkpoints - run.explicit_checkpoints;
      wraps += s->stats().log_writes * 4096 / geo.log_length;  // about: chunks are mostly one block
    }
    total_events += events;

    // The real run, cut at one event: every third cut point lands right after a
    // checkpoint write (unflushed: kept, lost or torn by the crash).
    std::uint64_t cut;
    if (cp % 3 == 0 && !ckpt_events.empty()) {
      cut = ckpt_events[rng() % ckpt_events.size()];
    } else {
      cut = std::uniform_int_distribution<std::uint64_t>(1, events + 1)(rng);
    }
    auto fault = std::make_unique<FaultInjectingDevice>(formatted(), seed ^ 0x5eed);
    fault->fail_after(cut);
    Run run;
    bool in_ckpt = false;
    {
      TapDevice tap(*fault, slot_lo, slot_hi);
      auto s = open_ok(tap, kCrashRegion);
      FsWorkload work(seed);
      drive(*s, work, run, kBatches, seed);
      CHECK(run.failed == (cut < events));
      in_ckpt = tap.unflushed_checkpoint;
      if (tap.unflushed_checkpoint) ++mid_checkpoint;
      if (tap.unflushed_other) ++mid_log;
      if (cut >= events) ++cut_after_end;
    }
    std::unique_ptr<MemoryDevice> image = fault->crash_image();
    FsWorkload later_work(seed + 1'000'000);
    for (int inc = 0;; ++inc) {
      INFO("incarnation " << inc << ", cut " << cut << " of " << events << " events, last synced "
                          << run.last_synced << " of " << run.batches.size() << " batches");
      std::size_t k;
      {
        int err = 0;
        std::string msg;
        auto s = MetaStore::open(*image, kCrashRegion, &err, &msg);
        INFO("open: errno " << err << ": " << msg);
        REQUIRE(s != nullptr);
        k = check_prefix(run, dump(*s), "after crash");
      }
      if (inc == 0) {
        (k == run.last_synced ? exact : later) += 1;
        if (in_ckpt && k > run.last_synced) ++reopened_mid_ckpt_new;
      } else {
        ++later_incarnations;
        if (k == run.last_synced) ++later_exact;
      }
      if (inc == 2) break;
      // Recover and go on from the recovered state, then crash again.
      Model recovered = run.base;
      for (std::size_t i = 0; i < k; ++i) recovered.apply(run.batches[i]);
      auto f = std::make_unique<FaultInjectingDevice>(std::move(image), seed * 31 + inc);
      const std::uint64_t cut2 = std::uniform_int_distribution<std::uint64_t>(1, 150)(rng);
      f->fail_after(cut2);
      run = Run{};
      run.base = recovered;
      {
        auto s = open_ok(*f, kCrashRegion);
        drive(*s, later_work, run, kLaterBatches, seed * 131 + inc);
      }
      image = f->crash_image();
      cut = cut2;
    }
  }
  std::printf(
      "meta crash test: %d cut points (%llu events in all; dry runs: %llu checkpoints, %llu of them because the "
      "log was full, ~%llu log wrap-arounds); crash with an "
      "unflushed checkpoint write %llu (%llu of them reopened past last_synced), with an unflushed log write %llu, "
      "after the end %llu; reopened to exactly last_synced %llu, later %llu; %llu further incarnations "
      "(%llu exact)\n",
      kCutPoints, static_cast<unsigned long long>(total_events), static_cast<unsigned long long>(checkpoints),
      static_cast<unsigned long long>(auto_checkpoints), static_cast<unsigned long long>(wraps),
      static_cast<unsigned long long>(mid_checkpoint), static_cast<unsigned long long>(reopened_mid_ckpt_new),
      static_cast<unsigned long long>(mid_log), static_cast<unsigned long long>(cut_after_end),
      static_cast<unsigned long long>(exact), static_cast<unsigned long long>(later),
      static_cast<unsigned long long>(later_incarnations), static_cast<unsigned long long>(later_exact));
  CHECK(mid_checkpoint >= kCutPoints / 4);
  CHECK(later > 0);
  CHECK(auto_checkpoints >= static_cast<std::uint64_t>(kCutPoints));
}

TEST_CASE("meta: version 1: corruption is refused or yields a prefix state", "[meta][corrupt]") {
  // Version 1 regions (one copy of everything): any damage to a live
  // structure is refused or loses the batches behind it.
  const CorruptionImage image = build_corruption_image(1);
  const std::vector<std::byte>& good = image.good;
  const meta::RegionHeader& geo = image.geo;
  const Run& run = image.run;
  const std::uint64_t R = kCrashRegion.offset;
  auto slot_header = [&](int s) { return image.slot_header(s); };
  const int newest = image.newest;
  const auto& chunks = image.chunks;
  const auto& live = image.live;
  INFO("newest slot " << newest << ", live log chunks " << chunks.size());

  std::mt19937_64 rng(99);
  enum Area { kHeader, kOldSlot, kNewSlot, kLogMiddle, kLogLast, kDeadLog, kAreas };
  const char* names[kAreas] = {"region header", "older slot", "newest slot", "earlier chunk", "last chunk",
                               "stale log"};
  std::uint64_t refused[kAreas] = {}, full[kAreas] = {}, stale[kAreas] = {};
  for (int trial = 0; trial < 1200; ++trial) {
    const Area area = static_cast<Area>(trial % kAreas);
    std::uint64_t lo = 0, len = 0;
    switch (area) {
      case kHeader:
        lo = R, len = meta::kRegionHeaderSize;
        break;
      case kOldSlot:
      case kNewSlot: {
        const int s = area == kNewSlot ? newest : 1 - newest;
        lo = R + geo.slot_offset[s];
        len = meta::kCheckpointHeaderSize + slot_header(s).payload_length;
        break;
      }
      case kLogMiddle:
      case kLogLast: {
        const auto& c = area == kLogLast ? chunks.back() : chunks[rng() % (chunks.size() - 1)];
        lo = R + geo.log_offset + c.first;
        len = c.second;
        break;
      }
      case kDeadLog: {
        std::vector<std::uint64_t> blocks;
        for (std::size_t b = 0; b < live.size(); ++b)
          if (!live[b]) blocks.push_back(b);
        if (blocks.empty()) continue;
        lo = R + geo.log_offset + blocks[rng() % blocks.size()] * 4096;
        len = 4096;
        break;
      }
      default:
        break;
    }
    auto img = std::make_unique<MemoryDevice>(kDeviceBytes);
    img->bytes() = good;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int f = 0; f < flips; ++f) {
      const std::uint64_t bit = rng() % (len * 8);
      img->bytes()[lo + bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
    }
    int err = 0;
    std::string msg;
    auto s = MetaStore::open(*img, kCrashRegion, &err, &msg);
    INFO("trial " << trial << " in the " << names[area] << ": errno " << err << " " << msg);
    if (!s) {
      CHECK(err == EUCLEAN);
      CHECK(!msg.empty());
      ++refused[area];
      continue;
    }
    Run any = run;
    any.last_synced = 0;  // any prefix state is acceptable here
    const std::size_t k = check_prefix(any, dump(*s), names[area]);
    (k == run.batches.size() ? full : stale)[area] += 1;
    if (area == kHeader || area == kLogMiddle) FAIL("corruption in the " << names[area] << " was accepted");
    if (area == kOldSlot || area == kDeadLog) CHECK(k == run.batches.size());
    if (area == kLogLast) CHECK(k < run.batches.size());
  }
  for (int a = 0; a < kAreas; ++a)
    std::printf("meta corruption, %-14s: refused %3llu, full state %3llu, older prefix state %3llu\n", names[a],
                static_cast<unsigned long long>(refused[a]), static_cast<unsigned long long>(full[a]),
                static_cast<unsigned long long>(stale[a]));
  CHECK(refused[kNewSlot] > 0);

  // Bit flips on reads, anywhere: refused or a prefix state.
  std::uint64_t read_refused = 0, read_ok = 0;
  for (int trial = 0; trial < 300; ++trial) {
    auto img = std::make_unique<MemoryDevice>(kDeviceBytes);
    img->bytes() = good;
    FaultInjectingDevice f(std::move(img), trial);
    f.set_read_bitflip_probability(0.2);
    int err = 0;
    std::string msg;
    auto s = MetaStore::open(f, kCrashRegion, &err, &msg);
    INFO("read-flip trial " << trial << ": errno " << err << " " << msg);
    if (!s) {
      CHECK(err == EUCLEAN);
      ++read_refused;
      continue;
    }
    Run any = run;
    any.last_synced = 0;
    check_prefix(any, dump(*s), "read bit flips");
    ++read_ok;
  }
  std::printf("meta corruption, read flips: refused %llu, opened %llu\n",
              static_cast<unsigned long long>(read_refused), static_cast<unsigned long long>(read_ok));
}

TEST_CASE("meta: speed", "[meta][speed]") {
  const std::uint64_t kRegionBytes = 64ull << 20;
  std::string path = num("/var/tmp/mmfs-meta-speed-", ::getpid()) + ".img";
  std::unique_ptr<BlockDevice> dev;
  std::unique_ptr<MemoryDevice> mem;
  const char* where = "real image file (O_DIRECT)";
  for (bool direct : {true, false}) {
    OpenOptions o;
    o.create = true;
    o.create_size = kRegionBytes;
    o.direct = direct;
    int err = 0;
    std::string msg;
    dev = open_device(path, o, &err, &msg);
    if (dev) break;
    where = "real image file (buffered)";
  }
  if (!dev) {
    mem = std::make_unique<MemoryDevice>(kRegionBytes);
    where = "MemoryDevice";
  }
  BlockDevice& d = dev ? *dev : *mem;
  const MetaRegion region{0, kRegionBytes};
  REQUIRE(MetaStore::format(d, region) == 0);
  auto s = open_ok(d, region);

  const int kOps = 100000;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kOps; ++i) {
    WriteBatch b;
    b.put(num("i/", i), std::string(64, 'n'));
    REQUIRE(s->apply(b) == 0);
    if (i % 1000 == 999) REQUIRE(s->sync() == 0);
  }
  auto t1 = std::chrono::steady_clock::now();
  const double secs = std::chrono::duration<double>(t1 - t0).count();
  std::printf("meta speed on %s: %d single-put batches, sync every 1000: %.0f ops/s (%llu flushes)\n", where, kOps,
              kOps / secs, static_cast<unsigned long long>(s->stats().flushes));

  const int kCommits = 200;
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kCommits; ++i) {
    WriteBatch b;
    b.put(num("lat/", i), std::string(100, 'l'));
    REQUIRE(s->apply(b) == 0);
    REQUIRE(s->sync() == 0);
  }
  t1 = std::chrono::steady_clock::now();
  std::printf("meta speed on %s: isolated commit (apply + sync of one small batch): %.1f us average over %d\n",
              where, std::chrono::duration<double, std::micro>(t1 - t0).count() / kCommits, kCommits);
  const Map all = dump(*s);
  s.reset();
  CHECK(dump(*open_ok(d, region)) == all);
  dev.reset();
  ::unlink(path.c_str());
}
