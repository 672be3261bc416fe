// The touched cells' runs a plan keeps for the read that follows it
// (layouts/touched_runs.h): named by C-order position whatever order the
// plan walks in, the layout's own runs, and plans unchanged by keeping them.
#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "geometry/load.h"
#include "layouts/cell_copy.h"
#include "layouts/io_plan.h"
#include "layouts/layout.h"
#include "layouts/selection.h"
#include "layouts/touched_runs.h"

using namespace mmfs;
using namespace mmfs::layouts;

namespace {

std::vector<std::vector<std::uint64_t>> touched_of(const CellGrid& g, const Selection& sel) {
  std::vector<std::vector<std::uint64_t>> t(g.dims());
  for (std::size_t d = 0; d < g.dims(); ++d) t[d] = cells_touched(sel.dims()[d], g.cell()[d]);
  return t;
}

}  // namespace

TEST_CASE("touched runs: positions are C order, and every cell's runs are the layout's") {
  auto ssd = geom::load_geometry("ssd");
  std::mt19937_64 rng(31);
  for (const char* name : {"naive", "zorder", "hilbert", "multimap"}) {
    INFO(name);
    // Order {2,1,0}: the plan walks dimension 2 fastest; C order has it fastest too,
    // so use {0,1,2} as well, where the plan walks dimension 0 fastest.
    for (const std::vector<std::uint32_t>& order : {std::vector<std::uint32_t>{2, 1, 0}, {0, 1, 2}}) {
      CellGrid g({64, 48, 16}, 8, {16, 16, 4}, order);
      auto layout = make_layout(name, *ssd, g);
      layout->place(allocate_linear(*ssd, layout->space(), 0));
      for (int k = 0; k < 6; ++k) {
        std::vector<DimRange> dims;
        for (std::size_t d = 0; d < 3; ++d) {
          const std::uint64_t a = rng() % g.shape()[d], b = rng() % g.shape()[d];
          dims.push_back({std::min(a, b), std::max(a, b) + 1, 1});
        }
        const Selection sel(dims);
        TouchedRuns runs;
        PlanOptions kept;
        kept.runs = &runs;
        kept.block_sectors = 1;  // 8 KiB cells of two 4 KiB blocks: a choice, so two walks
        PlanOptions plain;
        plain.block_sectors = 1;
        const IoPlan a = plan_selection(*layout, sel, kept), b = plan_selection(*layout, sel, plain);
        CHECK(a.to_json() == b.to_json());  // keeping the runs changes nothing

        const auto touched = touched_of(g, sel);
        REQUIRE(runs.covers(touched));
        CHECK_FALSE(runs.covers(touched_of(g, Selection::slice(g.shape(), 0, 0))));
        std::uint64_t position = 0;
        for_each_touched_cell(touched, [&](std::span<const std::uint64_t> cc) {
          Run want[2];
          const std::size_t n = layout->cell_runs(cc, want);
          const auto got = runs.of(*layout, position++, cc);
          REQUIRE(got.size() == n);
          for (std::size_t i = 0; i < n; ++i) {
            REQUIRE(got[i].lbn == want[i].lbn);
            REQUIRE(got[i].sectors == want[i].sectors);
          }
        });
      }
    }
  }
}

TEST_CASE("touched runs: position() of per-dimension indices") {
  TouchedRuns runs;
  runs.prepare({{3, 4}, {0, 1, 2}, {7, 8, 9, 10}});
  const std::vector<std::size_t> first = {0, 0, 0}, last = {1, 2, 3}, mid = {1, 0, 2};
  CHECK(runs.position(first) == 0);
  CHECK(runs.position(last) == 2 * 3 * 4 - 1);
  CHECK(runs.position(mid) == 1 * 12 + 0 * 4 + 2);
}
