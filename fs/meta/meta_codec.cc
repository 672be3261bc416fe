// Encodings of the metadata store's on-disk structures (fs/meta/meta_codec.h).
// The format of the whole region, and how the store writes and replays it,
// is described here once; fs/meta/meta_store.cc (writing) and fs/meta/meta_open.cc
// (open, replay, repair, salvage) refer to it.
//
// ===========================================================================
// On-disk format of the metadata region
// ===========================================================================
//
// Integers are little-endian, fixed width, unaligned. Checksums are XXH3-64
// (xxhash's XXH3_64bits, seed 0). BS is the device's logical block size. All
// areas are block-aligned.
//
// Copies. A version 2 region holds two copies of every structure: copy 0 at
// the start of the region, copy 1 at stride = floor(length/BS/2)*BS (an odd
// last block is unused). Every write goes to both copies in one submit,
// followed by one flush; each copy is laid out as below, offsets relative to
// the start of the copy. A version 1 region is one copy spanning the region.
//
//   +--------+---------------------+---------------------+---------------+
//   | header | checkpoint slot 0   | checkpoint slot 1   | log (a ring)  |
//   +--------+---------------------+---------------------+---------------+
//   0        BS                    BS+S                  BS+2S      copy length
//
// Split (chosen by format(), recorded in the header; open() reads it from
// there): N = copy length/BS blocks, R = N-1; log = max(2, R/8) blocks
// (version 1: R/4), each slot S = (R - log)/2 blocks, the log gets the
// remainder. A 512 KiB version 2 region on 4 KiB blocks: two copies of
// 256 KiB, each a header of 4 KiB, slots of 112 KiB and a log of 28 KiB.
//
// Region header (block 0, written only by format()):
//    0  8  magic "MMFSMETA"
//    8  4  version (2; 1 for regions of one copy)
//   12  4  block size
//   16  8  nonce: random per format(); every chunk and checkpoint carries it,
//          so data left by an earlier format is never taken for ours
//   24  8  region length
//   32  8  slot 0 offset        40  8  slot 1 offset      48  8  slot length
//   56  8  log offset           64  8  log length
//   72  8  XXH3 of bytes [0, 72)
//   rest of the block: zero
//
// Checkpoint (at the start of a slot):
//    0  8  magic "MMFSCKPT"
//    8  8  nonce
//   16  8  checkpoint sequence (the valid slot with the highest one wins)
//   24  8  log position: byte offset in the log area where replay starts
//   32  8  next chunk sequence: the chunk replay expects there
//   40  8  last batch sequence included in the state
//   48  8  entry count
//   56  8  payload length
//   64  8  XXH3 of the payload
//   72  8  XXH3 of bytes [0, 72)
//   80     payload: entry_count entries in strictly ascending key order (bytewise),
//          each  u32 key length, key bytes, u32 value length, value bytes;
//          then zero padding to the block size.
// The serialized size 80 + sum(8 + key + value) is MetaStats::state_bytes; it
// must not exceed the slot length (apply() refuses with ENOSPC otherwise).
// format() writes an empty checkpoint into both slots (slot 0 sequence 1,
// slot 1 sequence 0, log position 0, next chunk 1, last batch 0).
//
// Log chunk (one per sync(), starting at a block boundary of the log area):
//    0  8  magic "MMFSLOGC"
//    8  8  nonce
//   16  8  epoch: sequence of the checkpoint current when it was written
//   24  8  chunk sequence (+1 per chunk, continuing across checkpoints)
//   32  8  position: byte offset of this chunk in the log area
//   40  8  first batch sequence      48  8  last batch sequence (inclusive)
//   56  8  payload length
//   64  8  XXH3 of the payload
//   72  8  XXH3 of bytes [0, 72)
//   80     payload: the batches first..last, each
//            u64 batch sequence, u32 op count, then per op
//            u8 kind (1 = put, 0 = delete), u32 key length, key bytes,
//            and for a put u32 value length, value bytes;
//          then zero padding to the block size.
// Key and value lengths are below 2^32 (apply() refuses others with EINVAL).
//
// Writing. A chunk goes at the log tail if it fits before the end of the log
// area, else at offset 0 (the rest of the area is skipped). It is one device
// write per copy followed by one flush. The log space from the newest durable
// checkpoint's log position up to the tail (including skipped ends) is in
// use; it never exceeds the checkpoint's log window (log_window(): version 2
// max(4 MiB, 2 x the checkpoint's bytes) capped at the log; version 1 the
// whole log). A chunk that would not fit in the window is not written: a
// checkpoint is written instead. A checkpoint holds the whole in-memory state,
// i.e. every batch applied so far, so it also makes the pending batches
// durable and pending batches are never split over several chunks. It goes to
// the slot not holding the newest valid checkpoint, records the current tail
// as its log position, and is flushed before any later chunk is written; only
// then does the space before the tail become free again.
//
// Replay (open, fs/meta/meta_open.cc). Take the checkpoint with the highest
// sequence that validates in some copy (headers of all four copies first,
// then payloads, newest first); at its log position expect chunk `next chunk
// sequence`: read the header there (or, if it is not valid there, at offset 0
// - allowed only when a chunk of that length would not have fit at the
// tail), in copy 0 and else in copy 1; accept it when magic, nonce, both
// checksums, chunk sequence, epoch (= the checkpoint's sequence), position,
// batch continuity (first batch = last applied + 1) and bounds (inside the
// window) hold; apply its batches and go on behind it. The first chunk that
// fails in both copies ends the log: a torn or lost last chunk is simply not
// there, and stale chunks never match the expected sequence and epoch. Then
// open() reads, in both copies, the rest of the window behind the end of the
// log, the block at the end and block 0 (where a newer epoch's first chunk
// goes when it wraps), and refuses with EUCLEAN if any holds a valid chunk
// header (this nonce) of a newer epoch than the chosen checkpoint (a newer
// checkpoint was durable and is now corrupt in both copies) or of the same
// epoch with a higher chunk sequence than the one replay stopped at (a chunk
// in the middle of the log is corrupt in both copies). Neither can follow a
// torn or lost write: a chunk is flushed before the next one is written and a
// checkpoint before the chunks of its epoch. A structure lost in both copies
// at the end of the log cannot be told from a torn write; open() then returns
// the older prefix state.
//
// Twins. Both copies of every structure replay uses hold the same bytes,
// except that the last write (the last chunk, or the checkpoint when no chunk
// follows it) may have reached one copy only when the power went. A copy that
// fails its checks or differs from its twin is rewritten from the twin
// (MetaOpenOptions::repair); elsewhere than in the last write it is reported
// as damage. Salvage (MetaOpenOptions::salvage) opens the prefix instead of
// refusing, and makes it durable with a checkpoint whose sequence exceeds
// every epoch found in the log.
// ===========================================================================
#include "fs/meta/meta_codec.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "util/align.h"
#include "util/coding.h"

namespace mmfs::fs {

// ---------------------------------------------------------------------------
// Encodings (fs/meta/meta_codec.h)

namespace meta {
namespace {

constexpr char kRegionMagic[8] = {'M', 'M', 'F', 'S', 'M', 'E', 'T', 'A'};
constexpr char kChunkMagic[8] = {'M', 'M', 'F', 'S', 'L', 'O', 'G', 'C'};
constexpr char kCheckpointMagic[8] = {'M', 'M', 'F', 'S', 'C', 'K', 'P', 'T'};
constexpr std::size_t kHeaderHashOffset = 72;  // all three headers: XXH3 of [0, 72) at 72

std::uint64_t hash(const void* p, std::size_t n) { return XXH3_64bits(p, n); }

bool has_magic(std::span<const std::byte> bytes, const char (&magic)[8]) {
  return bytes.size() >= 8 && std::memcmp(bytes.data(), magic, 8) == 0;
}

// Magic and header checksum of an 80-byte header at the start of `bytes`.
bool header_ok(std::span<const std::byte> bytes, const char (&magic)[8]) {
  return bytes.size() >= 80 && has_magic(bytes, magic) &&
         util::get_le64(bytes.data() + kHeaderHashOffset) == hash(bytes.data(), kHeaderHashOffset);
}

void seal_header(std::byte* p, const char (&magic)[8]) {
  std::memcpy(p, magic, 8);
  util::put_le64(p + kHeaderHashOffset, hash(p, kHeaderHashOffset));
}

// A bounds-checked reader over untrusted bytes.
class Cursor {
 public:
  explicit Cursor(std::span<const std::byte> b) : b_(b) {}
  std::size_t left() const { return b_.size() - off_; }
  bool u8(std::uint8_t* v) {
    if (left() < 1) return false;
    *v = static_cast<std::uint8_t>(b_[off_]);
    off_ += 1;
    return true;
  }
  bool u32(std::uint32_t* v) {
    if (left() < 4) return false;
    *v = util::get_le32(b_.data() + off_);
    off_ += 4;
    return true;
  }
  bool u64(std::uint64_t* v) {
    if (left() < 8) return false;
    *v = util::get_le64(b_.data() + off_);
    off_ += 8;
    return true;
  }
  bool str(std::uint32_t n, std::string* s) {
    if (left() < n) return false;
    s->assign(reinterpret_cast<const char*>(b_.data() + off_), n);
    off_ += n;
    return true;
  }
  bool bytes_lstr(std::string* s) {  // u32 length + bytes
    std::uint32_t n;
    return u32(&n) && str(n, s);
  }

 private:
  std::span<const std::byte> b_;
  std::size_t off_ = 0;
};

}  // namespace

void encode_region_header(const RegionHeader& h, std::span<std::byte> out) {
  std::byte* p = out.data();
  std::memset(p, 0, kRegionHeaderSize);
  util::put_le32(p + 8, h.version);
  util::put_le32(p + 12, h.block_size);
  util::put_le64(p + 16, h.nonce);
  util::put_le64(p + 24, h.region_length);
  util::put_le64(p + 32, h.slot_offset[0]);
  util::put_le64(p + 40, h.slot_offset[1]);
  util::put_le64(p + 48, h.slot_length);
  util::put_le64(p + 56, h.log_offset);
  util::put_le64(p + 64, h.log_length);
  seal_header(p, kRegionMagic);
}

std::optional<RegionHeader> decode_region_header(std::span<const std::byte> bytes) {
  if (!header_ok(bytes, kRegionMagic)) return std::nullopt;
  const std::byte* p = bytes.data();
  RegionHeader h;
  h.version = util::get_le32(p + 8);
  h.block_size = util::get_le32(p + 12);
  h.nonce = util::get_le64(p + 16);
  h.region_length = util::get_le64(p + 24);
  h.slot_offset[0] = util::get_le64(p + 32);
  h.slot_offset[1] = util::get_le64(p + 40);
  h.slot_length = util::get_le64(p + 48);
  h.log_offset = util::get_le64(p + 56);
  h.log_length = util::get_le64(p + 64);
  return h;
}

std::string check_region_geometry(const RegionHeader& h, std::uint32_t device_block_size,
                                  std::uint64_t region_length) {
  if (h.block_size != device_block_size)
    return "block size " + std::to_string(h.block_size) + " does not match the device's " +
           std::to_string(device_block_size);
  if (h.region_length != region_length)
    return "region length " + std::to_string(h.region_length) + " does not match the expected " +
           std::to_string(region_length);
  const std::uint64_t bs = h.block_size;
  if (h.version < kOldestVersion || h.version > kFormatVersion) return "unsupported version";
  const std::uint64_t span = h.copy_length();
  if (span < 8 * bs) return "region too small for its copies";
  struct Area {
    std::uint64_t off, len;
  } areas[4] = {{0, bs}, {h.slot_offset[0], h.slot_length}, {h.slot_offset[1], h.slot_length},
                {h.log_offset, h.log_length}};
  for (const Area& a : areas) {
    if (a.len == 0 || a.off % bs != 0 || a.len % bs != 0 || a.off > span || a.len > span - a.off)
      return "areas outside the region or not block-aligned";
  }
  if (h.slot_length < bs || h.log_length < 2 * bs) return "areas too small";
  std::sort(std::begin(areas), std::end(areas), [](const Area& a, const Area& b) { return a.off < b.off; });
  for (int i = 0; i + 1 < 4; ++i)
    if (areas[i].off + areas[i].len > areas[i + 1].off) return "areas overlap";
  return {};
}

std::uint64_t log_window(const RegionHeader& h, std::uint64_t checkpoint_bytes) {
  if (h.version < 2 || h.block_size == 0) return h.log_length;
  const std::uint64_t bs = h.block_size;
  const std::uint64_t twice = util::align_up(checkpoint_bytes, bs) * 2;
  return std::min(h.log_length, std::max(kMinLogWindow, twice));
}

std::uint64_t log_batch_bytes(const WriteBatch& batch) {
  std::uint64_t n = 12;
  for (const auto& op : batch.ops()) n += 5 + op.key.size() + (op.is_put ? 4 + op.value.size() : 0);
  return n;
}

void append_log_batch(std::string& payload, std::uint64_t sequence, const WriteBatch& batch) {
  util::append_le64(payload, sequence);
  util::append_le32(payload, static_cast<std::uint32_t>(batch.size()));
  for (const auto& op : batch.ops()) {
    payload.push_back(op.is_put ? 1 : 0);
    util::append_le32(payload, static_cast<std::uint32_t>(op.key.size()));
    payload.append(op.key);
    if (op.is_put) {
      util::append_le32(payload, static_cast<std::uint32_t>(op.value.size()));
      payload.append(op.value);
    }
  }
}

void encode_chunk_header(const ChunkHeader& h, std::span<std::byte> out) {
  std::byte* p = out.data();
  std::memset(p, 0, kChunkHeaderSize);
  util::put_le64(p + 8, h.nonce);
  util::put_le64(p + 16, h.epoch);
  util::put_le64(p + 24, h.chunk_seq);
  util::put_le64(p + 32, h.position);
  util::put_le64(p + 40, h.first_batch);
  util::put_le64(p + 48, h.last_batch);
  util::put_le64(p + 56, h.payload_length);
  util::put_le64(p + 64, h.payload_hash);
  seal_header(p, kChunkMagic);
}

std::optional<ChunkHeader> decode_chunk_header(std::span<const std::byte> bytes) {
  if (!header_ok(bytes, kChunkMagic)) return std::nullopt;
  const std::byte* p = bytes.data();
  ChunkHeader h;
  h.nonce = util::get_le64(p + 8);
  h.epoch = util::get_le64(p + 16);
  h.chunk_seq = util::get_le64(p + 24);
  h.position = util::get_le64(p + 32);
  h.first_batch = util::get_le64(p + 40);
  h.last_batch = util::get_le64(p + 48);
  h.payload_length = util::get_le64(p + 56);
  h.payload_hash = util::get_le64(p + 64);
  return h;
}

std::optional<Chunk> decode_chunk(std::span<const std::byte> bytes) {
  auto h = decode_chunk_header(bytes);
  if (!h) return std::nullopt;
  if (h->payload_length > bytes.size() - kChunkHeaderSize) return std::nullopt;
  if (h->first_batch == 0 || h->last_batch < h->first_batch) return std::nullopt;
  const auto payload = bytes.subspan(kChunkHeaderSize, h->payload_length);
  if (hash(payload.data(), payload.size()) != h->payload_hash) return std::nullopt;
  // Every batch takes at least 12 bytes: bounds the batch count before any allocation.
  if (h->last_batch - h->first_batch >= payload.size() / 12) return std::nullopt;
  Chunk chunk;
  chunk.header = *h;
  chunk.batches.reserve(h->last_batch - h->first_batch + 1);
  Cursor c(payload);
  std::uint64_t expect = h->first_batch;
  while (c.left() > 0) {
    if (expect > h->last_batch) return std::nullopt;
    LogBatch b;
    std::uint32_t ops;
    if (!c.u64(&b.sequence) || b.sequence != expect || !c.u32(&ops)) return std::nullopt;
    if (ops > c.left() / 5) return std::nullopt;
    for (std::uint32_t i = 0; i < ops; ++i) {
      std::uint8_t kind;
      std::string key, value;
      if (!c.u8(&kind) || kind > 1 || !c.bytes_lstr(&key)) return std::nullopt;
      if (kind == 1) {
        if (!c.bytes_lstr(&value)) return std::nullopt;
        b.batch.put(std::move(key), std::move(value));
      } else {
        b.batch.del(std::move(key));
      }
    }
    chunk.batches.push_back(std::move(b));
    ++expect;
  }
  if (expect != h->last_batch + 1) return std::nullopt;
  return chunk;
}

std::uint64_t checkpoint_bytes(const StateMap& state) {
  std::uint64_t n = kCheckpointHeaderSize;
  for (const auto& [k, v] : state) n += checkpoint_entry_bytes(k.size(), v.size());
  return n;
}

void encode_checkpoint(CheckpointHeader h, const StateMap& state, std::span<std::byte> out) {
  std::byte* p = out.data();
  std::byte* q = p + kCheckpointHeaderSize;
  for (const auto& [k, v] : state) {
    util::put_le32(q, static_cast<std::uint32_t>(k.size()));
    std::memcpy(q + 4, k.data(), k.size());
    q += 4 + k.size();
    util::put_le32(q, static_cast<std::uint32_t>(v.size()));
    std::memcpy(q + 4, v.data(), v.size());
    q += 4 + v.size();
  }
  h.entry_count = state.size();
  h.payload_length = static_cast<std::uint64_t>(q - p) - kCheckpointHeaderSize;
  h.payload_hash = hash(p + kCheckpointHeaderSize, h.payload_length);
  std::memset(p, 0, kCheckpointHeaderSize);
  util::put_le64(p + 8, h.nonce);
  util::put_le64(p + 16, h.sequence);
  util::put_le64(p + 24, h.log_position);
  util::put_le64(p + 32, h.next_chunk_seq);
  util::put_le64(p + 40, h.last_batch);
  util::put_le64(p + 48, h.entry_count);
  util::put_le64(p + 56, h.payload_length);
  util::put_le64(p + 64, h.payload_hash);
  seal_header(p, kCheckpointMagic);
}

std::optional<CheckpointHeader> decode_checkpoint_header(std::span<const std::byte> bytes) {
  if (!header_ok(bytes, kCheckpointMagic)) return std::nullopt;
  const std::byte* p = bytes.data();
  CheckpointHeader h;
  h.nonce = util::get_le64(p + 8);
  h.sequence = util::get_le64(p + 16);
  h.log_position = util::get_le64(p + 24);
  h.next_chunk_seq = util::get_le64(p + 32);
  h.last_batch = util::get_le64(p + 40);
  h.entry_count = util::get_le64(p + 48);
  h.payload_length = util::get_le64(p + 56);
  h.payload_hash = util::get_le64(p + 64);
  return h;
}

std::optional<Checkpoint> decode_checkpoint(std::span<const std::byte> bytes) {
  auto h = decode_checkpoint_header(bytes);
  if (!h) return std::nullopt;
  if (h->payload_length > bytes.size() - kCheckpointHeaderSize) return std::nullopt;
  const auto payload = bytes.subspan(kCheckpointHeaderSize, h->payload_length);
  if (hash(payload.data(), payload.size()) != h->payload_hash) return std::nullopt;
  if (h->entry_count > payload.size() / 8) return std::nullopt;
  Checkpoint ck;
  ck.header = *h;
  Cursor c(payload);
  for (std::uint64_t i = 0; i < h->entry_count; ++i) {
    std::string key, value;
    if (!c.bytes_lstr(&key) || !c.bytes_lstr(&value)) return std::nullopt;
    if (!ck.state.empty() && !(ck.state.rbegin()->first < key)) return std::nullopt;
    ck.state.emplace_hint(ck.state.end(), std::move(key), std::move(value));
  }
  if (c.left() != 0) return std::nullopt;
  return ck;
}

}  // namespace meta

}  // namespace mmfs::fs
