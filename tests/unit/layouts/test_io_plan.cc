// The I/O planner (layouts/io_plan.h) against brute force: a view's plan
// reads exactly the sectors of the cells it touches (or, for partial-cell
// plans, the checksum blocks holding it), contiguous sectors merge, MultiMap
// batches a basic cube's tracks, several plans combine into one or are
// concatenated, and the pipeline modeled_read_ms predicts a chunked read with
// (device, cells' work, hand-over) against hand computation.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <set>
#include <span>
#include <vector>

#include "fs/meta/cell_checksums.h"
#include "geometry/load.h"
#include "layouts/cell_blocks.h"
#include "layouts/io_plan.h"
#include "layouts/layout.h"
#include "layouts/multimap.h"
#include "layouts/selection.h"
#include "tests/unit/support/layout_test_support.h"
#include "tests/unit/support/selection_test_support.h"

using namespace mmfs;
using namespace mmfs::layouts;
using namespace mmfs::layouts::testing;

namespace {

// The LBNs of the sectors of `mask`'s blocks of cell `cc`.
void needed_sectors(const Layout& layout, std::span<const std::uint64_t> cc, const BlockMask& mask,
                    std::uint32_t block_sectors, std::set<geom::Lbn>* out) {
  Run runs[2];
  const std::size_t k = layout.cell_runs(cc, runs);
  std::vector<geom::Lbn> sectors;
  for (std::size_t i = 0; i < k; ++i)
    for (std::uint32_t s = 0; s < runs[i].sectors; ++s) sectors.push_back(runs[i].lbn + s);
  for (std::uint32_t b = 0; b * block_sectors < sectors.size(); ++b)
    if (mask.has(b))
      for (std::uint32_t s = 0; s < block_sectors; ++s) out->insert(sectors[b * block_sectors + s]);
}

// A modeled part of a read: its device time and its result's MiB.
layouts::IoPlan part(double device_ms, std::uint64_t useful_mib) {
  layouts::IoPlan p;
  p.modeled_ms = device_ms;
  p.bytes_useful = useful_mib << 20;
  return p;
}

}  // namespace

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

TEST_CASE("combine_plans reads several attributes' plans as one: sorted, joined, counted", "[capsule]") {
  IoPlan a, b;
  a.batches = {{{{100, 4}, {300, 2}}}};
  a.cells = 6;
  a.bytes_useful = 1000;
  b.batches = {{{{104, 6}, {50, 1}}}, {{{302, 1}}}};
  b.cells = 8;
  b.bytes_useful = 500;
  std::vector<IoPlan> plans{a, b};
  IoPlan c = combine_plans(plans, 512, 2);
  REQUIRE(c.batches.size() == 2);
  auto pairs = [](const IoBatch& b) {
    std::vector<std::pair<geom::Lbn, std::uint32_t>> v;
    for (const geom::Request& r : b.requests) v.push_back({r.lbn, r.sectors});
    return v;
  };
  using P = std::vector<std::pair<geom::Lbn, std::uint32_t>>;
  CHECK(pairs(c.batches[0]) == P{{50, 1}, {100, 10}});
  CHECK(pairs(c.batches[1]) == P{{300, 3}});
  CHECK(c.requests == 3);
  CHECK(c.sectors == 14);
  CHECK(c.bytes_read == 14 * 512);
  CHECK(c.cells == 14);
  CHECK(c.bytes_useful == 1500);
}

TEST_CASE("io plan: a partial-cell plan reads exactly the blocks holding the selection, when the model says so",
          "[partial_cells]") {
  auto ssd = small_ssd();
  auto disk = geom::load_geometry("atlas10k3");
  std::mt19937_64 rng(77);
  for (const geom::Geometry* geometry : {ssd.get(), disk.get()}) {
    const std::uint32_t ss = geometry->sector_size();
    const std::uint32_t block_sectors = fs::checksum_block_bytes(ss) / ss;
    for (const char* name : {"naive", "zorder", "hilbert", "multimap"}) {
      INFO(geometry->name() << " " << name);
      CellGrid g({64, 64, 16}, 8, {16, 16, 4}, {2, 1, 0});  // 8 KiB cells: two 4 KiB blocks
      auto layout = make_layout(name, *geometry, g);
      layout->place(allocate_linear(*geometry, layout->space(), 0));
      REQUIRE(layout->sectors_per_cell() == 2 * block_sectors);
      std::vector<Selection> views = {Selection::slice(g.shape(), 0, rng() % 64),
                                      Selection::slice(g.shape(), 1, rng() % 64),
                                      Selection::slice(g.shape(), 2, rng() % 16)};
      for (int k = 0; k < 8; ++k) {
        std::vector<DimRange> dims;
        for (std::size_t d = 0; d < 3; ++d) dims.push_back(random_range(rng, g.shape()[d]));
        views.push_back(Selection(dims));
      }
      std::size_t partial_plans = 0;
      for (std::size_t v = 0; v < views.size(); ++v) {
        INFO("view " << v);
        const Selection& sel = views[v];
        PlanOptions options;
        options.block_sectors = block_sectors;
        IoPlan plan = plan_selection(*layout, sel, options);
        IoPlan whole = plan_selection(*layout, sel);
        model_plan(whole, *geometry);
        // The blocks the view needs, cell by cell.
        CellBlocks blocks(g, sel, std::uint64_t(block_sectors) * ss, 2);
        std::set<geom::Lbn> needed;
        bool cut = false;
        std::vector<std::vector<std::uint64_t>> touched(3);
        for (std::size_t d = 0; d < 3; ++d) touched[d] = cells_touched(sel.dims()[d], g.cell()[d]);
        for (auto a : touched[0])
          for (auto b : touched[1])
            for (auto c : touched[2]) {
              const std::vector<std::uint64_t> cc = {a, b, c};
              const BlockMask& m = blocks.of(cc);
              cut = cut || !blocks.full(m);
              needed_sectors(*layout, cc, m, block_sectors, &needed);
            }
        std::set<geom::Lbn> read;
        for (const IoBatch& b : plan.batches)
          for (const geom::Request& r : b.requests)
            for (std::uint32_t s = 0; s < r.sectors; ++s) read.insert(r.lbn + s);
        for (geom::Lbn l : needed) REQUIRE(read.count(l) == 1);  // nothing needed is left out
        CHECK((plan.whole_cells_ms >= 0) == cut);  // a choice only when a cell is cut
        if (plan.partial_cells) {
          ++partial_plans;
          CHECK(plan.modeled_ms < whole.modeled_ms);  // chosen because the model serves it faster
          CHECK(plan.whole_cells_ms == Approx(whole.modeled_ms));
          CHECK(plan.sectors < whole.sectors);
          // Every request starts and ends on a needed sector (gaps only between them).
          for (const IoBatch& b : plan.batches)
            for (const geom::Request& r : b.requests) {
              CHECK(needed.count(r.lbn) == 1);
              CHECK(needed.count(r.lbn + r.sectors - 1) == 1);
            }
        } else {
          CHECK(plan.sectors == whole.sectors);
          CHECK(plan.requests == whole.requests);
        }
      }
      // On flash a slice along dimension 0 needs one block of each cell and
      // the model takes it; a slice along the last needs both.
      if (geometry == ssd.get()) {
        PlanOptions options;
        options.block_sectors = block_sectors;
        CHECK(plan_selection(*layout, views[0], options).partial_cells);
        CHECK_FALSE(plan_selection(*layout, views[2], options).partial_cells);
        CHECK(partial_plans >= 1);
      }
    }
  }
}

TEST_CASE("host cost: a chunked read is a two-stage pipeline, device then hand-over", "[host_cost]") {
  const geom::HostCost none;
  const geom::HostCost host{0.5, 0.25};  // 0.25 ms per MiB handed over
  std::vector<layouts::IoPlan> one = {part(10, 8)};
  CHECK(layouts::modeled_read_ms(one, none) == Approx(10));
  CHECK(layouts::modeled_read_ms(one, host) == Approx(0.5 + 10 + 8 * 0.25));

  // Hand-over slower than the device (4 ms against 1 ms a chunk): the reader
  // waits for the first chunk, then the hand-over sets the pace.
  std::vector<layouts::IoPlan> bound_by_host = {part(1, 16), part(1, 16), part(1, 16), part(1, 16)};
  CHECK(layouts::modeled_read_ms(bound_by_host, none) == Approx(4));
  CHECK(layouts::modeled_read_ms(bound_by_host, host) == Approx(0.5 + 1 + 4 * 4));

  // The device slower (5 ms against 1 ms): only the last chunk's hand-over shows.
  std::vector<layouts::IoPlan> bound_by_device = {part(5, 4), part(5, 4), part(5, 4)};
  CHECK(layouts::modeled_read_ms(bound_by_device, host) == Approx(0.5 + 15 + 1));

  // Mixed: the hand-over of chunk 0 (4 ms) delays chunk 1's (the device is done with it at 2 ms).
  std::vector<layouts::IoPlan> mixed = {part(1, 16), part(1, 0), part(6, 4)};
  // hand-over ends: max(0, 1) + 4 = 5; max(5, 2) + 0 = 5; max(5, 8) + 1 = 9.
  CHECK(layouts::modeled_read_ms(mixed, host) == Approx(0.5 + 9));
  CHECK(layouts::modeled_read_ms({}, host) == Approx(0.5));
}

TEST_CASE("host cost: the cells' work is a stage between the device and the hand-over", "[host_cost]") {
  geom::HostCost host;
  host.request_ms = 0.5;
  host.verify_ms_per_mib = 0.25;  // per MiB read
  host.gather_ms_per_mib = 0.5;   // per MiB of the result
  auto with = [](double device_ms, std::uint64_t read_mib, std::uint64_t useful_mib, std::uint64_t batches) {
    layouts::IoPlan p = part(device_ms, useful_mib);
    p.bytes_read = read_mib << 20;
    p.batches.resize(batches);
    return p;
  };
  // One batch: its cells are worked on after it arrives, all of them.
  std::vector<layouts::IoPlan> one = {with(2, 4, 2, 1)};
  CHECK(layouts::modeled_read_ms(one, host) == Approx(0.5 + 2 + (4 * 0.25 + 2 * 0.5)));
  // Many batches, the device slower: the work hides behind it, but for the
  // last batch's share.
  std::vector<layouts::IoPlan> many = {with(10, 8, 4, 100)};
  CHECK(layouts::modeled_read_ms(many, host) == Approx(0.5 + 10 + 4.0 / 100));
  // One batch group of 128 requests (a basic cube's) arrives in waves of the
  // queue depth (16): 8 of them, as 8 batches would.
  layouts::IoPlan grouped = with(10, 8, 4, 1);
  grouped.requests = 128;
  layouts::IoPlan eight = with(10, 8, 4, 8);
  CHECK(layouts::modeled_read_ms(std::vector<layouts::IoPlan>{grouped}, host) ==
        Approx(layouts::modeled_read_ms(std::vector<layouts::IoPlan>{eight}, host)));
  CHECK(layouts::modeled_read_ms(std::vector<layouts::IoPlan>{grouped}, host) == Approx(0.5 + 10 + 4.0 / 8));
  // Many batches, the work slower: it starts with the first batch and sets the pace.
  std::vector<layouts::IoPlan> cpu_bound = {with(1, 16, 16, 10)};
  CHECK(layouts::modeled_read_ms(cpu_bound, host) == Approx(0.5 + 0.1 + 12));
  // Across parts: part 1's cells wait for part 0's (ends 0.1 + 12); hand-over
  // (2 ms per MiB) of part 0 then of part 1.
  host.ms_per_mib = 2;
  std::vector<layouts::IoPlan> two = {with(1, 16, 16, 10), with(1, 0, 1, 1)};
  // cells: 12.1, then max(12.1, 2) + 0.5 = 12.6; hand-over: 12.1 + 32 = 44.1, then max(44.1, 12.6) + 2.
  CHECK(layouts::modeled_read_ms(two, host) == Approx(0.5 + 46.1));
}

TEST_CASE("concatenate_plans: batches in order, counts and times added, whole-cell times where parts chose",
          "[io_plan]") {
  IoPlan a, b, c;
  a.batches = {{{{100, 4}}}, {{{300, 2}}}};
  a.cells = 3;
  a.requests = 2;
  a.sectors = 6;
  a.bytes_read = 6 * 512;
  a.bytes_useful = 1000;
  a.merge_gap_sectors = 4;
  a.modeled_ms = 2.5;  // no cell cut: no choice
  b.batches = {{{{50, 1}, {60, 3}}}};
  b.cells = 2;
  b.requests = 2;
  b.sectors = 4;
  b.bytes_read = 4 * 512;
  b.bytes_useful = 300;
  b.merge_gap_sectors = 9;
  b.modeled_ms = 1.0;
  b.partial_cells = true;  // chose its blocks over whole cells of 1.75 ms
  b.whole_cells_ms = 1.75;
  c.cells = 1;
  c.modeled_ms = 0.5;
  c.whole_cells_ms = 0.5;  // a choice, and whole cells won
  std::vector<IoPlan> parts{a, b, c};
  const IoPlan all = concatenate_plans(std::move(parts));
  REQUIRE(all.batches.size() == 3);
  CHECK(all.batches[0].requests[0].lbn == 100);
  CHECK(all.batches[1].requests[0].lbn == 300);
  CHECK(all.batches[2].requests.size() == 2);
  CHECK(all.batches[2].requests[1].lbn == 60);
  CHECK(all.cells == 6);
  CHECK(all.requests == 4);
  CHECK(all.sectors == 10);
  CHECK(all.bytes_read == 10 * 512);
  CHECK(all.bytes_useful == 1300);
  CHECK(all.merge_gap_sectors == 9);
  CHECK(all.modeled_ms == Approx(4.0));
  CHECK(all.partial_cells);
  CHECK(all.whole_cells_ms == Approx(2.5 + 1.75 + 0.5));
  // No part with a choice: none for the whole.
  std::vector<IoPlan> plain{a, a};
  const IoPlan twice = concatenate_plans(std::move(plain));
  CHECK_FALSE(twice.partial_cells);
  CHECK(twice.whole_cells_ms == -1);
  CHECK(twice.modeled_ms == Approx(5.0));
  CHECK(concatenate_plans({}).batches.empty());
}
