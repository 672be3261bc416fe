// The one bitmap type of mmfs's indexes: CRoaring's 64-bit map (one 32-bit
// Roaring bitmap per 2^32 rows, so arrays of more than 2^32 elements work
// and smaller ones cost a single bucket). Small helpers CRoaring 0.2.66
// lacks in its 64-bit class live here, built from its own operations.
#pragma once

#include <roaring/roaring64map.hh>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace mmfs::indexes {

// CRoaring 0.2.66 (Debian 12; no roaring:: namespace yet) declares a copy
// assignment in Roaring64Map and so no move: every std::move, every
// returned temporary assigned, every vector growth deep-copies all of its
// containers. Bitmap is Roaring64Map with moves that hand over the buckets.
class Bitmap : public ::Roaring64Map {
 public:
  using Roaring64Map::Roaring64Map;
  Bitmap() = default;
  Bitmap(const Bitmap& other) : Roaring64Map(static_cast<const Roaring64Map&>(other)) {}
  Bitmap(const Roaring64Map& other) : Roaring64Map(other) {}
  Bitmap(Bitmap&& other) noexcept { take(other); }
  Bitmap(Roaring64Map&& other) noexcept { take(other); }
  Bitmap& operator=(const Bitmap& other) {
    Roaring64Map::operator=(other);
    return *this;
  }
  Bitmap& operator=(const Roaring64Map& other) {
    Roaring64Map::operator=(other);
    return *this;
  }
  Bitmap& operator=(Bitmap&& other) noexcept {
    if (this != &other) take(other);
    return *this;
  }
  Bitmap& operator=(Roaring64Map&& other) noexcept {
    if (this != &other) take(other);
    return *this;
  }
  ~Bitmap() = default;

  // Roaring64Map's versions of these walk its buckets with a lambda taking
  // pair<uint32_t, Roaring> (not pair<const uint32_t, ...>), so every call
  // deep-copies every bucket: cardinality() twice. These walk them in place.
  std::uint64_t cardinality() const;
  bool isEmpty() const;
  std::size_t getSizeInBytes(bool portable = true) const;
  std::size_t write(char* buf, bool portable = true) const;
  void toUint64Array(std::uint64_t* out) const;

 private:
  // This map's buckets become other's; other is left empty.
  void take(Roaring64Map& other) noexcept;
};

// [begin, end) as a bitmap (run-compressed).
Bitmap range_bitmap(std::uint64_t begin, std::uint64_t end);
// CRoaring portable serialization of rows below 2^32 (the 32-bit format
// pyroaring and every CRoaring reader take); rows >= 2^32 use the 64-bit
// portable format. This is what A@/query/COND/mask returns.
std::string portable_mask(const Bitmap& b, std::uint64_t rows);
// Serialization for the index's own storage (64-bit portable) and its
// bounded, never-throwing inverse (false on malformed input).
std::string serialize(const Bitmap& b);
// a ⊆ b. (Roaring64Map::isSubset of 0.2.66 dereferences the other map's
// end() when it lacks one of a's buckets: never call it.)
bool is_subset(const Bitmap& a, const Bitmap& b);
// Same rows. (Its operator== can loop forever on empty buckets.)
bool same_rows(const Bitmap& a, const Bitmap& b);
bool deserialize(std::span<const std::byte> bytes, Bitmap* out);
// The union of many bitmaps, merged pairwise as a balanced tree: CRoaring
// 0.2.66's Roaring64Map::fastunion ORs them one after another into a
// growing result, which costs the result's size once per input (a range of
// a thousand equality bitmaps took 0.1 s; the tree takes log2(n) passes).
Bitmap union_all(std::vector<const Bitmap*> parts);
// Adds rows (high << 32) | low[i] for ascending low[] straight into the
// map's bucket (no temporary bitmap per call: index builds add millions of
// short runs).
void add_rows32(Bitmap* b, std::uint32_t high, const std::uint32_t* low, std::size_t n);
// The rows whose bits are set in `words` (row r: bit r % 64 of word r / 64;
// fewer than 2^32 rows), each 2^16-row chunk handed to CRoaring as a finished
// container, so a dense bit slice costs a copy, not an insertion per row.
// Run-optimized unless `run_optimize` is false (a result about to be read
// once, whose containers need not be the smallest). With first_row (a
// multiple of 2^16), bit i of the words is row first_row + i: a slice of a
// larger row space built on its own.
Bitmap bitmap_of_words(std::span<const std::uint64_t> words, std::uint64_t first_row = 0, bool run_optimize = true);
// ORs b's rows in [first_row, first_row + 64 * words.size()) into `words`
// (row first_row + i is bit i; first_row a multiple of 2^16), container by
// container: the inverse of bitmap_of_words for a slice of the rows.
void or_rows_into(const Bitmap& b, std::uint64_t first_row, std::span<std::uint64_t> words);
// ORs the rows of a serialize()d bitmap into `words` (as above; their
// number a multiple of 1024, one per 2^16 rows) straight from its bytes,
// checked as deserialize() checks them: no container is built. False when
// the bytes are malformed or hold a row past the words.
bool or_serialized_into(std::span<const std::byte> bytes, std::span<std::uint64_t> words);
// a ∩ b as a new bitmap. (Roaring64Map's operator& copies a whole, then
// intersects the copy in place.)
Bitmap intersect(const Bitmap& a, const Bitmap& b);
// |a ∩ b|, without building the intersection.
std::uint64_t and_count(const Bitmap& a, const Bitmap& b);
// The rows in every bitmap of all_of and in none of none_of, counted
// without building any intersection: container by container (2^16 rows),
// the operands' words ANDed in place, or a sparse one's rows looked up in
// the others. A count of five dense atoms cost CRoaring four intersections,
// each allocating its result's containers.
std::uint64_t count_all_none(std::span<const Bitmap* const> all_of, std::span<const Bitmap* const> none_of);
// The rows, ascending. (Roaring64Map's own iterator of 0.2.66 can hang on
// empty buckets, which set operations leave behind: never iterate a Bitmap.)
std::vector<std::uint64_t> rows_of(const Bitmap& b);

}  // namespace mmfs::indexes
