// The volume's default layout and cell (layouts/default_layout.h): MultiMap
// on disks and MEMStores, and on flash a cell shaped like the array.
#include <catch2/catch.hpp>

#include <algorithm>

#include "geometry/load.h"
#include "layouts/cell_grid.h"
#include "layouts/default_layout.h"

using namespace mmfs;
using layouts::CellGrid;

namespace {

std::uint64_t product(const std::vector<std::uint64_t>& v) {
  std::uint64_t p = 1;
  for (auto x : v) p *= x;
  return p;
}

}  // namespace

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

TEST_CASE("default layout: multimap on disks and MEMS, the measured flash choice on flash") {
  for (const char* p : {"atlas10k3", "cheetah36es", "mems-g2"}) {
    auto g = geom::load_geometry(p);
    const auto rule = layouts::default_layout(*g);
    CHECK(rule.layout == "multimap");
    CHECK(rule.cell_bytes == 0);
    CHECK(rule.rule.find("multimap") != std::string::npos);
    const std::vector<std::uint64_t> shape{64, 64, 64};
    const std::vector<std::uint32_t> order{2, 1, 0};
    CHECK(layouts::default_cell(rule, *g, shape, 8, order) ==
          CellGrid::default_cell(shape, 8, CellGrid::default_cell_bytes(g->sector_size()), order));
  }
  auto ssd = geom::load_geometry("ssd");
  const auto rule = layouts::default_layout(*ssd);
  CHECK(rule.layout == layouts::kFlashLayout);
  CHECK(rule.cell_bytes == layouts::kFlashCellBytes);
  CHECK(rule.rule.find("flash") != std::string::npos);
  CHECK(layouts::default_cell(rule, *ssd, std::vector<std::uint64_t>{1024, 1024, 256}, 8,
                              std::vector<std::uint32_t>{2, 1, 0}) == std::vector<std::uint64_t>{16, 16, 4});
}
