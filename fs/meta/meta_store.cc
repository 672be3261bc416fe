// The metadata store (fs/meta/meta_store.h): an in-memory ordered map made durable
// by a write-ahead log of batches plus checkpoints of the whole map. The
// on-disk format, and the rules for writing and replaying it, are described at
// the top of fs/meta/meta_codec.cc; open() is in fs/meta/meta_open.cc.
#include "fs/meta/meta_store.h"

#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>
#include <random>
#include <unordered_map>

#include "fs/meta/meta_store_impl.h"
#include "util/align.h"
#include "util/coding.h"

namespace mmfs::fs {

using namespace meta_internal;

// ---------------------------------------------------------------------------
// WriteBatch

void WriteBatch::put(std::string key, std::string value) {
  ops_.push_back(Op{true, std::move(key), std::move(value)});
}

void WriteBatch::del(std::string key) { ops_.push_back(Op{false, std::move(key), {}}); }


int MetaStore::Impl::lead(std::unique_lock<std::mutex>& lk, bool force_checkpoint) {
  std::vector<std::string> batches;
  batches.swap(pending);
  const std::uint64_t payload_bytes = pending_bytes;
  pending_bytes = 0;
  const std::uint64_t first = durable + 1, last = last_applied;
  const std::uint64_t L = geo.log_length;
  const std::uint64_t chunk_len = util::align_up(meta::kChunkHeaderSize + payload_bytes, bs);
  const std::uint64_t pos = (chunk_len <= L - tail) ? tail : 0;
  const std::uint64_t consume = pos == tail ? chunk_len : (L - tail) + chunk_len;
  const bool use_log = !force_checkpoint && chunk_len <= L && consume <= window - used;

  int err = 0;
  if (batches.empty() && !force_checkpoint) {
    // nothing to write
  } else if (use_log) {
    ChunkHeader h;
    h.nonce = geo.nonce;
    h.epoch = ckpt_seq;
    h.chunk_seq = next_chunk;
    h.position = pos;
    h.first_batch = first;
    h.last_batch = last;
    h.payload_length = payload_bytes;
    lk.unlock();  // apply() goes on while the chunk is written
    reserve_io(chunk_len);
    std::byte* p = io_buf.data();
    std::byte* q = p + meta::kChunkHeaderSize;
    for (const std::string& b : batches) {
      std::memcpy(q, b.data(), b.size());
      q += b.size();
    }
    std::memset(q, 0, chunk_len - (q - p));
    h.payload_hash = XXH3_64bits(p + meta::kChunkHeaderSize, payload_bytes);
    meta::encode_chunk_header(h, io_buf.span());
    err = write_copies(geo.log_offset + pos, p, chunk_len);
    if (err == 0) err = dev.flush();
    lk.lock();
    if (err == 0) {
      tail = pos + chunk_len;
      used += consume;
      ++next_chunk;
      ++stats.log_writes;
      ++stats.flushes;
    }
  } else {
    // Checkpoint of the whole state (every applied batch): holding mu freezes it.
    CheckpointHeader h;
    h.nonce = geo.nonce;
    h.sequence = ckpt_seq + 1;
    h.log_position = tail;
    h.next_chunk_seq = next_chunk;
    h.last_batch = last;
    const std::uint64_t len = util::align_up(state_bytes, bs);
    reserve_io(len);
    meta::encode_checkpoint(h, state, io_buf.span());
    std::memset(io_buf.data() + state_bytes, 0, len - state_bytes);
    const int slot = 1 - active_slot;
    lk.unlock();
    err = write_copies(geo.slot_offset[slot], io_buf.data(), len);
    if (err == 0) err = dev.flush();
    lk.lock();
    if (err == 0) {
      active_slot = slot;
      ckpt_seq = h.sequence;
      window = meta::log_window(geo, state_bytes);
      used = 0;
      ++stats.checkpoints;
      ++stats.flushes;
    }
  }
  if (err != 0) {
    failed = err;  // the batches may or may not be on disk: never claim them
  } else {
    durable = last;
  }
  leader = false;
  cv.notify_all();
  return err;
}

int MetaStore::Impl::write_copies(std::uint64_t off, const std::byte* data, std::uint64_t len) {
  std::vector<IoRequest> reqs;
  for (int c = 0; c < geo.copies(); ++c) {
    for (std::uint64_t done = 0; done < len;) {
      const std::uint64_t n = std::min(len - done, meta_internal::kMaxRequestBytes);
      IoRequest r;
      r.op = IoRequest::Op::Write;
      r.offset = region.offset + c * geo.copy_stride() + off + done;
      r.length = static_cast<std::uint32_t>(n);
      r.buffer = const_cast<std::byte*>(data + done);
      reqs.push_back(r);
      done += n;
    }
  }
  return reqs.empty() ? 0 : dev.submit(reqs);
}

MetaStore::MetaStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MetaStore::~MetaStore() = default;

int MetaStore::format(BlockDevice& device, const MetaRegion& region, std::uint32_t version) {
  if (int err = check_region(device, region)) return err;
  if (version == 0) version = meta::kFormatVersion;
  if (version < meta::kOldestVersion || version > meta::kFormatVersion) return EINVAL;
  const std::uint64_t bs = device.block_size();
  RegionHeader g;
  g.version = version;
  g.block_size = static_cast<std::uint32_t>(bs);
  g.region_length = region.length;
  // Each copy: a header block, two slots and the log. Version 2 logs are an
  // eighth of the copy: the log window keeps replay to twice the state, so
  // the rest is better spent on the slots, which bound the state.
  const std::uint64_t copy_blocks = g.copy_length() / bs;
  if (copy_blocks < 8) return EINVAL;
  const std::uint64_t r = copy_blocks - 1;
  std::uint64_t log_blocks = std::max<std::uint64_t>(2, version >= 2 ? r / 8 : r / 4);
  const std::uint64_t slot_blocks = (r - log_blocks) / 2;
  log_blocks = r - 2 * slot_blocks;

  std::random_device rd;
  g.nonce = (std::uint64_t{rd()} << 32) ^ rd() ^
            static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  if (g.nonce == 0) g.nonce = 1;
  g.slot_offset[0] = bs;
  g.slot_offset[1] = bs + slot_blocks * bs;
  g.slot_length = slot_blocks * bs;
  g.log_offset = bs + 2 * slot_blocks * bs;
  g.log_length = log_blocks * bs;

  AlignedBuffer buf(3 * bs);
  meta::encode_region_header(g, buf.span());
  const StateMap empty;
  for (int s = 0; s < 2; ++s) {
    CheckpointHeader h;
    h.nonce = g.nonce;
    h.sequence = s == 0 ? 1 : 0;
    h.log_position = 0;
    h.next_chunk_seq = 1;
    h.last_batch = 0;
    meta::encode_checkpoint(h, empty, buf.span().subspan((1 + s) * bs));
  }
  std::vector<IoRequest> reqs;
  const std::uint64_t offs[3] = {0, g.slot_offset[0], g.slot_offset[1]};
  for (int c = 0; c < g.copies(); ++c) {
    for (int i = 0; i < 3; ++i) {
      IoRequest r;
      r.op = IoRequest::Op::Write;
      r.offset = region.offset + c * g.copy_stride() + offs[i];
      r.length = static_cast<std::uint32_t>(bs);
      r.buffer = buf.data() + i * bs;
      reqs.push_back(r);
    }
  }
  if (int err = device.submit(reqs)) return err;
  return device.flush();
}

int MetaStore::apply(const WriteBatch& batch, std::uint64_t* sequence) {
  Impl& I = *impl_;
  constexpr std::uint64_t kMaxLen = std::numeric_limits<std::uint32_t>::max();
  if (batch.size() > kMaxLen) return EINVAL;
  for (const auto& op : batch.ops())
    if (op.key.size() > kMaxLen || op.value.size() > kMaxLen) return EINVAL;
  if (batch.empty()) {
    std::lock_guard lk(I.mu);
    if (I.failed) return I.failed;
    if (sequence) *sequence = I.last_applied;
    return 0;
  }
  std::string enc;
  enc.reserve(meta::log_batch_bytes(batch));
  meta::append_log_batch(enc, 0, batch);  // the sequence is patched in below

  std::unique_lock lk(I.mu);
  if (I.failed) return I.failed;
  // Size of the state after the batch; O(batch). Later ops of the batch see earlier ones.
  std::uint64_t added = 0, removed = 0;
  auto current = [&](const std::string& key) -> std::uint64_t {
    auto it = I.state.find(key);
    return it == I.state.end() ? 0 : meta::checkpoint_entry_bytes(key.size(), it->second.size());
  };
  if (batch.size() == 1) {
    const auto& op = batch.ops()[0];
    removed = current(op.key);
    added = op.is_put ? meta::checkpoint_entry_bytes(op.key.size(), op.value.size()) : 0;
  } else {
    std::unordered_map<std::string_view, std::uint64_t> overlay;
    for (const auto& op : batch.ops()) {
      auto it = overlay.find(op.key);
      removed += it != overlay.end() ? it->second : current(op.key);
      const std::uint64_t now = op.is_put ? meta::checkpoint_entry_bytes(op.key.size(), op.value.size()) : 0;
      added += now;
      overlay[op.key] = now;
    }
  }
  const std::uint64_t new_bytes = I.state_bytes + added - removed;
  if (new_bytes > I.geo.slot_length) return ENOSPC;
  {
    std::unique_lock sl(I.state_mu);
    apply_to(I.state, batch);
  }
  const std::uint64_t seq = ++I.last_applied;
  util::put_le64(enc.data(), seq);
  I.pending_bytes += enc.size();
  I.pending.push_back(std::move(enc));
  I.state_bytes = new_bytes;
  ++I.stats.batches_applied;
  if (sequence) *sequence = seq;
  return 0;
}

int MetaStore::sync() {
  Impl& I = *impl_;
  std::unique_lock lk(I.mu);
  const std::uint64_t target = I.last_applied;
  for (;;) {
    if (I.failed) return I.failed;
    if (I.durable >= target) return 0;  // covered by an earlier or a concurrent leader
    if (!I.leader) break;
    I.cv.wait(lk);
  }
  I.leader = true;
  return I.lead(lk, false);
}

int MetaStore::checkpoint() {
  Impl& I = *impl_;
  std::unique_lock lk(I.mu);
  while (I.leader && !I.failed) I.cv.wait(lk);
  if (I.failed) return I.failed;
  I.leader = true;
  return I.lead(lk, true);
}

std::optional<std::string> MetaStore::get(std::string_view key) const {
  std::shared_lock sl(impl_->state_mu);
  auto it = impl_->state.find(key);
  if (it == impl_->state.end()) return std::nullopt;
  return it->second;
}

void MetaStore::scan(std::string_view prefix,
                     const std::function<bool(std::string_view, std::string_view)>& visit) const {
  std::shared_lock sl(impl_->state_mu);
  for (auto it = impl_->state.lower_bound(prefix); it != impl_->state.end(); ++it) {
    if (std::string_view(it->first).substr(0, prefix.size()) != prefix) break;
    if (!visit(it->first, it->second)) break;
  }
}

MetaStats MetaStore::stats() const {
  const Impl& I = *impl_;
  std::lock_guard lk(I.mu);
  MetaStats s = I.stats;
  s.batches_durable = I.durable - I.opened_at;
  s.log_bytes_used = I.used;
  s.log_bytes_total = I.geo.log_length;
  s.state_bytes = I.state_bytes;
  return s;
}

}  // namespace mmfs::fs
