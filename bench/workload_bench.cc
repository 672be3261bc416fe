#include "bench/workload_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <stdexcept>

#include "bench/baselines.h"
#include "bench/mmfs_target.h"
#include "bench/workloads.h"
#include "fs/array/array_schema.h"
#include "geometry/load.h"

namespace mmfs::bench {
namespace {

using nlohmann::json;

json optional_json(const auto& v) { return v ? json(*v) : json(nullptr); }

// Cells of the mmfs grid (cell `cell`) a selection touches: the common
// denominator of "ms per cell", so targets with other units (pages, chunks)
// are compared per equal amount of data.
std::uint64_t grid_cells(const layouts::Selection& sel, const std::vector<std::uint64_t>& cell) {
  std::uint64_t c = 1;
  for (std::size_t d = 0; d < cell.size(); ++d) c *= layouts::cells_touched(sel.dims()[d], cell[d]).size();
  return c;
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / double(v.size());
}

struct NamedTarget {
  std::string name, kind, label, layout;
  std::unique_ptr<Target> target;  // null when it could not be placed
  std::string error;
};

std::vector<NamedTarget> make_targets(const geom::Geometry& g, const WorkloadBenchOptions& opt,
                                      std::uint32_t itemsize) {
  std::vector<NamedTarget> out;
  auto add = [&](std::string name, std::string kind, std::string layout, auto make) {
    NamedTarget t{std::move(name), std::move(kind), "", std::move(layout), nullptr, ""};
    try {
      t.target = make();
      t.label = t.target->label();
    } catch (const std::exception& e) {
      t.error = e.what();
      t.label = t.layout.empty() ? t.name : t.layout;
    }
    out.push_back(std::move(t));
  };
  for (const std::string& layout : opt.layouts) {
    MmfsArraySpec spec{layout, opt.shape, itemsize, opt.cell, {}};
    add("mmfs-" + layout, "mmfs", layout, [&] { return make_mmfs_target(g, spec, opt.first_lbn); });
  }
  if (opt.baselines) {
    add("contiguous", "baseline", "", [&] { return make_contiguous_target(g, opt.shape, itemsize, opt.first_lbn); });
    add("chunked", "baseline", "",
        [&] { return make_chunked_target(g, opt.shape, itemsize, opt.chunk_edge, opt.first_lbn); });
  }
  return out;
}

json run_profile(const std::string& profile, const WorkloadBenchOptions& opt, std::uint32_t itemsize,
                 const std::vector<Workload>& workloads) {
  auto geometry = geom::load_geometry(profile);
  std::vector<NamedTarget> targets = make_targets(*geometry, opt, itemsize);
  MmfsArraySpec ref{"naive", opt.shape, itemsize, opt.cell, {}};
  const std::vector<std::uint64_t> ref_cell = opt.cell.empty() ? daemon_cell(*geometry, ref) : opt.cell;

  json doc = {{"profile", profile}, {"geometry", geometry->info()}, {"cell", ref_cell},
              {"targets", json::array()}, {"workloads", json::array()}, {"results", json::array()}};
  for (const NamedTarget& t : targets) {
    json j = {{"name", t.name}, {"kind", t.kind}, {"label", t.label},
              {"layout", t.layout.empty() ? json(nullptr) : json(t.layout)}};
    if (t.target) j["placement"] = t.target->describe();
    else j["error"] = t.error;
    doc["targets"].push_back(j);
  }
  for (const Workload& w : workloads) {
    std::uint64_t elements = w.selections.front().elements();
    doc["workloads"].push_back({{"id", w.id}, {"kind", w.kind}, {"dim", optional_json(w.dim)},
                                {"p", optional_json(w.p)}, {"plod", optional_json(w.plod)}, {"random", w.random},
                                {"elements", elements}, {"bytes", elements * itemsize}, {"views", w.views}});
    std::vector<json> rows;
    for (const NamedTarget& t : targets) {
      if (!t.target) continue;
      std::vector<double> ms, per_cell, cells, ref_cells, requests, read, useful;
      for (const layouts::Selection& sel : w.selections) {
        layouts::IoPlan p = t.target->plan(sel);
        double rc = double(std::max<std::uint64_t>(1, grid_cells(sel, ref_cell)));
        ms.push_back(p.modeled_ms);
        per_cell.push_back(p.modeled_ms / rc);
        cells.push_back(double(p.cells));
        ref_cells.push_back(rc);
        requests.push_back(double(p.requests));
        read.push_back(double(p.bytes_read));
        useful.push_back(double(p.bytes_useful));
      }
      rows.push_back({{"workload", w.id},
                      {"kind", w.kind},
                      {"dim", optional_json(w.dim)},
                      {"p", optional_json(w.p)},
                      {"plod", optional_json(w.plod)},
                      {"target", t.name},
                      {"target_kind", t.kind},
                      {"layout", t.layout.empty() ? json(nullptr) : json(t.layout)},
                      {"clock", "modeled"},
                      {"elements", elements},
                      {"cells", mean(cells)},
                      {"ref_cells", mean(ref_cells)},
                      {"requests", mean(requests)},
                      {"bytes_read", mean(read)},
                      {"bytes_useful", mean(useful)},
                      {"ms", summarize(ms)},
                      {"ms_per_cell", summarize(per_cell)}});
    }
    // Ratios against the best baseline: its median over this one's (> 1 = faster than the best baseline).
    std::string best;
    double best_ms = 0;
    for (const json& r : rows)
      if (r["target_kind"] == "baseline" && (best.empty() || r["ms"]["median"].get<double>() < best_ms)) {
        best = r["target"];
        best_ms = r["ms"]["median"];
      }
    for (json& r : rows) {
      double m = r["ms"]["median"];
      r["best_baseline"] = best.empty() ? json(nullptr) : json(best);
      r["ratio_vs_best_baseline"] = best.empty() || m <= 0 ? json(nullptr) : json(best_ms / m);
      doc["results"].push_back(std::move(r));
    }
  }
  return doc;
}

}  // namespace

json summarize(std::vector<double> values) {
  if (values.empty()) return nullptr;
  std::vector<double> s = values;
  std::sort(s.begin(), s.end());
  std::size_t n = s.size();
  double median = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  return {{"median", median}, {"min", s.front()}, {"max", s.back()}, {"runs", values}};
}

json run_workload_bench(const WorkloadBenchOptions& opt) {
  auto dtype = fs::parse_dtype(opt.dtype);
  if (!dtype) throw std::invalid_argument(fmt::format("unknown dtype '{}'", opt.dtype));
  if (opt.shape.empty()) throw std::invalid_argument("empty shape");
  // The layouts the daemon places (ArrayFile::build); a misspelt name is an
  // error of the command line, not a target that failed to fit a device.
  for (const std::string& l : opt.layouts)
    if (l != "naive" && l != "zorder" && l != "hilbert" && l != "multimap")
      throw std::invalid_argument(fmt::format("unknown layout '{}' (this release places naive, zorder, hilbert, "
                                              "multimap)", l));
  if (!opt.cell.empty() && opt.cell.size() != opt.shape.size())
    throw std::invalid_argument(fmt::format("--cell has {} dimensions, the shape {}", opt.cell.size(), opt.shape.size()));
  WorkloadOptions wo{opt.shape, dtype->itemsize, opt.runs, opt.seed, opt.cubes, std::min(opt.plod, dtype->itemsize)};
  std::vector<Workload> workloads = make_workloads(wo);
  std::uint64_t bytes = dtype->itemsize;
  for (std::uint64_t s : opt.shape) bytes *= s;

  json doc = {
      {"schema", "mmfs-bench-modeled/1"},
      {"clock", "modeled"},
      {"command", opt.command},
      {"config",
       {{"shape", opt.shape},
        {"dtype", dtype->name},
        {"itemsize", dtype->itemsize},
        {"bytes", bytes},
        {"layouts", opt.layouts},
        {"cell", opt.cell.empty() ? json("daemon default") : json(opt.cell)},
        {"runs", opt.runs},
        {"seed", opt.seed},
        {"cubes", opt.cubes},
        {"plod", wo.plod},
        {"baselines", opt.baselines},
        {"chunk_edge", opt.chunk_edge},
        {"first_lbn", opt.first_lbn},
        {"quick", opt.quick},
        {"cube_definition",
         "p%-length cube (MultiMap §5.2): edge_d = max(1, round(p/100 * S_d)) along every dimension, corner "
         "uniform among the positions where it fits"}}},
      {"profiles", json::array()}};
  for (const std::string& profile : opt.profiles) doc["profiles"].push_back(run_profile(profile, opt, dtype->itemsize, workloads));
  return doc;
}

}  // namespace mmfs::bench
