// Support for the metadata store's tests (test_meta_store.cc,
// test_meta_open.cc): a model of the state with an order-independent
// fingerprint, a filesystem-shaped workload, devices that tap or slow down
// I/O, and the run/prefix bookkeeping of the crash and corruption tests.
#pragma once

#include <catch2/catch.hpp>
#include <xxhash.h>

#include <array>
#include <chrono>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fs/device/block_device.h"
#include "fs/device/fault_device.h"
#include "fs/meta/meta_codec.h"
#include "fs/meta/meta_store.h"

namespace mmfs_test_meta {

using namespace mmfs::fs;

using Map = std::map<std::string, std::string>;

// ---------------------------------------------------------------------------
// A model of the state with an order-independent fingerprint updated per op.

inline std::uint64_t entry_hash(std::string_view k, std::string_view v) {
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

inline Map dump(const MetaStore& s, std::string_view prefix = "") {
  Map m;
  s.scan(prefix, [&](std::string_view k, std::string_view v) {
    m.emplace(std::string(k), std::string(v));
    return true;
  });
  return m;
}

inline std::unique_ptr<MetaStore> open_ok(BlockDevice& dev, const MetaRegion& region) {
  int err = -1;
  std::string msg;
  auto s = MetaStore::open(dev, region, &err, &msg);
  INFO("open: errno " << err << ": " << msg);
  REQUIRE(s != nullptr);
  return s;
}

inline meta::RegionHeader region_header(MemoryDevice& dev, const MetaRegion& region) {
  auto h = meta::decode_region_header(std::span<const std::byte>(dev.bytes()).subspan(region.offset, 4096));
  REQUIRE(h.has_value());
  return *h;
}

// "prefix" + decimal n (GCC 12 warns falsely on "literal" + std::string&&).
inline std::string num(const char* prefix, std::uint64_t n) {
  std::string s(prefix);
  s += std::to_string(n);
  return s;
}

inline std::string random_bytes(std::mt19937_64& rng, std::size_t lo, std::size_t hi) {
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

inline void drive(MetaStore& store, FsWorkload& work, Run& run, int batches, std::uint64_t seed) {
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
inline std::size_t check_prefix(const Run& run, const Map& recovered, const std::string& what) {
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

inline constexpr std::uint64_t kDeviceBytes = 1 << 20;
inline constexpr MetaRegion kCrashRegion{64 * 1024, 512 * 1024};

// An image of kCrashRegion for the corruption tests: checkpoints, a wrapped
// log, several chunks after the newest checkpoint, every batch synced.
// Offsets are those of copy 0 (copy 1, if any, is at geo.copy_stride()).
struct CorruptionImage {
  std::vector<std::byte> good;
  Run run;
  meta::RegionHeader geo;
  int newest = 0;                                              // slot of the newest checkpoint
  std::vector<std::pair<std::uint64_t, std::uint64_t>> chunks;  // live chunks: offset in the log, bytes
  std::vector<bool> live;                                      // per log block: part of a live chunk
  meta::CheckpointHeader slot_header(int s) const {
    auto h = meta::decode_checkpoint_header(
        std::span<const std::byte>(good).subspan(kCrashRegion.offset + geo.slot_offset[s], 4096));
    REQUIRE(h.has_value());
    return *h;
  }
};

inline CorruptionImage build_corruption_image(std::uint32_t version) {
  CorruptionImage image;
  // Build an image: checkpoints, a wrapped log, every batch synced at the end.
  auto mem = std::make_unique<MemoryDevice>(kDeviceBytes);
  REQUIRE(MetaStore::format(*mem, kCrashRegion, version) == 0);
  const meta::RegionHeader geo = image.geo = region_header(*mem, kCrashRegion);
  Run& run = image.run;
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
  image.good = mem->bytes();
  const std::vector<std::byte>& good = image.good;
  const std::uint64_t R = kCrashRegion.offset;
  auto slot_header = [&](int s) { return image.slot_header(s); };
  const int newest = image.newest = slot_header(1).sequence > slot_header(0).sequence ? 1 : 0;
  // The live log chunks (offset in the log area, header + payload bytes), walked like replay does.
  auto& chunks = image.chunks;
  auto& live = image.live;
  live.assign(geo.log_length / 4096, false);
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
  return image;
}


}  // namespace mmfs_test_meta
