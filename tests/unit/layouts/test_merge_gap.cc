// Which gaps the planner reads through (layouts/merge_gap.h): the volume's
// service model decides, and plans follow it.
#include <catch2/catch.hpp>

#include "geometry/flash.h"
#include "geometry/load.h"
#include "layouts/io_plan.h"
#include "layouts/layout.h"
#include "layouts/merge_gap.h"

using namespace mmfs;

namespace {

geom::FlashParams one_channel() {
  geom::FlashParams p;
  p.capacity_sectors = 1ull << 24;
  p.queues = 1;
  p.track_sectors = 1024;
  p.latency_ms = 0.1;
  p.bandwidth_mb_s = 1000;  // a request costs as much as 100 KB of transfer
  return p;
}

}  // namespace

TEST_CASE("merge gap: one channel reads through a gap cheaper than a request's latency") {
  geom::Flash flash(one_channel());
  // Joining pays g bytes at 1 GB/s and saves 0.1 ms: gaps under 100 KB (24.4
  // sectors of 4 KiB); the largest power of two under that is 16.
  CHECK(layouts::merge_gap_sectors(flash, 1, 16) == 16);
  geom::FlashParams slower = one_channel();
  slower.latency_ms = 1.0;  // ten times the latency: ten times the gap (244 sectors -> 128)
  CHECK(layouts::merge_gap_sectors(geom::Flash(slower), 1, 16) == 128);
  CHECK(layouts::merge_gap_sectors(geom::Flash(slower), 1, 16, 64) == 64);  // the limit holds
}

TEST_CASE("merge gap: many parallel channels never join (separate requests go side by side)") {
  geom::Flash nvme(geom::FlashParams{});  // 32 queues of 80 us at 2 GB/s: 400,000 reads a second
  CHECK(layouts::merge_gap_sectors(nvme, 1, 16) == 0);
}

TEST_CASE("merge gap: the ssd profile's 100,000 reads a second make a one-page gap cheaper than a request") {
  // 8 queues of 80 us: a request costs 10 us of the device's time, a 4 KiB
  // page 2 us of its bandwidth (docs/benchmarks/ssd-profile.md). Gaps of up
  // to 4 pages cost less than the request they save, 5 or more cost more;
  // the planner tries powers of two, and 16 requests on 8 queues round the
  // break-even down (a joined read across a track boundary loads two queues).
  auto ssd = geom::load_geometry("ssd");
  const std::uint32_t gap = layouts::merge_gap_sectors(*ssd, 1, 16);
  CHECK(gap >= 1);
  CHECK(gap <= 4);
  CHECK(layouts::merge_gap_sectors(*ssd, 1, 16, 1) == 1);  // the limit holds
}

TEST_CASE("merge gap: on a disk two requests on a track cost what the joined read does, so none is joined") {
  // The disk model charges no per-command overhead: its scheduler serves both
  // requests in the one pass of the head the joined read takes. Merely as fast
  // is not worth the buffer.
  auto disk = geom::load_geometry("atlas10k3");
  CHECK(layouts::merge_gap_sectors(*disk, 1, 16) == 0);
}

TEST_CASE("merge gap: plans join requests across gaps the model says to read, and only those") {
  geom::Flash flash(one_channel());
  // A naive layout of one-sector cells, one per row of a 64x512 float64 array.
  layouts::CellGrid grid({64, 512}, 8, {1, 512}, {1, 0});
  auto layout = layouts::make_layout("naive", flash, grid);
  layout->place(layouts::allocate_linear(flash, layout->space(), 0));
  const std::uint32_t gap = layout->merge_gap_sectors();
  REQUIRE(gap == 16);
  // Column 0 of every row: one cell per row, consecutive rows one cell apart
  // (no gap): one request.
  layouts::Selection rows = layouts::Selection({{0, 64, 1}, {0, 1, 1}});
  layouts::IoPlan plan = layouts::plan_selection(*layout, rows);
  CHECK(plan.requests == 1);
  CHECK(plan.merge_gap_sectors == 16);
  // Every 17th row: gaps of 16 cells are read through; every 18th: 17-sector gaps are not.
  layouts::Selection every17 = layouts::Selection({{0, 64, 17}, {0, 1, 1}});
  CHECK(layouts::plan_selection(*layout, every17).requests == 1);
  layouts::Selection every18 = layouts::Selection({{0, 64, 18}, {0, 1, 1}});
  CHECK(layouts::plan_selection(*layout, every18).requests == 4);
  layouts::PlanOptions contiguous;
  contiguous.merge_gaps = false;
  CHECK(layouts::plan_selection(*layout, every17, contiguous).requests == 4);
}
