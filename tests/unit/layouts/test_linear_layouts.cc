// The layouts that fill their extents along a curve (layouts/linear_layouts.h):
// naive ranks cells with order[0] varying fastest, Z-order and Hilbert rank
// them along the textbook curves with dimensions taken in priority order, and
// the ranks fill the extents in order, whole cells per extent.
#include <catch2/catch.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "layouts/linear_layouts.h"
#include "tests/unit/support/layout_test_support.h"

using namespace mmfs;
using namespace mmfs::layouts;
using namespace mmfs::layouts::testing;

namespace {

using Cell = std::vector<std::uint64_t>;

// One 512-byte cell per sector, one extent from LBN 0.
std::unique_ptr<Layout> one_sector_cells(const char* name, const geom::Geometry& g, Cell shape,
                                         std::vector<std::uint32_t> order) {
  auto l = make_layout(name, g, CellGrid(shape, 512, Cell(shape.size(), 1), std::move(order)));
  l->place({{0, l->space().sectors}});
  return l;
}

}  // namespace

TEST_CASE("naive layout: cells in dimension-priority order, order[0] varying fastest", "[linear_layouts]") {
  auto g = toy();
  auto l = one_sector_cells("naive", *g, {5, 3, 4}, {2, 0, 1});
  CHECK(l->name() == "naive");
  for_each_cell({5, 3, 4}, [&](const Cell& c) {
    INFO(join(c));
    CHECK(l->cell_lbn(c) == c[2] + 4 * c[0] + 4 * 5 * c[1]);
  });
  // The C order when order is n-1, ..., 0.
  auto c_order = one_sector_cells("naive", *g, {3, 7}, CellGrid::default_order(2));
  for_each_cell({3, 7}, [&](const Cell& c) { CHECK(c_order->cell_lbn(c) == 7 * c[0] + c[1]); });
}

TEST_CASE("zorder layout: the Morton sequence over the dimensions in priority order", "[linear_layouts]") {
  auto g = toy();
  // Morton on 4 x 4 (curve dimension 0 the more significant bit of each pair).
  const std::vector<Cell> morton = {{0, 0}, {0, 1}, {1, 0}, {1, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3},
                                    {2, 0}, {2, 1}, {3, 0}, {3, 1}, {2, 2}, {2, 3}, {3, 2}, {3, 3}};
  auto primary0 = one_sector_cells("zorder", *g, {4, 4}, {0, 1});  // curve dimension 0 is array dimension 0
  auto primary1 = one_sector_cells("zorder", *g, {4, 4}, {1, 0});  // ... is array dimension 1
  CHECK(primary0->name() == "zorder");
  for (std::uint64_t r = 0; r < morton.size(); ++r) {
    const Cell& m = morton[r];
    CHECK(primary0->cell_lbn(Cell{m[0], m[1]}) == r);
    CHECK(primary1->cell_lbn(Cell{m[1], m[0]}) == r);
  }
}

TEST_CASE("hilbert layout: the textbook 2-D Hilbert curve over the dimensions in priority order",
          "[linear_layouts]") {
  auto g = toy();
  auto primary0 = one_sector_cells("hilbert", *g, {8, 8}, {0, 1});
  auto primary1 = one_sector_cells("hilbert", *g, {8, 8}, {1, 0});
  CHECK(primary0->name() == "hilbert");
  for (std::uint64_t d = 0; d < 64; ++d) {
    std::uint64_t x, y;
    d2xy(8, d, x, y);
    INFO("rank " << d << " at " << x << "," << y);
    CHECK(primary0->cell_lbn(Cell{x, y}) == d);
    CHECK(primary1->cell_lbn(Cell{y, x}) == d);
  }
}

TEST_CASE("linear layouts: ranks fill the extents in order, whole cells per extent", "[linear_layouts]") {
  auto g = toy();
  for (const char* name : {"naive", "zorder", "hilbert"}) {
    INFO(name);
    // 8 cells of two sectors (1024 bytes each).
    auto l = make_layout(name, *g, CellGrid({8}, 1024, {1}, {0}));
    REQUIRE(l->sectors_per_cell() == 2);
    const SpaceRequest req = l->space();
    CHECK(req.shape == SpaceShape::Runs);
    CHECK(req.sectors == 16);
    CHECK(req.unit_sectors == 2);
    // 7 sectors hold 3 cells (the 7th is slack), 10 hold 5.
    l->place({{100, 7}, {200, 10}});
    CHECK(l->extents().size() == 2);
    // In 1-D every curve ranks cell i at i.
    const std::vector<Lbn> want = {100, 102, 104, 200, 202, 204, 206, 208};
    for (std::uint64_t i = 0; i < 8; ++i) {
      Run r[2];
      REQUIRE(l->cell_runs(Cell{i}, r) == 1);
      CHECK(r[0].lbn == want[i]);
      CHECK(r[0].sectors == 2);
    }
    // Extents holding fewer cells than the array are refused.
    auto short_of_one = make_layout(name, *g, CellGrid({8}, 1024, {1}, {0}));
    try {
      short_of_one->place({{100, 7}, {200, 9}});
      FAIL("no error");
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).find("extents hold 7 cells") != std::string::npos);
    }
    CHECK_THROWS_AS(short_of_one->place({}), std::invalid_argument);
  }
}
