// The bytes of MLOC's units (layouts/mloc.h): how one chunk's elements split
// into per-bin position lists and byte planes and back, and how a unit is
// packed (zstd when it shrinks, else stored raw). Pure. Where the units of an
// image lie is its directory (layouts/mloc_directory.h).
//
// A unit (bin b, byte group g, chunk c) holds, for the elements of chunk c in
// bin b taken in ascending position, the bytes of group g plane by plane:
// first every element's byte of the group's first rank, then the next rank.
// Planes of one significance compress far better than interleaved bytes (the
// high-order bytes of one bin are nearly constant).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "layouts/mloc.h"

namespace mmfs::layouts {

inline constexpr std::uint32_t kMlocNoBin = 0xFFFFFFFFu;
// Sets the bins of the brick positions of chunk `rank` that lie outside the
// array to kMlocNoBin.
void mloc_mark_padding(const MlocGrid& grid, std::uint64_t rank, std::uint32_t* bins);

// One chunk's elements split by bin.
struct MlocChunkSplit {
  std::vector<std::vector<std::uint32_t>> positions;  // [bin]: ascending in-chunk C-order offsets
  std::vector<std::vector<std::byte>> planes;         // [bin * groups + group]
};

// `elements` is the chunk's brick (C order of the full chunk shape, padded at
// the array's edges), `count` its length, `bins` their bins (< grid.bins(),
// or kMlocNoBin for the padding, which no unit holds). Positions are offsets
// in the brick.
void mloc_split_chunk(const MlocGrid& grid, const std::byte* elements, std::uint64_t count,
                      const std::uint32_t* bins, MlocChunkSplit* out);
// The inverse for one (bin, chunk): writes the elements at `positions` into
// `elements`, the chunk's C-order buffer, whole: the bytes of groups
// [0, groups) from planes[g] (the units' raw bytes, positions.size() per
// byte), every other byte 0.
void mloc_scatter(const MlocGrid& grid, std::span<const std::uint32_t> positions, std::uint32_t groups,
                  const std::byte* const* planes, std::byte* elements);
// The elements of one (bin, chunk), dense in position order: the bytes of
// groups [0, groups) from planes[g] (count per rank), the rest left as is.
void mloc_assemble(const MlocGrid& grid, std::uint64_t count, std::uint32_t groups, const std::byte* const* planes,
                   std::byte* elements);
// Element k of a (bin, chunk) from its units' raw bytes: planes[g] holds
// group g's bytes, `count` per byte of the group (as mloc_scatter reads
// them). The first `groups` groups are kept; the other bytes are zero.
class MlocElementReader {
 public:
  MlocElementReader(const MlocGrid& grid, std::uint64_t count, std::uint32_t groups, const std::byte* const* planes);
  std::uint64_t value(std::size_t k) const {  // little-endian: the element is its first item bytes
    std::uint64_t v = 0;
    for (std::uint32_t j = 0; j < kept_; ++j) v |= std::uint64_t(src_[j][k]) << shift_[j];
    return v;
  }
  // A fixed-size store per element, not a memcpy call: loops over many
  // elements switch on the item size once, outside, and call this.
  template <class Word>
  void write_as(std::size_t k, std::byte* out) const {
    const Word w = Word(value(k));
    std::memcpy(out, &w, sizeof w);
  }
  // For loops over many elements: their own copies of these, which the
  // compiler keeps in registers (a store through std::byte* may alias any
  // member, so it reloads members after every store).
  const std::array<const std::byte*, 8>& sources() const { return src_; }
  const std::array<std::uint32_t, 8>& shifts() const { return shift_; }
  std::uint32_t kept() const { return kept_; }
  std::uint32_t itemsize() const { return item_; }
  void write(std::size_t k, std::byte* out) const {
    switch (item_) {
      case 8: return write_as<std::uint64_t>(k, out);
      case 4: return write_as<std::uint32_t>(k, out);
      case 2: return write_as<std::uint16_t>(k, out);
      case 1: return write_as<std::uint8_t>(k, out);
    }
    const std::uint64_t v = value(k);
    std::memcpy(out, &v, item_);
  }

 private:
  std::array<const std::byte*, 8> src_{};
  std::array<std::uint32_t, 8> shift_{};
  std::uint32_t kept_ = 0, item_ = 0;
};

// An element index no place has: mloc_place_elements skips the element.
inline constexpr std::uint64_t kMlocSkip = std::uint64_t(1) << 62;

// The one loop that un-bins elements: element k (k < count) of `element`'s
// (bin, chunk) is written whole, one fixed-size store, at out + index(k)
// elements, or skipped when index(k) >= kMlocSkip. mloc_scatter places
// into a brick (index: the position), layouts/mloc_select.h into a view.
template <class Index>
void mloc_place_elements(const MlocElementReader& element, std::size_t count, Index index, std::byte* out) {
  // Locals (and `index` by value), not the reader's members: a store
  // through std::byte* may alias them, and the compiler would reload them
  // after every store.
  const std::array<const std::byte*, 8> src = element.sources();
  const std::array<std::uint32_t, 8> shift = element.shifts();
  const std::uint32_t kept = element.kept();
  auto place = [&]<typename Word>(Word) {
    for (std::size_t k = 0; k < count; ++k) {
      const std::uint64_t at = index(k);
      if (at >= kMlocSkip) continue;
      std::uint64_t v = 0;
      for (std::uint32_t j = 0; j < kept; ++j) v |= std::uint64_t(src[j][k]) << shift[j];
      const Word w = Word(v);
      std::memcpy(out + at * sizeof(Word), &w, sizeof w);
    }
  };
  switch (element.itemsize()) {
    case 8: return place(std::uint64_t{});
    case 4: return place(std::uint32_t{});
    case 2: return place(std::uint16_t{});
    case 1: return place(std::uint8_t{});
  }
  for (std::size_t k = 0; k < count; ++k)
    if (const std::uint64_t at = index(k); at < kMlocSkip) element.write(k, out + at * element.itemsize());
}

// A unit's raw size.
inline std::uint64_t mloc_unit_raw_bytes(const MlocGrid& grid, std::uint64_t count, std::uint32_t group) {
  return count * grid.groups()[group].bytes;
}

// zstd at `level` when that makes it at least an eighth smaller (level 0:
// never); otherwise the raw bytes. A unit is compressed exactly when its
// stored size is below its raw size.
std::vector<std::byte> mloc_pack(std::span<const std::byte> raw, int level);
// false when the stored bytes do not expand to exactly `raw_bytes`.
bool mloc_unpack(std::span<const std::byte> stored, std::size_t raw_bytes, std::byte* out);

// A position list as a portable CRoaring bitmap (runs where they help).
std::vector<std::byte> mloc_encode_positions(std::span<const std::uint32_t> positions);
// false unless the bytes are a portable bitmap of exactly `count` positions below `limit`.
bool mloc_decode_positions(std::span<const std::byte> bytes, std::uint64_t count, std::uint64_t limit,
                           std::vector<std::uint32_t>* out);

std::uint32_t mloc_checksum(std::span<const std::byte> bytes);

}  // namespace mmfs::layouts
