// The metadata store (fs/meta_store.h): basics, group commit, checkpoints,
// crash consistency at random cut points (fs/fault_device.h), corruption,
// decoder robustness, speed.
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

#include "fs/block_device.h"
#include "fs/fault_device.h"
#include "fs/meta_codec.h"
#include "fs/meta_store.h"

using namespace mmfs::fs;

namespace {

using Map = std::map<std::string, std::string>;

// ---------------------------------------------------------------------------
// A model of the state with an order-independent fingerprint updated per op.

std::uint64_t entry_hash(std::string_view k, std::string_view v) {
  std::string s;
  s.reserve(k.size() + v.size() + 8);
  const std::uint32_t kl = static_cast<std::uint32_t>(k.size());
  s.append(reinterpret_cast<const char*>(&kl), 4);
  s.append(k);
  s.append(v);
  return XXH3_64bits(s.data(), s.size());
}

struct Model {
  Map m;
  std::uint64_t fp = 0;
  void apply(const WriteBatch& b) {
    for (const auto& op : b.ops()) {
      auto it = m.find(op.key);
      if (it != m.end()) {
        fp -= entry_hash(it->first, it->second);
        if (op.is_put) {
          it->second = op.value;
        } else {
          m.erase(it);
        }
      } else if (op.is_put) {
        m.emplace(op.key, op.value);
      }
      if (op.is_put) fp += entry_hash(op.key, op.value);
    }
  }
  static Model of(const Map& map) {
    Model r;
    r.m = map;
    for (const auto& [k, v] : map) r.fp += entry_hash(k, v);
    return r;
  }
};

Map dump(const MetaStore& s, std::string_view prefix = "") {
  Map m;
  s.scan(prefix, [&](std::string_view k, std::string_view v) {
    m.emplace(std::string(k), std::string(v));
    return true;
  });
  return m;
}

std::unique_ptr<MetaStore> open_ok(BlockDevice& dev, const MetaRegion& region) {
  int err = -1;
  std::string msg;
  auto s = MetaStore::open(dev, region, &err, &msg);
  INFO("open: errno " << err << ": " << msg);
  REQUIRE(s != nullptr);
  return s;
}

meta::RegionHeader region_header(MemoryDevice& dev, const MetaRegion& region) {
  auto h = meta::decode_region_header(std::span<const std::byte>(dev.bytes()).subspan(region.offset, 4096));
  REQUIRE(h.has_value());
  return *h;
}

// "prefix" + decimal n (GCC 12 warns falsely on "literal" + std::string&&).
std::string num(const char* prefix, std::uint64_t n) {
  std::string s(prefix);
  s += std::to_string(n);
  return s;
}

std::string random_bytes(std::mt19937_64& rng, std::size_t lo, std::size_t hi) {
  std::string s(std::uniform_int_distribution<std::size_t>(lo, hi)(rng), '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// ---------------------------------------------------------------------------
// A workload shaped like filesystem metadata: i/<ino> inode blobs (first
// byte D or F), d/<parent>/<name> dirents (value: ino), x/<ino>/<name>
// xattrs, e/<ino> extent lists (16 bytes per extent).

class FsWorkload {
 public:
  explicit FsWorkload(std::uint64_t seed) : rng_(seed) {}

  WriteBatch next(const Map& m) {
    WriteBatch b;
    if (!m.count("i/1")) {
      b.put("i/1", blob('D', 40, 100));
      return b;
    }
    const auto inodes = keys(m, "i/");
    int op = std::uniform_int_distribution<int>(0, 99)(rng_);
    if (inodes.size() > 120 && op < 50) op = 50;  // keep the state bounded: unlink
    if (op < 22) {
      create(m, b, false);
    } else if (op < 27) {
      create(m, b, true);
    } else if (op < 40) {
      rename(m, b);
    } else if (op < 50) {
      setxattr(m, b);
    } else if (op < 62) {
      unlink(m, b);
    } else if (op < 67) {
      removexattr(m, b);
    } else if (op < 90) {
      extent_alloc(m, b);
    } else {
      extent_free(m, b);
    }
    if (b.empty()) create(m, b, false);
    return b;
  }

 private:
  static std::vector<std::string> keys(const Map& m, const std::string& prefix) {
    std::vector<std::string> out;
    for (auto it = m.lower_bound(prefix); it != m.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it)
      out.push_back(it->first);
    return out;
  }
  template <class V>
  const typename V::value_type* pick(const V& v) {
    if (v.empty()) return nullptr;
    return &v[std::uniform_int_distribution<std::size_t>(0, v.size() - 1)(rng_)];
  }
  std::string blob(char kind, std::size_t lo, std::size_t hi) {  // an inode: kind byte + attributes
    std::string s(1, kind);
    s += random_bytes(rng_, lo, hi);
    return s;
  }
  std::string random_dir(const Map& m) {
    std::vector<std::string> dirs;
    for (const auto& k : keys(m, "i/"))
      if (m.at(k)[0] == 'D') dirs.push_back(k.substr(2));
    return *pick(dirs);
  }
  std::string random_file(const Map& m) {  // an ino, or "" when there is none
    std::vector<std::string> files;
    for (const auto& k : keys(m, "i/"))
      if (m.at(k)[0] == 'F') files.push_back(k.substr(2));
    const std::string* f = pick(files);
    return f ? *f : std::string();
  }
  std::string fresh_dirent(const Map& m) {
    const std::string dir = "d/" + random_dir(m);
    std::string d;
    do {
      d = dir + num("/n", next_name_++);
    } while (m.count(d));
    return d;
  }
  void create(const Map& m, WriteBatch& b, bool dir) {
    // Unique even when a generator continues on a state it did not build.
    while (m.count(num("i/", next_ino_))) ++next_ino_;
    const std::string ino = std::to_string(next_ino_++);
    b.put("i/" + ino, blob(dir ? 'D' : 'F', 40, 120));
    b.put(fresh_dirent(m), ino);
  }
  void rename(const Map& m, WriteBatch& b) {
    const auto dirents = keys(m, "d/");
    const std::string* from = pick(dirents);
    if (!from) return;
    const std::string ino = m.at(*from);
    const std::string to = fresh_dirent(m);
    if (to == *from) return;
    b.del(*from);
    b.put(to, ino);
    b.put("i/" + ino, blob(m.at("i/" + ino)[0], 40, 120));  // ctime
  }
  void unlink(const Map& m, WriteBatch& b) {
    std::vector<std::string> file_dirents;
    for (const auto& k : keys(m, "d/"))
      if (m.at("i/" + m.at(k))[0] == 'F') file_dirents.push_back(k);
    const std::string* d = pick(file_dirents);
    if (!d) return;
    const std::string ino = m.at(*d);
    b.del(*d);
    b.del("i/" + ino);
    b.del("e/" + ino);
    for (const auto& x : keys(m, "x/" + ino + "/")) b.del(x);
  }
  void setxattr(const Map& m, WriteBatch& b) {
    const auto inodes = keys(m, "i/");
    const std::string ino = pick(inodes)->substr(2);
    b.put("x/" + ino + num("/user.", rng_() % 5), random_bytes(rng_, 0, 200));
  }
  void removexattr(const Map& m, WriteBatch& b) {
    const auto xs = keys(m, "x/");
    if (const std::string* x = pick(xs)) b.del(*x);
  }
  void extent_alloc(const Map& m, WriteBatch& b) {
    const std::string ino = random_file(m);
    if (ino.empty()) return;
    auto it = m.find("e/" + ino);
    std::string list = it == m.end() ? std::string() : it->second;
    if (list.size() >= 512) list.clear();  // defragmented into one extent
    list += random_bytes(rng_, 16, 16);
    b.put("e/" + ino, list);
    b.put("i/" + ino, blob('F', 40, 120));  // size, mtime
  }
  void extent_free(const Map& m, WriteBatch& b) {
    const auto es = keys(m, "e/");
    const std::string* e = pick(es);
    if (!e) return;
    const std::string& list = m.at(*e);
    if (list.size() <= 16) {
      b.del(*e);
    } else {
      b.put(*e, list.substr(0, list.size() / 32 * 16));
    }
  }

  std::mt19937_64 rng_;
  std::uint64_t next_ino_ = 2, next_name_ = 0;
};

// ---------------------------------------------------------------------------
// Devices for the tests.

// Records which writes went to the checkpoint slots and whether one is unflushed.
class TapDevice final : public BlockDevice {
 public:
  TapDevice(FaultInjectingDevice& inner, std::uint64_t slot_lo, std::uint64_t slot_hi)
      : inner_(inner), lo_(slot_lo), hi_(slot_hi) {}
  std::uint64_t size_bytes() const override { return inner_.size_bytes(); }
  std::uint32_t block_size() const override { return inner_.block_size(); }
  int submit(std::span<IoRequest> batch) override {
    const int rc = inner_.submit(batch);
    for (const IoRequest& r : batch) {
      if (r.op != IoRequest::Op::Write || r.result != 0) continue;
      if (r.offset >= lo_ && r.offset < hi_) {
        checkpoint_write_events.push_back(inner_.events());
        unflushed_checkpoint = true;
      } else {
        unflushed_other = true;
      }
    }
    return rc;
  }
  int flush() override {
    const int rc = inner_.flush();
    if (rc == 0) unflushed_checkpoint = unflushed_other = false;
    return rc;
  }
  std::vector<std::uint64_t> checkpoint_write_events;
  bool unflushed_checkpoint = false, unflushed_other = false;

 private:
  FaultInjectingDevice& inner_;
  std::uint64_t lo_, hi_;
};

// A MemoryDevice whose flush takes a while, like a real one: group commit matters.
class SlowFlushDevice final : public BlockDevice {
 public:
  SlowFlushDevice(MemoryDevice& inner, std::chrono::microseconds delay) : inner_(inner), delay_(delay) {}
  std::uint64_t size_bytes() const override { return inner_.size_bytes(); }
  std::uint32_t block_size() const override { return inner_.block_size(); }
  int submit(std::span<IoRequest> batch) override { return inner_.submit(batch); }
  int flush() override {
    std::this_thread::sleep_for(delay_);
    return inner_.flush();
  }

 private:
  MemoryDevice& inner_;
  std::chrono::microseconds delay_;
};

// ---------------------------------------------------------------------------
// One incarnation of a store under the crash test: the batches it applied,
// the fingerprint of the model after each, and the last one a sync covered.

struct Run {
  Model base;                      // the state at open
  std::vector<WriteBatch> batches;  // applied, in order
  std::vector<std::uint64_t> fps;  // fps[i]: after the first i batches (fps[0] = base)
  std::size_t last_synced = 0;     // batches [0, last_synced) were covered by a successful sync()
  bool failed = false;
  int explicit_checkpoints = 0;
};

void drive(MetaStore& store, FsWorkload& work, Run& run, int batches, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  // Per run, how often to sync: rarely (multi-block chunks, which a crash can
  // tear), sometimes, or nearly always.
  const double p_sync = std::array<double, 3>{0.05, 0.3, 0.6}[rng() % 3];
  Model m = run.base;
  run.fps.push_back(m.fp);
  for (int i = 0; i < batches; ++i) {
    const WriteBatch b = work.next(m.m);
    int rc = store.apply(b);
    if (rc == ENOSPC) continue;
    if (rc != 0) {
      REQUIRE(rc == EIO);
      run.failed = true;
      break;
    }
    m.apply(b);
    run.batches.push_back(b);
    run.fps.push_back(m.fp);
    const double r = std::uniform_real_distribution<double>(0, 1)(rng);
    if (r < p_sync || r >= 0.99) {
      rc = r < p_sync ? store.sync() : (++run.explicit_checkpoints, store.checkpoint());
      if (rc != 0) {
        REQUIRE(rc == EIO);
        run.failed = true;
        break;
      }
      run.last_synced = run.batches.size();
    }
  }
  if (run.failed) {  // a dead device stays dead: no pretended durability
    CHECK(store.sync() == EIO);
    CHECK(store.checkpoint() == EIO);
    WriteBatch b;
    b.put("z", "z");
    CHECK(store.apply(b) == EIO);
  }
}

// The recovered state must be the model after k batches for some k >= last_synced.
// Returns k.
std::size_t check_prefix(const Run& run, const Map& recovered, const std::string& what) {
  const std::uint64_t fp = Model::of(recovered).fp;
  for (std::size_t k = run.last_synced; k < run.fps.size(); ++k) {
    if (run.fps[k] != fp) continue;
    Model m = run.base;
    for (std::size_t i = 0; i < k; ++i) m.apply(run.batches[i]);
    if (m.m == recovered) return k;
  }
  FAIL(what << ": recovered state (" << recovered.size() << " keys) is not the state after any batch >= "
            << run.last_synced << " of " << run.batches.size());
  return 0;
}

constexpr std::uint64_t kDeviceBytes = 1 << 20;
constexpr MetaRegion kCrashRegion{64 * 1024, 512 * 1024};

}  // namespace

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
  const MetaRegion region{0, 256 * 1024};
  REQUIRE(MetaStore::format(dev, region) == 0);
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

TEST_CASE("meta: corruption is refused or yields a prefix state", "[meta][corrupt]") {
  // Build an image: checkpoints, a wrapped log, every batch synced at the end.
  auto mem = std::make_unique<MemoryDevice>(kDeviceBytes);
  REQUIRE(MetaStore::format(*mem, kCrashRegion) == 0);
  const meta::RegionHeader geo = region_header(*mem, kCrashRegion);
  Run run;
  {
    auto s = open_ok(*mem, kCrashRegion);
    FsWorkload work(42);
    drive(*s, work, run, 450, 42);
    REQUIRE(s->sync() == 0);
    Model m = run.base;
    for (const WriteBatch& b : run.batches) m.apply(b);
    for (int i = 0; i < 6; ++i) {  // end with several chunks after the newest checkpoint
      const WriteBatch b = work.next(m.m);
      REQUIRE(s->apply(b) == 0);
      REQUIRE(s->sync() == 0);
      m.apply(b);
      run.batches.push_back(b);
      run.fps.push_back(m.fp);
    }
    run.last_synced = run.batches.size();
    REQUIRE(s->stats().checkpoints >= 2);
    REQUIRE(s->stats().log_writes >= 10);
  }
  const std::vector<std::byte> good = mem->bytes();
  const std::uint64_t R = kCrashRegion.offset;
  auto slot_header = [&](int s) {
    auto h = meta::decode_checkpoint_header(std::span<const std::byte>(good).subspan(R + geo.slot_offset[s], 4096));
    REQUIRE(h.has_value());
    return *h;
  };
  const int newest = slot_header(1).sequence > slot_header(0).sequence ? 1 : 0;
  // The live log chunks (offset in the log area, header + payload bytes), walked like replay does.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> chunks;
  std::vector<bool> live(geo.log_length / 4096, false);
  {
    const auto ck = slot_header(newest);
    std::uint64_t pos = ck.log_position, seq = ck.next_chunk_seq;
    for (;;) {
      bool found = false;
      for (std::uint64_t at : {pos, std::uint64_t{0}}) {
        if (at + 4096 > geo.log_length) continue;
        auto c = meta::decode_chunk(std::span<const std::byte>(good).subspan(R + geo.log_offset + at,
                                                                             geo.log_length - at));
        if (!c || c->header.chunk_seq != seq || c->header.epoch != ck.sequence) continue;
        const std::uint64_t len = (meta::kChunkHeaderSize + c->header.payload_length + 4095) / 4096 * 4096;
        for (std::uint64_t b = at / 4096; b < (at + len) / 4096; ++b) live[b] = true;
        chunks.emplace_back(at, meta::kChunkHeaderSize + c->header.payload_length);
        pos = at + len;
        ++seq;
        found = true;
        break;
      }
      if (!found) break;
    }
  }
  REQUIRE(chunks.size() >= 2);
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

TEST_CASE("meta: decoders reject malformed input without crashing", "[meta][corrupt]") {
  std::mt19937_64 rng(5);
  auto seal = [](std::byte* p) {  // header checksum: XXH3 of bytes [0, 72) at 72
    const std::uint64_t h = XXH3_64bits(p, 72);
    std::memcpy(p + 72, &h, 8);  // little-endian host
  };
  auto set_u64 = [](std::byte* p, std::uint64_t v) { std::memcpy(p, &v, 8); };
  // A valid chunk to mutate.
  std::string payload;
  WriteBatch b1, b2;
  b1.put("i/1", "D");
  b1.del("x");
  b2.put("d/1/a", "2");
  meta::append_log_batch(payload, 7, b1);
  meta::append_log_batch(payload, 8, b2);
  std::vector<std::byte> chunk(meta::kChunkHeaderSize + payload.size());
  std::memcpy(chunk.data() + meta::kChunkHeaderSize, payload.data(), payload.size());
  meta::ChunkHeader h;
  h.nonce = 1, h.epoch = 1, h.chunk_seq = 3, h.first_batch = 7, h.last_batch = 8;
  h.payload_length = payload.size();
  h.payload_hash = XXH3_64bits(payload.data(), payload.size());
  meta::encode_chunk_header(h, chunk);
  auto c = meta::decode_chunk(chunk);
  REQUIRE(c.has_value());
  REQUIRE(c->batches.size() == 2);
  CHECK(c->batches[1].batch.ops()[0].key == "d/1/a");
  CHECK(c->batches[0].batch.ops()[1].is_put == false);
  CHECK(!meta::decode_chunk(std::span<const std::byte>(chunk).first(chunk.size() - 1)));

  meta::StateMap state{{"a", "1"}, {"b", std::string(100, 'x')}, {"c", ""}};
  std::vector<std::byte> ckpt(meta::checkpoint_bytes(state));
  meta::encode_checkpoint(meta::CheckpointHeader{}, state, ckpt);
  auto k = meta::decode_checkpoint(ckpt);
  REQUIRE(k.has_value());
  CHECK(k->state == state);

  int accepted = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    // Mutate the payload, then make the checksums right again so the parsers see it.
    std::vector<std::byte> m = (trial % 2 == 0) ? chunk : ckpt;
    const int n = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < n; ++i) {
      const std::size_t at = rng() % m.size();
      if (rng() % 2) {
        m[at] = static_cast<std::byte>(rng());
      } else if (at >= 8) {
        m[at] ^= std::byte{1};
      }
    }
    if (rng() % 3 == 0) m.resize(rng() % (m.size() + 1));
    if (m.size() >= 80) {
      if (rng() % 4 == 0) set_u64(m.data() + 56, rng() % 300);  // payload length
      const std::uint64_t plen = std::min<std::uint64_t>(
          m.size() - 80, [&] { std::uint64_t v; std::memcpy(&v, m.data() + 56, 8); return v; }());
      set_u64(m.data() + 64, XXH3_64bits(m.data() + 80, plen));
      seal(m.data());
    }
    const bool ok = trial % 2 == 0 ? meta::decode_chunk(m).has_value() : meta::decode_checkpoint(m).has_value();
    accepted += ok;
    (void)meta::decode_region_header(m);
  }
  INFO("accepted " << accepted);
  CHECK(accepted < 20000);
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
