#include "bench/atropos_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <vector>

#include "geometry/load.h"
#include "geometry/striped.h"
#include "geometry/zoned_disk.h"
#include "layouts/io_plan.h"
#include "layouts/quadrangle_array.h"
#include "layouts/selection.h"

namespace mmfs::bench {
namespace {

using geom::Lbn;
using geom::Request;

// The paper's Table 2 rows for the disks mmfs has profiles of.
struct PaperRow {
  const char* profile;
  const char* disk;
  std::uint32_t Dmax, b, R;
};
constexpr PaperRow kTable2[] = {{"atlas10k3", "Maxtor Atlas 10K III (2002)", 5, 26, 10},
                                {"cheetah36es", "Seagate Cheetah 36ES (2001)", 6, 7, 3}};

double pct(double value, double reference) { return 100.0 * (value - reference) / reference; }

// A model placed at a random LBN of [lo, hi) at a random rotational phase:
// where a random earlier request left the head.
class Sampler {
 public:
  Sampler(const geom::Geometry& g, Lbn lo, Lbn hi, std::uint64_t seed)
      : g_(g), model_(g.make_service_model()), rng_(seed), lo_(lo), hi_(hi) {}
  geom::ServiceTimeModel& model() { return *model_; }
  std::mt19937_64& rng() { return rng_; }
  Lbn random_lbn(Lbn lo, Lbn hi) { return std::uniform_int_distribution<Lbn>(lo, hi - 1)(rng_); }
  void randomize(double revolution_ms) {
    model_->reset();
    model_->place_at(random_lbn(lo_, hi_));
    model_->idle(std::uniform_real_distribution<double>(0, revolution_ms)(rng_));
  }

 private:
  const geom::Geometry& g_;
  std::unique_ptr<geom::ServiceTimeModel> model_;
  std::mt19937_64 rng_;
  Lbn lo_, hi_;
};

double revolution_ms(const geom::Geometry& g) {
  const auto* disk = dynamic_cast<const geom::ZonedDisk*>(&g);
  return disk ? 60000.0 / disk->params().rpm : 0;
}

// ---- Table 2 ---------------------------------------------------------------

nlohmann::json table2(std::string& md) {
  md += "## Table 2: quadrangle parameters of each disk profile's outermost zone\n\n"
        "`Geometry::quadrangle(1)` (Eq. 1-5 for the zone of LBN 0, d = Dmax) beside the paper's row for the "
        "same disk.\n\n"
        "| profile | N | H | Dmax | b | R | residual | paper disk | paper Dmax, b, R | match |\n"
        "|---|---:|---:|---:|---:|---:|---:|---|---|---|\n";
  nlohmann::json rows = nlohmann::json::array();
  for (const std::string& name : geom::profile_names()) {
    auto g = geom::load_geometry(name);
    if (g->kind() != geom::DeviceKind::Disk) continue;
    const auto q = g->quadrangle(1);
    const PaperRow* paper = nullptr;
    for (const auto& r : kTable2)
      if (name == r.profile) paper = &r;
    const bool match = paper && q.Dmax == paper->Dmax && q.b == paper->b && q.R == paper->R;
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {:.2f} % | {} | {} | {} |\n", name, q.N, q.H, q.Dmax, q.b, q.R,
                      100.0 * q.R / q.N, paper ? paper->disk : "(not in Table 2)",
                      paper ? fmt::format("{}, {}, {}", paper->Dmax, paper->b, paper->R) : "-",
                      paper ? (match ? "exact" : "differs") : "-");
    nlohmann::json row = geom::to_json(q);
    row.update({{"profile", name}, {"residual_fraction", double(q.R) / q.N}});
    if (paper) row["paper"] = {{"disk", paper->disk}, {"Dmax", paper->Dmax}, {"b", paper->b}, {"R", paper->R}};
    rows.push_back(row);
  }
  md += "\n";
  return rows;
}

// A 2-D array of `cell_bytes`-byte cells in the quadrangle layout, K rows per
// quadrangle column, placed at the start of its zone.
struct QuadArray {
  std::unique_ptr<layouts::QuadrangleArrayLayout> layout;
  QuadArray(const geom::Geometry& g, std::vector<std::uint64_t> shape, std::uint32_t cell_bytes,
            std::vector<std::uint64_t> depth_cube) {
    layouts::CellGrid grid(std::move(shape), cell_bytes, {1, 1}, {1, 0});
    layout = std::make_unique<layouts::QuadrangleArrayLayout>(g, std::move(grid), std::move(depth_cube));
    const auto req = layout->space();
    layout->place(layouts::allocate_linear(g, req, layout->zone_first_lbn()));
  }
};

// ---- Figure 7 --------------------------------------------------------------

// Average response time of `make(sampler)`'s batches served as one batch
// (sequential = false) or one request after another.
template <class Make>
double average_ms(Sampler& s, double rev, std::uint32_t samples, bool one_by_one, Make&& make) {
  double total = 0;
  for (std::uint32_t i = 0; i < samples; ++i) {
    std::vector<Request> batch = make();
    s.randomize(rev);
    if (one_by_one)
      for (const Request& r : batch) total += s.model().serve_one(r);
    else
      total += s.model().serve(batch);
  }
  return total / samples;
}

// Appendix A's T_zl(N, K): revolutions to read K <= N sectors of one track
// from a random rotational position with zero-latency firmware.
double t_zl(double N, double K) { return (N - K + 1) * (N + K) / (2 * N * N) + (K - 1) / N; }

// Line (2) through the layout and the planner: a 2-D array in the
// quadrangle layout whose cells are S/d sectors, d rows per quadrangle column
// (depth cube {d, 1}); one read is the d cells of a random column of a random
// quadrangle, planned by plan_cells as the daemon plans it. Returns the mean
// response in ms, or -1 when the layout cannot take d rows of such cells (S
// past the one-revolution constraint: Dmax(S/d) < d).
double quadrangle_column_ms(const geom::Geometry& g, Sampler& s, double rev, std::uint32_t samples,
                            std::uint32_t d, std::uint32_t piece_sectors, nlohmann::json* layout) {
  std::unique_ptr<QuadArray> a;
  try {
    a = std::make_unique<QuadArray>(g, std::vector<std::uint64_t>{std::uint64_t(d) * 32, 96},
                                    piece_sectors * g.sector_size(), std::vector<std::uint64_t>{d, 1});
  } catch (const std::exception&) {
    return -1;
  }
  *layout = a->layout->describe();
  const std::uint64_t rows = a->layout->grid().shape()[0], cols = a->layout->grid().shape()[1];
  double total = 0;
  for (std::uint32_t i = 0; i < samples; ++i) {
    const std::uint64_t r0 = std::uniform_int_distribution<std::uint64_t>(0, rows / d - 1)(s.rng()) * d;
    const std::uint64_t c = std::uniform_int_distribution<std::uint64_t>(0, cols - 1)(s.rng());
    std::vector<std::uint64_t> cells;
    for (std::uint32_t r = 0; r < d; ++r) cells.insert(cells.end(), {r0 + r, c});
    const auto plan = layouts::plan_cells(*a->layout, cells, std::uint64_t(d) * piece_sectors * g.sector_size());
    s.randomize(rev);
    total += layouts::serve_plan(plan, s.model());
  }
  return total / samples;
}

nlohmann::json figure7(const geom::Geometry& g, const AtroposBenchOptions& o, std::string& md) {
  const double rev = revolution_ms(g);
  const auto zone = g.zone_bounds(0);
  const std::uint32_t N = std::uint32_t(g.track_length(0));
  const std::uint32_t H = g.quadrangle(1).H;
  const std::uint64_t tracks = zone.length() / N;
  Sampler s(g, zone.low, zone.high + 1, o.seed);
  constexpr std::uint32_t d = 4;
  // The one-revolution constraint (Eq. 1): d pieces and d-1 head switches fit one revolution.
  const std::uint32_t bmax = (N + H) / d - H;
  const double one_rev_bound = double(bmax) * d * g.sector_size() / 1024.0;
  md += fmt::format(
      "## Figure 7: access efficiency against I/O size ({}, outermost zone: N = {} sectors, H = {}, {:.2f} ms a "
      "revolution)\n\n"
      "Efficiency = media transfer time of the data (S/N revolutions) / response time, requests at random "
      "positions of the zone from a random head position. (1) track-based: S sectors from a random track start "
      "(traxtent). (2) quadrangle, d = {}: S/{} sectors on each of {} consecutive tracks served as one batch. Up to "
      "the one-revolution constraint it runs through the layout and the planner: a 2-D array of S/{}-sector "
      "cells in `user.mmfs.layout=quadrangle` (depth cube {{{}, 1}}), one read = the {} cells of a random "
      "quadrangle column, planned by `plan_cells`; past it (the layout refuses a depth beyond Dmax) row r's piece "
      "is placed by hand r pieces further along its track (§3.2.2's slot rotation). (3) naive: the same {} "
      "pieces at random offsets of the {} tracks, one after another. Eq. 7: the paper's model of (2), "
      "T_zl(N, S + (d-1)H), with the positioning time this model measures for (1) (its response less "
      "T_zl(N, S)). Maximal streaming efficiency (Eq. 6) N/(N+H) = {:.2f} (paper: 0.82).\n\n"
      "| I/O size | (1) track-based | (2) quadrangle d=4 | (2) via | ring closes | Eq. 7 | (2) vs Eq. 7 | "
      "(3) naive d=4 | (1) ms | (2) ms | (3) ms |\n"
      "|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|\n",
      g.name(), N, H, rev, d, d, d, d, d, d, d, d, double(N) / (N + H));
  nlohmann::json rows = nlohmann::json::array();
  double knee_kb = 0;
  for (std::uint32_t kb : {4u, 8u, 16u, 32u, 48u, 64u, 80u, 96u, 112u, 128u, 134u, 192u, 256u, 343u, 384u, 512u,
                           686u}) {
    const std::uint32_t S = std::max<std::uint32_t>(d, kb * 1024 / g.sector_size() / d * d);
    const std::uint32_t piece = std::min(S / d, N);
    const double transfer = double(S) / N * rev;
    const double t1 = average_ms(s, rev, o.samples, false, [&] {
      const Lbn t = s.random_lbn(0, tracks - 2);
      return std::vector<Request>{{zone.low + t * N, S}};
    });
    nlohmann::json layout;
    double t2 = piece <= bmax ? quadrangle_column_ms(g, s, rev, o.samples, d, piece, &layout) : -1;
    const bool via_layout = t2 >= 0;
    // The pieces' spacing along the track: the layout's block b (Eq. 3 fills the revolution), or the piece.
    const std::uint32_t spacing = via_layout ? layout.at("b").get<std::uint32_t>() : piece;
    // The ring closes — a batch entered at any piece comes round to the first again without waiting — when the
    // switch from the last track back to the first fits the revolution too: d-1 spacings, a piece, d switches.
    const bool ring = std::uint64_t(d - 1) * spacing + piece + std::uint64_t(d) * H <= N;
    if (!via_layout)
      t2 = average_ms(s, rev, o.samples, false, [&] {
        // A quadrangle's d tracks start at a multiple of d in the zone (§3.1), as the layout's stripes do.
        const Lbn t = s.random_lbn(0, tracks / d - 1) * d;
        const std::uint32_t col = std::uint32_t(s.random_lbn(0, N));
        std::vector<Request> b;
        for (std::uint32_t r = 0; r < d; ++r) {
          const std::uint32_t at = std::uint32_t((col + std::uint64_t(r) * piece) % N);
          const std::uint32_t first = std::min(piece, N - at);
          b.push_back({zone.low + (t + r) * N + at, first});
          if (first < piece) b.push_back({zone.low + (t + r) * N, piece - first});  // wraps to the track's start
        }
        return b;
      });
    const double t3 = average_ms(s, rev, o.samples, true, [&] {
      const Lbn t = s.random_lbn(0, tracks - d - 1);
      std::vector<Request> b;
      for (std::uint32_t r = 0; r < d; ++r) {
        const std::uint32_t off = std::uint32_t(s.random_lbn(0, N - piece + 1));
        b.push_back({zone.low + (t + r) * N + off, piece});
      }
      return b;
    });
    // Eq. 7 holds within the one-revolution constraint only (S + (d-1)H <= N).
    const double K = double(S) + double(d - 1) * H;
    const double positioning = t1 - t_zl(N, std::min<double>(S, N)) * rev;
    const double eq7_ms = K <= N ? positioning + t_zl(N, K) * rev : -1;
    const double bytes_kb = double(S) * g.sector_size() / 1024.0;
    if (piece <= bmax) knee_kb = bytes_kb;
    md += fmt::format("| {:.0f} KB | {:.3f} | {:.3f} | {} | {} | {} | {} | {:.3f} | {:.2f} | {:.2f} | {:.2f} |\n",
                      bytes_kb, transfer / t1, transfer / t2, via_layout ? "layout" : "by hand", ring ? "yes" : "no",
                      eq7_ms > 0 ? fmt::format("{:.3f}", transfer / eq7_ms) : "-",
                      eq7_ms > 0 ? fmt::format("{:+.1f} %", pct(transfer / t2, transfer / eq7_ms)) : "-",
                      transfer / t3, t1, t2, t3);
    nlohmann::json row = {{"io_kb", bytes_kb},       {"track_based", transfer / t1}, {"quadrangle", transfer / t2},
                          {"naive", transfer / t3},  {"track_based_ms", t1},         {"quadrangle_ms", t2},
                          {"naive_ms", t3},          {"quadrangle_via_layout", via_layout},
                          {"ring_closes", ring}};
    if (eq7_ms > 0) row["eq7"] = transfer / eq7_ms, row["eq7_ms"] = eq7_ms;
    if (via_layout) row["layout"] = layout;
    rows.push_back(row);
  }
  md += fmt::format(
      "\nOne-revolution constraint for d = {}: pieces of at most (N+H)/d - H = {} sectors, S <= {:.0f} KB "
      "(paper: 124 KB); the largest size measured within it: {:.0f} KB.\n\n"
      "Where (2) leaves Eq. 7: the paper's model (and its remark that no rotational latency follows "
      "\"regardless of which request was serviced first\") counts d-1 head switches, as if the batch were one "
      "zero-latency track of S + (d-1)H sectors. A head that lands inside the quadrangle and starts at piece k "
      "must switch back from the last track to the first for pieces 0..k-1. That d-th switch fits the revolution "
      "only when (d-1) x spacing + S/d + dH <= N (\"ring closes\"; the layout spaces a column's pieces one block "
      "b apart, and Eq. 3 grows b to fill the revolution: b = 26 at d = 5 for cells up to 26 sectors, b = 67 at "
      "d = 4 beyond). Where it closes (2) tracks Eq. 7; where it does not, the disk either waits for piece 0 or "
      "comes round once more, so (2) falls below Eq. 7: the model charges the return switch (its head switch, "
      "1.0 ms here), and the firmware's greedy SPTF enters at the nearest piece.\n\n",
      d, bmax, one_rev_bound, knee_kb);
  return {{"rows", rows},
          {"one_revolution_kb", one_rev_bound},
          {"paper_one_revolution_kb", 124},
          {"max_streaming_efficiency", double(N) / (N + H)},
          {"paper_max_streaming_efficiency", 0.82}};
}

// ---- Figure 8 --------------------------------------------------------------


nlohmann::json figure8(const geom::Geometry& g, const AtroposBenchOptions& o, std::string& md) {
  const double rev = revolution_ms(g);
  const auto zone = g.zone_bounds(0);
  Sampler s(g, zone.low, zone.high + 1, o.seed + 8);
  const std::uint32_t ss = g.sector_size();
  const std::uint32_t sectors8k = 8192 / ss;
  const double contiguous = average_ms(s, rev, o.samples, false, [&] {
    return std::vector<Request>{{s.random_lbn(zone.low, zone.high + 1 - sectors8k), sectors8k}};
  });
  nlohmann::json out = {{"contiguous_ms", contiguous}, {"paper_contiguous_ms", 5.93}};
  md += fmt::format(
      "## Figure 8: a random 8 KB read ({}, outermost zone)\n\n"
      "Contiguous: 8 KB at a random LBN. Quadrangle d: the record is d cells of 8 KB/d in one quadrangle column "
      "of a 2-D array in the quadrangle layout (`QuadrangleArrayLayout`, depth cube d rows), planned by "
      "`plan_cells` exactly as the daemon plans a read, the plan's batch served from a random head position. "
      "Naive d: d pieces of 8 KB/d at random offsets of d consecutive tracks, one after another. Paper: 5.93 ms "
      "contiguous, +16 % (d = 2), +38 % (d = 4).\n\n"
      "| access | mmfs (ms) | vs contiguous | paper (ms) | paper vs contiguous | difference |\n"
      "|---|---:|---:|---:|---:|---:|\n"
      "| contiguous | {:.2f} | | 5.93 | | {:+.1f} % |\n",
      g.name(), contiguous, pct(contiguous, 5.93));
  for (std::uint32_t d : {2u, 4u}) {
    const std::uint32_t cell = 8192 / d;
    // Columns: enough rows for many quadrangles; the primary (dim 1) one quadrangle row wide at least.
    QuadArray a(g, {std::uint64_t(d) * 64, 256}, cell, {d, 1});
    const std::uint64_t rows = a.layout->grid().shape()[0], cols = a.layout->grid().shape()[1];
    double quad = 0;
    std::uint64_t batches = 0;
    for (std::uint32_t i = 0; i < o.samples; ++i) {
      const std::uint64_t r0 = std::uniform_int_distribution<std::uint64_t>(0, rows / d - 1)(s.rng()) * d;
      const std::uint64_t c = std::uniform_int_distribution<std::uint64_t>(0, cols - 1)(s.rng());
      std::vector<std::uint64_t> cells;
      for (std::uint32_t r = 0; r < d; ++r) cells.insert(cells.end(), {r0 + r, c});
      auto plan = layouts::plan_cells(*a.layout, cells, 8192);
      batches += plan.batches.size();
      s.randomize(rev);
      quad += layouts::serve_plan(plan, s.model());
    }
    quad /= o.samples;
    const double naive = average_ms(s, rev, o.samples, true, [&] {
      const std::uint64_t tracks = zone.length() / g.track_length(0);
      const Lbn t = s.random_lbn(0, tracks - d - 1);
      const std::uint32_t piece = sectors8k / d;
      std::vector<Request> b;
      for (std::uint32_t r = 0; r < d; ++r)
        b.push_back({zone.low + (t + r) * g.track_length(0) + s.random_lbn(0, g.track_length(0) - piece), piece});
      return b;
    });
    const double paper_pct = d == 2 ? 16 : 38;
    const double paper_ms = 5.93 * (1 + paper_pct / 100);
    md += fmt::format("| quadrangle d = {} | {:.2f} | {:+.1f} % | {:.2f} | +{:.0f} % | {:+.1f} % |\n", d, quad,
                      pct(quad, contiguous), paper_ms, paper_pct, pct(quad, paper_ms));
    md += fmt::format("| naive d = {} | {:.2f} | {:+.1f} % | | | |\n", d, naive, pct(naive, contiguous));
    out[fmt::format("quadrangle_d{}", d)] = {{"ms", quad},
                                             {"vs_contiguous_pct", pct(quad, contiguous)},
                                             {"paper_ms", paper_ms},
                                             {"paper_vs_contiguous_pct", paper_pct},
                                             {"difference_pct", pct(quad, paper_ms)},
                                             {"batches_per_read", double(batches) / o.samples},
                                             {"layout", a.layout->describe()}};
    out[fmt::format("naive_d{}", d)] = {{"ms", naive}, {"vs_contiguous_pct", pct(naive, contiguous)}};
  }
  md += "\n";
  return out;
}

// ---- §5.3 ------------------------------------------------------------------

nlohmann::json stripe_units(const geom::Geometry& g, const AtroposBenchOptions& o, double gap_ms, std::string& md) {
  constexpr std::uint32_t p = 4;
  const std::uint32_t ss = g.sector_size();
  const std::uint32_t N = std::uint32_t(g.track_length(0));
  const std::uint64_t total = o.scan_mib << 20;
  struct Unit {
    std::string name;
    std::uint32_t sectors;
  };
  const std::vector<Unit> units = {{"64K-RAID (64 KiB)", 65536 / ss},
                                   {"Approximate-RAID (256 KiB)", 262144 / ss},
                                   {fmt::format("Atropos-RAID (one track, {} KiB)", N * ss / 1024.0), N}};
  md += fmt::format(
      "## §5.3: track-sized stripe units ({} x {}, RAID 0, outermost zone), host gap {} ms\n\n"
      "A sequential scan of {} MiB cut into stripe-unit-sized I/Os, unit i on disk i mod {} at disk offset "
      "(i / {}) units from the zone's start; each disk serves its I/Os one after another, the next arriving {} ms "
      "after the previous one completed (the host's turnaround; the platter turns meanwhile), the model's "
      "command overhead and zero-latency firmware included; the volume takes as long as its slowest disk. Paper: the "
      "exact track is 2-23 % faster than 256 KiB per TPC-H query (Figure 10).\n\n"
      "| stripe unit | I/Os per disk | scan (ms) | MB/s | speedup vs 64K | vs 256K |\n|---|---:|---:|---:|---:|---:|\n",
      p, g.name(), gap_ms, o.scan_mib, p, p, gap_ms);
  nlohmann::json rows = nlohmann::json::array();
  std::vector<double> times;
  for (const Unit& u : units) {
    const std::uint64_t ios = (total / ss + u.sectors - 1) / u.sectors;
    double slowest = 0;
    for (std::uint32_t disk = 0; disk < p; ++disk) {
      auto model = g.make_service_model();
      model->reset();
      double ms = 0;
      for (std::uint64_t i = disk, k = 0; i < ios; i += p, ++k) {
        if (k && gap_ms > 0) {
          model->idle(gap_ms);
          ms += gap_ms;
        }
        ms += model->serve_one({k * u.sectors, u.sectors});
      }
      slowest = std::max(slowest, ms);
    }
    times.push_back(slowest);
    rows.push_back({{"unit", u.name}, {"unit_sectors", u.sectors}, {"ms", slowest},
                    {"mb_per_s", double(total) / 1e6 / (slowest / 1000)}});
  }
  for (std::size_t i = 0; i < units.size(); ++i) {
    rows[i]["speedup_vs_64k"] = times[0] / times[i];
    rows[i]["speedup_vs_256k"] = times[1] / times[i];
    md += fmt::format("| {} | {} | {:.0f} | {:.1f} | {:.3f} | {:.3f} |\n", units[i].name,
                      ((total / ss + units[i].sectors - 1) / units[i].sectors + p - 1) / p, times[i],
                      double(total) / 1e6 / (times[i] / 1000), times[0] / times[i], times[1] / times[i]);
  }
  md += fmt::format("\nThe exact track over 256 KiB: {:+.1f} % (paper: +2 to +23 %).\n\n", 100 * (times[1] / times[2] - 1));
  return {{"host_gap_ms", gap_ms}, {"rows", rows}, {"track_vs_256k_pct", 100 * (times[1] / times[2] - 1)}};
}

// ---- Scaling ---------------------------------------------------------------

nlohmann::json scaling(const AtroposBenchOptions& o, std::string& md) {
  // A 2-D float32 array of array_mib: (rows, cols) with cols the primary dimension.
  const std::uint64_t elements = (o.array_mib << 20) / 4;
  const std::uint64_t cols = 16384, rows = elements / cols;
  md += fmt::format(
      "## Scaling: a {} MiB array on 1, 2 and 4 members ({}, quadrangle layout)\n\n"
      "float32 {} x {}, dimension 1 primary, cells as `user.mmfs.layout=quadrangle` picks them; planned by "
      "`plan_selection` as the daemon plans views (on several members the r-th batch of every member joins one "
      "batch) and served by the striped model (members in parallel, the batch done when the slowest member is). "
      "Primary scan: rows 0..{} whole (1/16 of the array), along the primary dimension. Other dimension: the "
      "slice `A@/slice/1/J` (one element of every row), J random, averaged over 8.\n\n"
      "| members | primary scan (ms) | MB/s | speed-up | other-dim slice (ms) | speed-up | batches |\n"
      "|---:|---:|---:|---:|---:|---:|---:|\n",
      o.array_mib, o.profile, rows, cols, rows / 16);
  nlohmann::json out = nlohmann::json::array();
  double base_scan = 0, base_slice = 0;
  for (std::uint32_t p : {1u, 2u, 4u}) {
    auto g = std::make_unique<geom::StripedGeometry>(geom::load_geometry(o.profile), p);
    const std::vector<std::uint64_t> shape = {rows, cols};
    const std::vector<std::uint32_t> order = {1, 0};
    auto cell = layouts::CellGrid::default_cell(shape, 4, layouts::CellGrid::default_cell_bytes(g->sector_size()), order);
    layouts::QuadrangleArrayLayout layout(*g, layouts::CellGrid(shape, 4, cell, order));
    layout.place(layouts::allocate_linear(*g, layout.space(), layout.zone_first_lbn()));
    const std::vector<std::uint64_t> lo = {0, 0}, hi = {rows / 16, cols};
    auto scan = layouts::plan_selection(layout, layouts::Selection::box(lo, hi));
    const double scan_ms = layouts::model_plan(scan, *g);
    double slice_ms = 0;
    std::uint64_t slice_batches = 0;
    std::mt19937_64 rng(o.seed);
    for (int i = 0; i < 8; ++i) {
      const std::uint64_t j = std::uniform_int_distribution<std::uint64_t>(0, cols - 1)(rng);
      auto plan = layouts::plan_selection(layout, layouts::Selection::slice(shape, 1, j));
      slice_ms += layouts::model_plan(plan, *g) / 8;
      slice_batches = plan.batches.size();
    }
    if (p == 1) base_scan = scan_ms, base_slice = slice_ms;
    const double mb = double(rows / 16 * cols * 4) / 1e6;
    md += fmt::format("| {} | {:.1f} | {:.1f} | {:.2f}x | {:.1f} | {:.2f}x | {} |\n", p, scan_ms, mb / (scan_ms / 1000),
                      base_scan / scan_ms, slice_ms, base_slice / slice_ms, slice_batches);
    out.push_back({{"members", p}, {"scan_ms", scan_ms}, {"scan_mb_per_s", mb / (scan_ms / 1000)},
                   {"scan_speedup", base_scan / scan_ms}, {"slice_ms", slice_ms},
                   {"slice_speedup", base_slice / slice_ms}, {"slice_batches", slice_batches},
                   {"layout", layout.describe()}});
  }
  md += "\nTarget: >= 3.5x at 4 members for both.\n\n";
  return out;
}

}  // namespace

AtroposBenchReport run_atropos_bench(const AtroposBenchOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  AtroposBenchReport r;
  auto g = geom::load_geometry(o.profile);
  r.markdown = fmt::format("# mmfs-bench atropos\n\nCommand: `{}`; {} samples per point, seed {}. Modeled time "
                           "(the geometry's service-time model), no device I/O.\n\n",
                           o.command, o.samples, o.seed);
  r.json["command"] = o.command;
  r.json["table2"] = table2(r.markdown);
  r.json["figure7"] = figure7(*g, o, r.markdown);
  r.json["figure8"] = figure8(*g, o, r.markdown);
  r.json["stripe_units"] = nlohmann::json::array();
  for (double gap : {0.0, o.host_gap_ms}) r.json["stripe_units"].push_back(stripe_units(*g, o, gap, r.markdown));
  r.json["scaling"] = scaling(o, r.markdown);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.json["host_seconds"] = secs;
  r.markdown += fmt::format("Host time: {:.1f} s.\n", secs);
  return r;
}

}  // namespace mmfs::bench
