// An array cut into cells (layouts/cell_grid.h): the grid's sizes and C-order
// cell numbers against hand computation, the refusals of malformed grids, the
// default order, the default cell (a balanced brick filling a sector) and
// the proportional cell (shaped like the array) against brute force.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "layouts/cell_grid.h"

using namespace mmfs;
using layouts::CellGrid;

namespace {

std::uint64_t product(const std::vector<std::uint64_t>& v) {
  std::uint64_t p = 1;
  for (auto x : v) p *= x;
  return p;
}

// The message of the std::invalid_argument `f` throws ("" when it throws none).
template <class F>
std::string refusal(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("cell grid: cells per dimension round up, sizes multiply, cells are numbered in C order", "[cell_grid]") {
  const CellGrid g({10, 7, 3}, 4, {4, 7, 2}, {2, 0, 1});
  CHECK(g.dims() == 3);
  CHECK(g.grid() == std::vector<std::uint64_t>{3, 1, 2});  // ceil(10/4), ceil(7/7), ceil(3/2)
  CHECK(g.cells() == 6);
  CHECK(g.elements() == 210);
  CHECK(g.cell_elements() == 56);
  CHECK(g.cell_bytes() == 224);
  CHECK(g.itemsize() == 4);
  CHECK(g.order() == std::vector<std::uint32_t>{2, 0, 1});
  CHECK(g.sectors_per_cell(512) == 1);
  CHECK(g.sectors_per_cell(128) == 2);  // 224 bytes: one full sector and part of another
  CHECK(g.sectors_per_cell(224) == 1);
  // C order over the grid (3, 1, 2): the last dimension fastest.
  std::uint64_t expected = 0;
  for (std::uint64_t a = 0; a < 3; ++a)
    for (std::uint64_t c = 0; c < 2; ++c) CHECK(g.linear(std::vector<std::uint64_t>{a, 0, c}) == expected++);
  // A cell larger than the array is one cell.
  const CellGrid one({5, 5}, 8, {8, 8}, {1, 0});
  CHECK(one.grid() == std::vector<std::uint64_t>{1, 1});
  CHECK(one.cells() == 1);
  CHECK(one.cell_bytes() == 512);
}

TEST_CASE("cell grid: coords invert linear; a cell's elements are its box, clipped at the array's edge",
          "[cell_grid]") {
  const CellGrid g({10, 7, 3}, 4, {4, 3, 2}, {2, 0, 1});  // grid 3, 3, 2
  std::vector<std::uint64_t> at(3);
  for (std::uint64_t c = 0; c < g.cells(); ++c) {
    g.coords(c, at);
    for (std::size_t d = 0; d < 3; ++d) CHECK(at[d] < g.grid()[d]);
    CHECK(g.linear(at) == c);
  }
  g.coords(g.linear(std::vector<std::uint64_t>{2, 1, 1}), at);
  CHECK(at == std::vector<std::uint64_t>{2, 1, 1});
  // The last cell of dimension 0 holds elements 8..9, of dimension 1 6..6, of dimension 2 2..2.
  const auto box = g.element_box(g.linear(std::vector<std::uint64_t>{2, 2, 1}));
  REQUIRE(box.size() == 3);
  CHECK((box[0].start == 8 && box[0].stop == 10));
  CHECK((box[1].start == 6 && box[1].stop == 7));
  CHECK((box[2].start == 2 && box[2].stop == 3));
  // A run of cells: from the first element of `lo` to the last of `hi`.
  const auto run = g.element_box(std::vector<std::uint64_t>{0, 1, 0}, std::vector<std::uint64_t>{1, 2, 0});
  CHECK((run[0].start == 0 && run[0].stop == 8));
  CHECK((run[1].start == 3 && run[1].stop == 7));
  CHECK((run[2].start == 0 && run[2].stop == 2));
  for (const auto& r : run) CHECK((r.step == 1 && !r.fixed));
}

TEST_CASE("cell grid: malformed shapes, cells and orders are refused", "[cell_grid]") {
  CHECK_THAT(refusal([] { CellGrid({}, 8, {}, {}); }), Catch::Contains("1 to 16 dimensions"));
  CHECK_THAT(refusal([] { CellGrid(std::vector<std::uint64_t>(17, 1), 8, std::vector<std::uint64_t>(17, 1),
                                   CellGrid::default_order(17)); }),
             Catch::Contains("1 to 16 dimensions"));
  CHECK_NOTHROW(CellGrid(std::vector<std::uint64_t>(16, 2), 1, std::vector<std::uint64_t>(16, 1),
                         CellGrid::default_order(16)));
  CHECK_THAT(refusal([] { CellGrid({4}, 0, {1}, {0}); }), Catch::Contains("itemsize"));
  CHECK_THAT(refusal([] { CellGrid({4, 4}, 8, {1}, {1, 0}); }), Catch::Contains("cell has 1 dimensions, shape has 2"));
  CHECK_THAT(refusal([] { CellGrid({4, 4}, 8, {1, 1}, {0}); }), Catch::Contains("order has 1 dimensions"));
  CHECK_THAT(refusal([] { CellGrid({4, 4}, 8, {1, 1}, {0, 0}); }), Catch::Contains("permutation of 0..1"));
  CHECK_THAT(refusal([] { CellGrid({4, 4}, 8, {1, 1}, {0, 2}); }), Catch::Contains("permutation"));
  CHECK_THAT(refusal([] { CellGrid({4, 0}, 8, {1, 1}, {1, 0}); }), Catch::Contains("shape extents"));
  CHECK_THAT(refusal([] { CellGrid({4, 4}, 8, {1, 0}, {1, 0}); }), Catch::Contains("cell extents"));
  // Sizes that overflow 64 bits.
  const std::uint64_t big = std::uint64_t(1) << 40;
  CHECK_THAT(refusal([&] { CellGrid({big, big}, 1, {1, 1}, {1, 0}); }), Catch::Contains("number of cells"));
  CHECK_THAT(refusal([&] { CellGrid({big, big}, 1, {big, big}, {1, 0}); }), Catch::Contains("number of elements"));
  CHECK_THAT(refusal([&] { CellGrid({big, 1u << 22}, 8, {big, 1}, {1, 0}); }),
             Catch::Contains("the array's byte size"));
  CHECK_THAT(refusal([&] { CellGrid({4}, 8, {std::uint64_t(1) << 61}, {0}); }),
             Catch::Contains("the cell's byte size"));
}

TEST_CASE("cell grid: the default order streams the C-order fastest dimension; join prints a list",
          "[cell_grid]") {
  CHECK(CellGrid::default_order(1) == std::vector<std::uint32_t>{0});
  CHECK(CellGrid::default_order(4) == std::vector<std::uint32_t>{3, 2, 1, 0});
  CHECK(CellGrid::default_order(0).empty());
  CHECK(layouts::join(std::vector<std::uint64_t>{1, 22, 333}) == "1,22,333");
  CHECK(layouts::join(std::vector<std::uint64_t>{7}) == "7");
  CHECK(layouts::join(std::vector<std::uint64_t>{}) == "");
}

TEST_CASE("default cell: a brick of power-of-two sides, grown in priority order, filling one sector",
          "[cell_grid]") {
  const std::vector<std::uint32_t> c_order{1, 0};
  // 64 float64 elements fill 512 bytes: 8 x 8, each side doubled in turn.
  CHECK(CellGrid::default_cell(std::vector<std::uint64_t>{1000, 1000}, 8, 512, c_order) ==
        std::vector<std::uint64_t>{8, 8});
  // A short dimension is spanned whole (3), the other takes the rest that fits: 3 x 16 = 48 <= 64.
  CHECK(CellGrid::default_cell(std::vector<std::uint64_t>{3, 1000}, 8, 512, c_order) ==
        std::vector<std::uint64_t>{3, 16});
  // Room for an odd number of doublings: the primary dimension gets the extra one.
  const std::vector<std::uint64_t> cube{100, 100, 100};
  CHECK(CellGrid::default_cell(cube, 4, 512, std::vector<std::uint32_t>{2, 1, 0}) ==
        std::vector<std::uint64_t>{4, 4, 8});
  CHECK(CellGrid::default_cell(cube, 4, 512, std::vector<std::uint32_t>{0, 1, 2}) ==
        std::vector<std::uint64_t>{8, 4, 4});
  // An element larger than the sector: one element.
  CHECK(CellGrid::default_cell(std::vector<std::uint64_t>{10, 10}, 1024, 512, c_order) ==
        std::vector<std::uint64_t>{1, 1});
  // The whole array when it fits.
  CHECK(CellGrid::default_cell(std::vector<std::uint64_t>{4, 5}, 1, 4096, c_order) ==
        std::vector<std::uint64_t>{4, 5});
  // The default cell's bytes: 4 KiB, or the sector when larger.
  CHECK(CellGrid::default_cell_bytes(512) == 4096);
  CHECK(CellGrid::default_cell_bytes(4096) == 4096);
  CHECK(CellGrid::default_cell_bytes(8192) == 8192);
}

TEST_CASE("default cell: never more than the sector, and no side could double without passing it",
          "[cell_grid]") {
  for (const auto& shape : {std::vector<std::uint64_t>{1000, 3, 77}, std::vector<std::uint64_t>{2, 2, 2, 2, 2},
                            std::vector<std::uint64_t>{1 << 20}, std::vector<std::uint64_t>{5, 600, 9}}) {
    for (std::uint32_t itemsize : {1u, 2u, 8u, 24u}) {
      const auto order = CellGrid::default_order(shape.size());
      const auto cell = CellGrid::default_cell(shape, itemsize, 4096, order);
      const std::uint64_t budget = 4096 / itemsize;
      INFO("itemsize " << itemsize << " shape " << layouts::join(shape) << " cell " << layouts::join(cell));
      CHECK(product(cell) <= budget);
      for (std::size_t d = 0; d < shape.size(); ++d) {
        CHECK(cell[d] <= shape[d]);
        const bool power_of_two = (cell[d] & (cell[d] - 1)) == 0;
        CHECK((power_of_two || cell[d] == shape[d]));
        // Growing this side (to double or to the whole dimension) would pass the budget.
        if (cell[d] < shape[d]) CHECK(product(cell) / cell[d] * std::min(2 * cell[d], shape[d]) > budget);
      }
    }
  }
}

TEST_CASE("proportional cell: an element larger than the cell's bytes is a cell of one", "[cell_grid]") {
  CHECK(CellGrid::proportional_cell(std::vector<std::uint64_t>{64, 64}, 8192, 4096, std::vector<std::uint32_t>{1, 0}) ==
        std::vector<std::uint64_t>{1, 1});
  // A dimension of one never grows.
  CHECK(CellGrid::proportional_cell(std::vector<std::uint64_t>{1, 4096}, 1, 4096, std::vector<std::uint32_t>{1, 0}) ==
        std::vector<std::uint64_t>{1, 4096});
}

TEST_CASE("proportional cell: sides follow the array's shape, so every slice reads the same amplification") {
  const std::vector<std::uint32_t> order{2, 1, 0};
  CHECK(CellGrid::proportional_cell(std::vector<std::uint64_t>{1024, 1024, 256}, 8, 8192, order) ==
        std::vector<std::uint64_t>{16, 16, 4});
  CHECK(CellGrid::proportional_cell(std::vector<std::uint64_t>{1024, 1024, 1024}, 8, 4096, order) ==
        std::vector<std::uint64_t>{8, 8, 8});
  // A 2-D table 4096 x 64 of int32: 1024 elements, side ratio 64.
  CHECK(CellGrid::proportional_cell(std::vector<std::uint64_t>{4096, 64}, 4, 4096, std::vector<std::uint32_t>{1, 0}) ==
        std::vector<std::uint64_t>{256, 4});
}

TEST_CASE("proportional cell: brute force — the worst slice amplification per element is the least any "
          "power-of-two cell of that size has") {
  const std::vector<std::uint32_t> order{2, 1, 0};
  for (auto shape : {std::vector<std::uint64_t>{1024, 1024, 256}, std::vector<std::uint64_t>{512, 64, 2048},
                     std::vector<std::uint64_t>{100, 1000, 10}}) {
    const std::uint64_t elements = 1024;
    const auto cell = CellGrid::proportional_cell(shape, 8, elements * 8, order);
    CHECK(product(cell) <= elements);
    for (std::size_t d = 0; d < 3; ++d) CHECK(cell[d] <= shape[d]);
    // worst over d of cell[d] / shape[d] (a slice along d reads cell[d] x its bytes, of shape-proportional size)
    auto worst = [&](const std::vector<std::uint64_t>& c) {
      double w = 0;
      for (std::size_t d = 0; d < 3; ++d) w = std::max(w, double(c[d]) / double(shape[d]));
      return w;
    };
    double best = 1e300;
    std::uint64_t best_fill = 0;
    for (std::uint64_t a = 1; a <= shape[0]; a *= 2)
      for (std::uint64_t b = 1; b <= shape[1]; b *= 2)
        for (std::uint64_t c = 1; c <= shape[2]; c *= 2) {
          if (a * b * c > elements) continue;
          // Among cells that fill as much as the chosen one, none has a better worst slice.
          if (a * b * c < product(cell)) continue;
          best = std::min(best, worst({a, b, c}));
          best_fill = std::max(best_fill, a * b * c);
        }
    INFO("shape " << shape[0] << "x" << shape[1] << "x" << shape[2]);
    CHECK(product(cell) == best_fill);  // as full as a power-of-two cell can be
    CHECK(worst(cell) == Approx(best));
  }
}
