#include "fs/meta/cell_checksums.h"

#include <xxhash.h>
#if defined(__x86_64__)
#include <xxh_x86dispatch.h>
#endif

#include <algorithm>
#include <bit>
#include <cstring>

#include "util/align.h"
#include "util/coding.h"

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
  return util::align_up(std::max<std::uint32_t>(4096, ss), ss);
}

ChecksumBlocks checksum_blocks(std::uint64_t brick, std::uint32_t cell_sectors, std::uint32_t sector_size,
                               std::uint32_t block) {
  if (block == 0 || sector_size == 0 || block % sector_size != 0 || block >= brick) return {};
  const std::uint64_t per_cell = util::div_up(brick, block);
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

CellChecksums::CellChecksums(const MetaStore& store, Ino ino, std::uint64_t cells, char tag, ChecksumBlocks blocks,
                             std::uint8_t slot)
    : ino_(ino), tag_(tag), slot_(slot), blocks_(blocks), store_(&store) {
  entries_ = cells * blocks.per_cell;
  reset(util::div_up(entries_, kCellsPerRecord), false);
  // Every record is read on first use, absent ones as zeros: neither copying
  // a 2 GiB array's 2 MiB table into fresh memory (about 1 ms of page faults
  // on this VM, and a beam reads a handful of its records) nor visiting its
  // keys to learn which exist (a tenth of a millisecond per placement of a
  // cold open) is worth it. One key under the prefix says whether any entry
  // may be recorded (an alternatives' table with no rewrite in flight has none).
  for (std::uint64_t r = 0; r < dirty_.size(); ++r) records_[r].store(unloaded(), std::memory_order_relaxed);
  store.scan(keys::checksum_table_prefix(ino, tag, slot), [&](std::string_view, std::string_view) {
    recorded_ = true;
    return false;
  });
}

void CellChecksums::load_all() {
  for (std::uint64_t r = 0; r < dirty_.size(); ++r) record(r);
}

const std::uint32_t* CellChecksums::unloaded() {
  static const std::uint32_t mark = 0;
  return &mark;
}

const std::uint32_t* CellChecksums::zeros() {
  static const std::uint32_t none[kCellsPerRecord] = {};
  return none;
}

void CellChecksums::reset(std::uint64_t records, bool dirty) {
  records_ = std::make_unique<std::atomic<const std::uint32_t*>[]>(records);
  for (std::uint64_t r = 0; r < records; ++r) records_[r].store(zeros(), std::memory_order_relaxed);
  owned_.clear();
  owned_.resize(records);
  dirty_.assign(records, dirty);
}

const std::uint32_t* CellChecksums::load(std::uint64_t r) const {
  std::lock_guard lock(*load_mu_);
  if (const std::uint32_t* p = records_[r].load(std::memory_order_acquire); p != unloaded()) return p;  // another reader's
  const std::uint32_t* p = zeros();
  if (auto v = store_->get(keys::checksum_record(ino_, r, tag_, slot_))) {
    const std::uint64_t first = r * kCellsPerRecord;
    const std::uint64_t n = std::min<std::uint64_t>(v->size() / 4, entries_ - first);
    auto page = std::make_unique<std::uint32_t[]>(kCellsPerRecord);
    if constexpr (std::endian::native == std::endian::little) {
      std::memcpy(page.get(), v->data(), n * 4);
    } else {
      for (std::uint64_t i = 0; i < n; ++i) page[i] = util::get_le32(v->data() + 4 * i);
    }
    // owned_ changes only here (under load_mu_) and in writers, which no
    // reader runs beside.
    owned_[r] = std::move(page);
    p = owned_[r].get();
  }
  records_[r].store(p, std::memory_order_release);
  return p;
}

std::uint32_t* CellChecksums::writable(std::uint64_t r) {
  if (!owned_[r]) {
    const std::uint32_t* p = record(r);  // loads it if stored
    if (!owned_[r]) {
      owned_[r] = std::make_unique<std::uint32_t[]>(kCellsPerRecord);
      std::memcpy(owned_[r].get(), p, kCellsPerRecord * 4);
      records_[r].store(owned_[r].get(), std::memory_order_release);
    }
  }
  return owned_[r].get();
}

void CellChecksums::put(std::uint64_t i, std::uint32_t value) {
  const std::uint64_t r = i / kCellsPerRecord;
  if (record(r)[i % kCellsPerRecord] == value) return;
  writable(r)[i % kCellsPerRecord] = value;
  dirty_[r] = true;
  recorded_ = recorded_ || value != 0;
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
      batch.del(keys::checksum_record(ino_, r, tag_, slot_));
      continue;
    }
    std::string v(4 * n, '\0');
    for (std::uint64_t i = 0; i < n; ++i) util::put_le32(v.data() + 4 * i, entry(first + i));
    batch.put(keys::checksum_record(ino_, r, tag_, slot_), std::move(v));
  }
}

void CellChecksums::stage_removal(const MetaStore& store, Ino ino, WriteBatch& batch, char tag, std::uint8_t slot) {
  store.scan(keys::checksum_table_prefix(ino, tag, slot), [&](std::string_view k, std::string_view) {
    batch.del(std::string(k));
    return true;
  });
}

CellChecksums CellChecksums::fresh(Ino ino, std::uint64_t cells, char tag, ChecksumBlocks blocks,
                                   std::uint8_t slot) {
  CellChecksums t(ino, tag, blocks, slot);
  t.entries_ = cells * blocks.per_cell;
  t.reset(util::div_up(t.entries_, kCellsPerRecord), true);
  return t;
}

void CellChecksums::resize(std::uint64_t cells) {
  const std::uint64_t old = entries_;
  if (cells == old) return;
  const std::uint64_t old_records = dirty_.size(), records = util::div_up(cells, kCellsPerRecord);
  // The record holding the old or new end changes length; a shrink clears
  // the entries it drops from it (a later growth brings them back as 0).
  const std::uint64_t edge = std::min(old, cells) / kCellsPerRecord;
  if (cells < old && cells % kCellsPerRecord != 0) {
    std::uint32_t* p = writable(edge);
    std::fill(p + cells % kCellsPerRecord, p + kCellsPerRecord, 0u);
  }
  auto next = std::make_unique<std::atomic<const std::uint32_t*>[]>(records);
  for (std::uint64_t r = 0; r < records; ++r)
    next[r].store(r < old_records ? records_[r].load(std::memory_order_relaxed) : zeros(), std::memory_order_relaxed);
  records_ = std::move(next);
  owned_.resize(records);
  dirty_.resize(records, true);
  entries_ = cells;
  if (edge < records) dirty_[edge] = true;
}

void CellChecksums::stage_removal_from(const MetaStore& store, Ino ino, std::uint64_t first_record,
                                       WriteBatch& batch, char tag) {
  const std::string from = keys::checksum_record(ino, first_record, tag);
  store.scan(keys::checksum_prefix(ino, tag), [&](std::string_view k, std::string_view) {
    if (k >= from) batch.del(std::string(k));
    return true;
  });
}

void CellChecksums::clear() { reset(dirty_.size(), true); }

}  // namespace mmfs::fs
