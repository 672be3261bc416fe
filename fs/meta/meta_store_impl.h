// Internals of the metadata store shared by fs/meta/meta_store.cc (writing) and
// fs/meta/meta_open.cc (open): device helpers and the store's state.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "fs/device/block_device.h"
#include "fs/meta/meta_codec.h"
#include "fs/meta/meta_store.h"
#include "util/align.h"

namespace mmfs::fs {
namespace meta_internal {

using meta::Checkpoint;
using meta::CheckpointHeader;
using meta::ChunkHeader;
using meta::RegionHeader;
using meta::StateMap;

inline constexpr std::uint64_t kMaxRequestBytes = std::uint64_t{1} << 30;
inline constexpr std::uint64_t kReadWindowBytes = std::uint64_t{1} << 20;

// One submit() of [offset, offset+length), split into requests of <= 1 GiB.
inline int device_io(BlockDevice& dev, IoRequest::Op op, std::uint64_t offset, std::byte* buffer, std::uint64_t length) {
  std::vector<IoRequest> reqs;
  for (std::uint64_t done = 0; done < length;) {
    const std::uint64_t n = std::min(length - done, kMaxRequestBytes);
    IoRequest r;
    r.op = op;
    r.offset = offset + done;
    r.length = static_cast<std::uint32_t>(n);
    r.buffer = buffer + done;
    reqs.push_back(r);
    done += n;
  }
  if (reqs.empty()) return 0;
  return dev.submit(reqs);
}

// Reads an area of the device through a window (replay reads many small chunks).
class AreaReader {
 public:
  AreaReader(BlockDevice& dev, std::uint64_t base, std::uint64_t length, std::uint32_t bs)
      : dev_(dev), base_(base), length_(length), bs_(bs) {}
  // REQUIRES: off a multiple of the block size, off + len <= length.
  int get(std::uint64_t off, std::uint64_t len, std::span<const std::byte>* out) {
    if (!(off >= win_off_ && off + len <= win_off_ + win_len_)) {
      const std::uint64_t want = std::min(std::max(util::align_up(len, bs_), kReadWindowBytes), length_ - off);
      if (buf_.size() < want) buf_ = AlignedBuffer(want);
      win_off_ = off;
      win_len_ = 0;
      if (int err = device_io(dev_, IoRequest::Op::Read, base_ + off, buf_.data(), want)) return err;
      win_len_ = want;
    }
    *out = std::span<const std::byte>(buf_.data() + (off - win_off_), len);
    return 0;
  }

 private:
  BlockDevice& dev_;
  std::uint64_t base_, length_;
  std::uint32_t bs_;
  AlignedBuffer buf_;
  std::uint64_t win_off_ = 0, win_len_ = 0;
};

inline int check_region(const BlockDevice& dev, const MetaRegion& region) {
  const std::uint64_t bs = dev.block_size();
  if (bs == 0 || region.offset % bs != 0 || region.length % bs != 0 || region.length < meta::kMinRegionBytes ||
      region.length / bs < 8 || region.offset > dev.size_bytes() || region.length > dev.size_bytes() - region.offset)
    return EINVAL;
  return 0;
}

// Replay's version: moves the batch's strings into the map and keeps
// *state_bytes (the checkpoint size of the state) up to date.
inline void apply_replayed(StateMap& state, WriteBatch&& batch, std::uint64_t* state_bytes) {
  for (auto& op : std::move(batch).take_ops()) {
    auto it = state.lower_bound(op.key);
    const bool found = it != state.end() && it->first == op.key;
    if (found) *state_bytes -= meta::checkpoint_entry_bytes(it->first.size(), it->second.size());
    if (!op.is_put) {
      if (found) state.erase(it);
      continue;
    }
    *state_bytes += meta::checkpoint_entry_bytes(op.key.size(), op.value.size());
    if (found)
      it->second = std::move(op.value);
    else
      state.emplace_hint(it, std::move(op.key), std::move(op.value));
  }
}

inline void apply_to(StateMap& state, const WriteBatch& batch) {
  for (const auto& op : batch.ops()) {
    if (op.is_put) {
      state.insert_or_assign(op.key, op.value);
    } else if (auto it = state.find(op.key); it != state.end()) {
      state.erase(it);
    }
  }
}

}  // namespace meta_internal

struct MetaStore::Impl {
  using RegionHeader = meta::RegionHeader;
  using StateMap = meta::StateMap;

  Impl(BlockDevice& d, const MetaRegion& r, const RegionHeader& g) : dev(d), region(r), geo(g), bs(d.block_size()) {}

  BlockDevice& dev;
  const MetaRegion region;
  const RegionHeader geo;
  const std::uint32_t bs;

  // Writes [off, off+len) of a copy (off relative to a copy's start) to every
  // copy in one submit(); the caller flushes.
  int write_copies(std::uint64_t off, const std::byte* data, std::uint64_t len);

  // Lock order: mu before state_mu. The map is changed only with both held
  // (apply), so holding mu alone is enough to read it consistently (checkpoint).
  mutable std::shared_mutex state_mu;
  StateMap state;  // GUARDED_BY(state_mu), writes also REQUIRE mu

  mutable std::mutex mu;
  std::condition_variable cv;
  std::uint64_t state_bytes = 0;     // GUARDED_BY(mu): checkpoint_bytes(state)
  std::vector<std::string> pending;  // GUARDED_BY(mu): encoded batches durable+1 .. last_applied
  std::uint64_t pending_bytes = 0;   // GUARDED_BY(mu)
  std::uint64_t last_applied = 0;    // GUARDED_BY(mu): sequence of the newest applied batch
  std::uint64_t durable = 0;         // GUARDED_BY(mu): every batch <= durable is on disk
  std::uint64_t opened_at = 0;       // last batch sequence found at open()
  bool leader = false;               // GUARDED_BY(mu): a thread is writing the log or a checkpoint
  int failed = 0;                    // GUARDED_BY(mu): sticky device error
  // Log writer position; changed only by the leader, under mu.
  std::uint64_t tail = 0;        // byte offset in the log area where the next chunk goes (if it fits)
  std::uint64_t used = 0;        // bytes in use since the newest durable checkpoint's log position
  std::uint64_t next_chunk = 1;  // sequence of the next chunk
  std::uint64_t ckpt_seq = 0;    // sequence of the newest durable checkpoint (= epoch of new chunks)
  int active_slot = 0;           // slot holding it
  std::uint64_t window = 0;      // log_window() of that checkpoint: `used` never exceeds it
  MetaStats stats;               // GUARDED_BY(mu)
  AlignedBuffer io_buf;          // used by the leader only

  void reserve_io(std::uint64_t n) {
    if (io_buf.size() < n) io_buf = AlignedBuffer(std::max<std::uint64_t>(n, 2 * io_buf.size()));
  }

  // Writes the pending batches as one chunk, or a checkpoint when they do not
  // fit in the free log space or `force_checkpoint`.
  // REQUIRES: lk holds mu, this thread set leader = true. Clears it, wakes waiters.
  int lead(std::unique_lock<std::mutex>& lk, bool force_checkpoint);
};


}  // namespace mmfs::fs
