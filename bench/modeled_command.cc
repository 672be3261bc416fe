#include "bench/modeled_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "bench/modeled.h"
#include "bench/python_scripts.h"
#include "bench/workload_report.h"

namespace mmfs::bench {
namespace {

namespace fsys = std::filesystem;

constexpr const char* kPlotScript = "bench/plot_workloads.py";
constexpr const char* kBase = "mmfs-bench-modeled";

// The PNG plot_workloads.py writes for a profile (same rule as its png_name()).
std::string png_name(const std::string& profile) {
  std::string stem = fsys::path(profile).stem().string(), out;
  for (char c : stem) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
  return fmt::format("{}-{}.png", kBase, out);
}

// Draws the plots; returns the markdown linking them, or "" (with a note on stderr).
std::string plot(const fsys::path& dir, const nlohmann::json& doc) {
  std::vector<std::string> looked;
  std::string script = find_script(kPlotScript, &looked);
  std::string by_hand = fmt::format("python3 {} {} --out-prefix {}", script.empty() ? kPlotScript : script,
                                    (dir / kBase).string() + ".json", (dir / kBase).string());
  if (script.empty()) {
    fmt::print(stderr, "mmfs-bench: no plots: {} not found (looked in {})\n", kPlotScript, fmt::join(looked, ", "));
    return "";
  }
  int rc = run_python(script, {(dir / kBase).string() + ".json", "--out-prefix", (dir / kBase).string()});
  if (rc != 0) {
    fmt::print(stderr, "mmfs-bench: no plots ({}); draw them with: {}\n",
               rc < 0 ? "python3 could not be started" : rc == 3 ? "matplotlib is missing" : "the plot script failed",
               by_hand);
    return "";
  }
  std::string md = "## Plots\n\n";
  for (const auto& prof : doc["profiles"]) {
    std::string png = png_name(prof["profile"]);
    if (fsys::exists(dir / png)) md += fmt::format("![{} modeled]({})\n\n", std::string(prof["profile"]), png);
  }
  return md;
}

}  // namespace

int run_modeled_command(const ModeledCommand& c) {
  nlohmann::json doc = run_workload_bench(c.bench);
  std::string md = workload_markdown(doc);
  if (c.with_table3) {
    ModeledOptions t3;
    t3.profiles = c.bench.profiles;
    t3.runs = c.bench.runs;
    auto report = run_multimap_experiments(t3);
    md += "## The MultiMap paper's Table 3, reproduced (`mmfs-bench model`)\n\n"
          "The paper's own datasets (one-sector cells: 259³ and 530×32×32×32 cells, §5.3/§5.4), not the array above; "
          "the same tables as `mmfs-bench model`.\n\n" +
          report.to_markdown();
    doc["table3"] = report.to_json();
  }
  if (!c.out_dir.empty()) {
    fsys::path dir(c.out_dir);
    fsys::create_directories(dir);
    std::ofstream(dir / (std::string(kBase) + ".json")) << doc.dump(1) << "\n";
    if (c.plot) md += plot(dir, doc);
    std::ofstream(dir / (std::string(kBase) + ".md")) << md;
  }
  std::cout << md;
  return 0;
}

}  // namespace mmfs::bench
