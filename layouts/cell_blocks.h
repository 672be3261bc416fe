// Which blocks of a cell hold a selection's elements (partial-cell
// reads). A cell's brick (C order) is checksummed in blocks of whole sectors
// (fs/meta/cell_checksums.h); a view that needs only some of them can read just
// those, and the planner asks the volume's model whether that is faster.
// Pure index math, tested against brute force.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "layouts/cell_grid.h"
#include "layouts/layout.h"
#include "layouts/selection.h"

namespace mmfs::layouts {

// A set of a cell's blocks, a bit each.
struct BlockMask {
  std::vector<std::uint64_t> words;
  std::uint32_t count = 0;  // blocks set
  bool has(std::uint32_t block) const { return (words[block / 64] >> (block % 64)) & 1; }
  void set(std::uint32_t block) {
    std::uint64_t& w = words[block / 64];
    const std::uint64_t bit = 1ull << (block % 64);
    if (!(w & bit)) ++count;
    w |= bit;
  }
};

// The sectors of block `block` of a cell stored in `runs` (the cell's one or
// two runs, layouts/layout.h): block b is the cell's sectors
// [b * block_sectors, (b + 1) * block_sectors). Calls
//   visit(lbn, sectors, sectors_into_block)
// for each piece, in order (two when the block straddles the runs).
template <class Visit>
void for_each_block_piece(std::span<const Run> runs, std::uint32_t block, std::uint32_t block_sectors,
                          Visit&& visit) {
  std::uint64_t at = std::uint64_t(block) * block_sectors, left = block_sectors, done = 0;
  for (const Run& r : runs) {
    if (!left) return;
    if (at >= r.sectors) {
      at -= r.sectors;
      continue;
    }
    const std::uint64_t take = std::min<std::uint64_t>(left, r.sectors - at);
    visit(r.lbn + at, std::uint32_t(take), done);
    done += take;
    left -= take;
    at = 0;
  }
}

class CellBlocks {
 public:
  // Blocks of `block_bytes` of the brick each, `per_cell` of them (the last
  // one shorter when the brick is not a multiple).
  CellBlocks(const CellGrid& grid, const Selection& selection, std::uint64_t block_bytes, std::uint32_t per_cell);

  std::uint32_t per_cell() const { return per_cell_; }
  // The blocks of cell `cc` that hold selected elements (none when the
  // selection misses the cell). The reference stays valid for the object's
  // life: cells cut the same way share one mask (a slice's inner cells all
  // do), so asking for every cell of a view costs a lookup each.
  const BlockMask& of(std::span<const std::uint64_t> cc);
  bool full(const BlockMask& m) const { return m.count == per_cell_; }

 private:
  BlockMask compute(std::span<const std::uint64_t> first, std::span<const std::uint64_t> count) const;
  // Every block: the mask of a cell the selection covers whole (most cells
  // of a large box or a full read), returned without a lookup.
  BlockMask all_;

  const CellGrid& grid_;
  const Selection& sel_;
  std::uint64_t block_bytes_;
  std::uint32_t per_cell_;
  std::vector<std::uint64_t> key_;  // scratch: (first, count) per dimension, in the cell
  std::map<std::vector<std::uint64_t>, BlockMask> masks_;
};

}  // namespace mmfs::layouts
