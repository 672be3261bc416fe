// Shared by the unit tests of fs/ data paths (test_array_file.cc,
// test_plain_file.cc): a small disk geometry, device adapters, and bytes to
// write and compare.
#pragma once

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "fs/device/block_device.h"
#include "fs/device/fault_device.h"
#include "geometry/geometry.h"
#include "geometry/load.h"

namespace mmfs::fs::testing {

using Bytes = std::vector<std::uint8_t>;

// "" when the bytes are equal, else a one-line description of the first
// difference (Catch would print both vectors whole).
inline std::string bytes_diff(const Bytes& got, const Bytes& want) {
  if (got == want) return "";
  std::size_t i = 0, n = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  for (std::size_t k = 0; k < std::min(got.size(), want.size()); ++k) n += got[k] != want[k];
  std::string s = "got " + std::to_string(got.size()) + " bytes, want " + std::to_string(want.size()) +
                  "; first difference at byte " + std::to_string(i);
  if (i < got.size() && i < want.size())
    s += " (got " + std::to_string(got[i]) + ", want " + std::to_string(want[i]) + ")";
  return s + "; " + std::to_string(n) + " bytes differ";
}

inline Bytes random_bytes(std::mt19937_64& rng, std::size_t n) {
  Bytes b(n);
  for (auto& x : b) x = std::uint8_t(rng());
  return b;
}

// docs/reference.md §7's toy disk (uniform, 8 sectors a track), with enough cylinders for
// a 4 MiB metadata region and ~4 MiB of data.
inline std::unique_ptr<geom::Geometry> toy_disk() {
  return geom::load_geometry(nlohmann::json{{"kind", "disk"},          {"sector_size", 512},
                                            {"cylinders", 2000},       {"surfaces", 1},
                                            {"sectors_per_track", 8},  {"rpm", 10000},
                                            {"track_skew_sectors", 0}, {"settle_ms", 0},
                                            {"settle_cylinders", 4},   {"conservatism_deg", 0},
                                            {"name", "toy"}});
}

// Forwards to a device the test owns, so a volume can be closed (or the
// device damaged) and the same device opened again.
class RefDevice final : public BlockDevice {
 public:
  explicit RefDevice(BlockDevice& d) : d_(d) {}
  std::uint64_t size_bytes() const override { return d_.size_bytes(); }
  std::uint32_t block_size() const override { return d_.block_size(); }
  int submit(std::span<IoRequest> batch) override {
    for (const IoRequest& r : batch)
      if (r.op == IoRequest::Op::Read) bytes_read += r.length;
    if (!failing.empty()) {
      // Reads that touch a failing byte range fail with EIO; the rest run.
      int first = 0;
      std::vector<IoRequest> pass;
      std::vector<std::size_t> where;
      for (std::size_t i = 0; i < batch.size(); ++i) {
        IoRequest& r = batch[i];
        bool bad = false;
        for (const auto& [begin, end] : failing)
          bad = bad || (r.op == IoRequest::Op::Read && r.offset < end && begin < r.offset + r.length);
        if (bad) {
          r.result = EIO;
          first = first ? first : EIO;
        } else {
          pass.push_back(r);
          where.push_back(i);
        }
      }
      const int e = d_.submit(pass);
      for (std::size_t j = 0; j < pass.size(); ++j) batch[where[j]].result = pass[j].result;
      return first ? first : e;
    }
    if (fail_reads) {
      bool any = false;
      for (IoRequest& r : batch)
        if (r.op == IoRequest::Op::Read) {
          r.result = EIO;
          any = true;
        }
      if (any) return EIO;
    }
    return d_.submit(batch);
  }
  int flush() override { return d_.flush(); }
  // Every read of a batch fails with EIO (and nothing of it runs): a device
  // that stopped answering.
  bool fail_reads = false;
  // Byte ranges [begin, end) no read can touch (bad sectors, a lost member).
  std::vector<std::pair<std::uint64_t, std::uint64_t>> failing;
  // The bytes of every read asked for (a test's measure of the work done).
  std::atomic<std::uint64_t> bytes_read{0};

 private:
  BlockDevice& d_;
};

// The daemon killed (SIGKILL) after `events` device writes and flushes: the
// device keeps every write issued before (the kernel has them; no power was
// lost), and every later write or flush fails with EIO (nothing after the
// kill happens). The device the test owns is then the image a new mount sees.
class KilledAfter final : public BlockDevice {
 public:
  KilledAfter(BlockDevice& d, std::uint64_t events) : d_(d), left_(events) {}
  std::uint64_t size_bytes() const override { return d_.size_bytes(); }
  std::uint32_t block_size() const override { return d_.block_size(); }
  int submit(std::span<IoRequest> batch) override {
    bool writes = false;
    for (const IoRequest& r : batch) writes |= r.op == IoRequest::Op::Write;
    if (writes && !pass()) {
      for (IoRequest& r : batch) r.result = EIO;
      return EIO;
    }
    return d_.submit(batch);
  }
  int flush() override { return pass() ? d_.flush() : EIO; }
  std::uint64_t events() const { return events_; }

 private:
  bool pass() {
    ++events_;
    return left_ == 0 || events_ <= left_;
  }
  BlockDevice& d_;
  std::uint64_t left_;  // 0: never killed (counts the events)
  std::uint64_t events_ = 0;
};

// The daemon killed at every device event of `run(BlockDevice&)`: run once on
// a copy of `golden` to count its events, then once per cut k = 1..events
// (and k = events + 1, never killed, when `and_unkilled`) on a fresh copy
// killed after k events; check(image, k) then looks at what a new mount of
// that image sees. Returns the number of events.
template <class Run, class Check>
std::uint64_t kill_at_every_event(MemoryDevice& golden, Run&& run, Check&& check, bool and_unkilled = false) {
  auto copy = [&] {
    auto c = std::make_unique<MemoryDevice>(golden.size_bytes(), golden.block_size());
    c->bytes() = golden.bytes();
    return c;
  };
  std::uint64_t events = 0;
  {
    auto image = copy();
    KilledAfter counter(*image, 0);
    run(counter);
    events = counter.events();
  }
  for (std::uint64_t cut = 1; cut <= events + (and_unkilled ? 1 : 0); ++cut) {
    auto image = copy();
    {
      KilledAfter killed(*image, cut);
      run(killed);
    }
    check(*image, cut, events);
  }
  return events;
}

}  // namespace mmfs::fs::testing
