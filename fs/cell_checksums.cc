#include "fs/cell_checksums.h"

#include <xxhash.h>
#if defined(__x86_64__)
#include <xxh_x86dispatch.h>
#endif

#include <algorithm>

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

std::string CellChecksums::key(Ino ino, std::uint64_t record, char tag) {
  std::string k{tag, '/'};
  for (int i = 7; i >= 0; --i) k.push_back(char((ino >> (8 * i)) & 0xff));
  for (int i = 7; i >= 0; --i) k.push_back(char((record >> (8 * i)) & 0xff));
  return k;
}

CellChecksums::CellChecksums(const MetaStore& store, Ino ino, std::uint64_t cells, char tag)
    : ino_(ino), tag_(tag), sums_(cells, 0), dirty_((cells + kCellsPerRecord - 1) / kCellsPerRecord, false) {
  for (std::uint64_t r = 0; r < dirty_.size(); ++r) {
    auto v = store.get(key(ino, r, tag));
    if (!v) continue;
    std::uint64_t first = r * kCellsPerRecord;
    std::uint64_t n = std::min<std::uint64_t>(v->size() / 4, cells - first);
    for (std::uint64_t i = 0; i < n; ++i) {
      const auto* p = reinterpret_cast<const std::uint8_t*>(v->data() + 4 * i);
      sums_[first + i] = std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 |
                         std::uint32_t(p[3]) << 24;
    }
  }
}

void CellChecksums::set(std::uint64_t cell, std::span<const std::byte> contents) {
  bool zero = std::all_of(contents.begin(), contents.end(), [](std::byte b) { return b == std::byte{0}; });
  sums_[cell] = zero ? 0 : cell_checksum(contents);
  dirty_[cell / kCellsPerRecord] = true;
}

void CellChecksums::set_raw(std::uint64_t cell, std::uint32_t value) {
  if (sums_[cell] == value) return;
  sums_[cell] = value;
  dirty_[cell / kCellsPerRecord] = true;
}

bool CellChecksums::verify(std::uint64_t cell, std::span<const std::byte> contents) const {
  if (sums_[cell] == 0)
    return std::all_of(contents.begin(), contents.end(), [](std::byte b) { return b == std::byte{0}; });
  return cell_checksum(contents) == sums_[cell];
}

void CellChecksums::stage(WriteBatch& batch) {
  for (std::uint64_t r = 0; r < dirty_.size(); ++r) {
    if (!dirty_[r]) continue;
    std::uint64_t first = r * kCellsPerRecord;
    std::uint64_t n = std::min<std::uint64_t>(kCellsPerRecord, sums_.size() - first);
    std::string v(4 * n, '\0');
    for (std::uint64_t i = 0; i < n; ++i)
      for (int b = 0; b < 4; ++b) v[4 * i + b] = char((sums_[first + i] >> (8 * b)) & 0xff);
    batch.put(key(ino_, r, tag_), std::move(v));
    dirty_[r] = false;
  }
}

void CellChecksums::stage_removal(const MetaStore& store, Ino ino, WriteBatch& batch, char tag) {
  std::string prefix = key(ino, 0, tag).substr(0, 10);
  store.scan(prefix, [&](std::string_view k, std::string_view) {
    batch.del(std::string(k));
    return true;
  });
}

CellChecksums CellChecksums::fresh(Ino ino, std::uint64_t cells, char tag) {
  CellChecksums t(ino, tag);
  t.sums_.assign(cells, 0);
  t.dirty_.assign((cells + kCellsPerRecord - 1) / kCellsPerRecord, true);
  return t;
}

void CellChecksums::resize(std::uint64_t cells) {
  std::uint64_t old = sums_.size();
  if (cells == old) return;
  sums_.resize(cells, 0);
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
  std::fill(sums_.begin(), sums_.end(), 0);
  std::fill(dirty_.begin(), dirty_.end(), true);
}

}  // namespace mmfs::fs
