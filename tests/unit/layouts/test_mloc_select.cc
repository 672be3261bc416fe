// Decoding mloc chunks straight into a selection's result
// (layouts/mloc_select.h) against brute force: a chunk split into bins and
// scattered whole into its brick, then the selected elements copied out by
// their coordinates one at a time.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "layouts/mloc.h"
#include "layouts/mloc_codec.h"
#include "layouts/mloc_select.h"
#include "layouts/selection.h"

#include "tests/unit/support/mloc_test_support.h"

using namespace mmfs::layouts;
using namespace mmfs::layouts::testing;

namespace {

// A random range of [0, extent): a single index, or a start, stop and step.
DimRange random_range(std::mt19937_64& rng, u64 extent) {
  DimRange r;
  if (rng() % 5 == 0) {
    r.start = rng() % extent;
    r.stop = r.start + 1;
    r.fixed = true;
    return r;
  }
  r.start = rng() % extent;
  r.stop = r.start + 1 + rng() % (extent - r.start);
  r.step = rng() % 3 == 0 ? 1 + rng() % 4 : 1;
  return r;
}

// Checks every chunk of a random array against brute force for `selection`.
void check(std::mt19937_64& rng, const Shape& shape, const Shape& chunk, u32 item, u32 bins,
           const Selection& selection) {
  const MlocGrid g = make_grid(shape, item, chunk, bins, kVMS, item == 8);
  const std::size_t n = shape.size(), G = g.groups().size();
  const u64 brick = product(g.chunk());
  // The result's strides (C order over the selection's counts).
  std::vector<u64> stride(n, 1);
  for (std::size_t d = n - 1; d-- > 0;) stride[d] = stride[d + 1] * selection.dims()[d + 1].count();
  const u64 result = selection.elements();
  for (u32 kept_groups = 1; kept_groups <= G; kept_groups += u32(G - 1 > 0 ? G - 1 : 1)) {
    Bytes got(result * item, std::byte{0xCD}), want(result * item, std::byte{0xCD});
    MlocSelectionTargets targets(g, selection);
    for (u64 rank = 0; rank < g.chunks(); ++rank) {
      const Bytes elems = random_bytes(rng, brick * item);
      const std::vector<u32> bin_of = random_bins(g, rank, bins, rng);
      MlocChunkSplit split;
      mloc_split_chunk(g, elems.data(), brick, bin_of.data(), &split);
      // Brute force: the whole brick, then each selected element by its coordinates.
      Bytes whole(brick * item, std::byte{0});
      for (u32 b = 0; b < bins; ++b) {
        std::vector<const std::byte*> planes;
        for (std::size_t k = 0; k < G; ++k) planes.push_back(split.planes[b * G + k].data());
        mloc_scatter(g, split.positions[b], kept_groups, planes.data(), whole.data());
      }
      const auto cc = g.coords_of(rank);
      bool any = false;
      for (u64 p = 0; p < brick; ++p) {
        u64 rest = p, index = 0;
        bool selected = true;
        for (std::size_t d = n; d-- > 0;) {
          const u64 x = rest % g.chunk()[d], gl = cc[d] * g.chunk()[d] + x;
          rest /= g.chunk()[d];
          const DimRange& r = selection.dims()[d];
          if (gl >= shape[d] || gl < r.start || gl >= r.stop || (gl - r.start) % r.step != 0) {
            selected = false;
            break;
          }
          index += (gl - r.start) / r.step * stride[d];
        }
        if (!selected) continue;
        any = true;
        std::copy_n(whole.begin() + std::ptrdiff_t(p * item), item, want.begin() + std::ptrdiff_t(index * item));
      }
      REQUIRE(targets.place(rank) == any);
      if (!any) continue;
      for (u32 b = 0; b < bins; ++b) {
        std::vector<const std::byte*> planes;
        for (std::size_t k = 0; k < G; ++k) planes.push_back(split.planes[b * G + k].data());
        mloc_scatter_selected(g, split.positions[b], kept_groups, planes.data(), targets, got.data());
      }
    }
    INFO("itemsize " << item << " groups kept " << kept_groups);
    REQUIRE(got == want);  // bytes outside every selected element stay 0xCD in both
  }
}

}  // namespace

TEST_CASE("mloc: chunks decode into a selection's result as through their bricks", "[mloc]") {
  std::mt19937_64 rng(0x53454c);
  // Power-of-two last sides (shift and mask) and others (division); chunks
  // clipped at the far edges; one to three dimensions.
  const std::vector<std::pair<Shape, Shape>> grids{
      {{37, 50}, {8, 16}}, {{37, 50}, {8, 12}}, {{21, 13, 70}, {4, 5, 64}}, {{9, 10, 11}, {4, 3, 5}},
      {{1000}, {128}},     {{999}, {100}},      {{6, 7, 8}, {8, 8, 8}}};
  for (const auto& [shape, chunk] : grids) {
    for (u32 item : {1u, 2u, 4u, 8u}) {
      for (int trial = 0; trial < 4; ++trial) {
        std::vector<DimRange> dims;
        for (u64 s : shape) dims.push_back(random_range(rng, s));
        INFO("shape " << shape.size() << "-D, first " << shape[0] << ", chunk last " << chunk.back() << ", trial "
                      << trial);
        check(rng, shape, chunk, item, 1 + u32(rng() % 5), Selection(dims));
      }
    }
    // The whole array, and nothing of a chunk (a selection inside one chunk).
    check(rng, shape, chunk, 8, 3, Selection::all(shape));
    std::vector<DimRange> one;
    for (u64 s : shape) one.push_back({s - 1, s, 1, false});
    check(rng, shape, chunk, 4, 2, Selection(one));
  }
}
