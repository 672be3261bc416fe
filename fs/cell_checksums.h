// Checksums of array data, one per cell (docs/on-disk-format.md, "data
// checksums"). They live in the metadata store — 4 bytes per cell, in records
// of 1024 cells — so the whole table of an open array sits in memory and
// verifying a slice costs no device request beyond the cells themselves.
// A record is written in the same batch as the metadata change that makes
// its cells' new contents reachable, so data and checksum commit together.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fs/meta_store.h"
#include "fs/metadata.h"

namespace mmfs::fs {

// XXH3-64 of the cell's bytes folded to 32 bits; 0 is reserved for "never
// written" (a cell that reads as zeros), so a real checksum of 0 becomes 1.
std::uint32_t cell_checksum(std::span<const std::byte> cell);

class CellChecksums {
 public:
  static constexpr std::uint64_t kCellsPerRecord = 1024;

  // Loads the table of array `ino` with `cells` cells from the store. `tag`
  // names the table: 'c' the checksums of the committed contents, 'a' the
  // alternatives of cells being rewritten in place (see ArrayState).
  CellChecksums(const MetaStore& store, Ino ino, std::uint64_t cells, char tag = 'c');

  // A new, all-unwritten table for `cells` cells whose every record is dirty,
  // so stage() writes it in full (a new placement replacing the old table).
  static CellChecksums fresh(Ino ino, std::uint64_t cells, char tag = 'c');
  // Grows or shrinks the table (plain files: one checksum per block); the
  // records that change become dirty. Records past a shrunk end must be
  // deleted by the caller (stage_removal_from).
  void resize(std::uint64_t cells);
  // Deletes records from `first_record` on (after a shrink).
  static void stage_removal_from(const MetaStore& store, Ino ino, std::uint64_t first_record, WriteBatch& batch,
                                 char tag = 'c');
  // Every cell reads as zeros again (truncate of an array to 0).
  void clear();

  std::uint64_t cells() const { return sums_.size(); }
  std::uint32_t get(std::uint64_t cell) const { return sums_[cell]; }
  // Records the checksum of a cell's new contents (dirty until staged).
  void set(std::uint64_t cell, std::span<const std::byte> contents);
  // Records a raw value (the alternative table: cell_checksum() of the
  // contents, zero contents included; 0 = no alternative).
  void set_raw(std::uint64_t cell, std::uint32_t value);
  // True when `contents` is what was last recorded for the cell (an
  // unwritten cell must read as all zeros).
  bool verify(std::uint64_t cell, std::span<const std::byte> contents) const;
  // Puts every dirty record into `batch` (commit it with the data's metadata).
  void stage(WriteBatch& batch);
  // Deletes every record of the array (with the array's removal).
  static void stage_removal(const MetaStore& store, Ino ino, WriteBatch& batch, char tag = 'c');

  static std::string key(Ino ino, std::uint64_t record, char tag = 'c');

 private:
  CellChecksums(Ino ino, char tag) : ino_(ino), tag_(tag) {}
  Ino ino_;
  char tag_ = 'c';
  std::vector<std::uint32_t> sums_;
  std::vector<bool> dirty_;  // per record
};

}  // namespace mmfs::fs
