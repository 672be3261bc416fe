// The layout an array's schema asks for (fs/array/array_layout.h): the
// schema's cell and order, else the default cell filling 4 KiB in the default
// order; the layout by name; an mloc array's naive staging cells whatever
// its schema says; capsule cells of one sector of a column; refusals.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <vector>

#include "fs/array/array_layout.h"
#include "geometry/load.h"
#include "layouts/capsule.h"
#include "layouts/multimap.h"
#include "tests/unit/support/array_test_support.h"
#include "tests/unit/support/fs_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;
using mmfs::fs::testing::arrays::make_schema;
using mmfs::fs::testing::toy_disk;

TEST_CASE("array layout: the schema's cell and order, else a 4 KiB default cell", "[array_layout]") {
  auto g = toy_disk();  // 512-byte sectors
  ArraySchema s = make_schema({40, 30}, "float64", "naive");
  auto l = make_array_layout(*g, s);
  CHECK(l->name() == "naive");
  // 512 float64 fill 4 KiB: sides doubled in turn from the last dimension, 30 taken whole.
  CHECK(l->grid().cell() == std::vector<std::uint64_t>{16, 30});
  CHECK(l->grid().order() == std::vector<std::uint32_t>{1, 0});
  CHECK(l->sectors_per_cell() == 8 * 16 * 30 / 512 + 1);  // 3840 bytes: 8 sectors (7.5 rounded up)
  s.cell = {4, 5};
  s.order = {0, 1};
  l = make_array_layout(*g, s);
  CHECK(l->grid().cell() == std::vector<std::uint64_t>{4, 5});
  CHECK(l->grid().order() == std::vector<std::uint32_t>{0, 1});
  CHECK(l->sectors_per_cell() == 1);
  for (const char* name : {"zorder", "hilbert", "multimap"}) {
    s.layout = name;
    CHECK(make_array_layout(*g, s)->name() == name);
  }
}

TEST_CASE("array layout: a basic cube reaches MultiMap; bad ones and unknown layouts are refused", "[array_layout]") {
  auto g = geom::load_geometry("atlas10k3");
  ArraySchema s = make_schema({100, 20, 10}, "float64", "multimap");
  s.cell = {1, 1, 1};
  s.basic_cube = {100, 20, 10};
  auto l = make_array_layout(*g, s);
  CHECK(dynamic_cast<layouts::MultiMapLayout&>(*l).basic_cube() == std::vector<std::uint64_t>{100, 20, 10});
  s.basic_cube = {100, 21, 10};  // past the shape
  CHECK_THROWS_AS(make_array_layout(*g, s), std::invalid_argument);
  s.basic_cube.clear();
  s.layout = "spiral";
  CHECK_THROWS_AS(make_array_layout(*g, s), std::invalid_argument);
  s.layout = "naive";
  s.cell = {1, 1};  // the wrong rank
  CHECK_THROWS_AS(make_array_layout(*g, s), std::invalid_argument);
}

TEST_CASE("array layout: an mloc array stages in naive default cells whatever its schema says", "[array_layout]") {
  auto g = toy_disk();
  ArraySchema s = make_schema({40, 30}, "float64", "mloc");
  s.cell = {2, 2};
  s.order = {0, 1};
  s.basic_cube = {2, 2};
  auto l = make_array_layout(*g, s);
  CHECK(l->name() == "naive");
  CHECK(l->grid().cell() == std::vector<std::uint64_t>{16, 30});
  CHECK(l->grid().order() == std::vector<std::uint32_t>{1, 0});
}

TEST_CASE("array layout: capsule cells are one sector of one column; a table attribute gets its part",
          "[array_layout]") {
  auto g = geom::load_geometry("mems-g2");
  ArraySchema s = make_schema({1000, 3}, "int32", "capsule");
  auto l = make_array_layout(*g, s);
  CHECK(l->name() == "capsule");
  CHECK(l->grid().cell() == std::vector<std::uint64_t>{g->sector_size() / 4, 1});
  CHECK(l->sectors_per_cell() == 1);
  s.shape = {1000};
  s.table_part = TablePart{1, 3, 1, 1};
  auto part = make_array_layout(*g, s);
  CHECK(part->name() == "capsule");
  CHECK(part->grid().cell() == std::vector<std::uint64_t>{g->sector_size() / 4});
}
