// layouts/whole_cell.h: a selection that is exactly one whole cell, against
// brute force over every box of a small grid.
#include <catch2/catch.hpp>

#include <vector>

#include "layouts/whole_cell.h"

using namespace mmfs::layouts;

TEST_CASE("a selection is one whole cell exactly when it is that cell's full box", "[whole_cell]") {
  const CellGrid grid({10, 8}, 8, {4, 4}, {1, 0});  // the last row of cells is clipped (rows 8..9 of 12)
  std::vector<std::uint64_t> cell;
  int whole = 0;
  for (std::uint64_t a = 0; a < 10; ++a)
    for (std::uint64_t b = a + 1; b <= 10; ++b)
      for (std::uint64_t c = 0; c < 8; ++c)
        for (std::uint64_t d = c + 1; d <= 8; ++d) {
          const Selection sel({{a, b, 1, false}, {c, d, 1, false}});
          const bool expect = a % 4 == 0 && b - a == 4 && c % 4 == 0 && d - c == 4;
          REQUIRE(whole_cell_of(grid, sel, &cell) == expect);
          if (expect) {
            CHECK(cell == std::vector<std::uint64_t>{a / 4, c / 4});
            ++whole;
          }
        }
  CHECK(whole == 4);  // 2 x 2 interior cells; the clipped row of cells never counts
  // A step, a wrong rank: not whole.
  CHECK_FALSE(whole_cell_of(grid, Selection({{0, 4, 2, false}, {0, 4, 1, false}}), &cell));
  CHECK_FALSE(whole_cell_of(grid, Selection({{0, 4, 1, false}}), &cell));
  // One-element-thick cells: a fixed index (a slice) is a whole cell.
  const CellGrid thin({6, 64}, 8, {1, 64}, {1, 0});
  REQUIRE(whole_cell_of(thin, Selection::slice(thin.shape(), 0, 4), &cell));
  CHECK(cell == std::vector<std::uint64_t>{4, 0});
  CHECK_FALSE(whole_cell_of(thin, Selection::slice(thin.shape(), 1, 4), &cell));
}
