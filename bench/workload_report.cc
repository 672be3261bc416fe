#include "bench/workload_report.h"

#include <fmt/format.h>

#include <functional>
#include <map>

namespace mmfs::bench {
namespace {

using nlohmann::json;

std::string fmt_num(double v) {
  if (v >= 1000) return fmt::format("{:.0f}", v);
  if (v >= 10) return fmt::format("{:.1f}", v);
  if (v >= 1) return fmt::format("{:.2f}", v);
  return fmt::format("{:.3g}", v);
}

std::string fmt_bytes(double b) {
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt::format("{:.1f} MiB", b / (1024.0 * 1024));
  if (b >= 1024.0) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{:.0f} B", b);
}

// "median (min–max)" for several runs, the value alone for one.
std::string spread(const json& s) {
  if (s.is_null()) return "—";
  if (s["runs"].size() == 1 || s["min"] == s["max"]) return fmt_num(s["median"]);
  return fmt::format("{} ({}–{})", fmt_num(s["median"]), fmt_num(s["min"]), fmt_num(s["max"]));
}

std::string dims_text(const json& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "×" : "") + std::to_string(v[i].get<std::uint64_t>());
  return s;
}

std::string workload_text(const json& w, const json& config) {
  const std::string kind = w["kind"];
  const std::string first = w["views"][0];
  const std::size_t n = w["views"].size();
  if (kind == "beam") return fmt::format("beam along dim {} ({} random)", w["dim"].get<int>(), n);
  if (kind == "slice") return fmt::format("slice `{}`", first);
  if (kind == "cube") {
    // The edges, read back from the first view's box selector.
    std::string box = first.substr(4), edges;
    std::size_t at = 0;
    while (at <= box.size()) {
      std::size_t comma = box.find(',', at);
      if (comma == std::string::npos) comma = box.size();
      std::string item = box.substr(at, comma - at);
      std::size_t colon = item.find(':');
      std::uint64_t lo = std::stoull(item.substr(0, colon)), hi = std::stoull(item.substr(colon + 1));
      edges += (edges.empty() ? "" : "×") + std::to_string(hi - lo);
      at = comma + 1;
    }
    return fmt::format("{:g}%-length cube {} ({} random)", w["p"].get<double>(), edges, n);
  }
  if (kind == "full") return fmt::format("full scan ({})", dims_text(config["shape"]));
  return fmt::format("PLoD `{}`", first);
}

std::string target_heading(const json& t) {
  if (t["kind"] == "mmfs") return t["layout"];
  if (t["name"] == "contiguous") return "contiguous†";
  if (t["name"] == "chunked" && t.contains("placement"))
    return fmt::format("chunked {}†", dims_text(t["placement"]["chunk"]));
  return std::string(t["name"]) + "†";
}

void table(std::string& md, const json& prof, const json& config, const std::vector<json>& targets,
           const std::function<bool(const json&)>& include,
           const std::function<std::string(const json& row)>& cell) {
  std::map<std::pair<std::string, std::string>, const json*> by;
  for (const json& r : prof["results"]) by[{r["workload"], r["target"]}] = &r;
  md += "| workload |";
  for (const json& t : targets) md += " " + target_heading(t) + " |";
  md += "\n|---|";
  for (std::size_t i = 0; i < targets.size(); ++i) md += "---|";
  md += "\n";
  for (const json& w : prof["workloads"]) {
    if (!include(w)) continue;
    md += "| " + workload_text(w, config) + " |";
    for (const json& t : targets) {
      auto it = by.find({w["id"], t["name"]});
      md += " " + (it == by.end() ? std::string("—") : cell(*it->second)) + " |";
    }
    md += "\n";
  }
  md += "\n";
}

std::string profile_markdown(const json& prof, const json& config) {
  std::string md;
  const std::string profile = prof["profile"];
  md += fmt::format("## {} — modeled clock\n\n", profile);
  std::vector<json> targets;
  for (const json& t : prof["targets"])
    if (!t.contains("error")) targets.push_back(t);

  md += fmt::format("Array {} {} ({}); mmfs cell {} ({}); every target placed alone from LBN {} by the daemon's "
                    "allocator.\n\n",
                    dims_text(config["shape"]), std::string(config["dtype"]), fmt_bytes(config["bytes"]),
                    dims_text(prof["cell"]),
                    config["cell"].is_string() ? "the daemon's default brick" : "given with --cell",
                    config["first_lbn"].get<std::uint64_t>());
  for (const json& t : prof["targets"]) {
    if (t.contains("error")) {
      md += fmt::format("* **{}**: not placed on {} — {}\n", std::string(t["name"]), profile, std::string(t["error"]));
      continue;
    }
    const json& p = t["placement"];
    if (t["kind"] == "mmfs") {
      md += fmt::format("* **{}**: {} sectors per cell, {} extent(s)", std::string(t["layout"]),
                        p["sectors_per_cell"].get<std::uint64_t>(), p["extents"].get<std::uint64_t>());
      if (p.contains("basic_cube")) md += fmt::format(", basic cube {} cells", dims_text(p["basic_cube"]));
      md += "\n";
    } else {
      md += fmt::format("* **{}** (a model, not the library): {}; read unit {}\n", std::string(t["label"]),
                        std::string(p["model"]), std::string(p["unit"]));
    }
  }
  md += "\n";

  md += "**Modeled ms per query** — median (min–max) over the random queries; ×R = the best baseline's median ÷ "
        "this median (R > 1: faster than the best baseline).\n\n";
  table(md, prof, config, targets, [](const json&) { return true; }, [](const json& r) {
    std::string s = spread(r["ms"]);
    if (!r["ratio_vs_best_baseline"].is_null())
      s += fmt::format(" ×{}", fmt_num(r["ratio_vs_best_baseline"].get<double>()));
    return s;
  });

  md += fmt::format("**Modeled ms per cell** (the papers' measure for beams and cubes) — the query's ms ÷ the "
                    "cells of the mmfs grid ({}) it touches; baselines divided by the same count, i.e. per equal "
                    "amount of data.\n\n",
                    dims_text(prof["cell"]));
  table(md, prof, config, targets, [](const json& w) { return w["kind"] == "beam" || w["kind"] == "cube"; },
        [](const json& r) { return spread(r["ms_per_cell"]); });

  md += "**Bytes read ÷ bytes useful (requests)** — mean over the random queries.\n\n";
  table(md, prof, config, targets, [](const json&) { return true; }, [](const json& r) {
    double read = r["bytes_read"], useful = r["bytes_useful"];
    return fmt::format("{} ÷ {} = {}× ({} req)", fmt_bytes(read), fmt_bytes(useful),
                       fmt_num(useful > 0 ? read / useful : 0), fmt_num(r["requests"].get<double>()));
  });
  return md;
}

}  // namespace

std::string workload_markdown(const json& doc) {
  const json& config = doc["config"];
  std::string md = "# mmfs-bench modeled: the benchmark workloads on modeled disks\n\n";
  md += fmt::format("`{}`\n\n", std::string(doc["command"]));
  md += "How to read this:\n\n"
        "* **Modeled clock.** Every query is spelled as the view a user reads below `A@` (e.g. `slice/0/512`, "
        "`box/3,:,7`), resolved by the daemon's path resolver, planned by the daemon's planner "
        "(`layouts::plan_selection` with the daemon's options) and costed from an idle device by the geometry's "
        "service-time model (`layouts::model_plan`): the number `A@/plan/VIEW` shows as `modeled_ms` on a mounted "
        "volume of the same geometry for an array with the same extents (pass `--first-lbn` = the LBN of "
        "`A@/lbn/0,...,0` to reproduce a mounted array). Modeled time is deterministic: slices, the full scan "
        "and PLoD are one query each; beams and cubes are `--runs` queries at random positions (the same "
        "positions for every target), shown as median (min–max).\n";
  md += fmt::format("* **Cubes** are the MultiMap paper's p%-length cubes (§5.2): edge = p % of each dimension's "
                    "length (rounded, at least 1), not p % of the volume; p = {}.\n",
                    config["cubes"].dump());
  md += "* **PLoD** reads (`plod/K`, `plod/K@/slice/...`) plan exactly like the unreduced view on these layouts: "
        "byte planes come with the MLOC layout, not implemented in this release, so the daemon reads whole "
        "elements and drops the low bytes in memory. They are shown to make that visible; bytes useful count "
        "whole elements, as `A@/plan` reports.\n"
        "* **† Baselines are models** of how the library's file would sit on the same modeled disk, placed by "
        "the same allocator from the same LBN, with the requests a library issues (one request per contiguous "
        "run, one at a time, in file order). The libraries themselves (h5py, zarr, numpy.memmap) are measured "
        "on the real clock by `mmfs-bench real`.\n\n";
  for (const json& prof : doc["profiles"]) md += profile_markdown(prof, config);
  return md;
}

}  // namespace mmfs::bench
