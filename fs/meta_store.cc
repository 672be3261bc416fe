// The metadata store (fs/meta_store.h): an in-memory ordered map made durable
// by a write-ahead log of batches plus checkpoints of the whole map.
//
// ===========================================================================
// On-disk format of the metadata region
// ===========================================================================
//
// Integers are little-endian, fixed width, unaligned. Checksums are XXH3-64
// (xxhash's XXH3_64bits, seed 0). Offsets below are relative to the start of
// the region; BS is the device's logical block size. All areas are
// block-aligned.
//
//   +--------+---------------------+---------------------+---------------+
//   | header | checkpoint slot 0   | checkpoint slot 1   | log (a ring)  |
//   +--------+---------------------+---------------------+---------------+
//   0        BS                    BS+S                  BS+2S           length
//
// Split (chosen by format(), recorded in the header; open() reads it from
// there): N = length/BS blocks, R = N-1; log = max(2, R/4) blocks, each slot
// S = (R - log)/2 blocks, the log gets the remainder. A 512 KiB region on
// 4 KiB blocks: header 4 KiB, slots 192 KiB each, log 124 KiB.
//
// Region header (block 0, written only by format()):
//    0  8  magic "MMFSMETA"
//    8  4  version (1)
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
// write followed by one flush. The log space from the newest durable
// checkpoint's log position up to the tail (including skipped ends) is in
// use; a chunk that would not fit in the free space is not written: a
// checkpoint is written instead. A checkpoint holds the whole in-memory state,
// i.e. every batch applied so far, so it also makes the pending batches
// durable and pending batches are never split over several chunks. It goes to
// the slot not holding the newest valid checkpoint, records the current tail
// as its log position, and is flushed before any later chunk is written; only
// then does the space before the tail become free again.
//
// Replay (open). Take the valid checkpoint with the highest sequence; at its
// log position expect chunk `next chunk sequence`: read the header there (or,
// if it is not valid there, at offset 0 - allowed only when a chunk of that
// length would not have fit at the tail); accept it when magic, nonce, both
// checksums, chunk sequence, epoch (= the checkpoint's sequence), position,
// batch continuity (first batch = last applied + 1) and bounds hold; apply its
// batches and go on behind it. The first chunk that fails any check ends the
// log: a torn or lost last chunk is simply not there, and stale chunks never
// match the expected sequence and epoch. Then open() reads every block of the
// log area and refuses with EUCLEAN if any holds a valid chunk header (this
// nonce) of a newer epoch than the chosen checkpoint (a newer checkpoint was
// durable and is now corrupt) or of the same epoch with a higher chunk
// sequence than the one replay stopped at (a chunk in the middle of the log is
// corrupt). Neither can follow a torn or lost write: a chunk is flushed before
// the next one is written and a checkpoint before the chunks of its epoch.
// A corrupt last chunk or a corrupt newest checkpoint with no chunk after it
// cannot be told from a torn write; open() then returns the older prefix state.
// ===========================================================================
#include "fs/meta_store.h"

#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <limits>
#include <random>
#include <shared_mutex>
#include <unordered_map>

#include "fs/meta_codec.h"

namespace mmfs::fs {

// ---------------------------------------------------------------------------
// WriteBatch

void WriteBatch::put(std::string key, std::string value) {
  ops_.push_back(Op{true, std::move(key), std::move(value)});
}

void WriteBatch::del(std::string key) { ops_.push_back(Op{false, std::move(key), {}}); }

// ---------------------------------------------------------------------------
// Encodings (fs/meta_codec.h)

namespace meta {
namespace {

constexpr char kRegionMagic[8] = {'M', 'M', 'F', 'S', 'M', 'E', 'T', 'A'};
constexpr char kChunkMagic[8] = {'M', 'M', 'F', 'S', 'L', 'O', 'G', 'C'};
constexpr char kCheckpointMagic[8] = {'M', 'M', 'F', 'S', 'C', 'K', 'P', 'T'};
constexpr std::size_t kHeaderHashOffset = 72;  // all three headers: XXH3 of [0, 72) at 72

void put_u32(std::byte* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}
void put_u64(std::byte* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}
std::uint32_t get_u32(const std::byte* p) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(p[i]);
  return v;
}
std::uint64_t get_u64(const std::byte* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(p[i]);
  return v;
}
std::uint64_t hash(const void* p, std::size_t n) { return XXH3_64bits(p, n); }

void append_u32(std::string& s, std::uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<char>(v >> (8 * i));
  s.append(b, 4);
}
void append_u64(std::string& s, std::uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(v >> (8 * i));
  s.append(b, 8);
}

bool has_magic(std::span<const std::byte> bytes, const char (&magic)[8]) {
  return bytes.size() >= 8 && std::memcmp(bytes.data(), magic, 8) == 0;
}

// Magic and header checksum of an 80-byte header at the start of `bytes`.
bool header_ok(std::span<const std::byte> bytes, const char (&magic)[8]) {
  return bytes.size() >= 80 && has_magic(bytes, magic) &&
         get_u64(bytes.data() + kHeaderHashOffset) == hash(bytes.data(), kHeaderHashOffset);
}

void seal_header(std::byte* p, const char (&magic)[8]) {
  std::memcpy(p, magic, 8);
  put_u64(p + kHeaderHashOffset, hash(p, kHeaderHashOffset));
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
    *v = get_u32(b_.data() + off_);
    off_ += 4;
    return true;
  }
  bool u64(std::uint64_t* v) {
    if (left() < 8) return false;
    *v = get_u64(b_.data() + off_);
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
  put_u32(p + 8, h.version);
  put_u32(p + 12, h.block_size);
  put_u64(p + 16, h.nonce);
  put_u64(p + 24, h.region_length);
  put_u64(p + 32, h.slot_offset[0]);
  put_u64(p + 40, h.slot_offset[1]);
  put_u64(p + 48, h.slot_length);
  put_u64(p + 56, h.log_offset);
  put_u64(p + 64, h.log_length);
  seal_header(p, kRegionMagic);
}

std::optional<RegionHeader> decode_region_header(std::span<const std::byte> bytes) {
  if (!header_ok(bytes, kRegionMagic)) return std::nullopt;
  const std::byte* p = bytes.data();
  RegionHeader h;
  h.version = get_u32(p + 8);
  h.block_size = get_u32(p + 12);
  h.nonce = get_u64(p + 16);
  h.region_length = get_u64(p + 24);
  h.slot_offset[0] = get_u64(p + 32);
  h.slot_offset[1] = get_u64(p + 40);
  h.slot_length = get_u64(p + 48);
  h.log_offset = get_u64(p + 56);
  h.log_length = get_u64(p + 64);
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
  struct Area {
    std::uint64_t off, len;
  } areas[4] = {{0, bs}, {h.slot_offset[0], h.slot_length}, {h.slot_offset[1], h.slot_length},
                {h.log_offset, h.log_length}};
  for (const Area& a : areas) {
    if (a.len == 0 || a.off % bs != 0 || a.len % bs != 0 || a.off > region_length ||
        a.len > region_length - a.off)
      return "areas outside the region or not block-aligned";
  }
  if (h.slot_length < bs || h.log_length < 2 * bs) return "areas too small";
  std::sort(std::begin(areas), std::end(areas), [](const Area& a, const Area& b) { return a.off < b.off; });
  for (int i = 0; i + 1 < 4; ++i)
    if (areas[i].off + areas[i].len > areas[i + 1].off) return "areas overlap";
  return {};
}

std::uint64_t log_batch_bytes(const WriteBatch& batch) {
  std::uint64_t n = 12;
  for (const auto& op : batch.ops()) n += 5 + op.key.size() + (op.is_put ? 4 + op.value.size() : 0);
  return n;
}

void append_log_batch(std::string& payload, std::uint64_t sequence, const WriteBatch& batch) {
  append_u64(payload, sequence);
  append_u32(payload, static_cast<std::uint32_t>(batch.size()));
  for (const auto& op : batch.ops()) {
    payload.push_back(op.is_put ? 1 : 0);
    append_u32(payload, static_cast<std::uint32_t>(op.key.size()));
    payload.append(op.key);
    if (op.is_put) {
      append_u32(payload, static_cast<std::uint32_t>(op.value.size()));
      payload.append(op.value);
    }
  }
}

void encode_chunk_header(const ChunkHeader& h, std::span<std::byte> out) {
  std::byte* p = out.data();
  std::memset(p, 0, kChunkHeaderSize);
  put_u64(p + 8, h.nonce);
  put_u64(p + 16, h.epoch);
  put_u64(p + 24, h.chunk_seq);
  put_u64(p + 32, h.position);
  put_u64(p + 40, h.first_batch);
  put_u64(p + 48, h.last_batch);
  put_u64(p + 56, h.payload_length);
  put_u64(p + 64, h.payload_hash);
  seal_header(p, kChunkMagic);
}

std::optional<ChunkHeader> decode_chunk_header(std::span<const std::byte> bytes) {
  if (!header_ok(bytes, kChunkMagic)) return std::nullopt;
  const std::byte* p = bytes.data();
  ChunkHeader h;
  h.nonce = get_u64(p + 8);
  h.epoch = get_u64(p + 16);
  h.chunk_seq = get_u64(p + 24);
  h.position = get_u64(p + 32);
  h.first_batch = get_u64(p + 40);
  h.last_batch = get_u64(p + 48);
  h.payload_length = get_u64(p + 56);
  h.payload_hash = get_u64(p + 64);
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
    put_u32(q, static_cast<std::uint32_t>(k.size()));
    std::memcpy(q + 4, k.data(), k.size());
    q += 4 + k.size();
    put_u32(q, static_cast<std::uint32_t>(v.size()));
    std::memcpy(q + 4, v.data(), v.size());
    q += 4 + v.size();
  }
  h.entry_count = state.size();
  h.payload_length = static_cast<std::uint64_t>(q - p) - kCheckpointHeaderSize;
  h.payload_hash = hash(p + kCheckpointHeaderSize, h.payload_length);
  std::memset(p, 0, kCheckpointHeaderSize);
  put_u64(p + 8, h.nonce);
  put_u64(p + 16, h.sequence);
  put_u64(p + 24, h.log_position);
  put_u64(p + 32, h.next_chunk_seq);
  put_u64(p + 40, h.last_batch);
  put_u64(p + 48, h.entry_count);
  put_u64(p + 56, h.payload_length);
  put_u64(p + 64, h.payload_hash);
  seal_header(p, kCheckpointMagic);
}

std::optional<CheckpointHeader> decode_checkpoint_header(std::span<const std::byte> bytes) {
  if (!header_ok(bytes, kCheckpointMagic)) return std::nullopt;
  const std::byte* p = bytes.data();
  CheckpointHeader h;
  h.nonce = get_u64(p + 8);
  h.sequence = get_u64(p + 16);
  h.log_position = get_u64(p + 24);
  h.next_chunk_seq = get_u64(p + 32);
  h.last_batch = get_u64(p + 40);
  h.entry_count = get_u64(p + 48);
  h.payload_length = get_u64(p + 56);
  h.payload_hash = get_u64(p + 64);
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

// ---------------------------------------------------------------------------
// Device helpers

namespace {

using meta::Checkpoint;
using meta::CheckpointHeader;
using meta::ChunkHeader;
using meta::RegionHeader;
using meta::StateMap;

constexpr std::uint64_t kMaxRequestBytes = std::uint64_t{1} << 30;
constexpr std::uint64_t kReadWindowBytes = std::uint64_t{1} << 20;

std::uint64_t round_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) / a * a; }

// One submit() of [offset, offset+length), split into requests of <= 1 GiB.
int device_io(BlockDevice& dev, IoRequest::Op op, std::uint64_t offset, std::byte* buffer, std::uint64_t length) {
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
      const std::uint64_t want = std::min(std::max(round_up(len, bs_), kReadWindowBytes), length_ - off);
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

int check_region(const BlockDevice& dev, const MetaRegion& region) {
  const std::uint64_t bs = dev.block_size();
  if (bs == 0 || region.offset % bs != 0 || region.length % bs != 0 || region.length < meta::kMinRegionBytes ||
      region.length / bs < 8 || region.offset > dev.size_bytes() || region.length > dev.size_bytes() - region.offset)
    return EINVAL;
  return 0;
}

void apply_to(StateMap& state, const WriteBatch& batch) {
  for (const auto& op : batch.ops()) {
    if (op.is_put) {
      state.insert_or_assign(op.key, op.value);
    } else if (auto it = state.find(op.key); it != state.end()) {
      state.erase(it);
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// MetaStore

struct MetaStore::Impl {
  Impl(BlockDevice& d, const MetaRegion& r, const RegionHeader& g) : dev(d), region(r), geo(g), bs(d.block_size()) {}

  BlockDevice& dev;
  const MetaRegion region;
  const RegionHeader geo;
  const std::uint32_t bs;

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

int MetaStore::Impl::lead(std::unique_lock<std::mutex>& lk, bool force_checkpoint) {
  std::vector<std::string> batches;
  batches.swap(pending);
  const std::uint64_t payload_bytes = pending_bytes;
  pending_bytes = 0;
  const std::uint64_t first = durable + 1, last = last_applied;
  const std::uint64_t L = geo.log_length;
  const std::uint64_t chunk_len = round_up(meta::kChunkHeaderSize + payload_bytes, bs);
  const std::uint64_t pos = (chunk_len <= L - tail) ? tail : 0;
  const std::uint64_t consume = pos == tail ? chunk_len : (L - tail) + chunk_len;
  const bool use_log = !force_checkpoint && chunk_len <= L && consume <= L - used;

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
    err = device_io(dev, IoRequest::Op::Write, region.offset + geo.log_offset + pos, p, chunk_len);
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
    const std::uint64_t len = round_up(state_bytes, bs);
    reserve_io(len);
    meta::encode_checkpoint(h, state, io_buf.span());
    std::memset(io_buf.data() + state_bytes, 0, len - state_bytes);
    const int slot = 1 - active_slot;
    lk.unlock();
    err = device_io(dev, IoRequest::Op::Write, region.offset + geo.slot_offset[slot], io_buf.data(), len);
    if (err == 0) err = dev.flush();
    lk.lock();
    if (err == 0) {
      active_slot = slot;
      ckpt_seq = h.sequence;
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

MetaStore::MetaStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MetaStore::~MetaStore() = default;

int MetaStore::format(BlockDevice& device, const MetaRegion& region) {
  if (int err = check_region(device, region)) return err;
  const std::uint64_t bs = device.block_size();
  const std::uint64_t r = region.length / bs - 1;
  std::uint64_t log_blocks = std::max<std::uint64_t>(2, r / 4);
  const std::uint64_t slot_blocks = (r - log_blocks) / 2;
  log_blocks = r - 2 * slot_blocks;

  RegionHeader g;
  g.block_size = static_cast<std::uint32_t>(bs);
  std::random_device rd;
  g.nonce = (std::uint64_t{rd()} << 32) ^ rd() ^
            static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  if (g.nonce == 0) g.nonce = 1;
  g.region_length = region.length;
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
  IoRequest reqs[3];
  const std::uint64_t offs[3] = {0, g.slot_offset[0], g.slot_offset[1]};
  for (int i = 0; i < 3; ++i) {
    reqs[i].op = IoRequest::Op::Write;
    reqs[i].offset = region.offset + offs[i];
    reqs[i].length = static_cast<std::uint32_t>(bs);
    reqs[i].buffer = buf.data() + i * bs;
  }
  if (int err = device.submit(reqs)) return err;
  return device.flush();
}

std::unique_ptr<MetaStore> MetaStore::open(BlockDevice& device, const MetaRegion& region, int* error,
                                           std::string* message) {
  auto fail = [&](int e, std::string m) -> std::unique_ptr<MetaStore> {
    if (error) *error = e;
    if (message) *message = std::move(m);
    return nullptr;
  };
  if (check_region(device, region) != 0)
    return fail(EINVAL, "metadata region is not block-aligned, too small (< 64 KiB) or outside the device");
  const std::uint32_t bs = device.block_size();

  // Region header.
  AlignedBuffer hb(bs);
  if (int err = device.read(region.offset, hb.data(), bs)) return fail(err, "cannot read the metadata region header");
  if (std::memcmp(hb.data(), "MMFSMETA", 8) != 0)
    return fail(EUCLEAN, "metadata region header: bad magic (not an mmfs metadata region)");
  const auto geo = meta::decode_region_header(hb.span());
  if (!geo) return fail(EUCLEAN, "metadata region header checksum mismatch");
  if (geo->version != meta::kFormatVersion)
    return fail(EUCLEAN, "metadata region header: unsupported version " + std::to_string(geo->version));
  if (std::string why = meta::check_region_geometry(*geo, bs, region.length); !why.empty())
    return fail(EUCLEAN, "metadata region header: " + why);

  // Checkpoint slots.
  std::optional<Checkpoint> slots[2];
  std::string why[2];
  for (int s = 0; s < 2; ++s) {
    const std::uint64_t base = region.offset + geo->slot_offset[s];
    AlignedBuffer first(bs);
    if (int err = device.read(base, first.data(), bs))
      return fail(err, "cannot read checkpoint slot " + std::to_string(s));
    const auto h = meta::decode_checkpoint_header(first.span());
    if (!h) {
      why[s] = "bad magic or header checksum";
      continue;
    }
    if (h->nonce != geo->nonce) {
      why[s] = "left by another format";
      continue;
    }
    if (h->payload_length > geo->slot_length - meta::kCheckpointHeaderSize) {
      why[s] = "payload length out of range";
      continue;
    }
    const std::uint64_t len = round_up(meta::kCheckpointHeaderSize + h->payload_length, bs);
    AlignedBuffer all;
    std::span<const std::byte> bytes = first.span();
    if (len > bs) {
      all = AlignedBuffer(len);
      if (int err = device_io(device, IoRequest::Op::Read, base, all.data(), len))
        return fail(err, "cannot read checkpoint slot " + std::to_string(s));
      bytes = all.span();
    }
    auto ck = meta::decode_checkpoint(bytes);
    if (!ck) {
      why[s] = "payload checksum mismatch or malformed payload";
      continue;
    }
    if (ck->header.log_position > geo->log_length || ck->header.log_position % bs != 0 ||
        ck->header.next_chunk_seq == 0) {
      why[s] = "log position out of range";
      continue;
    }
    slots[s] = std::move(ck);
  }
  if (!slots[0] && !slots[1])
    return fail(EUCLEAN, "no valid checkpoint (slot 0: " + why[0] + "; slot 1: " + why[1] + ")");
  const int chosen = !slots[1] ? 0 : !slots[0] ? 1 : (slots[1]->header.sequence > slots[0]->header.sequence ? 1 : 0);
  Checkpoint ck = std::move(*slots[chosen]);
  slots[0].reset();
  slots[1].reset();
  const std::uint64_t epoch = ck.header.sequence;

  // Replay the log.
  const std::uint64_t L = geo->log_length;
  AreaReader log(device, region.offset + geo->log_offset, L, bs);
  std::uint64_t pos = ck.header.log_position, seq = ck.header.next_chunk_seq, last = ck.header.last_batch, used = 0;
  for (;;) {
    std::optional<meta::Chunk> got;
    std::uint64_t got_at = 0, got_len = 0;
    for (int attempt = 0; attempt < 2 && !got; ++attempt) {
      const std::uint64_t cand = attempt == 0 ? pos : 0;
      if ((attempt == 1 && pos == 0) || bs > L - cand) continue;
      std::span<const std::byte> hdr_bytes;
      if (int err = log.get(cand, bs, &hdr_bytes)) return fail(err, "cannot read the metadata log");
      const auto h = meta::decode_chunk_header(hdr_bytes);
      if (!h || h->nonce != geo->nonce || h->epoch != epoch || h->chunk_seq != seq || h->position != cand ||
          h->first_batch != last + 1 || h->payload_length > L)
        continue;
      const std::uint64_t len = round_up(meta::kChunkHeaderSize + h->payload_length, bs);
      if (len > L - cand) continue;
      if (cand != pos && len <= L - pos) continue;  // the writer would have put it at pos
      const std::uint64_t consume = cand == pos ? len : (L - pos) + len;
      if (consume > L - used) continue;  // would overwrite the checkpoint's own log: not ours
      std::span<const std::byte> chunk_bytes;
      if (int err = log.get(cand, len, &chunk_bytes)) return fail(err, "cannot read the metadata log");
      got = meta::decode_chunk(chunk_bytes);
      if (!got) continue;
      got_at = cand;
      got_len = len;
      used += consume;
    }
    if (!got) break;
    for (const meta::LogBatch& b : got->batches) apply_to(ck.state, b.batch);
    last = got->header.last_batch;
    ++seq;
    pos = got_at + got_len;
  }
  // The log ends at chunk `seq`. A torn or lost write leaves no chunk after it
  // (each chunk is flushed before the next is written, and a checkpoint before
  // the chunks of its epoch), so a chunk of this epoch with a higher sequence,
  // or of a newer epoch, anywhere in the log means durable metadata is missing.
  for (std::uint64_t off = 0; off < L; off += bs) {
    std::span<const std::byte> b;
    if (int err = log.get(off, bs, &b)) return fail(err, "cannot read the metadata log");
    const auto h = meta::decode_chunk_header(b);
    if (!h || h->nonce != geo->nonce) continue;
    if (h->epoch > epoch)
      return fail(EUCLEAN, "metadata checkpoint " + std::to_string(epoch + 1) +
                               " is missing or corrupt but the log holds chunks written after it");
    if (h->epoch == epoch && h->chunk_seq > seq)
      return fail(EUCLEAN, "metadata log chunk " + std::to_string(seq) + " is missing or corrupt but chunk " +
                               std::to_string(h->chunk_seq) + " follows it");
  }
  const std::uint64_t state_bytes = meta::checkpoint_bytes(ck.state);
  if (state_bytes > geo->slot_length) return fail(EUCLEAN, "metadata state exceeds a checkpoint slot");

  auto impl = std::make_unique<Impl>(device, region, *geo);
  impl->state = std::move(ck.state);
  impl->state_bytes = state_bytes;
  impl->last_applied = impl->durable = impl->opened_at = last;
  impl->tail = pos;
  impl->used = used;
  impl->next_chunk = seq;
  impl->ckpt_seq = epoch;
  impl->active_slot = chosen;
  impl->stats.log_bytes_total = L;
  if (error) *error = 0;
  return std::unique_ptr<MetaStore>(new MetaStore(std::move(impl)));
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
  for (int i = 0; i < 8; ++i) enc[i] = static_cast<char>(seq >> (8 * i));
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
