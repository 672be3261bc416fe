// Geometries, grids and placed layouts shared by the layout unit tests
// (tests/unit/layouts/test_layout.cc, test_multimap.cc, test_io_plan.cc, ...).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "geometry/geometry.h"
#include "geometry/load.h"
#include "layouts/cell_grid.h"
#include "layouts/layout.h"

namespace mmfs::layouts::testing {

// docs/reference.md §7's uniform toy disk: T = 8, D = 4, zero skew and settle angle.
inline std::unique_ptr<geom::Geometry> toy() {
  return geom::load_geometry(nlohmann::json{{"kind", "disk"},       {"sector_size", 512},
                                            {"cylinders", 1000},    {"surfaces", 1},
                                            {"sectors_per_track", 8}, {"rpm", 10000},
                                            {"track_skew_sectors", 0}, {"settle_ms", 0.0},
                                            {"settle_cylinders", 4}, {"conservatism_deg", 0}});
}

// The built-in ssd profile's service model on a small device.
inline std::unique_ptr<geom::Geometry> small_ssd(std::uint64_t sectors = 4096) {
  return geom::load_geometry(nlohmann::json{{"kind", "flash"},        {"sector_size", 4096},
                                            {"capacity_sectors", sectors}, {"track_sectors", 32},
                                            {"queues", 8},            {"latency_ms", 0.08},
                                            {"bandwidth_mb_s", 2000.0}, {"depth", 128},
                                            {"name", "small-ssd"}});
}

// One cell per 512-byte sector, dimension 0 primary (the paper's Dim_0).
inline CellGrid paper_grid(std::vector<std::uint64_t> shape) {
  std::vector<std::uint32_t> order(shape.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  return CellGrid(shape, 512, std::vector<std::uint64_t>(shape.size(), 1), order);
}

// The layout `name` over `grid`, placed on linear extents from `at`.
inline std::unique_ptr<Layout> placed(const std::string& name, const geom::Geometry& g, CellGrid grid,
                                      std::vector<std::uint64_t> cube = {}, Lbn at = 0) {
  auto l = make_layout(name, g, std::move(grid), std::move(cube));
  l->place(allocate_linear(g, l->space(), at));
  return l;
}

// Calls f(cell) for every cell of a grid of `grid` cells per dimension, C order.
template <typename F>
void for_each_cell(const std::vector<std::uint64_t>& grid, F f) {
  std::vector<std::uint64_t> c(grid.size(), 0);
  while (true) {
    f(c);
    std::size_t d = grid.size();
    while (d > 0) {
      --d;
      if (++c[d] < grid[d]) break;
      c[d] = 0;
      if (d == 0) return;
    }
  }
}

// Wikipedia's textbook 2-D Hilbert d2xy (side n, a power of two): the curve
// the Hilbert orders and layouts are checked against (test_curve_order.cc,
// test_linear_layouts.cc).
inline void d2xy(std::uint64_t n, std::uint64_t d, std::uint64_t& x, std::uint64_t& y) {
  std::uint64_t t = d;
  x = y = 0;
  for (std::uint64_t s = 1; s < n; s *= 2) {
    const std::uint64_t rx = 1 & (t / 2);
    const std::uint64_t ry = 1 & (t ^ rx);
    if (ry == 0) {
      if (rx == 1) {
        x = s - 1 - x;
        y = s - 1 - y;
      }
      std::swap(x, y);
    }
    x += s * rx;
    y += s * ry;
    t /= 4;
  }
}

}  // namespace mmfs::layouts::testing
