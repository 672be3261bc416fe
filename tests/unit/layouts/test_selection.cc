// Selections (layouts/selection.h): the boxes all/slice/beam/box build, their
// element counts and result shapes by hand, empty and stepped ranges, and the
// cells a range touches against brute force.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "layouts/selection.h"

using namespace mmfs::layouts;

namespace {

using Shape = std::vector<std::uint64_t>;

bool same(const DimRange& r, std::uint64_t start, std::uint64_t stop, std::uint64_t step, bool fixed) {
  return r.start == start && r.stop == stop && r.step == step && r.fixed == fixed;
}

}  // namespace

TEST_CASE("selection: a range's count is ceil((stop - start) / step), zero when empty", "[selection]") {
  CHECK(DimRange{0, 10, 1, false}.count() == 10);
  CHECK(DimRange{0, 10, 3, false}.count() == 4);  // 0 3 6 9
  CHECK(DimRange{1, 10, 3, false}.count() == 3);  // 1 4 7
  CHECK(DimRange{2, 10, 4, false}.count() == 2);  // 2 6
  CHECK(DimRange{9, 10, 100, false}.count() == 1);
  CHECK(DimRange{5, 6, 1, true}.count() == 1);
  CHECK(DimRange{5, 5, 1, false}.count() == 0);
  CHECK(DimRange{7, 5, 1, false}.count() == 0);  // stop before start
}

TEST_CASE("selection: all, slice, beam and box", "[selection]") {
  const Shape shape{4, 5, 6};
  const Selection all = Selection::all(shape);
  REQUIRE(all.dims().size() == 3);
  for (std::size_t d = 0; d < 3; ++d) CHECK(same(all.dims()[d], 0, shape[d], 1, false));
  CHECK(all.elements() == 120);
  CHECK(all.result_shape() == Shape{4, 5, 6});

  const Selection slice = Selection::slice(shape, 1, 3);
  CHECK(same(slice.dims()[0], 0, 4, 1, false));
  CHECK(same(slice.dims()[1], 3, 4, 1, true));
  CHECK(same(slice.dims()[2], 0, 6, 1, false));
  CHECK(slice.elements() == 24);
  CHECK(slice.result_shape() == Shape{4, 6});  // the sliced dimension is dropped

  const Shape at{2, 0, 5};
  const Selection beam = Selection::beam(shape, at, 1);  // at[1] is ignored
  CHECK(same(beam.dims()[0], 2, 3, 1, true));
  CHECK(same(beam.dims()[1], 0, 5, 1, false));
  CHECK(same(beam.dims()[2], 5, 6, 1, true));
  CHECK(beam.elements() == 5);
  CHECK(beam.result_shape() == Shape{5});

  const Selection box = Selection::box(Shape{1, 0, 2}, Shape{3, 5, 3});
  CHECK(same(box.dims()[0], 1, 3, 1, false));
  CHECK(same(box.dims()[1], 0, 5, 1, false));
  CHECK(same(box.dims()[2], 2, 3, 1, false));  // one index, but a box keeps the dimension
  CHECK(box.elements() == 10);
  CHECK(box.result_shape() == Shape{2, 5, 1});

  // Every dimension fixed: one element, a 0-d result.
  const Selection point({{1, 2, 1, true}, {4, 5, 1, true}});
  CHECK(point.elements() == 1);
  CHECK(point.result_shape().empty());
}

TEST_CASE("selection: stepped and empty ranges count in elements and the result shape", "[selection]") {
  const Selection s({{0, 10, 3, false}, {2, 3, 1, true}, {1, 8, 2, false}});
  CHECK(s.elements() == 4 * 1 * 4);
  CHECK(s.result_shape() == Shape{4, 4});
  const Selection empty({{0, 10, 1, false}, {3, 3, 1, false}});
  CHECK(empty.elements() == 0);
  CHECK(empty.result_shape() == Shape{10, 0});
  const Selection empty_box = Selection::box(Shape{2, 2}, Shape{2, 9});
  CHECK(empty_box.elements() == 0);
}

TEST_CASE("cells_touched: the sorted distinct cells of a range's elements, against brute force", "[selection]") {
  // By hand: cells of 4, elements 1 3 5 7 9 -> cells 0 1 2; step 10 -> one element per cell, gaps between.
  CHECK(cells_touched(DimRange{1, 10, 2, false}, 4) == Shape{0, 1, 2});
  CHECK(cells_touched(DimRange{3, 40, 10, false}, 4) == Shape{0, 3, 5, 8});
  CHECK(cells_touched(DimRange{7, 8, 1, true}, 4) == Shape{1});
  CHECK(cells_touched(DimRange{5, 5, 1, false}, 4).empty());
  CHECK(cells_touched(DimRange{9, 2, 1, false}, 4).empty());
  std::mt19937_64 rng(99);
  for (int trial = 0; trial < 2000; ++trial) {
    const std::uint64_t extent = 1 + rng() % 200;
    const std::uint64_t cell = 1 + rng() % 20;
    const std::uint64_t start = rng() % extent;
    const std::uint64_t stop = start + rng() % (extent - start + 1);
    const std::uint64_t step = 1 + rng() % 25;
    const DimRange r{start, stop, step, false};
    std::set<std::uint64_t> want;
    for (std::uint64_t i = start; i < stop; i += step) want.insert(i / cell);
    INFO("range " << start << ":" << stop << ":" << step << " cell " << cell);
    CHECK(cells_touched(r, cell) == Shape(want.begin(), want.end()));
  }
}
