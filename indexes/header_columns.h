// The per-bin and per-bitmap columns of a decoded index header, kept as they
// are stored (each value in its column's narrowest width, see
// index_header.cc) and read on demand.
//
// Decoding them into arrays of structs cost a query's first touch of a
// 500,000-bin index 40 ms: 24 MB of fresh BinStats and directory entries,
// half of it the kernel faulting the pages in. A query reads a handful of
// bins; the columns stay packed (6.5 MB for that index) and each value is
// one load of its width.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace mmfs::indexes {

// Per bin: rows, and the smallest and largest key present.
struct BinStats {
  std::uint64_t rows = 0;
  std::uint64_t min_key = ~0ull;  // min_key > max_key: no row yet
  std::uint64_t max_key = 0;
  bool operator==(const BinStats&) const = default;
};

// One stored bitmap: where it is in the object and its XXH3-64.
struct BitmapEntry {
  std::uint64_t offset = 0, length = 0, checksum = 0;
};

// `n` unsigned values of `width` bytes (1, 2, 4 or 8), little-endian, in a
// buffer someone else keeps alive.
class PackedColumn {
 public:
  PackedColumn() = default;
  PackedColumn(const std::byte* data, unsigned width, std::size_t n) : data_(data), width_(width), size_(n) {}
  std::size_t size() const { return size_; }
  std::uint64_t operator[](std::size_t i) const {
    switch (width_) {
      case 1: return std::to_integer<std::uint8_t>(data_[i]);
      case 2: return load<std::uint16_t>(i);
      case 4: return load<std::uint32_t>(i);
      default: return load<std::uint64_t>(i);
    }
  }

 private:
  template <class T>
  std::uint64_t load(std::size_t i) const {
    T v;
    std::memcpy(&v, data_ + i * sizeof(T), sizeof(T));
    return v;
  }
  const std::byte* data_ = nullptr;
  unsigned width_ = 1;
  std::size_t size_ = 0;
};

// A random-access view whose elements are computed, not stored: iterators
// for range-for and comparisons.
template <class View, class Value>
class ComputedIterator {
 public:
  ComputedIterator(const View* v, std::size_t i) : v_(v), i_(i) {}
  Value operator*() const { return (*v_)[i_]; }
  ComputedIterator& operator++() {
    ++i_;
    return *this;
  }
  bool operator==(const ComputedIterator& o) const { return i_ == o.i_; }

 private:
  const View* v_;
  std::size_t i_;
};

// Every bin's statistics (NaN last). Value bins store their smallest key as
// an offset from the bin's lower edge and their largest from the smallest;
// the NaN bin stores its rows only.
class BinStatsView {
 public:
  BinStatsView(const PackedColumn* rows, const PackedColumn* min_offset, const PackedColumn* max_offset,
               const std::uint64_t* lower)
      : rows_(rows), min_(min_offset), max_(max_offset), lower_(lower) {}
  std::size_t size() const { return rows_->size(); }
  BinStats operator[](std::size_t b) const {
    BinStats s;
    s.rows = (*rows_)[b];
    if (b < min_->size()) {
      s.min_key = lower_[b] + (*min_)[b];
      s.max_key = s.min_key + (*max_)[b];
    }
    return s;
  }
  std::uint64_t rows(std::size_t b) const { return (*rows_)[b]; }
  ComputedIterator<BinStatsView, BinStats> begin() const { return {this, 0}; }
  ComputedIterator<BinStatsView, BinStats> end() const { return {this, size()}; }
  bool operator==(const BinStatsView& o) const {
    if (size() != o.size()) return false;
    for (std::size_t b = 0; b < size(); ++b)
      if (!((*this)[b] == o[b])) return false;
    return true;
  }

 private:
  const PackedColumn *rows_, *min_, *max_;
  const std::uint64_t* lower_;
};

// The bitmaps of an index, back to back after its header: lengths and
// checksums as stored, offsets the running sum of the lengths (kept at
// every kStride-th entry, the rest summed on demand).
class BitmapDirectory {
 public:
  BitmapDirectory() = default;
  // `first`: the offset of entry 0 (the header's length).
  BitmapDirectory(std::shared_ptr<const std::byte[]> keep, PackedColumn lengths, PackedColumn checksums,
                  std::uint64_t first)
      : keep_(std::move(keep)), lengths_(lengths), checksums_(checksums) {
    stride_offsets_.reserve(lengths_.size() / kStride + 1);
    std::uint64_t at = first;
    for (std::size_t i = 0; i < lengths_.size(); ++i) {
      if (i % kStride == 0) stride_offsets_.push_back(at);
      at += lengths_[i];  // wraps only on a lie, which the header's checks catch
    }
    end_ = at;
  }
  std::size_t size() const { return lengths_.size(); }
  std::uint64_t offset(std::size_t i) const {
    std::uint64_t at = stride_offsets_[i / kStride];
    for (std::size_t j = i - i % kStride; j < i; ++j) at += lengths_[j];
    return at;
  }
  std::uint64_t length(std::size_t i) const { return lengths_[i]; }
  BitmapEntry operator[](std::size_t i) const { return {offset(i), lengths_[i], checksums_[i]}; }
  // The offset just past the last bitmap.
  std::uint64_t bytes_end() const { return end_; }
  ComputedIterator<BitmapDirectory, BitmapEntry> begin() const { return {this, 0}; }
  ComputedIterator<BitmapDirectory, BitmapEntry> end() const { return {this, size()}; }

 private:
  static constexpr std::size_t kStride = 32;
  std::shared_ptr<const std::byte[]> keep_;  // the buffer the columns point into
  PackedColumn lengths_, checksums_;
  std::vector<std::uint64_t> stride_offsets_;
  std::uint64_t end_ = 0;
};

}  // namespace mmfs::indexes
