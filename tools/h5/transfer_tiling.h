// How a C-order array is moved between HDF5 and mmfs: in boxes aligned to the
// HDF5 dataset's chunks. Pure math, no I/O.
//
// Why chunk-aligned boxes: every HDF5 chunk then lies in exactly one box, so
// each chunk is read and decompressed (import) or compressed and written
// (export) exactly once, by one H5Dread/H5Dwrite call, and HDF5 needs no chunk
// cache to avoid doing it twice.
//
// Why extend along trailing dimensions: the array file is C order, so a box
// that spans whole trailing dimensions is a few long byte runs in the file
// (one pwrite/pread each), not many short ones. Starting from one chunk, the
// last dimension is widened to its whole length, then the one before it, and
// so on while the box fits the budget; the first dimension that does not fit
// whole is widened to as many chunks as fit, and the dimensions before it stay
// one chunk long. A chunk larger than the budget still makes a box of one
// chunk (the buffers are sized for the largest box, see max_box_bytes).
//
// Contiguous (unchunked) storage is the chunk of all ones: the boxes become
// C-order slabs of whole trailing dimensions.
//
// Boxes are numbered in C order of the box grid; the last boxes along a
// dimension are clipped to the array's shape.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace mmfs::h5 {

struct Box {
  std::vector<std::uint64_t> start;  // element coordinates of the first corner
  std::vector<std::uint64_t> count;  // elements along each dimension (>= 1)
  std::uint64_t elements() const;
};

// One contiguous byte range of a box: `length` bytes at `array_offset` in the
// whole array's C-order bytes, which are the bytes at `buffer_offset` of the
// box's own C-order buffer.
struct Run {
  std::uint64_t array_offset = 0;
  std::uint64_t buffer_offset = 0;
  std::uint64_t length = 0;
  bool operator==(const Run&) const = default;
};

class TransferTiling {
 public:
  // `shape` and `chunk` have the same rank (0 to any; rank 0 is a scalar: one
  // box, one run of `itemsize` bytes); every length >= 1; `itemsize` >= 1. A
  // chunk length beyond its dimension counts as the dimension's length.
  // `budget_bytes` is the buffer size a box should fit. Throws
  // std::invalid_argument when the ranks differ, a length is 0, or the
  // array's byte size does not fit in 64 bits.
  TransferTiling(std::span<const std::uint64_t> shape, std::uint32_t itemsize,
                 std::span<const std::uint64_t> chunk, std::uint64_t budget_bytes);

  const std::vector<std::uint64_t>& shape() const { return shape_; }
  // The box size before clipping at the array's edges.
  const std::vector<std::uint64_t>& box_shape() const { return box_; }
  std::uint64_t box_count() const { return box_count_; }
  // Box number `index` (0 <= index < box_count()), in C order of the grid.
  Box box(std::uint64_t index) const;
  // The largest box in bytes: the size each transfer buffer needs.
  std::uint64_t max_box_bytes() const;
  std::uint64_t total_bytes() const { return total_bytes_; }

  // Calls fn(const Run&) for each maximal contiguous run of `b`, in
  // increasing order of array_offset (which is also buffer order): trailing
  // dimensions the box spans whole merge into one run.
  template <class Fn>
  void for_each_run(const Box& b, Fn&& fn) const;
  std::vector<Run> runs(const Box& b) const;
  // How many runs for_each_run gives for `b`, and each one's length.
  std::uint64_t run_count(const Box& b) const;
  std::uint64_t run_length(const Box& b) const;

 private:
  // The dimension whose runs start: the last one the box does not span
  // whole, or -1 when it spans the whole array.
  int split_dim(const Box& b) const;

  std::vector<std::uint64_t> shape_, box_, grid_;
  std::vector<std::uint64_t> stride_;  // C-order element strides of the array
  std::uint32_t itemsize_ = 1;
  std::uint64_t box_count_ = 1;
  std::uint64_t total_bytes_ = 0;
};

template <class Fn>
void TransferTiling::for_each_run(const Box& b, Fn&& fn) const {
  const int k = split_dim(b);
  const std::uint64_t length = run_length(b);
  if (k < 0) {
    fn(Run{0, 0, length});
    return;
  }
  // Odometer over dimensions 0..k-1 of the box; dimension k and the ones
  // after it are inside each run.
  std::vector<std::uint64_t> at(static_cast<std::size_t>(k), 0);
  std::uint64_t buffer_offset = 0;
  for (;;) {
    std::uint64_t element = b.start[static_cast<std::size_t>(k)] * stride_[static_cast<std::size_t>(k)];
    for (int d = 0; d < k; ++d) element += (b.start[d] + at[d]) * stride_[d];
    fn(Run{element * itemsize_, buffer_offset, length});
    buffer_offset += length;
    int d = k - 1;
    while (d >= 0 && ++at[d] == b.count[d]) at[d--] = 0;
    if (d < 0) return;
  }
}

}  // namespace mmfs::h5
