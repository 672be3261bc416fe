// The default layout chosen by the volume's model (layouts/model_default.h):
// the view mix, every candidate priced as the planner prices a view, and the
// candidate with the fastest worst view chosen.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>

#include "geometry/load.h"
#include "layouts/cell_grid.h"
#include "layouts/io_plan.h"
#include "layouts/layout.h"
#include "layouts/model_default.h"

using namespace mmfs;
using layouts::CellGrid;

TEST_CASE("model default: the standard views are the middle slices, beams and a 1/20 box", "[model_default]") {
  const std::vector<std::uint64_t> shape{256, 200, 40};
  auto views = layouts::standard_views(shape);
  std::vector<std::string> names;
  for (const auto& [name, sel] : views) names.push_back(name);
  CHECK(names == std::vector<std::string>{"slice/0/128", "slice/1/100", "slice/2/20", "box/:,100,20", "box/128,:,20",
                                          "box/128,100,:", "box/122:134,95:105,19:21"});
  CHECK(views[0].second.elements() == 200 * 40);
  CHECK(views[4].second.elements() == 200);
  CHECK(views[6].second.elements() == 12 * 10 * 2);
  // A 1-D array: its one slice is an element; no beams; the box is 1/20 of it.
  auto one = layouts::standard_views(std::vector<std::uint64_t>{100});
  REQUIRE(one.size() == 2);
  CHECK(one[1].first == "box/47:52");
}

TEST_CASE("model default: the choice is the candidate with the fastest worst view, each priced as the planner "
          "prices it",
          "[model_default]") {
  for (const char* profile : {"atlas10k3", "mems-g2", "ssd"}) {
    INFO(profile);
    auto g = geom::load_geometry(profile);
    const std::vector<std::uint64_t> shape{128, 128, 64};
    const std::vector<std::uint32_t> order{2, 1, 0};
    const auto t0 = std::chrono::steady_clock::now();
    const layouts::ModelChoice choice = layouts::choose_by_model(*g, shape, 8, order);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    WARN(profile << ": chose " << choice.layout << " in " << secs << " s; worst " << choice.worst_ms << " ms");
    REQUIRE(choice.candidates.size() >= 9);  // naive, zorder, hilbert x 3 cells at least
    double least = 1e300;
    for (const auto& c : choice.candidates) {
      double worst = 0;
      for (const auto& v : c.views) worst = std::max(worst, v.ms);
      CHECK(worst == c.worst_ms);
      CHECK(c.views.size() == 7);
      least = std::min(least, worst);
    }
    CHECK(choice.worst_ms == least);
    CHECK(choice.rule.find(choice.layout) != std::string::npos);
    // One candidate priced again by hand: the planner's plan of the view, modeled from idle.
    const auto& naive = choice.candidates.front();
    REQUIRE(naive.layout == "naive");
    auto layout = layouts::make_layout("naive", *g, CellGrid(shape, 8, naive.cell, order));
    layout->place(layouts::allocate_linear(*g, layout->space(), 0));
    layouts::IoPlan plan = layouts::plan_selection(*layout, layouts::Selection::slice(shape, 2, 32));
    layouts::model_plan(plan, *g);
    const double ms = layouts::modeled_read_ms(std::span<const layouts::IoPlan>(&plan, 1), g->host_cost());
    CHECK(naive.views[2].view == "slice/2/32");
    CHECK(naive.views[2].ms == Approx(ms));
    // Deterministic.
    CHECK(layouts::choose_by_model(*g, shape, 8, order).to_json() == choice.to_json());
  }
}

TEST_CASE("model default: on the modeled Atlas disk it beats MultiMap's one-sector default on the worst slice",
          "[model_default]") {
  // The motivating case: multimap's 8x8x8 default prices its worst slice of a
  // 256^3 float64 array at about 3x Hilbert's.
  auto g = geom::load_geometry("atlas10k3");
  const std::vector<std::uint64_t> shape{256, 256, 256};
  const std::vector<std::uint32_t> order{2, 1, 0};
  const auto choice = layouts::choose_by_model(*g, shape, 8, order);
  const auto mm = std::find_if(choice.candidates.begin(), choice.candidates.end(),
                               [](const auto& c) { return c.layout == "multimap"; });
  REQUIRE(mm != choice.candidates.end());
  WARN("atlas10k3 256^3: chose " << choice.layout << " cell " << choice.cell[0] << "x" << choice.cell[1] << "x"
                                 << choice.cell[2] << " worst " << choice.worst_ms << " ms; multimap "
                                 << mm->worst_ms << " ms");
  CHECK(choice.worst_ms <= mm->worst_ms);
}

TEST_CASE("model default: a large array is priced on a proxy of its proportions, in milliseconds",
          "[model_default]") {
  auto g = geom::load_geometry("atlas10k3");
  const std::vector<std::uint32_t> order{2, 1, 0};
  const std::vector<std::uint64_t> huge{16384, 16384, 4096};  // 8 TiB of float64
  const auto t0 = std::chrono::steady_clock::now();
  const auto choice = layouts::choose_by_model(*g, huge, 8, order);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  WARN("8 TiB array: chose " << choice.layout << " in " << secs << " s on a proxy of "
                             << choice.priced_shape[0] << "x" << choice.priced_shape[1] << "x"
                             << choice.priced_shape[2]);
  long double bytes = 8;
  for (auto x : choice.priced_shape) bytes *= x;
  CHECK(bytes <= static_cast<long double>(layouts::kMaxPricedBytes));
  // The proportions are kept (every side halved in turn, the longest first), the stored cell is the real shape's.
  CHECK(choice.priced_shape == std::vector<std::uint64_t>{512, 1024, 256});
  CHECK(choice.rule.find("proxy of shape 512,1024,256") != std::string::npos);
  CHECK(choice.cell.size() == 3);
  // An array within the limit is priced on itself.
  const std::vector<std::uint64_t> small{256, 256, 256};
  CHECK(layouts::choose_by_model(*g, small, 8, order).priced_shape == small);
  CHECK(layouts::choose_by_model(*g, small, 8, order).rule.find("proxy") == std::string::npos);
}
