// The quadrangle layout of arrays on an Atropos volume (layouts/quadrangle.h):
// every cell gets its own sectors inside the extents, beams along the primary
// dimension read whole tracks of every device, beams along the others are
// quadrangle columns; its parameters, describe() and refusals. The volume
// mapping itself is in test_atropos.cc.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "geometry/zoned_disk.h"
#include "layouts/atropos.h"
#include "layouts/quadrangle.h"
#include "tests/unit/support/geometry_errors.h"
#include "tests/unit/support/layout_test_support.h"
#include "tests/unit/support/quadrangle_test_support.h"

using namespace mmfs;
using namespace mmfs::layouts;
using geom::ErrorKind;
using geom::testing::error_of;
using testing::for_each_cell;
using testing::track_start;

namespace {

// N = 23, H = 3, B = 2: b = 2, d = 5, w = 11, R = 1; p = 3.
std::unique_ptr<geom::ZonedDisk> layout_disk() {
  geom::DiskParams p;
  p.surfaces = 2;
  p.zones.push_back({40, 23, 3, 3});  // track and cylinder skews equal, as the quadrangle parameters assume
  return std::make_unique<geom::ZonedDisk>(p);
}

// Cells of `itemsize` bytes (512: one sector, k = 2 per block; 1024: two, k = 1).
CellGrid grid_of(std::vector<std::uint64_t> shape, std::vector<std::uint32_t> order, std::uint32_t itemsize = 512) {
  return CellGrid(shape, itemsize, std::vector<std::uint64_t>(shape.size(), 1), order);
}

// Places the layout on scattered stripes: stripe 2 first, then from stripe 5 on.
void place_scattered(QuadrangleLayout& l) {
  const StripeRequest need = l.space();
  std::vector<VlbnRange> extents{{2 * need.stripe_blocks, need.stripe_blocks}};
  if (need.stripes > 1) extents.push_back({5 * need.stripe_blocks, (need.stripes - 1) * need.stripe_blocks});
  l.place(extents);
}

bool in_extents(const QuadrangleLayout& l, Vlbn vlbn) {
  for (const VlbnRange& e : l.extents())
    if (e.first <= vlbn && vlbn < e.first + e.count) return true;
  return false;
}

struct Array {
  std::vector<std::uint64_t> shape;
  std::vector<std::uint32_t> order;
  std::uint32_t itemsize = 512;
  std::vector<std::uint64_t> depth_cube = {};
};
std::vector<Array> arrays() {
  return {
      {{12, 150}, {1, 0}},                      // 2-D: rows of 66 cells, d = 5 along dim 0
      {{150, 12}, {0, 1}},                      // the same with dimension 0 primary
      {{7, 40}, {1, 0}, 1024},                  // two-sector cells: one per block
      {{3, 4, 70}, {2, 1, 0}},                  // 3-D: order[1] takes 4 rows, order[2] 1
      {{3, 2, 70}, {2, 1, 0}},                  // order[1] short: order[2] takes 2 of the rest
      {{6, 5, 30}, {2, 1, 0}, 512, {2, 2, 1}},  // explicit 2 x 2 depth
      {{4, 3, 2, 20}, {3, 0, 1, 2}},            // 4-D, permuted order
      {{2, 150}, {1, 0}},                       // 2 rows a cube: 2 cubes stacked per stripe
      {{500}, {0}},                             // 1-D: rows stacked d per stripe
  };
}

}  // namespace

TEST_CASE("quadrangle layout: every cell gets its own sectors inside one VLBN of the extents", "[quadrangle]") {
  auto g = layout_disk();
  AtroposVolume v(*g, 3, 2);
  REQUIRE(v.block_sectors() == 2);
  REQUIRE(v.residual_sectors() == 1);
  for (const Array& a : arrays()) {
    QuadrangleLayout l(v, grid_of(a.shape, a.order, a.itemsize), a.depth_cube);
    INFO("shape " << join(a.shape) << " cube " << join(l.cube()));
    place_scattered(l);
    std::set<std::uint64_t> sectors;
    std::set<std::pair<std::uint32_t, geom::Lbn>> device_sectors;
    for_each_cell(l.grid().grid(), [&](const std::vector<std::uint64_t>& cell) {
      VolumeRun run[2];
      REQUIRE(l.cell_runs(cell, run) == 1);
      REQUIRE(run[0].sectors == l.sectors_per_cell());
      const Vlbn vlbn = run[0].sector / v.block_sectors();
      REQUIRE((run[0].sector + run[0].sectors - 1) / v.block_sectors() == vlbn);  // not across two VLBNs
      REQUIRE(l.cell_vlbn(cell) == vlbn);
      REQUIRE(in_extents(l, vlbn));
      REQUIRE(l.batch_key(cell) == v.coord(vlbn).quadrangle);
      for (std::uint32_t s = 0; s < run[0].sectors; ++s) {
        REQUIRE(sectors.insert(run[0].sector + s).second);
        const DeviceBlock at = v.locate_sector(run[0].sector + s);
        REQUIRE(device_sectors.insert({at.device, at.dlbn}).second);
      }
    });
    CHECK(sectors.size() == l.grid().cells() * l.sectors_per_cell());
    CHECK(l.space_amplification() >= 1.0);
  }
}

TEST_CASE("quadrangle layout: a beam along the primary dimension reads whole tracks of every device",
          "[quadrangle]") {
  auto g = layout_disk();
  AtroposVolume v(*g, 3, 2);
  for (const Array& a : arrays()) {
    QuadrangleLayout l(v, grid_of(a.shape, a.order, a.itemsize), a.depth_cube);
    place_scattered(l);
    const std::uint32_t primary = a.order[0];
    const std::uint64_t L = l.row_cells();
    REQUIRE(L == v.row_blocks() * l.cells_per_block());
    const std::uint64_t extent = l.grid().grid()[primary];
    std::vector<std::uint64_t> others = l.grid().grid();
    others[primary] = 1;
    for_each_cell(others, [&](std::vector<std::uint64_t> cell) {
      for (std::uint64_t piece = 0; piece + L <= extent; piece += L) {
        // A full row's worth of cells: exactly one rectangle, k cells per VLBN,
        // and on every device the data sectors of one track.
        std::map<Vlbn, int> per_vlbn;
        std::map<std::uint32_t, std::set<geom::Lbn>> dlbns;
        for (std::uint64_t i = piece; i < piece + L; ++i) {
          cell[primary] = i;
          VolumeRun run[2];
          l.cell_runs(cell, run);
          ++per_vlbn[run[0].sector / v.block_sectors()];
          for (std::uint32_t s = 0; s < run[0].sectors; ++s) {
            const DeviceBlock at = v.locate_sector(run[0].sector + s);
            dlbns[at.device].insert(at.dlbn);
          }
        }
        const VlbnRange rect = v.get_rectangle(per_vlbn.begin()->first);
        REQUIRE(per_vlbn.size() == rect.count);
        REQUIRE(per_vlbn.begin()->first == rect.first);
        for (auto& [vlbn, n] : per_vlbn) REQUIRE(n == int(l.cells_per_block()));
        REQUIRE(dlbns.size() == v.devices());
        for (auto& [device, set] : dlbns) {
          // k cells of spc sectors fill the block here (2 x 1, or 1 x 2).
          REQUIRE(set.size() == std::uint64_t(v.width()) * v.block_sectors());
          REQUIRE(*set.begin() == track_start(v, *set.begin()));
          REQUIRE(*set.rbegin() - *set.begin() + 1 == set.size());
        }
      }
    });
  }
}

TEST_CASE("quadrangle layout: beams along the other dimensions are quadrangle columns, K cells per batch",
          "[quadrangle]") {
  auto g = layout_disk();
  AtroposVolume v(*g, 3, 2);
  for (const Array& a : arrays()) {
    QuadrangleLayout l(v, grid_of(a.shape, a.order, a.itemsize), a.depth_cube);
    place_scattered(l);
    INFO("shape " << join(a.shape) << " cube " << join(l.cube()));
    for (std::size_t j = 1; j < a.order.size(); ++j) {
      const std::uint32_t dim = a.order[j];
      const std::uint64_t K = l.cube()[dim], extent = l.grid().grid()[dim];
      std::vector<std::uint64_t> others = l.grid().grid();
      others[dim] = 1;
      for_each_cell(others, [&](std::vector<std::uint64_t> cell) {
        std::set<std::uint64_t> quadrangles;
        for (std::uint64_t group = 0; group < extent; group += K) {
          // The group's cells: one quadrangle, one column, distinct rows.
          std::set<std::uint32_t> rows;
          cell[dim] = group;
          const QuadrangleCoord first = v.coord(l.cell_vlbn(cell));
          for (std::uint64_t i = group; i < std::min(group + K, extent); ++i) {
            cell[dim] = i;
            const QuadrangleCoord q = v.coord(l.cell_vlbn(cell));
            REQUIRE(q.quadrangle == first.quadrangle);
            REQUIRE(q.column == first.column);
            REQUIRE(l.batch_key(cell) == q.quadrangle);
            REQUIRE(rows.insert(q.row).second);
          }
          // order[1] is the fastest through a cube's rows: consecutive tracks.
          if (j == 1) REQUIRE(*rows.rbegin() - *rows.begin() + 1 == rows.size());
          quadrangles.insert(first.quadrangle);
        }
        // One batch per K cells (per d cells when the dimension takes the whole
        // depth); stacked cubes may share a quadrangle.
        if (l.cubes_per_stripe() == 1)
          REQUIRE(quadrangles.size() == (extent + K - 1) / K);
        else
          REQUIRE(quadrangles.size() <= (extent + K - 1) / K);
      });
    }
  }
  // 2-D: the second dimension takes the whole depth d = 5.
  QuadrangleLayout two_d(v, grid_of({12, 150}, {1, 0}));
  CHECK(two_d.cube() == std::vector<std::uint64_t>{5, 66});
  // Greedy in priority order: order[1] first, order[2] from what is left.
  CHECK(QuadrangleLayout(v, grid_of({3, 4, 70}, {2, 1, 0})).cube() == std::vector<std::uint64_t>{1, 4, 66});
  CHECK(QuadrangleLayout(v, grid_of({3, 2, 70}, {2, 1, 0})).cube() == std::vector<std::uint64_t>{2, 2, 66});
  // 1-D: one row per cube, d cubes per stripe, VLBNs in sequence.
  QuadrangleLayout one_d(v, grid_of({500}, {0}));
  CHECK(one_d.cubes_per_stripe() == 5);
  one_d.place({{0, v.stripe_blocks() * one_d.space().stripes}});
  for (std::uint64_t i = 0; i < 500; ++i) CHECK(one_d.cell_vlbn(std::vector<std::uint64_t>{i}) == i / 2);
}

TEST_CASE("quadrangle layout: parameters, describe() and errors", "[quadrangle]") {
  auto g = layout_disk();
  AtroposVolume v(*g, 3, 2);
  QuadrangleLayout l(v, grid_of({12, 150}, {1, 0}));
  // 150 cells along the primary: 3 cubes of 66; 12 along dim 0: 3 of 5.
  CHECK(l.cubes() == 9);
  CHECK(l.space().stripes == 9);
  CHECK(l.space().stripe_blocks == v.stripe_blocks());
  const nlohmann::json j = l.describe();
  CHECK(j["layout"] == "quadrangle");
  CHECK(j["devices"] == 3);
  CHECK(j["width"] == 11);
  CHECK(j["depth"] == 5);
  CHECK(j["cells_per_block"] == 2);
  CHECK(j["cube"] == nlohmann::json{5, 66});

  // A cell of 4 sectors does not fit a 2-sector block.
  CHECK_THROWS_AS(QuadrangleLayout(v, grid_of({4, 4}, {1, 0}, 2048)), std::invalid_argument);
  // Bad depth cubes: wrong rank, primary not 1, past the extent, more rows than d.
  CHECK_THROWS_AS(QuadrangleLayout(v, grid_of({12, 150}, {1, 0}), {5}), std::invalid_argument);
  CHECK_THROWS_AS(QuadrangleLayout(v, grid_of({12, 150}, {1, 0}), {5, 2}), std::invalid_argument);
  CHECK_THROWS_AS(QuadrangleLayout(v, grid_of({12, 150}, {1, 0}), {13, 1}), std::invalid_argument);
  CHECK_THROWS_AS(QuadrangleLayout(v, grid_of({6, 5, 30}, {2, 1, 0}), {3, 2, 1}), std::invalid_argument);

  // Cells before place(), and bad extents.
  const std::uint64_t s = v.stripe_blocks();
  CHECK_THROWS_AS(l.cell_vlbn(std::vector<std::uint64_t>{0, 0}), std::invalid_argument);
  CHECK_THROWS_AS(l.place({{0, 8 * s}}), std::invalid_argument);                 // too few
  CHECK_THROWS_AS(l.place({{1, 9 * s}}), std::invalid_argument);                 // not at a stripe boundary
  CHECK_THROWS_AS(l.place({{0, 9 * s - 1}}), std::invalid_argument);             // not whole stripes
  CHECK_THROWS_AS(l.place({{0, 5 * s}, {4 * s, 4 * s}}), std::invalid_argument);  // overlapping
  CHECK_THROWS_AS(l.place({{v.blocks() - 4 * s, 9 * s}}), std::invalid_argument); // past the volume
  l.place({{0, 4 * s}, {v.blocks() - 5 * s, 5 * s}});
  CHECK_NOTHROW(l.cell_vlbn(std::vector<std::uint64_t>{11, 149}));
  CHECK_THROWS_AS(l.cell_vlbn(std::vector<std::uint64_t>{12, 0}), std::invalid_argument);
  CHECK_THROWS_AS(l.cell_vlbn(std::vector<std::uint64_t>{0}), std::invalid_argument);

  // The Atlas 10K III with one-sector cells: b = 26, so 26 cells a block and
  // a row of 26 blocks on each of 4 devices.
  auto atlas = geom::load_geometry("atlas10k3");
  AtroposVolume big(*atlas, 4, 1);
  QuadrangleLayout on_atlas(big, grid_of({1000, 5000}, {1, 0}));
  CHECK(on_atlas.cells_per_block() == 26);
  CHECK(on_atlas.row_cells() == 26u * 4 * 26);
}
