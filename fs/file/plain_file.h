// The data of a plain (non-array) regular file: bytes on the device in the
// file's extents, read and written in blocks of max(4096, sector) bytes with
// one checksum per block (docs/reference.md §9: everything stored is checksummed).
//
// Space: a file's first track's worth comes as small extents from the top of
// the data area; beyond that it grows in whole-track runs (traxtents) from
// the bottom, doubling its allocation up to 64 MiB a step, so streaming a
// large file reads whole tracks.
//
// Writes go to the device at once (write-through); the size, extent map and
// checksums reach the metadata store at commit() (fsync, release, the
// periodic flusher), in one batch. A block that holds data is rewritten in
// place only after its new checksum is durable as an alternative (as array
// cells are, see fs/array/array_state.h), committed with the file's state so far,
// so a crash leaves it readable as one of its versions; appends and writes
// into holes need no such step.
//
// A shrinking truncate commits the new size with the checksums and extents
// it drops, in one batch, and writes nothing: a crash leaves the old file or
// the new one. So the bytes past the end in the last block are whatever they
// were; every way of growing the file (a write past the end, truncate,
// fallocate) zeroes them first.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "fs/meta/cell_checksums.h"
#include "fs/meta/metadata.h"
#include "fs/device/sector_io.h"

namespace mmfs::fs {

class PlainFile {
 public:
  PlainFile(Metadata& metadata, Allocator& allocator, SectorIo& io, const geom::Geometry& geometry, Ino ino,
            std::uint64_t size);

  std::uint64_t size() const;
  std::uint64_t block_size() const { return block_; }
  // Reads up to `length` bytes at `offset` (short at end of file). 0 or errno;
  // EIO when a block fails its checksum (the caller logs it).
  // `why`, when given, receives the reason of a failure (device or checksum).
  int read(std::uint64_t offset, std::size_t length, std::byte* out, std::size_t* got, std::string* why = nullptr);
  int write(std::uint64_t offset, const std::byte* data, std::size_t length);
  int truncate(std::uint64_t size);
  // Reserves space for [offset, offset+length) and, unless keep_size, extends the size.
  int fallocate(std::uint64_t offset, std::uint64_t length, bool keep_size);
  // Writes the inode (with this file's size, after `edit`), extent map and
  // checksums into the store in one batch (not synced).
  int commit(const std::function<void(Inode&)>& edit = {});
  bool dirty() const;
  std::uint64_t allocated_bytes() const;
  std::vector<Extent> extents() const;

 private:
  int ensure_capacity_locked(std::uint64_t bytes);
  // `why`, when given, receives the reason of a failure (device or checksum).
  int read_blocks_locked(std::uint64_t first_block, std::uint64_t blocks, std::byte* out, bool verify,
                         std::string* why = nullptr);
  int write_blocks_locked(std::uint64_t first_block, std::uint64_t blocks, const std::byte* data);
  // Stages extents, checksums and alternatives into `batch` and commits it
  // with the inode (its size, after `edit`); `dropped` extents are freed
  // after the next sync.
  int commit_locked(WriteBatch batch, std::vector<Extent> dropped, const std::function<void(Inode&)>& edit);
  // Zeroes the bytes past size_ in its block (before the file grows).
  int zero_tail_locked();
  bool block_stored(std::uint64_t block) const;
  bool block_valid(std::uint64_t block, std::span<const std::byte> contents) const;
  void map_locked(std::uint64_t first_sector, std::uint64_t sectors, std::byte* buffer,
                  std::vector<SectorRun>* runs) const;

  Metadata& metadata_;
  Allocator& allocator_;
  SectorIo& io_;
  Ino ino_;
  std::uint64_t block_;             // bytes
  std::uint64_t sectors_per_block_;
  std::uint64_t small_limit_sectors_;  // below this a file takes small extents
  mutable std::mutex mu_;
  std::uint64_t size_;
  std::vector<Extent> extents_;
  std::vector<std::uint64_t> starts_;  // file sector where each extent begins
  std::uint64_t capacity_sectors_ = 0;
  CellChecksums sums_;
  CellChecksums alt_;
  bool dirty_ = false;
};

}  // namespace mmfs::fs
