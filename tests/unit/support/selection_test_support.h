// Random selections and their brute-force result, shared by the selection,
// cell copy and planner unit tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "layouts/cell_grid.h"
#include "layouts/selection.h"

namespace mmfs::layouts::testing {

// A random range of a dimension of `extent` elements: a fixed index one time
// in four, else a stepped range (step 1..3) inside the dimension.
inline DimRange random_range(std::mt19937_64& rng, std::uint64_t extent) {
  const std::uint64_t a = rng() % extent;
  if (rng() % 4 == 0) return DimRange{a, a + 1, 1, true};
  const std::uint64_t b = a + 1 + rng() % (extent - a);
  return DimRange{a, b, 1 + rng() % 3, false};
}

// A random selection of the grid's array, a random_range per dimension.
inline Selection random_selection(const CellGrid& g, std::mt19937_64& rng) {
  std::vector<DimRange> dims;
  for (std::uint64_t s : g.shape()) dims.push_back(random_range(rng, s));
  return Selection(dims);
}

// The elements of `sel` in C order, straight from the C-order array.
inline std::vector<std::byte> brute(const CellGrid& g, const std::vector<std::byte>& array,
                                    const Selection& sel) {
  std::vector<std::byte> out;
  const auto& dims = sel.dims();
  std::size_t n = dims.size();
  std::vector<std::uint64_t> i(n, 0);
  for (std::size_t d = 0; d < n; ++d)
    if (dims[d].count() == 0) return out;
  for (;;) {
    std::uint64_t lin = 0;
    for (std::size_t d = 0; d < n; ++d) lin = lin * g.shape()[d] + dims[d].start + i[d] * dims[d].step;
    for (std::uint32_t b = 0; b < g.itemsize(); ++b) out.push_back(array[lin * g.itemsize() + b]);
    std::size_t d = n;
    while (d-- > 0) {
      if (++i[d] < dims[d].count()) break;
      i[d] = 0;
      if (d == 0) return out;
    }
  }
}

}  // namespace mmfs::layouts::testing
