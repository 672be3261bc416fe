// Runs of C-order elements as boxes (layouts/c_order_boxes.h), checked
// against brute force: the boxes hold exactly the run, once each, at most
// two per dimension; the cells a box touches are the cells of its elements.
#include <catch2/catch.hpp>

#include <random>
#include <set>
#include <vector>

#include "layouts/c_order_boxes.h"

using namespace mmfs::layouts;

namespace {

std::uint64_t linear_of(const std::vector<std::uint64_t>& shape, const std::vector<std::uint64_t>& at) {
  std::uint64_t l = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) l = l * shape[d] + at[d];
  return l;
}

// Every element of `box` (C-order linear indices in `shape`).
std::vector<std::uint64_t> elements(const std::vector<std::uint64_t>& shape, const std::vector<DimRange>& box) {
  std::vector<std::uint64_t> out;
  std::vector<std::uint64_t> at(shape.size());
  for (std::size_t d = 0; d < shape.size(); ++d) at[d] = box[d].start;
  for (;;) {
    out.push_back(linear_of(shape, at));
    std::size_t d = shape.size();
    for (;;) {
      if (d == 0) return out;
      --d;
      if (++at[d] < box[d].stop) break;
      at[d] = box[d].start;
    }
  }
}

}  // namespace

TEST_CASE("c_order_boxes: the boxes hold exactly the run, each element once", "[c_order_boxes]") {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 400; ++trial) {
    const std::size_t n = 1 + rng() % 4;
    std::vector<std::uint64_t> shape(n);
    std::uint64_t total = 1;
    for (auto& s : shape) total *= (s = 1 + rng() % 7);
    const std::uint64_t first = rng() % total;
    const std::uint64_t last = first + 1 + rng() % (total - first);
    std::vector<std::uint64_t> seen;
    int boxes = 0;
    c_order_boxes(shape, first, last, [&](const std::vector<DimRange>& box) {
      ++boxes;
      REQUIRE(box.size() == n);
      for (std::size_t d = 0; d < n; ++d) {
        REQUIRE(box[d].step == 1);
        REQUIRE(!box[d].fixed);
        REQUIRE(box[d].start < box[d].stop);
        REQUIRE(box[d].stop <= shape[d]);
      }
      for (auto e : elements(shape, box)) seen.push_back(e);
    });
    INFO("trial " << trial << " run [" << first << ", " << last << ")");
    CHECK(boxes <= int(2 * n));
    std::vector<std::uint64_t> expect;
    for (std::uint64_t e = first; e < last; ++e) expect.push_back(e);
    CHECK(seen == expect);  // in C order, each once
  }
}

TEST_CASE("c_order_boxes: an empty run emits nothing", "[c_order_boxes]") {
  int boxes = 0;
  const std::vector<std::uint64_t> shape{4, 5};
  c_order_boxes(shape, 7, 7, [&](const std::vector<DimRange>&) { ++boxes; });
  CHECK(boxes == 0);
}

TEST_CASE("touched_cell_runs: the runs are the cells of the box's elements", "[c_order_boxes]") {
  std::mt19937_64 rng(9);
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t n = 1 + rng() % 3;
    std::vector<std::uint64_t> shape(n), cell(n);
    for (std::size_t d = 0; d < n; ++d) {
      shape[d] = 1 + rng() % 20;
      cell[d] = 1 + rng() % shape[d];
    }
    const CellGrid grid(shape, 8, cell, CellGrid::default_order(n));
    std::vector<DimRange> box(n);
    for (std::size_t d = 0; d < n; ++d) {
      box[d].start = rng() % shape[d];
      box[d].stop = box[d].start + 1 + rng() % (shape[d] - box[d].start);
    }
    std::set<std::uint64_t> expect;
    for (auto e : elements(shape, box)) {
      std::vector<std::uint64_t> at(n), c(n);
      for (std::size_t d = n; d-- > 0;) {
        at[d] = e % shape[d];
        e /= shape[d];
      }
      for (std::size_t d = 0; d < n; ++d) c[d] = at[d] / cell[d];
      expect.insert(grid.linear(c));
    }
    std::set<std::uint64_t> got;
    std::uint64_t counted = 0;
    touched_cell_runs(grid, box, [&](std::uint64_t first, std::uint64_t count) {
      for (std::uint64_t i = 0; i < count; ++i) got.insert(first + i);
      counted += count;
    });
    CHECK(got == expect);
    CHECK(counted == expect.size());  // runs do not overlap
  }
}
