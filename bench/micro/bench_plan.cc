// Micro-benchmarks of planning a view (Catch2 BENCHMARK; not part of CI):
// the CPU a cold view spends choosing its placement and its requests. An
// array with copies plans each view on every placement it may be served
// from, then once more on the one that reads it; on a small box that was
// about as much CPU as gathering the box's cells.
// Run: build/bench/mmfs-read-path-bench "[plan]" --benchmark-samples 50
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "fs/meta/cell_checksums.h"
#include "geometry/load.h"
#include "layouts/cell_blocks.h"
#include "layouts/io_plan.h"
#include "layouts/layout.h"

using namespace mmfs;
using namespace mmfs::layouts;

namespace {

struct Placed {
  std::string name;
  std::unique_ptr<Layout> layout;
};

}  // namespace

TEST_CASE("plan the 5 % box of the (1024,1024,256) float64 array on each placement", "[plan]") {
  // The placements of `mmfs-bench real`'s array with two copies on a flash
  // volume: the model's default (hilbert 16x16x4) and the copies naive
  // 1x64x256 and 8x8x256.
  auto geometry = geom::load_geometry("ssd");
  const std::uint32_t ss = geometry->sector_size();
  const std::uint32_t block_sectors = fs::checksum_block_bytes(ss) / ss;
  const std::vector<std::uint64_t> shape = {1024, 1024, 256};
  std::vector<Placed> placed;
  geom::Lbn next = 0;
  for (auto [name, cell] : {std::pair<const char*, std::vector<std::uint64_t>>{"hilbert", {16, 16, 4}},
                            {"naive", {1, 64, 256}},
                            {"naive", {8, 8, 256}}}) {
    CellGrid g(shape, 8, cell, {2, 1, 0});
    auto layout = make_layout(name, *geometry, g);
    layout->place(allocate_linear(*geometry, layout->space(), next, &next));
    placed.push_back({fmt::format("{} {}x{}x{}", name, cell[0], cell[1], cell[2]), std::move(layout)});
  }
  const Selection box({{500, 551, 1}, {500, 551, 1}, {100, 113, 1}});
  for (const Placed& p : placed) {
    PlanOptions options;
    options.block_sectors = block_sectors;
    BENCHMARK("plan_selection, " + p.name) { return plan_selection(*p.layout, box, options).requests; };
    const std::uint32_t per_cell = p.layout->sectors_per_cell() / block_sectors;
    const CellGrid& g = p.layout->grid();
    BENCHMARK("CellBlocks of every touched cell, " + p.name) {
      CellBlocks blocks(g, box, std::uint64_t(block_sectors) * ss, per_cell);
      std::uint64_t set = 0;
      std::vector<std::uint64_t> cc(3);
      for (std::uint64_t a = 500 / g.cell()[0]; a <= 550 / g.cell()[0]; ++a)
        for (std::uint64_t b = 500 / g.cell()[1]; b <= 550 / g.cell()[1]; ++b)
          for (std::uint64_t c = 100 / g.cell()[2]; c <= 112 / g.cell()[2]; ++c) {
            cc = {a, b, c};
            set += blocks.of(cc).count;
          }
      return set;
    };
  }
}
