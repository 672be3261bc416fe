// The volume's default layout and cell (layouts/default_layout.h): MultiMap
// on disks and MEMStores, and on flash a cell shaped like the array.
#include <catch2/catch.hpp>


#include "geometry/load.h"
#include "layouts/cell_grid.h"
#include "layouts/default_layout.h"

using namespace mmfs;
using layouts::CellGrid;

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
