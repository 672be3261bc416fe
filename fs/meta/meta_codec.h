// The on-disk encodings of the metadata store (fs/meta/meta_store.h): region
// header, log chunks and checkpoints. The layout is described at the top of
// fs/meta/meta_store.cc (and in docs/on-disk-format.md, "metadata").
//
// Encoding contract: every integer is little-endian (least-significant byte
// first), fixed width, unaligned. Every structure carries an XXH3-64 checksum
// of its header and of its payload.
//
// The decoders are the trust boundary: they take untrusted bytes (a span of
// any length, any content) and return std::nullopt unless every length, count,
// ordering rule and checksum is valid. They never read outside the span and
// never allocate more than a small multiple of the span's size, so they can be
// fuzzed directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fs/meta/meta_store.h"

namespace mmfs::fs::meta {

// Version 2 (written by format() since 2026-11-24) keeps two copies of every
// structure, one in each half of the region; version 1 regions (one copy, the
// log's whole area replayed and scanned at open) are still opened and written.
inline constexpr std::uint32_t kFormatVersion = 2;
inline constexpr std::uint32_t kOldestVersion = 1;
inline constexpr std::size_t kRegionHeaderSize = 80;
inline constexpr std::size_t kChunkHeaderSize = 80;
inline constexpr std::size_t kCheckpointHeaderSize = 80;
inline constexpr std::uint64_t kMinRegionBytes = 64 * 1024;
// The smallest log window of a version 2 region (see log_window()).
inline constexpr std::uint64_t kMinLogWindow = 4 << 20;
// Serialized size of one state entry in a checkpoint: u32 key length, key,
// u32 value length, value.
inline constexpr std::uint64_t checkpoint_entry_bytes(std::uint64_t key_len, std::uint64_t value_len) {
  return 8 + key_len + value_len;
}

using StateMap = std::map<std::string, std::string, std::less<>>;

// ---- region header (first block of the region) ----
struct RegionHeader {
  std::uint32_t version = kFormatVersion;
  std::uint32_t block_size = 0;
  std::uint64_t nonce = 0;  // random per format(); chunks and checkpoints carry it
  std::uint64_t region_length = 0;
  std::uint64_t slot_offset[2] = {0, 0};  // relative to the region start
  std::uint64_t slot_length = 0;
  std::uint64_t log_offset = 0;  // relative to the region start
  std::uint64_t log_length = 0;

  // Copies of every structure: 2 from version 2 on. Offsets above are
  // relative to the start of a copy; copy c starts at c * copy_stride().
  int copies() const { return version >= 2 ? 2 : 1; }
  std::uint64_t copy_stride() const {
    return version >= 2 && block_size ? region_length / block_size / 2 * block_size : 0;
  }
  // Bytes of the region one copy spans (the areas lie inside it).
  std::uint64_t copy_length() const { return version >= 2 ? copy_stride() : region_length; }
};
// The log bytes the chunks of one epoch may use, fixed by its checkpoint of
// `checkpoint_bytes` (header + payload): replay and the scan for lost chunks
// at open never read more of the log than this. Version 1: the whole log.
// Version 2: twice the checkpoint (so checkpoints cost at most half of what
// the log writes), at least kMinLogWindow, at most the log.
std::uint64_t log_window(const RegionHeader& h, std::uint64_t checkpoint_bytes);
// REQUIRES: out.size() >= kRegionHeaderSize.
void encode_region_header(const RegionHeader& h, std::span<std::byte> out);
// Checks magic and header checksum only (not version or geometry).
// `bytes` must be at least kRegionHeaderSize long.
std::optional<RegionHeader> decode_region_header(std::span<const std::byte> bytes);
// Empty when the geometry is consistent with the device and region; else why not.
std::string check_region_geometry(const RegionHeader& h, std::uint32_t device_block_size,
                                  std::uint64_t region_length);

// ---- log chunks ----
struct ChunkHeader {
  std::uint64_t nonce = 0;
  std::uint64_t epoch = 0;      // sequence of the checkpoint the chunk follows
  std::uint64_t chunk_seq = 0;  // +1 per chunk, continues across checkpoints
  std::uint64_t position = 0;   // byte offset of the chunk in the log area
  std::uint64_t first_batch = 0, last_batch = 0;  // batch sequences, inclusive
  std::uint64_t payload_length = 0;
  std::uint64_t payload_hash = 0;  // XXH3-64 of the payload
};
struct LogBatch {
  std::uint64_t sequence = 0;
  WriteBatch batch;
};
struct Chunk {
  ChunkHeader header;
  std::vector<LogBatch> batches;
};
// Appends one batch to a chunk payload.
void append_log_batch(std::string& payload, std::uint64_t sequence, const WriteBatch& batch);
// Encoded size of one batch in a chunk payload.
std::uint64_t log_batch_bytes(const WriteBatch& batch);
// Writes the header (computing its checksum; payload_hash must be set).
// REQUIRES: out.size() >= kChunkHeaderSize.
void encode_chunk_header(const ChunkHeader& h, std::span<std::byte> out);
// Checks magic and header checksum only.
std::optional<ChunkHeader> decode_chunk_header(std::span<const std::byte> bytes);
// `bytes` starts at a chunk header and may extend beyond the chunk. Checks the
// header, the payload checksum, and that the payload holds exactly the batches
// first_batch..last_batch (consecutive, at least one) and nothing else.
std::optional<Chunk> decode_chunk(std::span<const std::byte> bytes);

// ---- checkpoints ----
struct CheckpointHeader {
  std::uint64_t nonce = 0;
  std::uint64_t sequence = 0;        // +1 per checkpoint; the newest valid slot wins
  std::uint64_t log_position = 0;    // where replay starts (byte offset in the log area)
  std::uint64_t next_chunk_seq = 0;  // the chunk sequence replay expects there
  std::uint64_t last_batch = 0;      // the last batch the state includes
  std::uint64_t entry_count = 0;
  std::uint64_t payload_length = 0;
  std::uint64_t payload_hash = 0;
};
struct Checkpoint {
  CheckpointHeader header;
  StateMap state;
};
// Serialized size (header + payload) of a checkpoint of `state`.
std::uint64_t checkpoint_bytes(const StateMap& state);
// Writes header + payload; fills entry_count, payload_length, payload_hash.
// REQUIRES: out.size() >= checkpoint_bytes(state).
void encode_checkpoint(CheckpointHeader h, const StateMap& state, std::span<std::byte> out);
// Checks magic and header checksum only.
std::optional<CheckpointHeader> decode_checkpoint_header(std::span<const std::byte> bytes);
// `bytes` starts at a checkpoint header and may extend beyond it. Checks both
// checksums, the entry count, strictly ascending keys, exact payload length.
std::optional<Checkpoint> decode_checkpoint(std::span<const std::byte> bytes);

}  // namespace mmfs::fs::meta
