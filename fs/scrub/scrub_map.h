// Who owns each sector of a volume, for the scrub (docs/daemon.md, "Scrub"):
// an array cell, a plain-file block, an index or mloc image, the metadata
// region, a superblock, or nobody (free). Built once when a scrub starts,
// from the metadata's extent maps and the arrays' layouts; the scrub then
// looks up every sector it reads.
//
// Checksummed owners come in *units*: an array cell (its sectors, the brick's
// bytes checksummed), a plain-file block (max(4096, sector) bytes), a
// superblock copy (16 KiB, its own XXH3). A unit is verified when all its
// sectors are at hand. Everything else is read for readability only: the
// metadata region (the store verifies both copies of every live structure at
// mount and repairs one from the other), index objects and mloc images (their
// readers verify them), free space.
//
// The map is a snapshot: an object written after the scrub started keeps its
// old owner here (sectors allocated since read as free), so every finding is
// checked again against the current metadata before it is reported
// (fs/scrub/scrub.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "fs/meta/metadata.h"
#include "geometry/geometry.h"
#include "layouts/layout.h"

namespace mmfs::fs {

class Volume;

// Every inode's path, from a walk of the tree from the root (the first name
// found wins; at most 2^20 names).
std::unordered_map<Ino, std::string> inode_paths(const Metadata& md);

enum class OwnerKind : std::uint8_t {
  Outside,      // past the volume's end, or between the data area and superblock B
  Superblock,   // a copy of the superblock (checksummed unit)
  Metadata,     // the metadata region
  Free,         // data area, owned by nobody when the scrub started
  ArrayCell,    // a cell of an array (checksummed unit)
  PlainBlock,   // a block of a plain file (checksummed unit)
  ArrayData,    // an array's sectors whose cells the scrub cannot place (readability only)
  IndexObject,  // a bitmap index's extents (readability only)
  MlocImage,    // a sealed mloc image (readability only)
  FileTail,     // a plain file's sectors past its last block (readability only)
};
const char* to_string(OwnerKind kind);

// One object with sectors: an array, a plain file, an index, a superblock copy.
struct ScrubObject {
  OwnerKind kind = OwnerKind::Free;
  Ino ino = 0;                      // 0 for superblocks
  std::string path;                 // for messages: "/t/a", or "superblock A"
  std::uint32_t unit_sectors = 1;   // sectors of a unit (cell, block, superblock)
  std::uint64_t units = 0;          // cells, blocks (of the committed size), 1 for a superblock
  std::uint64_t checked_bytes = 0;  // bytes of a unit the checksum covers (a cell's brick)
  // Arrays checksummed per block of a cell (fs/meta/cell_checksums.h): a unit is
  // one block, `blocks_per_cell` to a cell, the last of a cell covering what
  // is left of its `brick_bytes`.
  std::uint32_t blocks_per_cell = 1;
  std::uint64_t brick_bytes = 0;
  // The bytes unit `unit`'s checksum covers.
  std::uint64_t checked_bytes_of(std::uint64_t unit) const {
    if (blocks_per_cell == 1) return checked_bytes;
    const std::uint64_t first = (unit % blocks_per_cell) * checked_bytes;
    return std::min(checked_bytes, brick_bytes - first);
  }
  std::string extents_record;       // e/<ino> when the map was built: a change voids a finding
  std::string extents_key;          // the record's key when not e/<ino> (an index's, an mloc image's)
  std::string schema_record;        // the array's schema record, likewise
  // Where each unit lies, for reading it whole again: runs of object
  // positions (unit * unit_sectors + sector) to LBNs, sorted by position.
  struct Piece {
    std::uint64_t position = 0;
    geom::Lbn lbn = 0;
    std::uint64_t sectors = 0;
  };
  std::vector<Piece> pieces;
  // The LBN runs holding unit `unit`, in the unit's sector order.
  std::vector<layouts::Run> unit_runs(std::uint64_t unit) const;
  // "cell 17 of /t/a", "block 3 of /f", "superblock A".
  std::string unit_name(std::uint64_t unit) const;
};

// The owner of one sector.
struct Owner {
  OwnerKind kind = OwnerKind::Outside;
  std::uint32_t object = 0;  // index into objects() when the kind has one
  std::uint64_t unit = 0;    // checksummed kinds: which unit
  std::uint32_t sector = 0;  // and which of its sectors
};

class OwnerMap {
 public:
  // An empty map of `sectors` sectors, all Outside.
  explicit OwnerMap(std::uint64_t sectors, std::uint32_t sector_size);

  // Where a live array's cells are: calls `visit` with the placement the
  // daemon serves it from (ArrayFile::cells_locked(), under its lock) and
  // returns true; false when it cannot (the map then rebuilds the layout from
  // the stored schema and extents, as ArrayFile::build does).
  using PlacementSource =
      std::function<bool(Ino ino, const std::function<void(const layouts::Layout&)>& visit)>;
  // Built from a mounted volume's metadata. `budget_bytes` bounds the memory
  // of the cell index: arrays past it are ArrayData (read, not verified).
  static std::unique_ptr<OwnerMap> from_volume(Volume& volume, const PlacementSource& placements = {},
                                               std::uint64_t budget_bytes = 256ull << 20);

  // Building (from_volume, tests). Regions: every sector of [start, start +
  // sectors) gets `kind` (Metadata, Free, Outside). Objects: their pieces
  // become owners of their sectors; a later one wins over a region.
  void add_region(OwnerKind kind, geom::Lbn start, std::uint64_t sectors);
  std::uint32_t add_object(ScrubObject object);
  // An object's sectors outside its units (index, mloc image, file tail).
  void add_readable(OwnerKind kind, std::uint32_t object, geom::Lbn start, std::uint64_t sectors);
  // Sorts the lookup tables (after the last add; lookups before are wrong).
  void seal();

  std::uint64_t sectors() const { return sectors_; }
  std::uint32_t sector_size() const { return sector_size_; }
  Owner owner(geom::Lbn lbn) const;
  const std::vector<ScrubObject>& objects() const { return objects_; }
  const ScrubObject& object(std::uint32_t i) const { return objects_[i]; }
  // Objects whose placement the scrub could not reconstruct (read, not verified).
  std::uint64_t unmapped_objects() const { return unmapped_; }
  void note_unmapped() { ++unmapped_; }
  // Bytes the lookup tables take.
  std::uint64_t memory_bytes() const;
  // "metadata region", "free space", "cell 17 of /t/a" ...
  std::string describe(geom::Lbn lbn) const;

 private:
  struct Span {
    geom::Lbn start = 0;
    std::uint64_t sectors = 0;
    OwnerKind kind = OwnerKind::Outside;
    std::uint32_t object = 0;
    std::uint64_t position = 0;  // checksummed kinds: object position of `start`
  };
  static bool checksummed(OwnerKind kind) {
    return kind == OwnerKind::ArrayCell || kind == OwnerKind::PlainBlock || kind == OwnerKind::Superblock;
  }
  std::uint64_t sectors_;
  std::uint32_t sector_size_;
  std::vector<Span> regions_;  // disjoint, sorted by start after seal()
  std::vector<Span> spans_;    // object sectors: disjoint, sorted by start after seal()
  std::vector<ScrubObject> objects_;
  std::uint64_t unmapped_ = 0;
};

}  // namespace mmfs::fs
