// Private to indexes/: the stored index's bitmap layout and helpers the
// builder, the planner and the delta share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "indexes/binning.h"
#include "indexes/bitmap.h"
#include "indexes/bitmap_index.h"
#include "indexes/values.h"

namespace mmfs::indexes::detail {

// Which directory id holds what, for an encoding over B value bins, an
// optional NaN bin and C coarse bins (0: no coarse level).
struct Layout {
  Encoding encoding = Encoding::E1;
  std::uint32_t value_bins = 0;
  bool nan = false;
  std::uint32_t coarse_bins = 0;

  std::uint32_t interval_width() const { return (value_bins + 1) / 2; }          // m = ceil(B/2)
  std::uint32_t coarse_width() const { return (coarse_bins + 1) / 2; }          // m' = ceil(C/2)
  std::uint32_t slices() const;                                                  // bn: ceil(log2 B)
  std::uint32_t fine_count() const;   // the first level's stored bitmaps
  std::uint32_t nan_id() const { return fine_count(); }
  std::uint32_t coarse_first() const { return fine_count() + (nan ? 1 : 0); }
  std::uint32_t coarse_count() const;
  std::uint32_t total() const { return coarse_first() + coarse_count(); }
};

// Adds rows `rows[0..n)` (ascending, all in one 2^32 bucket) to `b`.
void add_rows(Bitmap* b, const std::uint64_t* rows, std::size_t n);

// How a bin relates to a key set, given the keys present in it.
enum class BinClass : std::uint8_t { Sure, Maybe, Skip, Empty };
BinClass classify(const KeySet& keys, std::pair<std::uint64_t, std::uint64_t> bin_keys, const BinStats& stats);
// Ascending, disjoint, non-adjacent ranges.
using indexes::normalized;

// Elements of a piece bucketed by bin: rows (first_row + i) grouped by bin
// in ascending row order, with per-bin key statistics.
struct Bucketed {
  std::vector<std::uint32_t> bin_start;  // bins + 1 offsets into rows
  std::vector<std::uint64_t> rows;
};
Bucketed bucket_by_bin(const Binning& binning, std::uint64_t first_row, const std::byte* elements, std::size_t count,
                       std::vector<BinStats>* stats);

}  // namespace mmfs::indexes::detail
