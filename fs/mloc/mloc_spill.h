// The pieces of an mloc image on their way to it (MlocImage::encode).
//
// The encoder makes the pieces of one chunk slab at a time (the chunks of a
// chunk row of dimension 0), but the image wants every piece in its place
// in unit order, which interleaves all slabs: a (bin, byte group)'s units
// run along the curve through every slab. Kept in memory until the last
// slab, the pieces of a 2 GiB float64 array held 2.8 GB of the daemon's
// memory while it sealed, and an array larger than memory could not seal.
//
// Here each slab's pieces, sorted by their place in the image, are written
// to temporary sectors of their own (a run), and the image is then written
// by merging the runs, each read front to back once. Memory: one slab's
// pieces while it is written, and a read window per run while merging.
// When the volume has no room for a run, that run stays in memory (the
// image still seals, as before). Temporary sectors are never recorded in
// the metadata, so after a crash the mount-time rebuild of the free map
// finds them free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "fs/meta/allocator.h"
#include "fs/device/sector_io.h"

namespace mmfs::fs {

class MlocSpill {
 public:
  struct Piece {
    std::uint64_t key = 0;  // its place in the image: ascending keys are image order
    std::vector<std::byte> bytes;
  };

  MlocSpill(SpaceSource& allocator, SectorIo& io) : allocator_(allocator), io_(io) {}
  ~MlocSpill();  // frees the temporary sectors
  MlocSpill(const MlocSpill&) = delete;
  MlocSpill& operator=(const MlocSpill&) = delete;

  // Adds a run: `pieces` (emptied) in any order; keys are unique across all
  // runs. 0 or the device's errno.
  int add_run(std::vector<Piece>& pieces, std::string* message);
  // Calls emit(bytes) for every piece of every run, keys ascending; stops at
  // the first non-zero result of emit or of a read, and returns it.
  int merge(const std::function<int(std::span<const std::byte>)>& emit, std::string* message);

  // Reads every run on the device into memory and frees its sectors: for
  // an image that finds no room beside its runs.
  int hold_all(std::string* message);
  // Runs kept in memory for want of space (tests: a full volume).
  std::size_t runs_in_memory() const;
  std::size_t runs() const { return runs_.size(); }

 private:
  struct Run {
    std::vector<std::uint64_t> keys, sizes;  // per piece, ascending keys
    std::uint64_t bytes = 0;
    std::vector<Extent> extents;  // on the device, or
    std::vector<std::byte> held;  // in memory (no room on the device)
  };
  // Reads run bytes [offset, offset + n) into `out` (sector-aligned offset
  // and n, n within the run's sectors).
  int read_run(const Run& run, std::uint64_t offset, std::uint64_t n, std::byte* out) const;

  SpaceSource& allocator_;
  SectorIo& io_;
  std::vector<Run> runs_;
};

}  // namespace mmfs::fs
