// MLOC (paper 004, §III): the multi-level layout for compressed scientific
// data. The array is cut into chunks, ordered along an N-dimensional Hilbert
// curve; each chunk's elements are split by value bin; each element's bytes
// are split into byte groups, most significant first (float64: the first two
// bytes together, then one byte at a time, the paper's Figure 3; other
// dtypes: one byte a group). The smallest unit is (bin, byte group, chunk),
// and units lie on the device in the order the priority names (V = bins,
// M = byte groups, S = chunks along the curve), outermost first, so the most
// favoured access reads long runs: V-M-S puts one bin's most significant
// bytes of every chunk together.
//
// Beside the data, a position list per (bin, chunk) says which of the
// chunk's elements the bin holds (the paper's light-weight index): region
// queries over aligned bins are answered from it without reading data.
//
// This file is the pure geometry of that structure: chunks and their curve
// ranks, byte groups, and the unit numbering of a priority. The unit bytes
// are in layouts/mloc_codec.h, their directory in layouts/mloc_directory.h;
// where they go on the device is fs/mloc/mloc_image.h.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mmfs::layouts {

enum class MlocLevel : char { Value = 'V', Precision = 'M', Space = 'S' };
using MlocPriority = std::array<MlocLevel, 3>;

// "V-M-S" and its permutations (docs/reference.md §4 user.mmfs.priority); nullopt otherwise.
std::optional<MlocPriority> parse_mloc_priority(std::string_view text);
std::string mloc_priority_text(const MlocPriority& p);

// A run of an element's bytes by significance: rank 0 is the most
// significant byte (the last byte of a little-endian element).
struct MlocByteGroup {
  std::uint32_t first_rank = 0;
  std::uint32_t bytes = 0;
  bool operator==(const MlocByteGroup&) const = default;
};

// The byte groups of an element, most significant first (see above).
std::vector<MlocByteGroup> mloc_byte_groups(std::uint32_t itemsize, bool float64);
// How many leading groups hold the `keep` most significant bytes (keep 0 or
// >= itemsize: all of them).
std::uint32_t mloc_groups_for_bytes(std::span<const MlocByteGroup> groups, std::uint32_t keep);

class MlocGrid {
 public:
  // Throws std::invalid_argument for an empty shape, a chunk of the wrong
  // rank or with a zero extent (a chunk larger than the shape is clipped),
  // zero bins, more than kMaxChunkElements elements per chunk, or more than
  // kMaxUnits units.
  MlocGrid(std::vector<std::uint64_t> shape, std::uint32_t itemsize, bool float64, std::vector<std::uint64_t> chunk,
           std::uint32_t bins, MlocPriority priority);

  // Positions and per-bin counts inside a chunk are 32-bit: chunks hold fewer elements.
  static constexpr std::uint64_t kMaxChunkElements = 1ull << 32;
  // The unit directory stays a few tens of MB at most.
  static constexpr std::uint64_t kMaxUnits = 1ull << 26;
  // The default chunk (docs/layouts.md, "mloc"): about kDefaultChunkBytes of
  // elements, its sides powers of two, grown one dimension at a time from the
  // last (C-order fastest), each no longer than its dimension. With 100 bins
  // a unit of one byte group then holds about 2.6 KB before compression:
  // one device page, so a region read wastes little, while a box read
  // touches few enough units that their requests do not dominate.
  static constexpr std::uint64_t kDefaultChunkBytes = 2ull << 20;
  static std::vector<std::uint64_t> default_chunk(std::span<const std::uint64_t> shape, std::uint32_t itemsize);

  std::size_t dims() const { return shape_.size(); }
  const std::vector<std::uint64_t>& shape() const { return shape_; }
  const std::vector<std::uint64_t>& chunk() const { return chunk_; }
  const std::vector<std::uint64_t>& chunk_grid() const { return grid_; }  // chunks per dimension
  std::uint32_t itemsize() const { return itemsize_; }
  std::uint32_t bins() const { return bins_; }
  const std::vector<MlocByteGroup>& groups() const { return groups_; }
  const MlocPriority& priority() const { return priority_; }
  std::uint64_t chunks() const { return chunks_; }
  std::uint64_t elements() const { return elements_; }
  std::uint64_t units() const { return std::uint64_t(bins_) * groups_.size() * chunks_; }

  // Curve rank <-> chunk coordinates (in chunks, C-order dimensions).
  std::uint64_t rank_of(std::span<const std::uint64_t> chunk_coords) const;
  std::span<const std::uint64_t> coords_of(std::uint64_t rank) const {
    return {rank_coords_.data() + rank * dims(), dims()};
  }
  // The chunk's first element and its extent (clipped at the array's end).
  void chunk_box(std::uint64_t rank, std::uint64_t* lo, std::uint64_t* extent) const;
  std::uint64_t chunk_elements(std::uint64_t rank) const;
  // Elements of a chunk's brick (the full chunk shape, padding included):
  // the range of positions inside a chunk.
  std::uint64_t brick_elements() const { return brick_; }

  // The unit's place in the priority order.
  std::uint64_t unit(std::uint32_t bin, std::uint32_t group, std::uint64_t rank) const;
  // The position list of (bin, chunk): bins outermost, chunks along the
  // curve, whatever the priority (a region query reads one bin's lists).
  std::uint64_t position_entry(std::uint32_t bin, std::uint64_t rank) const { return bin * chunks_ + rank; }

 private:
  std::vector<std::uint64_t> shape_, chunk_, grid_;
  std::uint32_t itemsize_;
  std::uint32_t bins_;
  std::vector<MlocByteGroup> groups_;
  MlocPriority priority_;
  std::uint64_t chunks_ = 1, elements_ = 1, brick_ = 1;
  std::vector<std::uint64_t> rank_coords_;  // chunks x dims
  std::vector<std::uint64_t> rank_of_linear_;  // C-order chunk id -> rank
  std::array<std::uint64_t, 3> stride_{};  // per level V, M, S: its stride in the unit order
};

}  // namespace mmfs::layouts
