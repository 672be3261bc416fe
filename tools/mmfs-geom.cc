// mmfs-geom: asks the geometry engine about a device without a mounted volume
// (docs/reference.md §7). The first positional is a built-in profile name or a geometry
// JSON file; a subcommand says what to compute:
//
//   mmfs-geom PROFILE|FILE.json info | boundaries LBN | adjacent LBN STEP |
//                               equivalent LBN | quadrangle [B] | time [FILE|-]
//   mmfs-geom measure TARGET [-t SECONDS] [-o FILE.json]
//
// `measure` times a real device (fs/device/device_probe.h) and prints a flash
// geometry fitted to it, which mkfs.mmfs -g FILE.json then uses.
//
// Every error (unknown profile, a malformed geometry naming its field, an LBN
// beyond the capacity, a step beyond D, a malformed batch line) is printed as
// "mmfs-geom: <message>" on stderr with exit status 1.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <istream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fs/device/device_probe.h"
#include "geometry/geometry.h"
#include "geometry/load.h"
#include "geometry/service_time.h"
#include "geometry/types.h"
#include "probes/host_probe.h"

#ifndef MMFS_VERSION
#define MMFS_VERSION "unknown"
#endif

namespace {

using mmfs::geom::Geometry;
using mmfs::geom::GeometryError;
using mmfs::geom::Lbn;
using mmfs::geom::Request;

// A malformed command line or input file; reported like a GeometryError.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Strict unsigned decimal: digits only (no sign, no blanks, no trailing
// junk), and the value must fit in T. Returns an explanation on failure,
// an empty string on success.
template <class T>
std::string to_uint(std::string_view text, T& out) {
  if (text.empty()) return "is empty (expected a non-negative integer)";
  if (!std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return "is not a non-negative decimal integer";
  T value{};
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range)
    return fmt::format("is too large (at most {})", std::numeric_limits<T>::max());
  if (ec != std::errc() || ptr != text.data() + text.size()) return "is not a non-negative decimal integer";
  out = value;
  return {};
}

// A command-line number: throws UsageError naming the argument.
template <class T>
T parse_arg(const std::string& text, std::string_view what) {
  T value{};
  if (std::string why = to_uint(text, value); !why.empty())
    throw UsageError(fmt::format("{} '{}' {}", what, text, why));
  return value;
}

// One line of `time` input: a batch of requests.
struct Batch {
  std::size_t line = 0;
  std::vector<Request> requests;
};

// Reads batches: one per line, "lbn:sectors" tokens separated by blanks.
// Blank lines and '#' comments (to the end of the line) are skipped.
std::vector<Batch> read_batches(std::istream& in, const std::string& source, const Geometry& geom) {
  std::vector<Batch> batches;
  const Lbn capacity = geom.capacity_sectors();
  std::string line;
  std::size_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream tokens(line);
    Batch batch;
    batch.line = lineno;
    std::string token;
    while (tokens >> token) {
      auto fail = [&](const std::string& why) {
        throw UsageError(fmt::format("{}: line {}: bad request '{}': {}", source, lineno, token, why));
      };
      const auto colon = token.find(':');
      if (colon == std::string::npos) fail("expected LBN:SECTORS");
      const std::string_view lbn_text = std::string_view(token).substr(0, colon);
      const std::string_view sectors_text = std::string_view(token).substr(colon + 1);
      Request r;
      if (std::string why = to_uint(lbn_text, r.lbn); !why.empty())
        fail(fmt::format("LBN '{}' {}", lbn_text, why));
      if (std::string why = to_uint(sectors_text, r.sectors); !why.empty())
        fail(fmt::format("sector count '{}' {}", sectors_text, why));
      if (r.sectors == 0) fail("the sector count must be at least 1");
      if (r.lbn >= capacity || r.sectors > capacity - r.lbn)
        fail(fmt::format("runs past the end of the device (capacity {} sectors, last LBN {})", capacity,
                         capacity - 1));
      batch.requests.push_back(r);
    }
    if (!batch.requests.empty()) batches.push_back(std::move(batch));
  }
  if (in.bad()) throw UsageError(fmt::format("{}: read error: {}", source, std::strerror(errno)));
  return batches;
}

// `time`: serves every batch, in order, with one service model (the device
// state carries from batch to batch, starting idle).
void run_time(const Geometry& geom, const std::string& file) {
  std::vector<Batch> batches;
  if (file == "-") {
    batches = read_batches(std::cin, "stdin", geom);
  } else {
    std::ifstream in(file);
    if (!in) throw UsageError(fmt::format("cannot open '{}': {}", file, std::strerror(errno)));
    batches = read_batches(in, file, geom);
  }
  auto model = geom.make_service_model();
  std::vector<double> times;
  times.reserve(batches.size());
  double total = 0.0;
  for (const Batch& b : batches) {
    double ms = 0.0;
    try {
      ms = model->serve(b.requests);
    } catch (const GeometryError& e) {
      throw UsageError(fmt::format("{}: line {}: {}", file == "-" ? "stdin" : file, b.line, e.what()));
    }
    times.push_back(ms);
    total += ms;
  }
  std::string out;
  for (double ms : times) out += fmt::format("{:.4f}\n", ms);
  out += fmt::format("total {:.4f}\n", total);
  std::fputs(out.c_str(), stdout);
}

// Loads the geometry; errors that are not GeometryErrors (I/O, JSON syntax)
// are prefixed with the profile/file argument so the user knows what failed.
std::unique_ptr<Geometry> load(const std::string& source) {
  try {
    return mmfs::geom::load_geometry(source);
  } catch (const GeometryError&) {
    throw;
  } catch (const std::exception& e) {
    throw UsageError(fmt::format("{}: {}", source, e.what()));
  }
}

std::string profile_list() {
  std::string list;
  for (const std::string& name : mmfs::geom::profile_names()) list += (list.empty() ? "" : ", ") + name;
  return list;
}

// `mmfs-geom measure TARGET`: reads only; the fitted geometry goes to stdout
// (or -o FILE), what was measured to stderr.
int run_measure(int argc, char** argv) {
  CLI::App app{"Measures a real device with O_DIRECT io_uring reads (sizes 512 B to 4 MiB, queue depths 1 to 64, "
               "a sequential stream, single reads after idle time for wake_ms) and what a read costs the machine "
               "besides the device (through a throwaway FUSE mount: \"host\") and prints a flash geometry JSON fitted "
               "to it. Reads only: safe on a device "
               "that holds data. A regular file is measured where it holds data; a nearly empty (sparse) image "
               "is measured through a scratch file written beside it and removed.",
               "mmfs-geom measure"};
  std::string target, out_file;
  double seconds = 60;
  bool quiet = false;
  app.add_option("TARGET", target, "Block device or file on the device to measure")->required();
  app.add_option("-t,--seconds", seconds, "Time budget of the whole measurement")->default_val(60)
      ->check(CLI::Range(1.0, 3600.0));
  app.add_option("-o,--output", out_file, "Write the geometry JSON here instead of standard output");
  app.add_flag("-q,--quiet", quiet, "Print no progress or summary on standard error");
  app.footer("Example:\n  mmfs-geom measure /dev/nvme0n1 -o nvme.json && mkfs.mmfs -g nvme.json /dev/nvme0n1\n"
             "The same in one step: mkfs.mmfs -g measure TARGET");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    fmt::print(stderr, "mmfs-geom: {}\nRun 'mmfs-geom measure --help' for usage.\n", e.what());
    return 1;
  }
  mmfs::fs::ProbeOptions opt;
  opt.seconds = seconds;
  opt.verbose = !quiet;
  mmfs::fs::ProbeResult probe;
  std::string message, summary;
  if (!quiet) fmt::print(stderr, "measuring {} for at most {:.0f} s (reads only)\n", target, seconds);
  if (mmfs::fs::probe_device(target, opt, &probe, &message) != 0) throw UsageError(message);
  nlohmann::json geometry = mmfs::fs::measured_geometry(probe, &summary);
  mmfs::probes::measure_host_into(&geometry, &summary, !quiet);
  (void)mmfs::geom::load_geometry(geometry);  // what mkfs would refuse, refuse now
  if (!quiet) fmt::print(stderr, "{}", summary);
  const std::string text = geometry.dump(2) + "\n";
  if (out_file.empty()) {
    std::fputs(text.c_str(), stdout);
  } else {
    std::ofstream out(out_file);
    out << text;
    out.close();
    if (!out) throw UsageError(fmt::format("cannot write '{}': {}", out_file, std::strerror(errno)));
  }
  return 0;
}

int run(int argc, char** argv) {
  if (argc >= 2 && std::string_view(argv[1]) == "measure") return run_measure(argc - 1, argv + 1);
  CLI::App app{"Answers geometry questions about a modeled device (docs/reference.md §7), without a mounted volume.",
               "mmfs-geom"};
  app.set_version_flag("--version", std::string("mmfs-geom ") + MMFS_VERSION);
  app.require_subcommand(1);
  app.footer(fmt::format(
      "Built-in profiles: {}.\n"
      "Examples:\n"
      "  mmfs-geom atlas10k3 info\n"
      "  mmfs-geom atlas10k3 adjacent 0 1\n"
      "  mmfs-geom mems-g2 equivalent 0\n"
      "  echo '0:1 686:1' | mmfs-geom atlas10k3 time\n"
      "  mmfs-geom measure /dev/sdb -o sdb.json   (fit a flash geometry to a real device)\n"
      "Run 'mmfs-geom PROFILE SUBCOMMAND --help' for a subcommand's arguments.",
      profile_list()));

  std::string source;
  // Not ->required(): CLI11 would then take a subcommand name for the geometry
  // ("mmfs-geom info --help" must show info's help). Checked after parsing.
  app.add_option("geometry", source, "Built-in profile name or path to a geometry JSON file (required)")
      ->type_name("PROFILE|FILE.json");

  CLI::App* info = app.add_subcommand(
      "info", "Print the geometry and its derived values as JSON (as /.mmfs/geometry)");

  std::string bnd_lbn;
  CLI::App* boundaries =
      app.add_subcommand("boundaries", "Print 'LOW HIGH': the first and last LBN of LBN's track");
  boundaries->add_option("LBN", bnd_lbn, "A sector number, 0 <= LBN < capacity")->required()->type_name("");

  std::string adj_lbn, adj_step;
  CLI::App* adjacent = app.add_subcommand(
      "adjacent", "Print the LBN adjacent to LBN, STEP tracks away (MultiMap GETADJACENT)");
  adjacent->add_option("LBN", adj_lbn, "A sector number, 0 <= LBN < capacity")->required()->type_name("");
  adjacent->add_option("STEP", adj_step, "Tracks away, 1 <= STEP <= D (the depth)")->required()->type_name("");

  std::string eq_lbn;
  CLI::App* equivalent = app.add_subcommand(
      "equivalent", "Print the equivalence class of LBN, one LBN per line (MEMS devices only)");
  equivalent->add_option("LBN", eq_lbn, "A sector number, 0 <= LBN < capacity")->required()->type_name("");

  std::string quad_block = "1";
  CLI::App* quadrangle = app.add_subcommand(
      "quadrangle", "Print the Atropos quadrangle parameters {N,H,b,d,w,R,Dmax} of LBN 0's zone (disks only)");
  quadrangle->add_option("B", quad_block, "Block size in sectors (default 1)")->type_name("");

  std::string time_file = "-";
  CLI::App* time = app.add_subcommand(
      "time",
      "Print the modeled service time (ms) of request batches, one batch per line of FILE "
      "('lbn:sectors lbn:sectors ...'; blank lines and # comments skipped), then the total. "
      "Batches are served in order from an idle device; the device state carries over.");
  time->add_option("FILE", time_file, "Batch file, or '-' for standard input (the default)")->type_name("");

  // CLI11 2.1 prints a subcommand's usage without the geometry before it.
  const std::pair<CLI::App*, const char*> usages[] = {
      {info, "info"},           {boundaries, "boundaries LBN"}, {adjacent, "adjacent LBN STEP"},
      {equivalent, "equivalent LBN"}, {quadrangle, "quadrangle [B]"},   {time, "time [FILE|-]"}};
  for (const auto& [sub, usage] : usages)
    sub->footer(fmt::format("Full form: mmfs-geom PROFILE|FILE.json {}", usage));

  if (argc <= 1) {
    fmt::print(stderr, "{}", app.help());
    return 1;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    fmt::print(stderr, "mmfs-geom: {}\nRun 'mmfs-geom --help' for usage.\n", e.what());
    return 1;
  }

  if (app.count("geometry") == 0) {
    fmt::print(stderr, "mmfs-geom: a geometry (PROFILE|FILE.json) is required before the subcommand\n"
                       "Run 'mmfs-geom --help' for usage.\n");
    return 1;
  }
  const std::unique_ptr<Geometry> geom = load(source);

  if (info->parsed()) {
    fmt::print("{}\n", geom->info().dump(2));
  } else if (boundaries->parsed()) {
    const auto b = geom->track_boundaries(parse_arg<Lbn>(bnd_lbn, "LBN"));
    fmt::print("{} {}\n", b.low, b.high);
  } else if (adjacent->parsed()) {
    const Lbn lbn = parse_arg<Lbn>(adj_lbn, "LBN");
    const auto step = parse_arg<std::uint32_t>(adj_step, "STEP");
    fmt::print("{}\n", geom->adjacent(lbn, step));
  } else if (equivalent->parsed()) {
    std::string out;
    for (Lbn l : geom->equivalent(parse_arg<Lbn>(eq_lbn, "LBN"))) out += fmt::format("{}\n", l);
    std::fputs(out.c_str(), stdout);
  } else if (quadrangle->parsed()) {
    const auto q = geom->quadrangle(parse_arg<std::uint32_t>(quad_block, "block size B"));
    fmt::print("{}\n", mmfs::geom::to_json(q).dump());
  } else if (time->parsed()) {
    run_time(*geom, time_file);
  }

  if (std::fflush(stdout) != 0 || std::ferror(stdout))
    throw UsageError(fmt::format("error writing output: {}", std::strerror(errno)));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const GeometryError& e) {  // unknown profile, bad field, LBN or step out of range
    fmt::print(stderr, "mmfs-geom: {}\n", e.what());
  } catch (const std::exception& e) {  // UsageError, JSON, I/O
    fmt::print(stderr, "mmfs-geom: {}\n", e.what());
  }
  return 1;
}
