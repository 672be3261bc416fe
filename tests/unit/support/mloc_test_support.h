// Shorthands and fixtures shared by the mloc unit tests (layouts/mloc*.h).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "layouts/mloc.h"
#include "layouts/mloc_codec.h"

namespace mmfs::layouts::testing {

using u32 = std::uint32_t;
using u64 = std::uint64_t;
using Shape = std::vector<u64>;
using Bytes = std::vector<std::byte>;

inline constexpr MlocPriority kVMS{MlocLevel::Value, MlocLevel::Precision, MlocLevel::Space};

inline u64 product(const Shape& s) {
  u64 p = 1;
  for (u64 v : s) p *= v;
  return p;
}

inline Bytes random_bytes(std::mt19937_64& rng, std::size_t n) {
  Bytes b(n);
  for (auto& x : b) x = std::byte(rng() & 0xFF);
  return b;
}

// A bin in [0, bins) drawn for every element of chunk `rank` of `g`, its
// padding marked (mloc_mark_padding): the bins of a random chunk.
inline std::vector<u32> random_bins(const MlocGrid& g, u64 rank, u32 bins, std::mt19937_64& rng) {
  std::vector<u32> out(product(g.chunk()));
  for (auto& b : out) b = u32(rng() % bins);
  mloc_mark_padding(g, rank, out.data());
  return out;
}

inline MlocGrid make_grid(Shape shape, u32 itemsize, Shape chunk, u32 bins, MlocPriority p = kVMS,
                          bool float64 = false) {
  return MlocGrid(std::move(shape), itemsize, float64, std::move(chunk), bins, p);
}

// Calls f(index) for every index of the box `extents`, C order.
template <typename F>
inline void for_each_index(const Shape& extents, F f) {
  Shape x(extents.size(), 0);
  for (u64 k = 0, n = product(extents); k < n; ++k) {
    f(x);
    for (std::size_t d = extents.size(); d-- > 0;) {
      if (++x[d] < extents[d]) break;
      x[d] = 0;
    }
  }
}

// The six orders of V, M and S, from their text.
inline std::vector<std::string> all_priority_texts() {
  std::string letters = "MSV";
  std::vector<std::string> out;
  do {
    out.push_back(std::string{letters[0], '-', letters[1], '-', letters[2]});
  } while (std::next_permutation(letters.begin(), letters.end()));
  return out;
}

inline MlocPriority priority_of(const std::string& text) {
  return {MlocLevel(text[0]), MlocLevel(text[2]), MlocLevel(text[4])};
}

}  // namespace mmfs::layouts::testing
