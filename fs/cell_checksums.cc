#include "fs/cell_checksums.h"

#include <xxhash.h>
#if defined(__x86_64__)
#include <xxh_x86dispatch.h>
#endif

#include <algorithm>
#include <bit>
#include <cstring>

namespace mmfs::fs {

std::uint32_t cell_checksum(std::span<const std::byte> cell) {
#if defined(__x86_64__)
  // The same hash, by the widest vector unit the CPU has (AVX2/AVX-512):
  // libxxhash's plain entry point is built for SSE2, and every cell a read
  // loads is hashed.
  std::uint64_t h = XXH3_64bits_dispatch(cell.data(), cell.size());
#else
  std::uint64_t h = XXH3_64bits(cell.data(), cell.size());
#endif
  std::uint32_t s = std::uint32_t(h ^ (h >> 32));
  return s ? s : 1;
}

std::uint32_t checksum_block_bytes(std::uint32_t sector_size) {
  const std::uint32_t ss = std::max<std::uint32_t>(sector_size, 1);
  return (std::max<std::uint32_t>(4096, ss) + ss - 1) / ss * ss;
}

ChecksumBlocks checksum_blocks(std::uint64_t brick, std::uint32_t cell_sectors, std::uint32_t sector_size,
                               std::uint32_t block) {
  if (block == 0 || sector_size == 0 || block % sector_size != 0 || block >= brick) return {};
  const std::uint64_t per_cell = (brick + block - 1) / block;
  // Blocks of block/sector_size sectors each must end exactly at the cell's
  // last sector; otherwise the last block would be read in part.
  if (per_cell * (block / sector_size) != cell_sectors || per_cell > UINT32_MAX) return {};
  return ChecksumBlocks{std::uint32_t(per_cell), block};
}

namespace {
bool all_zero(std::span<const std::byte> bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](std::byte b) { return b == std::byte{0}; });
}
}  // namespace

std::string CellChecksums::key(Ino ino, std::uint64_t record, char tag) {
  std::string k{tag, '/'};
  for (int i = 7; i >= 0; --i) k.push_back(char((ino >> (8 * i)) & 0xff));
  for (int i = 7; i >= 0; --i) k.push_back(char((record >> (8 * i)) & 0xff));
  return k;
}

CellChecksums::CellChecksums(const MetaStore& store, Ino ino, std::uint64_t cells, char tag, ChecksumBlocks blocks)
    : ino_(ino), tag_(tag), blocks_(blocks) {
  cells *= blocks.per_cell;  // entries from here on
  entries_ = cells;
  dirty_.assign((cells + kCellsPerRecord - 1) / kCellsPerRecord, false);
  // One ordered pass over the records present (an array's first open: a
  // lookup per record and a byte-wise decode cost 1.3 ms for the 512
  // records of a 2 GiB array, and the alternatives' table is usually absent).
  const std::string prefix = key(ino, 0, tag).substr(0, 10);
  store.scan(prefix, [&](std::string_view k, std::string_view v) {
    if (k.size() != 18) return true;
    std::uint64_t r = 0;
    for (std::size_t i = 10; i < 18; ++i) r = r << 8 | std::uint8_t(k[i]);
    if (r >= dirty_.size()) return true;  // past the table (records of a longer one are not ours to read)
    const std::uint64_t first = r * kCellsPerRecord;
    const std::uint64_t n = std::min<std::uint64_t>(v.size() / 4, cells - first);
    if (sums_.empty()) sums_.assign(cells, 0);
    if constexpr (std::endian::native == std::endian::little) {
      std::memcpy(sums_.data() + first, v.data(), n * 4);
    } else {
      for (std::uint64_t i = 0; i < n; ++i) {
        const auto* p = reinterpret_cast<const std::uint8_t*>(v.data() + 4 * i);
        sums_[first + i] = std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 |
                           std::uint32_t(p[3]) << 24;
      }
    }
    recorded_ = recorded_ || std::any_of(sums_.begin() + std::ptrdiff_t(first),
                                         sums_.begin() + std::ptrdiff_t(first + n), [](std::uint32_t x) { return x; });
    return true;
  });
}

void CellChecksums::set_entry(std::uint64_t i, std::uint32_t value) { put(i, value); }

bool CellChecksums::any(std::uint64_t cell) const {
  const std::uint64_t first = cell * blocks_.per_cell;
  for (std::uint64_t i = first; i < first + blocks_.per_cell; ++i)
    if (entry(i) != 0) return true;
  return false;
}

void CellChecksums::set(std::uint64_t cell, std::span<const std::byte> contents) {
  for (std::uint32_t b = 0; b < blocks_.per_cell; ++b) {
    const auto part = blocks_.of(contents, b);
    put(cell * blocks_.per_cell + b, all_zero(part) ? 0 : cell_checksum(part));
  }
}

void CellChecksums::set_alternative(std::uint64_t cell, std::span<const std::byte> contents) {
  for (std::uint32_t b = 0; b < blocks_.per_cell; ++b)
    put(cell * blocks_.per_cell + b, cell_checksum(blocks_.of(contents, b)));
}

void CellChecksums::clear_cell(std::uint64_t cell) {
  for (std::uint32_t b = 0; b < blocks_.per_cell; ++b) put(cell * blocks_.per_cell + b, 0);
}

void CellChecksums::set_raw(std::uint64_t cell, std::uint32_t value) { put(cell, value); }

bool CellChecksums::verify_block(std::uint64_t cell, std::uint32_t block, std::span<const std::byte> part) const {
  const std::uint32_t want = entry(cell * blocks_.per_cell + block);
  return want == 0 ? all_zero(part) : cell_checksum(part) == want;
}

bool CellChecksums::alternative_matches(std::uint64_t cell, std::uint32_t block,
                                        std::span<const std::byte> part) const {
  const std::uint32_t alt = entry(cell * blocks_.per_cell + block);
  return alt != 0 && cell_checksum(part) == alt;
}

bool CellChecksums::verify(std::uint64_t cell, std::span<const std::byte> contents) const {
  for (std::uint32_t b = 0; b < blocks_.per_cell; ++b)
    if (!verify_block(cell, b, blocks_.of(contents, b))) return false;
  return true;
}

void CellChecksums::stage(WriteBatch& batch) {
  for (std::uint64_t r = 0; r < dirty_.size(); ++r) {
    if (!dirty_[r]) continue;
    std::uint64_t first = r * kCellsPerRecord;
    std::uint64_t n = std::min<std::uint64_t>(kCellsPerRecord, entries_ - first);
    dirty_[r] = false;
    bool zero = true;
    for (std::uint64_t i = 0; i < n && zero; ++i) zero = entry(first + i) == 0;
    if (zero) {
      // A record of zeros reads as its absence: none is kept (a new array's
      // tables and an alternatives' table between rewrites cost nothing to
      // store or to load).
      batch.del(key(ino_, r, tag_));
      continue;
    }
    std::string v(4 * n, '\0');
    for (std::uint64_t i = 0; i < n; ++i)
      for (int b = 0; b < 4; ++b) v[4 * i + b] = char((entry(first + i) >> (8 * b)) & 0xff);
    batch.put(key(ino_, r, tag_), std::move(v));
  }
}

void CellChecksums::stage_removal(const MetaStore& store, Ino ino, WriteBatch& batch, char tag) {
  std::string prefix = key(ino, 0, tag).substr(0, 10);
  store.scan(prefix, [&](std::string_view k, std::string_view) {
    batch.del(std::string(k));
    return true;
  });
}

CellChecksums CellChecksums::fresh(Ino ino, std::uint64_t cells, char tag, ChecksumBlocks blocks) {
  CellChecksums t(ino, tag, blocks);
  cells *= blocks.per_cell;
  t.entries_ = cells;
  t.dirty_.assign((cells + kCellsPerRecord - 1) / kCellsPerRecord, true);
  return t;
}

void CellChecksums::resize(std::uint64_t cells) {
  std::uint64_t old = entries_;
  if (cells == old) return;
  entries_ = cells;
  if (!sums_.empty()) sums_.resize(cells, 0);
  std::uint64_t records = (cells + kCellsPerRecord - 1) / kCellsPerRecord;
  dirty_.resize(records, true);
  // The record holding the old or new end changes length.
  std::uint64_t edge = std::min(old, cells) / kCellsPerRecord;
  if (edge < records) dirty_[edge] = true;
}

void CellChecksums::stage_removal_from(const MetaStore& store, Ino ino, std::uint64_t first_record,
                                       WriteBatch& batch, char tag) {
  std::string from = key(ino, first_record, tag);
  store.scan(from.substr(0, 10), [&](std::string_view k, std::string_view) {
    if (k >= from) batch.del(std::string(k));
    return true;
  });
}

void CellChecksums::clear() {
  std::vector<std::uint32_t>().swap(sums_);
  std::fill(dirty_.begin(), dirty_.end(), true);
}

}  // namespace mmfs::fs
