// A selection's C-order result cut into chunks of about `budget` bytes, each
// a contiguous byte range of the result and itself a selection (result
// dimensions 0..k-1 fixed, a range of whole cells along result dimension k,
// everything after it whole), so a large view can be produced piece by piece
// with every piece read as one IoPlan.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "layouts/cell_grid.h"
#include "layouts/selection.h"

namespace mmfs::layouts {

class SelectionChunks {
 public:
  SelectionChunks(const Selection& selection, const CellGrid& grid, std::uint64_t budget);

  std::uint64_t count() const { return chunks_; }
  // Byte offset of chunk `c` in the result.
  std::uint64_t offset(std::uint64_t c) const;
  // The chunk holding result byte `byte`.
  std::uint64_t index_at(std::uint64_t byte) const;
  // Chunk `c` as a selection of the array (its result is the chunk's bytes);
  // std::out_of_range unless c < count().
  Selection selection(std::uint64_t c) const;

 private:
  Selection sel_;
  std::vector<std::size_t> result_dims_;  // array dimension of each result dimension
  std::size_t k_ = 0;
  std::uint64_t rows_ = 1, chunks_k_ = 1, inner_ = 0, chunks_ = 1, row_span_ = 0;
  bool scalar_ = false;
};

// The chunk size to read a result of `total` bytes in: `base`, or the
// largest of 2x, 4x ... up to `max_scale` x base whose cost per byte
// (`cost_per_byte(budget)`, e.g. the modeled time of a chunk's plan over its
// bytes) is below `gain` times that of the best smaller size. A larger chunk
// costs memory and its first bytes' latency, so it must pay for them.
std::uint64_t choose_chunk_budget(std::uint64_t base, std::uint64_t max_scale, std::uint64_t total, double gain,
                                  const std::function<double(std::uint64_t)>& cost_per_byte);

}  // namespace mmfs::layouts
