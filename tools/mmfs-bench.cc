// mmfs-bench: benchmark workloads (SPEC §8). Today: the modeled mode, which
// reruns the MultiMap paper's §5 experiments on modeled disks.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iostream>

#include "geometry/types.h"
#include "tools/bench/amplification.h"
#include "tools/bench/modeled.h"
#include "tools/bench/volume_bench.h"

int main(int argc, char** argv) {
  CLI::App app{"mmfs-bench: benchmark workloads against mmfs layouts (SPEC §8)"};
  app.require_subcommand(1);

  mmfs::bench::ModeledOptions opt;
  std::string out_dir;
  auto* model = app.add_subcommand(
      "model",
      "Rerun the MultiMap paper's §5 experiments (3-D 259^3 and 4-D 530x32x32x32 chunks, beams along every "
      "dimension, p%-cubes) on modeled disks: Naive, Hilbert and MultiMap plans costed by the geometry's "
      "service-time model, beside the paper's Table 3 and its App. A analytic model");
  model->add_option("--profile", opt.profiles, "Geometry profiles or JSON files (repeatable)")
      ->default_str("atlas10k3 cheetah36es");
  model->add_option("--layout", opt.layouts, "Layouts to compare (repeatable)")->default_str("naive hilbert multimap");
  model->add_option("--runs", opt.runs, "Random queries per beam direction and cube size")->default_val(15)
      ->check(CLI::Range(1u, 100000u));
  model->add_option("--seed", opt.seed, "Random seed")->default_val(2005);
  model->add_flag("--quick", opt.quick, "Small datasets (for tests)");
  model->add_option("--host-gap-ms", opt.host_gap_ms,
                    "Host round trip between a batch's completion and the next batch's arrival (ms)")
      ->default_val(0.1)->check(CLI::Range(0.0, 100.0));
  model->add_option("--out", out_dir, "Directory for multimap-table3.md and .json (default: print only)");

  mmfs::bench::AmplificationOptions amp;
  auto* ampl = app.add_subcommand(
      "amplification", "Read amplification and modeled time of a slice along every dimension, per cell shape "
                       "and layout (the trade-off behind the default cell shape)");
  ampl->add_option("--profile", amp.profile, "Geometry profile or JSON file")->default_val("atlas10k3");
  ampl->add_option("--shape", amp.shape, "Array shape in elements")->delimiter(',')->default_str("1024,1024,256");
  ampl->add_option("--itemsize", amp.itemsize, "Bytes per element")->default_val(8)->check(CLI::Range(1u, 8u));
  ampl->add_option("--layout", amp.layouts, "Layouts (repeatable)")->default_str("naive zorder hilbert multimap");

  mmfs::bench::VolumeBenchOptions vb;
  auto* volume = app.add_subcommand(
      "volume", "Speed of the volume layer on real image files: formatting a 1 TiB sparse image, metadata "
                "operations committed in batches, isolated commits, extent allocation for a 64 GiB array");
  volume->add_option("--dir", vb.dir, "Directory for the image files (on the disk to measure)")->default_val("/var/tmp");
  volume->add_option("--operations", vb.operations, "Metadata operations")->default_val(100000);
  volume->add_option("--batch", vb.batch, "Operations per durable commit")->default_val(1000)->check(CLI::Range(1u, 1000000u));

  CLI11_PARSE(app, argc, argv);
  try {
    if (volume->parsed()) {
      std::cout << mmfs::bench::run_volume_bench(vb);
      return 0;
    }
    if (ampl->parsed()) {
      std::cout << mmfs::bench::run_amplification(amp);
      return 0;
    }
    auto report = mmfs::bench::run_multimap_experiments(opt);
    std::string md = report.to_markdown();
    std::cout << md;
    if (!out_dir.empty()) {
      std::filesystem::create_directories(out_dir);
      std::ofstream(std::filesystem::path(out_dir) / "multimap-table3.md") << md;
      std::ofstream(std::filesystem::path(out_dir) / "multimap-table3.json") << report.to_json().dump(1) << "\n";
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "mmfs-bench: {}\n", e.what());
    return 1;
  }
  return 0;
}
