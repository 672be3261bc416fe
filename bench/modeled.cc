#include "bench/modeled.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <random>

#include "geometry/load.h"
#include "geometry/service_time.h"
#include "geometry/zoned_disk.h"
#include "layouts/cost_model.h"
#include "layouts/io_plan.h"
#include "layouts/multimap.h"

namespace mmfs::bench {
namespace {

using layouts::CellGrid;
using layouts::Selection;

// The paper's Table 3 (Atlas 10K III): measured and calculated, Naive and MultiMap.
struct PaperRow {
  double naive_measured, naive_calculated, multimap_measured, multimap_calculated;
};
const std::map<std::string, PaperRow>& paper_table3() {
  static const std::map<std::string, PaperRow> t = {
      {"3-D Dim_0", {0.03, 0.03, 0.04, 0.03}},   {"3-D Dim_1", {2.7, 2.7, 1.7, 1.5}},
      {"3-D Dim_2", {5.2, 4.3, 1.5, 1.5}},       {"3-D 1%", {294, 291, 205, 168}},
      {"3-D 2%", {1086, 1156, 722, 723}},        {"3-D 3%", {2485, 2632, 1626, 1758}},
      {"4-D Dim_0", {0.02, 0.02, 0.02, 0.02}},   {"4-D Dim_1", {5.5, 5.0, 2.1, 1.9}},
      {"4-D Dim_2", {2.2, 4.0, 2.1, 1.9}},       {"4-D Dim_3", {4.86, 5.1, 1.8, 1.6}},
      {"4-D 6^4", {1142, 1065, 513, 436}},       {"4-D 10^4", {5509, 5016, 1996, 2150}},
      {"4-D 12^4", {8905, 8714, 3590, 3960}},
  };
  return t;
}

struct Dataset {
  std::string name;
  std::vector<std::uint64_t> shape;                     // cells, Dim_0 first (the primary)
  std::vector<std::pair<std::string, std::uint64_t>> cubes;  // label, edge in cells
};

std::vector<Dataset> datasets(bool quick) {
  if (quick) return {{"3-D", {64, 64, 64}, {{"1%", 4}, {"2%", 8}}}, {"4-D", {96, 16, 16, 16}, {{"6^4", 6}}}};
  // §5.3: chunks of at most 259^3 cells per disk; p%-length cubes of the
  // 1024^3 dataset have edges of 10, 20 and 30 cells. §5.4: the earthquake
  // dataset in 530x32x32x32 chunks per disk, with 6^4, 10^4 and 12^4 cubes.
  return {{"3-D", {259, 259, 259}, {{"1%", 10}, {"2%", 20}, {"3%", 30}}},
          {"4-D", {530, 32, 32, 32}, {{"6^4", 6}, {"10^4", 10}, {"12^4", 12}}}};
}

// App. A parameters read off the geometry rather than the paper's A.3.
layouts::CostParams cost_params(const geom::Geometry& g) {
  layouts::CostParams p;
  const auto* disk = dynamic_cast<const geom::ZonedDisk*>(&g);
  if (!disk) return p;
  double rev = disk->revolution_ms();
  double T = double(disk->zones().front().spec.sectors_per_track);
  p.sigma_ms = rev / T;
  p.alpha_ms = disk->adjacency_budget_ms();
  p.rot_lat_ms = rev / 2;
  p.c_init_ms = disk->seek_profile().seek_ms(disk->cylinders() / 3) + rev / 2;
  p.track_sectors = T;
  // The two readings of App. A that reproduce the paper's own Calculated
  // column (see layouts/cost_model.h): jump distances rounded down, and alpha
  // charged per move between cells rather than per cell.
  p.distance_rounding = layouts::TrackRounding::kFloor;
  p.alpha_per_transition = true;
  std::uint32_t R = disk->params().surfaces;
  p.seek_ms = [disk, R](double tracks) {
    return disk->seek_profile().seek_ms(std::uint64_t(std::ceil(tracks / R)));
  };
  return p;
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / double(v.size());
}
double stdev(const std::vector<double>& v) {
  double m = mean(v), s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return v.size() < 2 ? 0 : std::sqrt(s / double(v.size() - 1));
}

}  // namespace

ModeledReport run_multimap_experiments(const ModeledOptions& opt) {
  ModeledReport report;
  report.profiles = opt.profiles;
  for (const std::string& profile : opt.profiles) {
    auto geometry = geom::load_geometry(profile);
    std::vector<QueryResult> results;
    layouts::CostParams cp = cost_params(*geometry);
    nlohmann::json setup = {{"geometry", geometry->info()}, {"datasets", nlohmann::json::array()}};
    for (const Dataset& ds : datasets(opt.quick)) {
      const std::size_t n = ds.shape.size();
      std::vector<std::uint32_t> order(n);
      for (std::uint32_t i = 0; i < n; ++i) order[i] = i;  // dimension 0 is the major order
      CellGrid grid(ds.shape, geometry->sector_size(), std::vector<std::uint64_t>(n, 1), order);
      nlohmann::json ds_setup = {{"name", ds.name}, {"shape", ds.shape}, {"layouts", nlohmann::json::object()}};
      std::vector<double> S(ds.shape.begin(), ds.shape.end()), K;
      for (const std::string& name : opt.layouts) {
        auto layout = layouts::make_layout(name, *geometry, grid);
        layout->place(layouts::allocate_linear(*geometry, layout->space(), 0));
        ds_setup["layouts"][name] = layout->describe();
        if (name == "multimap") {
          const auto& k = dynamic_cast<const layouts::MultiMapLayout&>(*layout).basic_cube();
          K.assign(k.begin(), k.end());
        }
        for (Discipline discipline : {Discipline::Paper, Discipline::Mmfs}) {
        layouts::PlanOptions plan_options;
        if (discipline == Discipline::Paper) {
          plan_options.order = layouts::IssueOrder::Lbn;
          plan_options.queue_depth = 1;
        }
        auto model = geometry->make_service_model();
        std::mt19937_64 rng(opt.seed);
        auto run = [&](const std::string& label, bool per_cell, const std::vector<double>& q,
                       const std::function<Selection()>& make) {
          std::vector<double> times;
          double read = 0, useful = 0;
          for (unsigned r = 0; r < opt.runs; ++r) {
            Selection sel = make();
            layouts::IoPlan plan = layouts::plan_selection(*layout, sel, plan_options);
            double ms = layouts::serve_plan(plan, *model, opt.host_gap_ms);
            times.push_back(per_cell ? ms / double(sel.elements()) : ms);
            read += double(plan.bytes_read);
            useful += double(plan.bytes_useful);
          }
          QueryResult res{ds.name, label, per_cell, name, discipline, mean(times), stdev(times), -1,
                          read / opt.runs, useful / opt.runs};
          if (name == "naive") res.analytic_ms = layouts::naive_cost_ms(cp, q, S);
          if (name == "multimap" && !K.empty()) res.analytic_ms = layouts::multimap_cost_ms(cp, q, S, K);
          if (res.analytic_ms >= 0 && per_cell) {
            double cells = 1;
            for (double x : q) cells *= x;
            res.analytic_ms /= cells;
          }
          results.push_back(res);
        };
        for (std::size_t dim = 0; dim < n; ++dim) {
          std::vector<double> q(n, 1.0);
          q[dim] = S[dim];
          run(fmt::format("Dim_{}", dim), true, q, [&] {
            std::vector<std::uint64_t> at(n);
            for (std::size_t d = 0; d < n; ++d) at[d] = rng() % ds.shape[d];
            return Selection::beam(ds.shape, at, dim);
          });
        }
        for (const auto& [label, edge] : ds.cubes) {
          std::vector<double> q(n, double(edge));
          run(label, false, q, [&, edge = edge] {
            std::vector<std::uint64_t> lo(n), hi(n);
            for (std::size_t d = 0; d < n; ++d) {
              lo[d] = rng() % (ds.shape[d] - edge + 1);
              hi[d] = lo[d] + edge;
            }
            return Selection::box(lo, hi);
          });
        }
        }  // discipline
      }
      setup["datasets"].push_back(ds_setup);
    }
    report.results.emplace_back(profile, std::move(results));
    report.setup[profile] = setup;
  }
  return report;
}

nlohmann::json ModeledReport::to_json() const {
  nlohmann::json j = {{"setup", setup}, {"results", nlohmann::json::object()}};
  for (const auto& [profile, rows] : results) {
    nlohmann::json arr = nlohmann::json::array();
    for (const QueryResult& r : rows) {
      nlohmann::json row = {{"dataset", r.dataset},       {"query", r.query},     {"per_cell", r.per_cell},
                            {"discipline", r.discipline == Discipline::Paper ? "paper" : "mmfs"},
                            {"layout", r.layout},         {"mean_ms", r.mean_ms}, {"stdev_ms", r.stdev_ms},
                            {"bytes_read", r.bytes_read}, {"bytes_useful", r.bytes_useful}};
      if (r.analytic_ms >= 0) row["analytic_ms"] = r.analytic_ms;
      auto it = paper_table3().find(r.dataset + " " + r.query);
      if (profile == "atlas10k3" && r.discipline == Discipline::Paper && it != paper_table3().end()) {
        if (r.layout == "naive") row["paper_measured_ms"] = it->second.naive_measured, row["paper_calculated_ms"] = it->second.naive_calculated;
        if (r.layout == "multimap") row["paper_measured_ms"] = it->second.multimap_measured, row["paper_calculated_ms"] = it->second.multimap_calculated;
      }
      arr.push_back(row);
    }
    j["results"][profile] = arr;
  }
  return j;
}

std::string ModeledReport::to_markdown() const {
  std::string md;
  auto fmt_ms = [](double v) {
    return v >= 100 ? fmt::format("{:.0f}", v) : v >= 1 ? fmt::format("{:.2f}", v) : fmt::format("{:.3f}", v);
  };
  for (const auto& [profile, rows] : results) {
    for (Discipline discipline : {Discipline::Paper, Discipline::Mmfs}) {
      const bool paper_cols = discipline == Discipline::Paper && profile == "atlas10k3";
      md += fmt::format("### {}, {}\n\n", profile,
                        discipline == Discipline::Paper
                            ? "the paper's discipline (Naive and Hilbert requests one at a time in LBN order; "
                              "MultiMap one batch per basic cube)"
                            : "mmfs's planner (requests sorted by LBN; Naive and Hilbert 16 per batch; MultiMap "
                              "one batch per basic cube)");
      md += "Beams: ms per cell; cubes: ms per query. *model* = the geometry's service-time model over the "
            "layout's plan (mean ± stdev of the runs); *App. A* = the paper's analytic model with this "
            "geometry's parameters";
      md += paper_cols ? "; *paper* = Table 3, measured / calculated.\n\n" : ".\n\n";
      md += "| dataset | query | Naive model | Naive App. A | Naive paper | Hilbert model | MultiMap model | "
            "MultiMap App. A | MultiMap paper | MultiMap vs Naive | MultiMap vs Hilbert |\n";
      md += "|---|---|---|---|---|---|---|---|---|---|---|\n";
      std::map<std::pair<std::string, std::string>, std::map<std::string, const QueryResult*>> by_query;
      std::vector<std::pair<std::string, std::string>> keys;
      for (const QueryResult& r : rows) {
        if (r.discipline != discipline) continue;
        auto key = std::make_pair(r.dataset, r.query);
        if (!by_query.count(key)) keys.push_back(key);
        by_query[key][r.layout] = &r;
      }
      for (const auto& key : keys) {
        auto& m = by_query[key];
        auto cell = [&](const char* layout) {
          auto it = m.find(layout);
          if (it == m.end()) return std::string("—");
          return fmt::format("{} ± {}", fmt_ms(it->second->mean_ms), fmt_ms(it->second->stdev_ms));
        };
        auto analytic = [&](const char* layout) {
          auto it = m.find(layout);
          return it == m.end() || it->second->analytic_ms < 0 ? std::string("—") : fmt_ms(it->second->analytic_ms);
        };
        auto paper = [&](bool naive) {
          auto it = paper_table3().find(key.first + " " + key.second);
          if (!paper_cols || it == paper_table3().end()) return std::string("—");
          const PaperRow& p = it->second;
          return naive ? fmt::format("{} / {}", fmt_ms(p.naive_measured), fmt_ms(p.naive_calculated))
                       : fmt::format("{} / {}", fmt_ms(p.multimap_measured), fmt_ms(p.multimap_calculated));
        };
        auto ratio = [&](const char* other) {
          auto a = m.find("multimap"), b = m.find(other);
          if (a == m.end() || b == m.end() || b->second->mean_ms == 0) return std::string("—");
          return fmt::format("{:+.0f} %", (a->second->mean_ms / b->second->mean_ms - 1) * 100);
        };
        md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", key.first, key.second,
                          cell("naive"), analytic("naive"), paper(true), cell("hilbert"), cell("multimap"),
                          analytic("multimap"), paper(false), ratio("naive"), ratio("hilbert"));
      }
      md += "\n";
    }
  }
  return md;
}

}  // namespace mmfs::bench
