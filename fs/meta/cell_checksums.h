// Checksums of array data (docs/on-disk-format.md, "data checksums"): one per
// block of a cell, so a read of only the sectors of a cell that hold a
// selection can still be verified (partial-cell reads); arrays
// placed before that have one per cell. They live in the metadata store — 4
// bytes per block, in records of 1024 — so the whole table of an open array
// sits in memory and verifying a slice costs no device request beyond the
// cells themselves. A record is written in the same batch as the metadata
// change that makes its cells' new contents reachable, so data and checksum
// commit together.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "fs/meta/meta_store.h"
#include "fs/meta/metadata.h"

namespace mmfs::fs {

// XXH3-64 of the cell's bytes folded to 32 bits; 0 is reserved for "never
// written" (a cell that reads as zeros), so a real checksum of 0 becomes 1.
std::uint32_t cell_checksum(std::span<const std::byte> cell);

// How a cell's bytes (its brick, C order) split into checksummed blocks:
// `per_cell` blocks of `bytes` each (the last one shorter when the brick is
// not a multiple), each a whole number of sectors.
struct ChecksumBlocks {
  std::uint32_t per_cell = 1;
  std::uint64_t bytes = 0;  // 0: the whole brick
  std::uint64_t first(std::uint32_t block) const { return std::uint64_t(block) * bytes; }
  // The part of `brick` block `block` covers.
  std::span<const std::byte> of(std::span<const std::byte> brick, std::uint32_t block) const {
    if (per_cell == 1) return brick;
    const std::uint64_t at = first(block);
    return brick.subspan(at, std::min<std::uint64_t>(bytes, brick.size() - at));
  }
};

// The checksum block of arrays placed on a volume of `sector_size`-byte
// sectors: max(4096, sector) bytes, the granularity a partial read can skip
// by (a smaller one would grow the tables in memory and in the store for
// reads no device serves faster).
std::uint32_t checksum_block_bytes(std::uint32_t sector_size);
// The blocks of a cell of `brick` bytes stored in `cell_sectors` sectors,
// for a schema's checksum_block `block` (0: one per cell). Blocks must tile
// the cell's sectors exactly, so a block is always read whole: when they
// cannot (a brick that is not a multiple of a block larger than a sector),
// the cell is one block.
ChecksumBlocks checksum_blocks(std::uint64_t brick, std::uint32_t cell_sectors, std::uint32_t sector_size,
                               std::uint32_t block);

class CellChecksums {
 public:
  static constexpr std::uint64_t kCellsPerRecord = 1024;

  // The table of array `ino` with `cells` cells in the store. `tag` names
  // the table (the letter of its keys, fs/meta/keys.h): 'c' the checksums of
  // the committed contents, 'a' the alternatives of cells being rewritten in
  // place (see ArrayState); an extra copy's tables are 'k' and 'j' with
  // its `slot` (1..255) in their keys.
  // `blocks`: how each cell is checksummed (one entry per block). A record
  // is read from the store when an entry of it is first used, so an array's
  // first open reads none (a beam needs a few of the 512 records of a 2 GiB
  // array): the store must outlive the table. Only this table writes its
  // records while it is in use.
  CellChecksums(const MetaStore& store, Ino ino, std::uint64_t cells, char tag = 'c', ChecksumBlocks blocks = {},
                std::uint8_t slot = 0);

  // Reads every stored record now: the table no longer needs the store.
  void load_all();

  // A new, all-unwritten table for `cells` cells whose every record is dirty,
  // so stage() writes it in full (a new placement replacing the old table).
  static CellChecksums fresh(Ino ino, std::uint64_t cells, char tag = 'c', ChecksumBlocks blocks = {},
                             std::uint8_t slot = 0);
  // Grows or shrinks the table (plain files: one checksum per block, so one
  // per "cell"); the
  // records that change become dirty. Records past a shrunk end must be
  // deleted by the caller (stage_removal_from).
  void resize(std::uint64_t cells);
  // Deletes records from `first_record` on (after a shrink).
  static void stage_removal_from(const MetaStore& store, Ino ino, std::uint64_t first_record, WriteBatch& batch,
                                 char tag = 'c');
  // Every cell reads as zeros again (truncate of an array to 0).
  void clear();

  const ChecksumBlocks& blocks() const { return blocks_; }
  std::uint64_t cells() const { return entries_ / blocks_.per_cell; }
  // The table's raw entries (cell * blocks().per_cell + block).
  std::uint64_t entries() const { return entries_; }
  // Safe from concurrent readers; not beside a writer (set*, clear, resize).
  std::uint32_t entry(std::uint64_t i) const { return record(i / kCellsPerRecord)[i % kCellsPerRecord]; }
  void set_entry(std::uint64_t i, std::uint32_t value);
  // One checksum per cell only (plain files' blocks).
  std::uint32_t get(std::uint64_t cell) const { return entry(cell); }
  // True when any block of the cell has a recorded value.
  bool any(std::uint64_t cell) const;
  // False when no entry has held a value since the table was loaded (an
  // alternatives' table with no rewrite in flight: nothing to look through).
  bool maybe_recorded() const { return recorded_; }
  // Records the checksums of a cell's new contents, its brick (dirty until
  // staged); an all-zero block records 0, like a block never written.
  void set(std::uint64_t cell, std::span<const std::byte> contents);
  // Records the checksums of the contents, zero blocks included (the
  // alternative table: 0 = no alternative).
  void set_alternative(std::uint64_t cell, std::span<const std::byte> contents);
  // Forgets the cell's values (no alternative).
  void clear_cell(std::uint64_t cell);
  // Records a raw value (one checksum per cell only).
  void set_raw(std::uint64_t cell, std::uint32_t value);
  // True when `contents` (the cell's brick) is what was last recorded for the
  // cell (an unwritten block must read as all zeros).
  bool verify(std::uint64_t cell, std::span<const std::byte> contents) const;
  // The same for one block; `part` is that block's bytes (blocks().of).
  bool verify_block(std::uint64_t cell, std::uint32_t block, std::span<const std::byte> part) const;
  // True when the block has an alternative and `part` matches it.
  bool alternative_matches(std::uint64_t cell, std::uint32_t block, std::span<const std::byte> part) const;
  // Puts every dirty record into `batch` (commit it with the data's metadata).
  void stage(WriteBatch& batch);
  // Deletes every record of the array (with the array's removal).
  static void stage_removal(const MetaStore& store, Ino ino, WriteBatch& batch, char tag = 'c',
                            std::uint8_t slot = 0);

 private:
  CellChecksums(Ino ino, char tag, ChecksumBlocks blocks, std::uint8_t slot)
      : ino_(ino), tag_(tag), slot_(slot), blocks_(blocks) {}
  // A record's entries: kCellsPerRecord values (those past the table's end are 0).
  const std::uint32_t* record(std::uint64_t r) const {
    const std::uint32_t* p = records_[r].load(std::memory_order_acquire);
    return p != unloaded() ? p : load(r);
  }
  const std::uint32_t* load(std::uint64_t r) const;
  std::uint32_t* writable(std::uint64_t r);
  void put(std::uint64_t i, std::uint32_t value);
  // Makes the table `records` records of zeros, every one dirty or none.
  void reset(std::uint64_t records, bool dirty);
  static const std::uint32_t* unloaded();
  static const std::uint32_t* zeros();

  Ino ino_;
  char tag_ = 'c';
  std::uint8_t slot_ = 0;
  ChecksumBlocks blocks_;
  const MetaStore* store_ = nullptr;  // where records not yet read are (null: none are)
  bool recorded_ = false;             // some entry was nonzero in the store or has been set since
  std::uint64_t entries_ = 0;
  // Per record: unloaded() until first read, zeros() while all its entries
  // are 0 (an alternatives' table with no rewrite in flight allocates
  // nothing), else owned_[r]. Readers race only to load; loads take load_mu_.
  std::unique_ptr<std::atomic<const std::uint32_t*>[]> records_;
  mutable std::vector<std::unique_ptr<std::uint32_t[]>> owned_;  // written by load() under load_mu_
  std::unique_ptr<std::mutex> load_mu_ = std::make_unique<std::mutex>();
  std::vector<bool> dirty_;  // per record
};

}  // namespace mmfs::fs
