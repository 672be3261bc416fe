// mmfs-bench: benchmark workloads (docs/reference.md §8). `modeled`: the workloads
// on every layout and on library baselines in modeled time; `real`:
// the same on the real clock (bench/mmfs_bench_real.py); `query`: bitmap-index
// queries, the Set Query Benchmark and a 3-D array (bench/query_bench.py);
// `mloc`: the MLOC layout (bench/mloc_bench.py); `python`: the Python client,
// its xarray engine and the Zarr view (bench/python_bench.py);
// `model`: the MultiMap paper's §5 experiments on modeled disks;
// `amplification`, `volume`.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <iostream>

#include "bench/amplification.h"
#include "bench/atropos_bench.h"
#include "bench/capsule_table.h"
#include "bench/free_bandwidth_bench.h"
#include "bench/modeled.h"
#include "bench/modeled_command.h"
#include "bench/python_scripts.h"
#include "bench/volume_bench.h"
#include "geometry/types.h"

int main(int argc, char** argv) {
  CLI::App app{"mmfs-bench: benchmark workloads against mmfs layouts (docs/reference.md §8)"};
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

  mmfs::bench::ModeledCommand mc;
  auto* modeled = app.add_subcommand(
      "modeled",
      "The benchmark workloads (beams and middle slices along every dimension, p%-length cubes, the full scan, "
      "PLoD reads) on every mmfs layout and on models of h5py/zarr/numpy files on the same disk, in modeled time: "
      "each view planned as the daemon plans it (the modeled_ms of A@/plan/VIEW) and costed by the geometry's "
      "service-time model. Markdown to stdout; with --out DIR also DIR/mmfs-bench-modeled.{md,json} and PNG plots");
  auto& mb = mc.bench;
  modeled->add_option("--profile", mb.profiles, "Geometry profiles or JSON files (repeatable)")
      ->default_str("atlas10k3 cheetah36es");
  auto* shape_opt = modeled->add_option("--shape", mb.shape, "Array shape in elements")->delimiter(',')
      ->default_str("1024,1024,256 (--quick: 512,512,128)");
  modeled->add_option("--dtype", mb.dtype, "Element type (docs/reference.md §1)")->default_val("float64");
  modeled->add_option("--layout", mb.layouts, "mmfs layouts (repeatable)")->default_str("naive zorder hilbert multimap");
  modeled->add_option("--cell", mb.cell, "Cell shape in elements for every layout (default: the daemon's choice, a "
                                         "brick of max(4096, sector) bytes)")->delimiter(',');
  auto* runs_opt = modeled->add_option("--runs", mb.runs, "Random queries per beam dimension and per cube size")
      ->default_str("15 (--quick: 5)")->check(CLI::Range(1u, 100000u));
  modeled->add_option("--seed", mb.seed, "Random seed of the beam positions and cube corners")->default_val(2005);
  modeled->add_option("--cubes", mb.cubes, "p of the p%-length cubes (edge = p % of each dimension)")
      ->delimiter(',')->default_str("1,5,10");
  modeled->add_option("--plod", mb.plod, "Bytes kept per element by the PLoD reads (at most the itemsize; 0: none)")->default_val(2);
  modeled->add_option("--chunk", mb.chunk_edge, "Chunk edge of the chunked baseline, in elements")->default_val(64)
      ->check(CLI::Range(std::uint64_t(1), std::uint64_t(1) << 20));
  bool no_baselines = false;
  modeled->add_flag("--no-baselines", no_baselines, "Leave out the contiguous and chunked baselines");
  modeled->add_option("--first-lbn", mb.first_lbn, "LBN where every target's space starts (to reproduce a mounted "
                                                   "array, the LBN of its A@/lbn/0,...,0)")->default_val(0);
  modeled->add_flag("--quick", mb.quick, "Small array, 5 runs, no Table 3 (for tests; seconds)");
  auto* t3_opt = modeled->add_flag("--with-table3,!--no-table3", mc.with_table3,
                                   "Append the MultiMap Table 3 reproduction (default: on, off with --quick)");
  modeled->add_option("--out", mc.out_dir, "Directory for mmfs-bench-modeled.md, .json and the PNG plots");
  bool no_plot = false;
  modeled->add_flag("--no-plot", no_plot, "Do not run bench/plot_workloads.py");

  mmfs::bench::CapsuleTableOptions ct;
  std::string capsule_out;
  auto* capsule = app.add_subcommand(
      "capsule", "The MEMS paper's Table 5 in modeled time: a table of records (default 10,000,000 of 8, 32, 15 "
                 "and 16 bytes) scanned whole, by a1, by a1+a2, and 100 records of a1, in 8 KB row-major pages and "
                 "in capsules (the capsule layout), each read planned as the daemon plans it and costed by the "
                 "geometry's service-time model, beside the paper's figures");
  capsule->add_option("--profile", ct.profile, "MEMS geometry profile or JSON file")->default_val("mems-g2");
  capsule->add_option("--records", ct.records, "Records in the table")->default_val(10'000'000)
      ->check(CLI::Range(std::uint64_t(200), std::uint64_t(1) << 40));
  capsule->add_option("--attribute", ct.attributes, "Bytes per record of each attribute, in order")
      ->delimiter(',')->default_str("8,32,15,16");
  capsule->add_option("--page-records", ct.page_records, "Records per page of the normal layout")->default_val(115);
  capsule->add_option("--paper-records", ct.paper_records,
                      "Records per capsule of the paper's capsules, shown beside CapsuleResolve's choice")
      ->default_val(60)->check(CLI::Range(std::uint64_t(1), std::uint64_t(1) << 20));
  capsule->add_option("--samples", ct.samples, "Random short reads averaged")->default_val(500)
      ->check(CLI::Range(1u, 1000000u));
  capsule->add_option("--seed", ct.seed, "Random seed of the short reads")->default_val(2003);
  capsule->add_option("--out", capsule_out, "Directory for mmfs-bench-capsule.md and .json");

  mmfs::bench::AtroposBenchOptions ab;
  std::string atropos_out;
  auto* atropos = app.add_subcommand(
      "atropos",
      "The Atropos paper's figures in modeled time: Table 2 for every disk profile, Figure 7 (access "
      "efficiency against I/O size: track-based, semi-sequential quadrangle, naive), Figure 8 (a random 8 KB "
      "other-major read through the quadrangle layout and the planner), §5.3 (stripe units of 64 KiB, 256 KiB and "
      "the exact track on 4 disks) and the scaling of a quadrangle array on 1, 2 and 4 striped members");
  atropos->add_option("--profile", ab.profile, "Disk geometry profile or JSON file")->default_val("atlas10k3");
  atropos->add_option("--samples", ab.samples, "Random requests averaged per point")->default_val(2000)
      ->check(CLI::Range(1u, 1000000u));
  atropos->add_option("--seed", ab.seed, "Random seed")->default_val(2004);
  atropos->add_option("--scan-mib", ab.scan_mib, "§5.3: MiB scanned")->default_val(512)
      ->check(CLI::Range(std::uint64_t(1), std::uint64_t(1) << 20));
  atropos->add_option("--host-gap-ms", ab.host_gap_ms,
                      "§5.3: the host's turnaround between a disk's I/Os (also run with 0)")->default_val(0.1)
      ->check(CLI::Range(0.0, 100.0));
  atropos->add_option("--array-mib", ab.array_mib, "Scaling: the array's MiB")->default_val(2048)
      ->check(CLI::Range(std::uint64_t(16), std::uint64_t(1) << 20));
  atropos->add_option("--out", atropos_out, "Directory for mmfs-bench-atropos.md and .json");

  mmfs::bench::FreeBandwidthOptions fb;
  std::string freebw_out;
  bool any_column = false;
  auto* freebw = app.add_subcommand(
      "freebw",
      "The MEMS paper's free-bandwidth experiment (§5.1, Figure 4, Table 4): random 4 KB foreground reads on the "
      "G2 MEMStore, and a background scan that reads the whole device in the free slots of the foreground's row "
      "passes (p sectors per pass, taken from the pass's equivalence class, its column +- M), until every LBN is "
      "read. Prints foreground requests to scan 95 % and 100 %, minutes at one foreground rate (the paper does not "
      "state its rate: calibrated so that p=10, M=0 reaches 95 % at the paper's 1120 minutes, or --rate), the "
      "paper's minutes and the ratio, free LBNs per request, and the rate-independent ratios");
  freebw->add_option("--p", fb.p, "Parallelism p: LBNs per row pass (repeatable; N = 100 must be a multiple)")
      ->default_str("10 20")->check(CLI::Range(1u, 100u));
  freebw->add_option("--micropositioning,-M", fb.M, "Micropositioning M in cylinders either way (repeatable)")
      ->default_str("0 5")->check(CLI::Range(0u, 1000u));
  freebw->add_option("--seed", fb.seed, "Random seed of the foreground")->default_val(2003);
  freebw->add_option("--align", fb.align, "Foreground starts on multiples of this many sectors (1: any sector; 8: "
                                          "4 KB-aligned)")->default_val(1)->check(CLI::Range(1u, 1u << 20));
  freebw->add_option("--rate", fb.rate, "Foreground requests per second behind the minutes (default: calibrated)")
      ->check(CLI::PositiveNumber);
  freebw->add_option("--profile", fb.profile, "MEMS geometry profile or JSON file")->default_val("mems-g2");
  freebw->add_flag("--any-column", any_column,
                   "Let a square's tip read two columns in one pass (ignore the one-column-per-square conflict)");
  freebw->add_flag("--quick", fb.quick, "A device of 100 cylinders instead of 2500 (for tests; the minutes are "
                                        "then not comparable with the paper's)");
  freebw->add_option("--out", freebw_out, "Directory for mmfs-bench-freebw.md and .json");

  // Everything after `real` goes to the script untouched, --help included.
  auto* real = app.add_subcommand(
      "real", "The same workloads on the real clock with cold caches, on a mounted mmfs and on h5py, zarr and "
              "numpy.memmap files: runs bench/mmfs_bench_real.py with every argument passed through (see "
              "`mmfs-bench real --help`)");
  real->set_help_flag();
  real->prefix_command();
  real->allow_extras();

  // The same for `query`.
  auto* query = app.add_subcommand(
      "query", "Bitmap-index queries on the real clock, cold and warm: the Set Query Benchmark's 75 count queries "
               "on a table directory of every index encoding, beside DuckDB, pyroaring and a numpy scan, and "
               "count/coords/values of a 3-D array: runs bench/query_bench.py with every argument passed "
               "through (see `mmfs-bench query --help`)");
  query->set_help_flag();
  query->prefix_command();
  query->allow_extras();

  auto* mloc = app.add_subcommand(
      "mloc", "The MLOC layout on the real clock, cold: ingest, storage per byte group, region queries, box reads "
              "and PLoD per priority beside a numpy scan, the default layout and h5py chunked: runs "
              "bench/mloc_bench.py with every argument passed through (see `mmfs-bench mloc --help`)");
  mloc->set_help_flag();
  mloc->prefix_command();
  mloc->allow_extras();

  auto* python = app.add_subcommand(
      "python", "The Python client on the real clock, cold: the xarray engine \"mmfs\", mmfs.open and the raw "
                "views beside h5netcdf and zarr through xarray, the Zarr view A@/zarr/ beside real zarr stores, "
                "dask over mmfs.open beside numpy.memmap: runs bench/python_bench.py with every argument passed "
                "through (see `mmfs-bench python --help`)");
  python->set_help_flag();
  python->prefix_command();
  python->allow_extras();

  CLI11_PARSE(app, argc, argv);
  try {
    if (real->parsed() || query->parsed() || mloc->parsed() || python->parsed()) {
      auto* sub = real->parsed() ? real : query->parsed() ? query : mloc->parsed() ? mloc : python;
      std::vector<std::string> looked;
      std::string script = mmfs::bench::find_script(real->parsed()    ? "bench/mmfs_bench_real.py"
                                                    : query->parsed() ? "bench/query_bench.py"
                                                    : mloc->parsed()  ? "bench/mloc_bench.py"
                                                                      : "bench/python_bench.py",
                                                    &looked);
      if (script.empty()) {
        fmt::print(stderr, "mmfs-bench: the {} script is not there (looked in {})\n", sub->get_name(),
                   fmt::join(looked, ", "));
        return 1;
      }
      std::string err = mmfs::bench::exec_python(script, sub->remaining());
      fmt::print(stderr, "mmfs-bench: cannot run python3 {}: {}\n", script, err);
      return 1;
    }
    if (modeled->parsed()) {
      if (mb.quick && shape_opt->count() == 0) mb.shape = {512, 512, 128};
      if (runs_opt->count() == 0) mb.runs = mb.quick ? 5 : 15;
      if (t3_opt->count() == 0) mc.with_table3 = !mb.quick;
      mb.baselines = !no_baselines;
      mc.plot = !no_plot;
      std::vector<std::string> args(argv, argv + argc);
      args[0] = "mmfs-bench";
      mb.command = fmt::format("{}", fmt::join(args, " "));
      return mmfs::bench::run_modeled_command(mc);
    }
    if (atropos->parsed()) {
      std::vector<std::string> args(argv, argv + argc);
      args[0] = "mmfs-bench";
      ab.command = fmt::format("{}", fmt::join(args, " "));
      auto report = mmfs::bench::run_atropos_bench(ab);
      std::cout << report.markdown;
      if (!atropos_out.empty()) {
        std::filesystem::create_directories(atropos_out);
        std::ofstream(std::filesystem::path(atropos_out) / "mmfs-bench-atropos.md") << report.markdown;
        std::ofstream(std::filesystem::path(atropos_out) / "mmfs-bench-atropos.json") << report.json.dump(1) << "\n";
      }
      return 0;
    }
    if (capsule->parsed()) {
      auto report = mmfs::bench::run_capsule_table(ct);
      std::cout << report.markdown;
      if (!capsule_out.empty()) {
        std::filesystem::create_directories(capsule_out);
        std::ofstream(std::filesystem::path(capsule_out) / "mmfs-bench-capsule.md") << report.markdown;
        std::ofstream(std::filesystem::path(capsule_out) / "mmfs-bench-capsule.json") << report.json.dump(1) << "\n";
      }
      return 0;
    }
    if (freebw->parsed()) {
      fb.one_column_per_square = !any_column;
      std::vector<std::string> args(argv, argv + argc);
      args[0] = "mmfs-bench";
      fb.command = fmt::format("{}", fmt::join(args, " "));
      auto report = mmfs::bench::run_free_bandwidth(fb);
      std::cout << report.markdown();
      if (!freebw_out.empty()) mmfs::bench::write_free_bandwidth(report, freebw_out);
      return 0;
    }
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
