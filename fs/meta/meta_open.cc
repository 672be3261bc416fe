// MetaStore::open (fs/meta/meta_store.h): finds the newest consistent state of a
// metadata region - the newest valid checkpoint plus the log chunks behind
// it - taking every structure from whichever of its two copies is intact,
// rewrites damaged copies from their twins, and (for mmfsck) salvages the
// longest consistent prefix when a structure is lost in both copies. The
// format and the writer's rules are at the top of fs/meta/meta_codec.cc.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "fs/meta/keys.h"
#include "fs/meta/meta_store_impl.h"
#include "util/align.h"

namespace mmfs::fs {

using namespace meta_internal;

class MetaOpener {
 public:
  MetaOpener(BlockDevice& dev, const MetaRegion& region, const MetaOpenOptions& options)
      : dev_(dev), region_(region), opt_(options), bs_(dev.block_size()) {}

  std::unique_ptr<MetaStore> open(int* error, std::string* message, MetaOpenReport* report);

 private:
  // A copy of a structure to rewrite from its twin's bytes.
  struct Rewrite {
    int copy;
    std::uint64_t off;  // relative to a copy's start
    std::vector<std::byte> bytes;
    std::string what;
    bool problem;  // damage, not the trace of an interrupted last write
  };
  struct Slot {
    int slot, copy;
    CheckpointHeader header;
    std::vector<std::byte> header_bytes;  // the first block, to compare with the twin
  };

  std::uint64_t at(int copy, std::uint64_t off) const { return region_.offset + copy * geo_.copy_stride() + off; }
  int fail(int err, std::string why) {
    err_ = err;
    msg_ = std::move(why);
    return err;
  }
  int read_region_header();
  int choose_checkpoint();
  int check_checkpoint_twin(bool last_write);
  int replay();
  int find_lost_metadata();
  int rewrite_copies();
  std::string describe_lost(const std::vector<meta::Chunk>& later) const;

  BlockDevice& dev_;
  const MetaRegion region_;
  const MetaOpenOptions opt_;
  const std::uint32_t bs_;
  RegionHeader geo_;
  int err_ = 0;
  std::string msg_;
  MetaOpenReport rep_;
  std::vector<Rewrite> rewrites_;

  // The chosen checkpoint.
  Checkpoint ck_;
  int slot_ = 0, slot_copy_ = 0;
  AlignedBuffer ck_bytes_;  // its blocks as read
  std::uint64_t ck_len_ = 0;
  std::uint64_t state_bytes_ = 0;  // checkpoint_bytes() of the state, kept up to date by replay
  bool twin_checked_ = false;

  // Replay.
  std::uint64_t pos_ = 0, seq_ = 0, last_ = 0, used_ = 0, window_ = 0;
  std::uint64_t chunks_replayed_ = 0;
  struct LastChunk {
    std::uint64_t at = 0, len = 0, seq = 0;
    int copy = 0;
    bool twin_checked = false;
  } last_chunk_;
  // A newer epoch than the checkpoint's found in the log (salvage).
  std::uint64_t newest_epoch_ = 0;
  bool salvaged_ = false;
};

int MetaOpener::read_region_header() {
  AlignedBuffer hb(bs_);
  std::string why[2];
  bool magic[2] = {false, false};
  AlignedBuffer twin;
  const std::uint64_t stride_guess = region_.length / bs_ / 2 * bs_;
  for (int c = 0; c < 2; ++c) {
    // Copy 1 exists only in version 2 regions: half way through the region.
    const std::uint64_t off = region_.offset + c * stride_guess;
    AlignedBuffer& b = c == 0 ? hb : twin;
    if (c == 1) b = AlignedBuffer(bs_);
    if (int err = dev_.read(off, b.data(), bs_)) return fail(err, "cannot read the metadata region header");
    magic[c] = std::memcmp(b.data(), "MMFSMETA", 8) == 0;
    const auto h = meta::decode_region_header(b.span());
    if (!h) {
      why[c] = magic[c] ? "checksum mismatch" : "bad magic";
      continue;
    }
    if (h->version > meta::kFormatVersion || h->version < meta::kOldestVersion) {
      why[c] = "unsupported version " + std::to_string(h->version);
      continue;
    }
    if (c == 1 && h->version < 2) {
      why[c] = "bad magic";  // a version 1 region has no second copy
      continue;
    }
    if (std::string w = meta::check_region_geometry(*h, bs_, region_.length); !w.empty()) {
      why[c] = w;
      continue;
    }
    geo_ = *h;
    if (c == 1) {
      rewrites_.push_back({0, 0, std::vector<std::byte>(b.data(), b.data() + bs_),
                           "the metadata region header (copy 0: " + why[0] + ")", true});
    } else if (h->copies() == 2 && opt_.verify_copies) {
      twin = AlignedBuffer(bs_);
      if (int err = dev_.read(region_.offset + geo_.copy_stride(), twin.data(), bs_))
        return fail(err, "cannot read the metadata region header");
      if (std::memcmp(twin.data(), hb.data(), bs_) != 0)
        rewrites_.push_back({1, 0, std::vector<std::byte>(hb.data(), hb.data() + bs_),
                             "the metadata region header (copy 1 differs)", true});
    }
    return 0;
  }
  if (!magic[0] && !magic[1]) return fail(EUCLEAN, "metadata region header: bad magic (not an mmfs metadata region)");
  if (why[0] == why[1]) return fail(EUCLEAN, "metadata region header: " + why[0] + " in both copies");
  return fail(EUCLEAN, "metadata region header: copy 0: " + why[0] + "; copy 1: " + why[1]);
}

int MetaOpener::choose_checkpoint() {
  std::vector<Slot> candidates;
  std::string why[2][2];
  for (int s = 0; s < 2; ++s) {
    for (int c = 0; c < geo_.copies(); ++c) {
      AlignedBuffer first(bs_);
      if (int err = dev_.read(at(c, geo_.slot_offset[s]), first.data(), bs_))
        return fail(err, "cannot read checkpoint slot " + std::to_string(s));
      const auto h = meta::decode_checkpoint_header(first.span());
      if (!h) {
        why[s][c] = "bad magic or header checksum";
      } else if (h->nonce != geo_.nonce) {
        why[s][c] = "left by another format";
      } else if (h->payload_length > geo_.slot_length - meta::kCheckpointHeaderSize) {
        why[s][c] = "payload length out of range";
      } else {
        candidates.push_back({s, c, *h, std::vector<std::byte>(first.data(), first.data() + bs_)});
      }
    }
  }
  // Newest first; of two copies of one checkpoint, copy 0 first.
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Slot& a, const Slot& b) { return a.header.sequence > b.header.sequence; });
  for (const Slot& cand : candidates) {
    const std::uint64_t len = util::align_up(meta::kCheckpointHeaderSize + cand.header.payload_length, bs_);
    AlignedBuffer all(len);
    if (int err = device_io(dev_, IoRequest::Op::Read, at(cand.copy, geo_.slot_offset[cand.slot]), all.data(), len))
      return fail(err, "cannot read checkpoint slot " + std::to_string(cand.slot));
    auto ck = meta::decode_checkpoint(all.span());
    if (!ck) {
      why[cand.slot][cand.copy] = "payload checksum mismatch or malformed payload";
      continue;
    }
    if (ck->header.log_position > geo_.log_length || ck->header.log_position % bs_ != 0 ||
        ck->header.next_chunk_seq == 0) {
      why[cand.slot][cand.copy] = "log position out of range";
      continue;
    }
    ck_ = std::move(*ck);
    slot_ = cand.slot;
    slot_copy_ = cand.copy;
    ck_bytes_ = std::move(all);
    ck_len_ = len;
    state_bytes_ = meta::kCheckpointHeaderSize + ck_.header.payload_length;
    window_ = meta::log_window(geo_, meta::kCheckpointHeaderSize + ck_.header.payload_length);
    return 0;
  }
  auto both = [&](int s) {
    if (geo_.copies() == 1) return why[s][0];
    return why[s][0] == why[s][1] ? why[s][0] + " in both copies"
                                  : "copy 0: " + why[s][0] + ", copy 1: " + why[s][1];
  };
  return fail(EUCLEAN, "no valid checkpoint (slot 0: " + both(0) + "; slot 1: " + both(1) + ")");
}

// The chosen checkpoint's other copy must hold the same bytes: a checkpoint
// is flushed (both copies) before any chunk of its epoch is written, so a
// difference is damage unless the checkpoint is the last write, which a crash
// may have interrupted half way.
int MetaOpener::check_checkpoint_twin(bool last_write) {
  if (geo_.copies() == 1 || twin_checked_) return 0;
  twin_checked_ = true;
  const int twin = 1 - slot_copy_;
  AlignedBuffer b(ck_len_);
  if (int err = device_io(dev_, IoRequest::Op::Read, at(twin, geo_.slot_offset[slot_]), b.data(), ck_len_))
    return fail(err, "cannot read checkpoint slot " + std::to_string(slot_));
  // Only the checkpoint's own bytes: the padding of its last block is not covered.
  const std::uint64_t n = meta::kCheckpointHeaderSize + ck_.header.payload_length;
  if (std::memcmp(b.data(), ck_bytes_.data(), n) != 0)
    rewrites_.push_back({twin, geo_.slot_offset[slot_], std::vector<std::byte>(ck_bytes_.data(), ck_bytes_.data() + ck_len_),
                         fmt::format("checkpoint {} (slot {}, copy {})", ck_.header.sequence, slot_, twin), !last_write});
  return 0;
}

int MetaOpener::replay() {
  const std::uint64_t L = geo_.log_length;
  const std::uint64_t epoch = ck_.header.sequence;
  AreaReader copies[2] = {AreaReader(dev_, at(0, geo_.log_offset), L, bs_),
                          AreaReader(dev_, at(geo_.copies() - 1, geo_.log_offset), L, bs_)};
  pos_ = ck_.header.log_position;
  seq_ = ck_.header.next_chunk_seq;
  last_ = ck_.header.last_batch;
  used_ = 0;
  for (;;) {
    std::optional<meta::Chunk> got;
    std::uint64_t got_at = 0, got_len = 0, consume = 0;
    int got_copy = 0;
    std::span<const std::byte> got_bytes;
    for (int attempt = 0; attempt < 2 && !got; ++attempt) {
      const std::uint64_t cand = attempt == 0 ? pos_ : 0;
      if ((attempt == 1 && pos_ == 0) || bs_ > L - cand) continue;
      for (int c = 0; c < geo_.copies() && !got; ++c) {
        std::span<const std::byte> hdr_bytes;
        if (int err = copies[c].get(cand, bs_, &hdr_bytes)) return fail(err, "cannot read the metadata log");
        const auto h = meta::decode_chunk_header(hdr_bytes);
        if (!h || h->nonce != geo_.nonce || h->epoch != epoch || h->chunk_seq != seq_ || h->position != cand ||
            h->first_batch != last_ + 1 || h->payload_length > L)
          continue;
        const std::uint64_t len = util::align_up(meta::kChunkHeaderSize + h->payload_length, bs_);
        if (len > L - cand) continue;
        if (cand != pos_ && len <= L - pos_) continue;  // the writer would have put it at pos
        const std::uint64_t need = cand == pos_ ? len : (L - pos_) + len;
        if (need > window_ - used_) continue;  // beyond what the writer may use in this epoch: not ours
        std::span<const std::byte> chunk_bytes;
        if (int err = copies[c].get(cand, len, &chunk_bytes)) return fail(err, "cannot read the metadata log");
        got = meta::decode_chunk(chunk_bytes);
        if (!got) continue;
        got_at = cand;
        got_len = len;
        got_copy = c;
        got_bytes = chunk_bytes;
        consume = need;
      }
    }
    if (!got) break;
    // The previous chunk was not the last write: a difference between its
    // copies, found below, is damage.
    for (Rewrite& r : rewrites_)
      if (r.what.starts_with("metadata log chunk ")) r.problem = true;
    last_chunk_ = {got_at, got_len, seq_, got_copy, false};
    if (got_copy == 1) {
      // Copy 0 was tried first and failed.
      rewrites_.push_back({0, geo_.log_offset + got_at, std::vector<std::byte>(got_bytes.begin(), got_bytes.end()),
                           fmt::format("metadata log chunk {} (copy 0)", seq_), false});
      last_chunk_.twin_checked = true;
    } else if (geo_.copies() == 2 && opt_.verify_copies) {
      std::vector<std::byte> mine(got_bytes.begin(), got_bytes.end());
      std::span<const std::byte> twin;
      if (int err = copies[1].get(got_at, got_len, &twin)) return fail(err, "cannot read the metadata log");
      if (std::memcmp(twin.data(), mine.data(), meta::kChunkHeaderSize + got->header.payload_length) != 0)
        rewrites_.push_back({1, geo_.log_offset + got_at, std::move(mine),
                             fmt::format("metadata log chunk {} (copy 1)", seq_), false});
      last_chunk_.twin_checked = true;
    }
    for (meta::LogBatch& b : got->batches) apply_replayed(ck_.state, std::move(b.batch), &state_bytes_);
    last_ = got->header.last_batch;
    used_ += consume;
    ++seq_;
    ++chunks_replayed_;
    pos_ = got_at + got_len;
  }
  // The last write's twin: a crash may have left it in one copy only.
  if (chunks_replayed_ == 0) return check_checkpoint_twin(/*last_write=*/true);
  if (opt_.verify_copies)
    if (int err = check_checkpoint_twin(/*last_write=*/false)) return err;
  if (geo_.copies() == 2 && !last_chunk_.twin_checked) {
    std::span<const std::byte> mine, twin;
    if (int err = copies[0].get(last_chunk_.at, last_chunk_.len, &mine)) return fail(err, "cannot read the metadata log");
    std::vector<std::byte> good(mine.begin(), mine.end());
    if (int err = copies[1].get(last_chunk_.at, last_chunk_.len, &twin)) return fail(err, "cannot read the metadata log");
    if (std::memcmp(twin.data(), good.data(), good.size()) != 0)
      rewrites_.push_back({1, geo_.log_offset + last_chunk_.at, std::move(good),
                           fmt::format("metadata log chunk {} (copy 1)", last_chunk_.seq), false});
  }
  return 0;
}

// The log ends at chunk seq_. A torn or lost write leaves no chunk after it
// (each chunk is flushed before the next is written, and a checkpoint before
// the chunks of its epoch), so a chunk of this epoch with a higher sequence,
// or of a newer epoch, means durable metadata is missing in both copies. Only
// the rest of this epoch's window can hold one, and a newer epoch's first
// chunk sits where this epoch's log ends or, wrapped, at offset 0.
int MetaOpener::find_lost_metadata() {
  const std::uint64_t L = geo_.log_length;
  const std::uint64_t epoch = ck_.header.sequence;
  std::set<std::uint64_t> blocks;
  const std::uint64_t end = pos_ % L;
  blocks.insert(end / bs_);
  blocks.insert(0);
  for (std::uint64_t off = 0; off < window_ - used_; off += bs_) blocks.insert(((end + off) % L) / bs_);
  std::uint64_t first_lost = 0, last_found = 0, newest_batch = last_;
  std::vector<meta::Chunk> later;
  for (int c = 0; c < geo_.copies(); ++c) {
    AreaReader log(dev_, at(c, geo_.log_offset), L, bs_);
    for (std::uint64_t b : blocks) {
      std::span<const std::byte> bytes;
      if (int err = log.get(b * bs_, bs_, &bytes)) return fail(err, "cannot read the metadata log");
      const auto h = meta::decode_chunk_header(bytes);
      if (!h || h->nonce != geo_.nonce) continue;
      const bool newer_epoch = h->epoch > epoch, later_chunk = h->epoch == epoch && h->chunk_seq > seq_;
      if (!newer_epoch && !later_chunk) continue;
      if (newer_epoch && h->epoch > newest_epoch_) newest_epoch_ = h->epoch;
      if (later_chunk) {
        first_lost = first_lost ? std::min(first_lost, h->chunk_seq) : h->chunk_seq;
        last_found = std::max(last_found, h->chunk_seq);
      }
      newest_batch = std::max(newest_batch, h->last_batch);
      if (opt_.salvage) {
        const std::uint64_t len = util::align_up(meta::kChunkHeaderSize + h->payload_length, bs_);
        std::span<const std::byte> all;
        if (len <= L - b * bs_ && log.get(b * bs_, len, &all) == 0)
          if (auto chunk = meta::decode_chunk(all)) later.push_back(std::move(*chunk));
      }
    }
  }
  if (newest_epoch_ == 0 && last_found == 0) return 0;
  const std::string where =
      last_found ? fmt::format("metadata log chunk {} is {} but chunk {} follows it", seq_,
                               geo_.copies() == 2 ? "corrupt in both copies" : "missing or corrupt", first_lost)
                 : fmt::format("metadata checkpoint {} is {} but the log holds chunks written after it", epoch + 1,
                               geo_.copies() == 2 ? "corrupt in both copies" : "missing or corrupt");
  if (!opt_.salvage) return fail(EUCLEAN, where + " (mmfsck -y salvages the metadata written before it)");
  rep_.lost_batches = newest_batch > last_ ? newest_batch - last_ : 1;
  rep_.problems.push_back(fmt::format("{}: kept the state up to batch {}, lost {}", where, last_, describe_lost(later)));
  salvaged_ = true;
  return 0;
}

std::string MetaOpener::describe_lost(const std::vector<meta::Chunk>& later) const {
  std::uint64_t newest = last_;
  std::set<std::uint64_t> inodes;
  std::uint64_t keys = 0;
  for (const meta::Chunk& c : later) {
    newest = std::max(newest, c.header.last_batch);
    for (const meta::LogBatch& b : c.batches)
      for (const auto& op : b.batch.ops()) {
        ++keys;
        if (const auto ino = keys::owner(op.key)) inodes.insert(*ino);  // keys filed under an inode
      }
  }
  std::string text = newest > last_ ? fmt::format("batches {}..{} (at least)", last_ + 1, newest)
                                    : std::string("the batches of the corrupt chunk");
  if (keys) {
    text += fmt::format("; the readable later chunks changed {} records of inodes", keys);
    int shown = 0;
    for (std::uint64_t ino : inodes) {
      if (shown++ == 8) {
        text += " ...";
        break;
      }
      text += fmt::format(" {}", ino);
    }
  }
  return text;
}

int MetaOpener::rewrite_copies() {
  for (const Rewrite& r : rewrites_) {
    if (r.problem) rep_.problems.push_back(fmt::format("{} is corrupt; its twin is intact", r.what));
    if (!opt_.repair) continue;
    // The bytes are whole blocks; write them through an aligned buffer.
    AlignedBuffer b(util::align_up(r.bytes.size(), bs_));
    std::memset(b.data(), 0, b.size());
    std::memcpy(b.data(), r.bytes.data(), r.bytes.size());
    if (int err = device_io(dev_, IoRequest::Op::Write, at(r.copy, r.off), b.data(), b.size()))
      return fail(err, "cannot rewrite a metadata copy");
    if (r.problem) rep_.repairs.push_back(fmt::format("rewrote {} from its twin", r.what));
  }
  if (opt_.repair && !rewrites_.empty())
    if (int err = dev_.flush()) return fail(err, "cannot flush the rewritten metadata copies");
  return 0;
}

std::unique_ptr<MetaStore> MetaOpener::open(int* error, std::string* message, MetaOpenReport* report) {
  auto done = [&](std::unique_ptr<MetaStore> store) {
    if (error) *error = store ? 0 : err_;
    if (message && !store) *message = msg_;
    if (report) *report = std::move(rep_);
    return store;
  };
  if (check_region(dev_, region_) != 0) {
    fail(EINVAL, "metadata region is not block-aligned, too small (< 64 KiB) or outside the device");
    return done(nullptr);
  }
  if (read_region_header() || choose_checkpoint() || replay() || find_lost_metadata() || rewrite_copies())
    return done(nullptr);
  const std::uint64_t state_bytes = state_bytes_;
  if (state_bytes > geo_.slot_length) {
    fail(EUCLEAN, "metadata state exceeds a checkpoint slot");
    return done(nullptr);
  }
  auto impl = std::make_unique<MetaStore::Impl>(dev_, region_, geo_);
  impl->state = std::move(ck_.state);
  impl->state_bytes = state_bytes;
  impl->last_applied = impl->durable = impl->opened_at = last_;
  impl->tail = pos_;
  impl->used = used_;
  impl->window = window_;
  impl->next_chunk = seq_;
  // A salvaged prefix is made durable by a checkpoint newer than every epoch
  // in the log, so the chunks written after the lost one never count again.
  impl->ckpt_seq = std::max(ck_.header.sequence, newest_epoch_);
  impl->active_slot = slot_;
  impl->stats.log_bytes_total = geo_.log_length;
  std::unique_ptr<MetaStore> store(new MetaStore(std::move(impl)));
  if (salvaged_ && opt_.repair) {
    if (int err = store->checkpoint()) {
      fail(err, "cannot write the salvaged metadata");
      return done(nullptr);
    }
    rep_.repairs.push_back(fmt::format("salvaged the metadata up to batch {} (a new checkpoint)", last_));
  }
  return done(std::move(store));
}

std::unique_ptr<MetaStore> MetaStore::open(BlockDevice& device, const MetaRegion& region, int* error,
                                           std::string* message, const MetaOpenOptions& options,
                                           MetaOpenReport* report) {
  return MetaOpener(device, region, options).open(error, message, report);
}

}  // namespace mmfs::fs
