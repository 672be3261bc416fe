#include "bench/free_bandwidth_bench.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>

#include "geometry/load.h"
#include "geometry/memstore.h"

namespace mmfs::bench {
namespace {

// Table 4 and §5.1 of the MEMS paper: minutes to scan 95 % and 100 % of the G2
// MEMStore for free, and the free LBNs per request over the first 95 % (stated
// for M = 0 only).
struct PaperRow {
  std::uint32_t p, M;
  double min_mark, min_full;
  double free_per_request;  // NaN: not stated
};
constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
constexpr PaperRow kPaper[] = {
    {10, 0, 1120, 3375, 6.3},
    {20, 0, 781, 2290, 11},
    {10, 5, 940, 1742, kNone},
    {20, 5, 556, 878, kNone},
};
constexpr double kCalibrationMinutes = 1120;  // p = 10, M = 0 at 95 %

const PaperRow* paper(std::uint32_t p, std::uint32_t M) {
  for (const PaperRow& r : kPaper)
    if (r.p == p && r.M == M) return &r;
  return nullptr;
}

std::string num(double v, const char* fmt_spec = "{:.0f}") {
  return std::isnan(v) ? std::string("–") : fmt::format(fmt::runtime(fmt_spec), v);
}

std::string grouped(std::uint64_t v) {
  std::string s = std::to_string(v), out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

const FreeBandwidthRow* find(const FreeBandwidthReport& r, std::uint32_t p, std::uint32_t M) {
  for (const FreeBandwidthRow& row : r.rows)
    if (row.result.params.p == p && row.result.params.M == M) return &row;
  return nullptr;
}

double minutes(const FreeBandwidthReport& r, std::uint64_t requests) { return double(requests) / r.rate / 60.0; }

}  // namespace

FreeBandwidthReport run_free_bandwidth(const FreeBandwidthOptions& opt) {
  if (opt.p.empty() || opt.M.empty()) throw std::invalid_argument("freebw: give at least one p and one M");
  if (!(opt.rate >= 0.0) || std::isinf(opt.rate)) throw std::invalid_argument("freebw: --rate must be positive");
  auto g = geom::load_geometry(opt.profile);
  const auto* mems = dynamic_cast<const geom::MemStore*>(g.get());
  if (!mems) throw std::invalid_argument(fmt::format("freebw: profile '{}' is not a MEMS geometry", opt.profile));
  geom::MemsParams base = mems->params();
  if (opt.quick) base.Sx = std::min<std::uint32_t>(base.Sx, 100);

  FreeBandwidthReport report;
  report.options = opt;
  const auto t0 = std::chrono::steady_clock::now();
  auto run = [&](std::uint32_t p, std::uint32_t M, bool calibration_only) {
    geom::MemsParams mp = base;
    mp.p = p;
    mp.M = M;
    geom::FreeScanOptions so;
    so.one_column_per_square = opt.one_column_per_square;
    so.align = opt.align;
    FreeBandwidthRow row;
    row.calibration_only = calibration_only;
    const auto s = std::chrono::steady_clock::now();
    row.result = geom::simulate_free_scan(mp, opt.seed, so);
    row.host_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - s).count();
    report.rows.push_back(std::move(row));
  };
  for (std::uint32_t p : opt.p)
    for (std::uint32_t M : opt.M)
      if (!find(report, p, M)) run(p, M, false);

  if (opt.rate > 0.0) {
    report.rate = opt.rate;
    report.rate_source = "given with --rate";
  } else {
    if (!find(report, 10, 0)) run(10, 0, true);
    report.rate = double(find(report, 10, 0)->result.requests_mark) / (kCalibrationMinutes * 60.0);
    report.rate_source =
        "calibrated: the one rate at which p = 10, M = 0 reaches 95 % at the paper's 1120 minutes (the paper "
        "does not state its foreground rate)";
  }
  report.host_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

std::string FreeBandwidthReport::markdown() const {
  const geom::MemsParams& d = rows.front().result.params;
  std::string md = "# Free bandwidth on a MEMStore: the MEMS paper's §5.1 (Figure 4, Table 4)\n\n";
  md += fmt::format(
      "Device: `{}`{} — N = {} squares, Sx = {}, Sy = {}, {} LBNs of {} bytes; p and M as in each row "
      "(Nx = p, Ny = N/p). Foreground: uniformly random 4 KB reads (8 sectors, start uniform over {}), "
      "one per batch. Background: in every row pass the foreground needs, the free slots (p per "
      "pass minus the foreground's sectors) are filled with untouched LBNs of that pass's equivalence class "
      "(its column ± M, one column per square and pass{}), nearest column first; no service-time prediction "
      "(`geometry/free_bandwidth.h`). Seed {}.\n\n",
      options.profile, options.quick ? " shrunk to 100 cylinders (--quick: the minutes are not the paper's device)" : "",
      d.N, d.Sx, d.Sy, grouped(rows.front().result.capacity), d.sector_size,
      options.align == 1 ? std::string("the device") : fmt::format("the multiples of {} sectors", options.align),
      options.one_column_per_square ? "" : " — rule off: --any-column", options.seed);
  md += fmt::format("**Foreground rate: {:.3f} requests/s ({:.1f} ms between requests)**, {}. Every minute "
                    "figure below is requests / this rate; the request counts and the ratios do not depend on "
                    "it.\n\n",
                    rate, 1000.0 / rate, rate_source);

  md += "| p | M | requests to 95 % | requests to 100 % | 95 %: min | paper | ratio | 100 %: min | paper | ratio "
        "| free LBNs/request (first 95 %) | paper | host s |\n";
  md += "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const FreeBandwidthRow& row : rows) {
    const geom::FreeScanResult& r = row.result;
    const PaperRow* pp = paper(r.params.p, r.params.M);
    const double m95 = minutes(*this, r.requests_mark), m100 = minutes(*this, r.requests_full);
    const double p95 = pp ? pp->min_mark : kNone, p100 = pp ? pp->min_full : kNone;
    md += fmt::format("| {} | {}{} | {} | {} | {:.0f} | {} | {} | {:.0f} | {} | {} | {:.2f} | {} | {:.2f} |\n",
                      r.params.p, r.params.M, row.calibration_only ? " (calibration)" : "",
                      grouped(r.requests_mark), grouped(r.requests_full), m95, num(p95), num(m95 / p95, "{:.2f}"),
                      m100, num(p100), num(m100 / p100, "{:.2f}"), r.free_per_request_mark(),
                      num(pp ? pp->free_per_request : kNone, "{:.1f}"), row.host_seconds);
  }

  // Rate-independent ratios.
  struct Ratio {
    std::string what;
    double measured, paper;
  };
  std::vector<Ratio> ratios;
  for (const FreeBandwidthRow& row : rows) {
    const geom::FreeScanResult& r = row.result;
    const PaperRow* pp = paper(r.params.p, r.params.M);
    ratios.push_back({fmt::format("100 % / 95 %, p = {}, M = {}", r.params.p, r.params.M),
                      double(r.requests_full) / double(r.requests_mark), pp ? pp->min_full / pp->min_mark : kNone});
  }
  auto pair = [&](std::uint32_t p1, std::uint32_t m1, std::uint32_t p0, std::uint32_t m0, const char* label) {
    const FreeBandwidthRow *a = find(*this, p1, m1), *b = find(*this, p0, m0);
    if (!a || !b) return;
    const PaperRow *pa = paper(p1, m1), *pb = paper(p0, m0);
    ratios.push_back({fmt::format("{} at 95 %", label), double(a->result.requests_mark) / double(b->result.requests_mark),
                      pa && pb ? pa->min_mark / pb->min_mark : kNone});
    ratios.push_back({fmt::format("{} at 100 %", label),
                      double(a->result.requests_full) / double(b->result.requests_full),
                      pa && pb ? pa->min_full / pb->min_full : kNone});
  };
  pair(20, 0, 10, 0, "p = 20 / p = 10, M = 0");
  pair(20, 5, 10, 5, "p = 20 / p = 10, M = 5");
  pair(10, 5, 10, 0, "M = 5 / M = 0, p = 10");
  pair(20, 5, 20, 0, "M = 5 / M = 0, p = 20");
  md += "\nRatios (independent of the foreground rate):\n\n| ratio | measured | paper | measured / paper |\n"
        "|---|---:|---:|---:|\n";
  for (const Ratio& r : ratios)
    md += fmt::format("| {} | {:.2f} | {} | {} |\n", r.what, r.measured, num(r.paper, "{:.2f}"),
                      num(r.measured / r.paper, "{:.2f}"));

  // Figure 4: minutes to scan a fraction of the device.
  md += "\nFigure 4 (minutes at the rate above to scan a fraction of the device):\n\n| p | M |";
  const std::uint32_t marks[] = {10, 25, 50, 75, 90, 95, 99, 100};
  for (std::uint32_t m : marks) md += fmt::format(" {} % |", m);
  md += "\n|---:|---:|";
  for (std::size_t i = 0; i < std::size(marks); ++i) md += "---:|";
  md += "\n";
  for (const FreeBandwidthRow& row : rows) {
    const geom::FreeScanResult& r = row.result;
    md += fmt::format("| {} | {} |", r.params.p, r.params.M);
    for (std::uint32_t m : marks) {
      const std::size_t i = std::size_t(m) * r.curve.size() / 100;
      md += i > 0 && i <= r.curve.size() ? fmt::format(" {:.0f} |", minutes(*this, r.curve[i - 1])) : " – |";
    }
    md += "\n";
  }
  md += fmt::format("\nHost time: {:.1f} s in all (one core).", host_seconds);
  if (!options.command.empty()) md += fmt::format(" Command: `{}`.", options.command);
  md += "\n";
  return md;
}

nlohmann::json FreeBandwidthReport::json() const {
  nlohmann::json j;
  j["schema"] = "mmfs-bench-freebw/1";
  j["profile"] = options.profile;
  j["quick"] = options.quick;
  j["seed"] = options.seed;
  j["one_column_per_square"] = options.one_column_per_square;
  j["request_sectors"] = 8;
  j["align_sectors"] = options.align;
  j["rate_requests_per_s"] = rate;
  j["rate_source"] = rate_source;
  j["host_seconds"] = host_seconds;
  if (!options.command.empty()) j["command"] = options.command;
  nlohmann::json out = nlohmann::json::array();
  for (const FreeBandwidthRow& row : rows) {
    const geom::FreeScanResult& r = row.result;
    const PaperRow* pp = paper(r.params.p, r.params.M);
    nlohmann::json e = {{"p", r.params.p},
                        {"M", r.params.M},
                        {"N", r.params.N},
                        {"Sx", r.params.Sx},
                        {"Sy", r.params.Sy},
                        {"capacity_lbns", r.capacity},
                        {"calibration_only", row.calibration_only},
                        {"requests_95", r.requests_mark},
                        {"requests_100", r.requests_full},
                        {"minutes_95", minutes(*this, r.requests_mark)},
                        {"minutes_100", minutes(*this, r.requests_full)},
                        {"free_lbns_per_request_95", r.free_per_request_mark()},
                        {"granted_95", r.granted_mark},
                        {"granted_100", r.granted_full},
                        {"foreground_touched", r.foreground_touched},
                        {"row_passes_100", r.passes_full},
                        {"curve_requests_per_percent", r.curve},
                        {"host_seconds", row.host_seconds}};
    if (pp) {
      e["paper"] = {{"minutes_95", pp->min_mark}, {"minutes_100", pp->min_full}};
      if (!std::isnan(pp->free_per_request)) e["paper"]["free_lbns_per_request_95"] = pp->free_per_request;
    }
    out.push_back(std::move(e));
  }
  j["rows"] = std::move(out);
  return j;
}

void write_free_bandwidth(const FreeBandwidthReport& report, const std::string& dir) {
  std::filesystem::create_directories(dir);
  const std::filesystem::path d(dir);
  std::ofstream(d / "mmfs-bench-freebw.md") << report.markdown();
  std::ofstream(d / "mmfs-bench-freebw.json") << report.json().dump(1) << "\n";
}

}  // namespace mmfs::bench
