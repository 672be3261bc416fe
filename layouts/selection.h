// A view of an array as a box in element space: per dimension a half-open
// range with a step (numpy basic indexing without negative indices, docs/reference.md §5).
// Beams, slices and boxes are all selections.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "util/align.h"

namespace mmfs::layouts {

struct DimRange {
  std::uint64_t start = 0, stop = 0, step = 1;  // elements; stop exclusive
  bool fixed = false;                           // a single index: the dimension is dropped from the result
  std::uint64_t count() const { return stop > start ? util::div_up(stop - start, step) : 0; }
};

class Selection {
 public:
  explicit Selection(std::vector<DimRange> dims) : dims_(std::move(dims)) {}
  // Everything.
  static Selection all(std::span<const std::uint64_t> shape);
  // x_dim = index (docs/reference.md §5: A@/slice/D/I).
  static Selection slice(std::span<const std::uint64_t> shape, std::size_t dim, std::uint64_t index);
  // All coordinates fixed but `free_dim` (MultiMap's beam query).
  static Selection beam(std::span<const std::uint64_t> shape, std::span<const std::uint64_t> at,
                        std::size_t free_dim);
  // The half-open box [lo, hi).
  static Selection box(std::span<const std::uint64_t> lo, std::span<const std::uint64_t> hi);

  const std::vector<DimRange>& dims() const { return dims_; }
  std::uint64_t elements() const;
  // The selection's result shape (fixed dimensions dropped).
  std::vector<std::uint64_t> result_shape() const;

 private:
  std::vector<DimRange> dims_;
};

// The sorted, distinct cell indices a range touches along a dimension with
// cells of `cell` elements. O(count) at most, O(1) per cell when step <= cell.
std::vector<std::uint64_t> cells_touched(const DimRange& r, std::uint64_t cell);

}  // namespace mmfs::layouts
