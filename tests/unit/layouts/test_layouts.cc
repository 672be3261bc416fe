// Layouts and the I/O planner against the MultiMap paper's worked examples and
// brute-force oracles.
#include <catch2/catch.hpp>
#include <random>
#include <set>

#include "geometry/load.h"
#include "layouts/io_plan.h"
#include "layouts/multimap.h"

using namespace mmfs;
using namespace mmfs::layouts;

namespace {

// docs/reference.md §7's uniform toy disk: T = 8, D = 4, zero skew and settle angle.
std::unique_ptr<geom::Geometry> toy() {
  return geom::load_geometry(nlohmann::json{{"kind", "disk"},       {"sector_size", 512},
                                            {"cylinders", 1000},    {"surfaces", 1},
                                            {"sectors_per_track", 8}, {"rpm", 10000},
                                            {"track_skew_sectors", 0}, {"settle_ms", 0.0},
                                            {"settle_cylinders", 4}, {"conservatism_deg", 0}});
}

// One cell per 512-byte sector, dimension 0 primary (the paper's Dim_0).
CellGrid paper_grid(std::vector<std::uint64_t> shape) {
  std::vector<std::uint32_t> order(shape.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  return CellGrid(shape, 512, std::vector<std::uint64_t>(shape.size(), 1), order);
}

std::unique_ptr<Layout> placed(const std::string& name, const geom::Geometry& g, CellGrid grid,
                               std::vector<std::uint64_t> cube = {}, Lbn at = 0) {
  auto l = make_layout(name, g, std::move(grid), std::move(cube));
  l->place(allocate_linear(g, l->space(), at));
  return l;
}

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

}  // namespace

TEST_CASE("MultiMap §4.2: the 2-D, 3-D and 4-D examples map to the LBNs of Figures 8-10") {
  auto g = toy();
  // Fig. 8: S = (8, 3): Dim_1 runs along first adjacent blocks.
  auto l2 = placed("multimap", *g, paper_grid({8, 3}));
  for_each_cell({8, 3}, [&](const auto& c) { CHECK(l2->cell_lbn(c) == c[0] + 8 * c[1]); });
  // Fig. 9: S = (8, 4, 3): Dim_2 along 4th adjacent blocks (LBN 32 is the 4th neighbour of 0).
  auto l3 = placed("multimap", *g, paper_grid({8, 4, 3}));
  CHECK(dynamic_cast<MultiMapLayout&>(*l3).basic_cube() == std::vector<std::uint64_t>{8, 4, 3});
  for_each_cell({8, 4, 3}, [&](const auto& c) { CHECK(l3->cell_lbn(c) == c[0] + 8 * c[1] + 32 * c[2]); });
  CHECK(l3->cell_lbn(std::vector<std::uint64_t>{0, 0, 1}) == 32);
  CHECK(l3->cell_lbn(std::vector<std::uint64_t>{0, 0, 2}) == 64);
  // Fig. 10: S = (8, 2, 2, 3): Dim_3 along (S_1 x S_2)-th adjacent blocks.
  auto l4 = placed("multimap", *g, paper_grid({8, 2, 2, 3}));
  for_each_cell({8, 2, 2, 3},
                [&](const auto& c) { CHECK(l4->cell_lbn(c) == c[0] + 8 * c[1] + 16 * c[2] + 32 * c[3]); });
}

TEST_CASE("MultiMap: basic cubes obey Eq. 1-3 and user cubes are validated") {
  auto g = geom::load_geometry("atlas10k3");
  // The paper's 3-D chunk: 259^3 cells on D = 128.
  auto k = MultiMapLayout::choose_basic_cube(paper_grid({259, 259, 259}), 1, 686, 128, 1u << 30);
  CHECK(k[0] == 259);  // Eq. 1, two cubes per track
  CHECK(k[1] <= 128);  // Eq. 3
  CHECK(k[2] == 259);  // Eq. 2
  // Two cubes share a track, so an even cube count wastes nothing: 4 cubes of
  // 65 (1 cell of padding) beat 3 of 87 (an empty packing slot) and 7 of 37.
  CHECK(k[1] == 65);
  auto k4 = MultiMapLayout::choose_basic_cube(paper_grid({530, 32, 32, 32}), 1, 686, 128, 1u << 30);
  CHECK(k4 == std::vector<std::uint64_t>{530, 16, 8, 32});

  CHECK_THROWS_WITH(MultiMapLayout(*g, paper_grid({1000, 10, 10}), {687, 10, 10}), Catch::Contains("Eq. 1"));
  CHECK_THROWS_WITH(MultiMapLayout(*g, paper_grid({100, 200, 10}), {100, 129, 10}), Catch::Contains("Eq. 3"));
  CHECK_THROWS_WITH(MultiMapLayout(*g, paper_grid({100, 20, 10}), {100, 21, 10}), Catch::Contains("1..20"));
  CHECK_THROWS_WITH(MultiMapLayout(*g, paper_grid({100, 20, 10}), {100, 20}), Catch::Contains("dimensions"));
  // A device with a single track has no adjacent blocks at all.
  auto one_track = geom::load_geometry(nlohmann::json{{"kind", "disk"}, {"cylinders", 1}, {"sectors_per_track", 64},
                                                      {"rpm", 10000}, {"settle_ms", 1.0}, {"settle_cylinders", 1}});
  REQUIRE(one_track->depth() == 0);
  CHECK_THROWS_WITH(MultiMapLayout(*one_track, paper_grid({8, 2})), Catch::Contains("D = 0"));
}

TEST_CASE("MultiMap on the Atlas: neighbours in every non-primary dimension are adjacent blocks") {
  auto g = geom::load_geometry("atlas10k3");
  auto layout = placed("multimap", *g, paper_grid({259, 100, 40}), {}, 686 * 8 * 100);
  const auto& mm = dynamic_cast<MultiMapLayout&>(*layout);
  auto K = mm.basic_cube();
  std::mt19937_64 rng(3);
  for (int i = 0; i < 2000; ++i) {
    std::vector<std::uint64_t> c = {rng() % 259, rng() % 100, rng() % 40};
    Lbn here = layout->cell_lbn(c);
    // Dim_0: the next sector on the track (within the cube's row).
    if (c[0] % K[0] + 1 < K[0]) {
      auto n = c;
      ++n[0];
      auto b = g->track_boundaries(here);
      CHECK(layout->cell_lbn(n) == (here == b.high ? b.low : here + 1));
    }
    std::uint64_t step = 1;
    for (std::size_t d = 1; d < 3; ++d) {
      if (c[d] % K[d] + 1 < K[d] && c[d] + 1 < (d == 1 ? 100u : 40u)) {
        auto n = c;
        ++n[d];
        CHECK(layout->cell_lbn(n) == g->adjacent(here, std::uint32_t(step)));
      }
      step *= K[d];
    }
  }
}

TEST_CASE("every layout is a bijection from cells onto its sectors, on random shapes") {
  std::mt19937_64 rng(2024);
  auto atlas = geom::load_geometry("atlas10k3");
  auto g = toy();
  for (int round = 0; round < 60; ++round) {
    std::size_t dims = 1 + rng() % 6;
    std::vector<std::uint64_t> shape(dims);
    std::uint64_t total = 1;
    for (auto& s : shape) {
      s = 1 + rng() % (dims <= 2 ? 300 : dims <= 4 ? 12 : 5);
      total *= s;
    }
    std::vector<std::uint32_t> order = CellGrid::default_order(dims);
    std::shuffle(order.begin(), order.end(), rng);
    std::uint32_t itemsize = std::vector<std::uint32_t>{1, 2, 4, 8}[rng() % 4];
    const geom::Geometry& geometry = (round % 2) ? *atlas : *g;
    auto cell = CellGrid::default_cell(shape, itemsize, geometry.sector_size(), order);
    for (const char* name : {"naive", "zorder", "hilbert", "multimap"}) {
      INFO(name << " shape " << join(shape) << " cell " << join(cell) << " order " << order.size());
      auto layout = placed(name, geometry, CellGrid(shape, itemsize, cell, order), {}, round % 2 ? 686 * 64 : 0);
      std::set<Lbn> used;
      std::uint64_t runs = 0;
      bool inside = true;
      for_each_cell(layout->grid().grid(), [&](const auto& c) {
        Run r[2];
        std::size_t n = layout->cell_runs(c, r);
        std::uint32_t sectors = 0;
        for (std::size_t i = 0; i < n; ++i) {
          sectors += r[i].sectors;
          for (Lbn s = r[i].lbn; s < r[i].lbn + r[i].sectors; ++s) {
            used.insert(s);
            bool in_extent = false;
            for (const Extent& e : layout->extents()) in_extent |= s >= e.start && s < e.start + e.sectors;
            inside &= in_extent;
          }
        }
        CHECK(sectors == layout->sectors_per_cell());
        runs += layout->sectors_per_cell();
      });
      CHECK(inside);
      CHECK(used.size() == runs);  // no two cells share a sector
      CHECK(runs == layout->grid().cells() * layout->sectors_per_cell());
    }
  }
}

TEST_CASE("the plan of any view reads exactly the cells of the view") {
  std::mt19937_64 rng(77);
  auto atlas = geom::load_geometry("atlas10k3");
  for (int round = 0; round < 40; ++round) {
    std::size_t dims = 1 + rng() % 4;
    std::vector<std::uint64_t> shape(dims);
    for (auto& s : shape) s = 1 + rng() % (dims <= 2 ? 200 : 24);
    std::vector<std::uint32_t> order = CellGrid::default_order(dims);
    std::shuffle(order.begin(), order.end(), rng);
    auto cell = CellGrid::default_cell(shape, 8, 512, order);
    // A random box with steps; some dimensions fixed.
    std::vector<DimRange> ranges;
    for (std::size_t d = 0; d < dims; ++d) {
      std::uint64_t a = rng() % shape[d], b = a + 1 + rng() % (shape[d] - a);
      bool fixed = rng() % 4 == 0;
      ranges.push_back(fixed ? DimRange{a, a + 1, 1, true} : DimRange{a, b, 1 + rng() % 5, false});
    }
    Selection sel(ranges);
    for (const char* name : {"naive", "zorder", "hilbert", "multimap"}) {
      INFO(name << " shape " << join(shape));
      auto layout = placed(name, *atlas, CellGrid(shape, 8, cell, order));
      IoPlan plan = plan_selection(*layout, sel);
      std::set<Lbn> planned;
      for (const IoBatch& b : plan.batches)
        for (const geom::Request& r : b.requests)
          for (Lbn s = r.lbn; s < r.lbn + r.sectors; ++s) CHECK(planned.insert(s).second);  // no sector twice
      // Brute force: every selected element's cell, and that cell's sectors.
      std::set<Lbn> expected;
      std::set<std::vector<std::uint64_t>> cells;
      std::vector<std::uint64_t> counts;
      for (const DimRange& r : ranges) counts.push_back(r.count());
      for_each_cell(counts, [&](const auto& k) {
        std::vector<std::uint64_t> c(dims);
        for (std::size_t d = 0; d < dims; ++d) c[d] = (ranges[d].start + k[d] * ranges[d].step) / cell[d];
        cells.insert(c);
      });
      for (const auto& c : cells) {
        Run r[2];
        std::size_t n = layout->cell_runs(c, r);
        for (std::size_t i = 0; i < n; ++i)
          for (Lbn s = r[i].lbn; s < r[i].lbn + r[i].sectors; ++s) expected.insert(s);
      }
      CHECK(planned == expected);
      CHECK(plan.cells == cells.size());
      CHECK(plan.bytes_useful == sel.elements() * 8);
      CHECK(plan.bytes_read == expected.size() * 512);
    }
  }
}

TEST_CASE("plans: contiguous sectors merge, MultiMap batches one basic cube's tracks together") {
  auto atlas = geom::load_geometry("atlas10k3");
  auto naive = placed("naive", *atlas, paper_grid({259, 259, 4}));
  // A beam along the primary dimension of Naive is one contiguous request.
  std::vector<std::uint64_t> shape = {259, 259, 4}, at = {0, 7, 2};
  IoPlan p = plan_selection(*naive, Selection::beam(shape, at, 0));
  CHECK(p.requests == 1);
  CHECK(p.sectors == 259);
  auto mm = placed("multimap", *atlas, paper_grid({259, 259, 4}));
  IoPlan q = plan_selection(*mm, Selection::beam(shape, at, 1));
  const auto& K = dynamic_cast<MultiMapLayout&>(*mm).basic_cube();
  // K_0 = 259 packs two cubes per track group: one batch per group crossed.
  CHECK(dynamic_cast<MultiMapLayout&>(*mm).cubes_per_track() == 2);
  CHECK(q.batches.size() == ((259 + K[1] - 1) / K[1] + 1) / 2);
  CHECK(q.requests == 259);
  model_plan(q, *atlas);
  CHECK(q.modeled_ms > 0);
  auto j = q.to_json();
  CHECK(j["requests"] == 259);
  CHECK(j["batches"].size() == q.batches.size());
}
