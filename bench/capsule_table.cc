#include "bench/capsule_table.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <random>
#include <stdexcept>

#include "geometry/load.h"
#include "geometry/memstore.h"
#include "layouts/capsule.h"
#include "layouts/io_plan.h"
#include "layouts/linear_layouts.h"

namespace mmfs::bench {
namespace {

using layouts::IoPlan;
using layouts::Selection;

// Table 5 of the MEMS paper (seconds and ms) for its 10,000,000-record table of
// 8, 32, 15 and 16-byte attributes on the G2 MEMStore.
struct PaperRow {
  const char* operation;
  double normal, capsule;  // ms
};
constexpr PaperRow kPaper[] = {
    {"entire table scan", 22440, 22930},
    {"a1 scan", 22440, 2430},
    {"a1 + a2 scan", 22440, 12720},
    {"100 records of a1", 1.58, 1.31},
    {"one whole record", 1.469, 1.385},  // §5.2.6's text: the average access time of one random record
};

// The table in capsules: one CapsuleLayout per attribute, parts of shared bands.
struct CapsuleTable {
  layouts::CapsuleFormat format;
  std::vector<std::unique_ptr<layouts::CapsuleLayout>> attributes;
  std::uint64_t bands = 0, split = 0;
};

CapsuleTable make_capsule_table(const geom::Geometry& g, const CapsuleTableOptions& o, layouts::CapsuleFormat format) {
  CapsuleTable t;
  t.format = std::move(format);
  const auto& mems = dynamic_cast<const geom::MemStore&>(g);
  const std::uint64_t T = mems.sectors_per_track();
  const std::uint64_t capsules = (o.records + t.format.records - 1) / t.format.records;
  layouts::SpaceRequest bands;
  bands.shape = layouts::SpaceShape::TrackGroups;
  bands.group_tracks = t.format.total;
  bands.groups = (capsules + T - 1) / T;
  bands.sectors = bands.groups * bands.group_tracks * T;
  bands.boundary_tracks = mems.params().M == 0 ? mems.Ny() : 0;  // as CapsuleLayout::space() asks
  std::vector<layouts::Extent> whole = layouts::allocate_linear(g, bands, 0);
  t.bands = whole.size();
  for (std::size_t i = 0; i < o.attributes.size(); ++i) {
    layouts::CellGrid grid({o.records}, o.attributes[i], {t.format.records_per_block(i)}, {0});
    auto a = std::make_unique<layouts::CapsuleLayout>(
        g, grid, layouts::CapsulePart{t.format.total, t.format.first[i], t.format.blocks[i]});
    a->place(layouts::band_part_extents(whole, T, a->part()));
    t.split = a->split_capsules();
    t.attributes.push_back(std::move(a));
  }
  return t;
}

// The records [first, first + count) of the chosen attributes, as one plan.
IoPlan capsule_plan(const geom::Geometry& g, const CapsuleTable& t, const std::vector<std::size_t>& attrs,
                    std::uint64_t first, std::uint64_t count) {
  std::vector<IoPlan> plans;
  for (std::size_t a : attrs) {
    const std::uint64_t lo[1] = {first}, hi[1] = {first + count};
    plans.push_back(layouts::plan_selection(*t.attributes[a], Selection::box(lo, hi)));
  }
  return layouts::combine_plans(plans, g.sector_size());
}

// The normal layout: pages of page_records records, one after another from LBN 0.
IoPlan normal_plan(const layouts::Layout& pages, const CapsuleTableOptions& o, std::uint64_t first,
                   std::uint64_t count) {
  const std::uint64_t lo[2] = {first / o.page_records, 0};
  const std::uint64_t hi[2] = {(first + count - 1) / o.page_records + 1, o.page_bytes};
  return layouts::plan_selection(pages, Selection::box(lo, hi));
}

double idle_ms(IoPlan plan, const geom::Geometry& g) { return layouts::model_plan(plan, g); }

}  // namespace

CapsuleTableReport run_capsule_table(const CapsuleTableOptions& o) {
  auto gp = geom::load_geometry(o.profile);
  const geom::Geometry& g = *gp;
  if (g.kind() != geom::DeviceKind::Mems)
    throw std::invalid_argument(fmt::format("capsule tables need a MEMS profile; '{}' is not one", o.profile));
  std::uint32_t record_bytes = 0;
  for (std::uint32_t a : o.attributes) record_bytes += a;
  if (std::uint64_t(o.page_records) * record_bytes > o.page_bytes)
    throw std::invalid_argument(fmt::format("{} records of {} bytes do not fit a {}-byte page", o.page_records,
                                            record_bytes, o.page_bytes));

  CapsuleTable resolved = make_capsule_table(g, o, layouts::capsule_resolve(o.attributes, g.sector_size(),
                                                                            g.parallelism()));
  CapsuleTable paper_cap =
      make_capsule_table(g, o, layouts::capsule_with_records(o.attributes, g.sector_size(), o.paper_records));
  const std::uint64_t pages = (o.records + o.page_records - 1) / o.page_records;
  layouts::NaiveLayout normal(g, layouts::CellGrid({pages, o.page_bytes}, 1, {1, o.page_bytes}, {1, 0}));
  normal.place(layouts::allocate_linear(g, normal.space(), 0));

  std::vector<std::size_t> all(o.attributes.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  struct Row {
    std::string operation;
    double ms[3];             // normal, capsule as the paper, capsule as CapsuleResolve chooses
    std::uint64_t bytes[3];
  };
  std::vector<Row> rows;
  const CapsuleTable* caps[2] = {&paper_cap, &resolved};
  auto scan = [&](const std::string& name, std::vector<std::size_t> attrs) {
    Row row{name, {}, {}};
    IoPlan n = normal_plan(normal, o, 0, o.records);
    row.ms[0] = idle_ms(n, g);
    row.bytes[0] = n.bytes_read;
    for (int k = 0; k < 2; ++k) {
      IoPlan c = capsule_plan(g, *caps[k], attrs, 0, o.records);
      row.ms[k + 1] = idle_ms(c, g);
      row.bytes[k + 1] = c.bytes_read;
    }
    rows.push_back(row);
  };
  scan("entire table scan", all);
  scan("a1 scan", {0});
  if (o.attributes.size() > 1) scan("a1 + a2 scan", {0, 1});

  // Short reads from wherever the previous access left the sled: the same
  // random starting positions and records for every layout.
  auto short_reads = [&](const std::string& name, std::vector<std::size_t> attrs, std::uint64_t count) {
    std::mt19937_64 rng(o.seed);
    auto model = g.make_service_model();
    Row row{name, {0, 0, 0}, {0, 0, 0}};
    for (std::uint32_t s = 0; s < o.samples; ++s) {
      const geom::Lbn from = rng() % g.capacity_sectors();
      const std::uint64_t first = rng() % (o.records - count + 1);
      IoPlan plans[3] = {normal_plan(normal, o, first, count), capsule_plan(g, paper_cap, attrs, first, count),
                         capsule_plan(g, resolved, attrs, first, count)};
      for (int k = 0; k < 3; ++k) {
        model->reset();
        model->place_at(from);
        row.ms[k] += layouts::serve_plan(plans[k], *model) / o.samples;
        row.bytes[k] += plans[k].bytes_read;
      }
    }
    for (auto& b : row.bytes) b /= o.samples;
    rows.push_back(row);
  };
  short_reads("100 records of a1", {0}, 100);
  short_reads("one whole record", all, 1);

  const bool paper_table = o.records == 10'000'000 && o.attributes == std::vector<std::uint32_t>{8, 32, 15, 16} &&
                           o.profile == "mems-g2" && o.paper_records == 60;
  CapsuleTableReport r;
  std::string& md = r.markdown;
  auto describe = [](const CapsuleTable& t) {
    return fmt::format("{} records in {} sectors ({} per attribute), {} bands of {} tracks, {} split capsules",
                       t.format.records, t.format.total, fmt::join(t.format.blocks, "/"), t.bands, t.format.total,
                       t.split);
  };
  md += fmt::format("# MEMS Table 5: a {}-record table in capsules and in {}-byte pages (modeled, `{}`)\n\n",
                    o.records, o.page_bytes, o.profile);
  md += fmt::format(
      "Attributes of {} bytes. Capsules as the paper packs them: {}. Capsules as CapsuleResolve packs them: {}. "
      "Normal: {} records a page, {} pages. Each read is planned as the daemon plans it (requests sorted by LBN, "
      "contiguous ones joined, 16 in flight) and costed by the geometry's service-time model; scans from an idle "
      "device, short reads averaged over {} random records from a random sled position.\n\n",
      fmt::join(o.attributes, ", "), describe(paper_cap), describe(resolved), o.page_records, pages, o.samples);
  md += fmt::format("| operation | normal | paper | ratio | capsule, {} records | paper | ratio | capsule, {} records "
                    "(CapsuleResolve) | read: normal / {} / {} |\n",
                    paper_cap.format.records, resolved.format.records, paper_cap.format.records,
                    resolved.format.records);
  md += "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  auto amount = [](std::uint64_t bytes) {
    return bytes >= 1000000 ? fmt::format("{:.1f} MB", bytes / 1e6) : fmt::format("{:.1f} KB", bytes / 1e3);
  };
  auto shown = [](double ms) { return ms >= 100 ? fmt::format("{:.2f} s", ms / 1000) : fmt::format("{:.3f} ms", ms); };
  nlohmann::json jrows = nlohmann::json::array();
  for (const Row& row : rows) {
    const PaperRow* paper = nullptr;
    if (paper_table)
      for (const PaperRow& p : kPaper)
        if (row.operation == p.operation) paper = &p;
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} / {} / {} |\n", row.operation,
                      shown(row.ms[0]), paper ? shown(paper->normal) : "—",
                      paper ? fmt::format("{:.2f}", row.ms[0] / paper->normal) : "—", shown(row.ms[1]),
                      paper ? shown(paper->capsule) : "—",
                      paper ? fmt::format("{:.2f}", row.ms[1] / paper->capsule) : "—", shown(row.ms[2]),
                      amount(row.bytes[0]), amount(row.bytes[1]), amount(row.bytes[2]));
    nlohmann::json j = {{"operation", row.operation},
                        {"normal_ms", row.ms[0]},
                        {"capsule_paper_records_ms", row.ms[1]},
                        {"capsule_resolved_ms", row.ms[2]},
                        {"bytes_read", {row.bytes[0], row.bytes[1], row.bytes[2]}}};
    if (paper) j["paper"] = {{"normal_ms", paper->normal}, {"capsule_ms", paper->capsule}};
    jrows.push_back(std::move(j));
  }
  const double speedup = rows[0].ms[2] / rows[1].ms[2];
  md += fmt::format("\nA single-attribute (a1) scan in capsules is {:.1f}x faster than the full scan with "
                    "CapsuleResolve's capsules, {:.1f}x with the paper's (target >= 8x; the paper: 9.4x).\n",
                    speedup, rows[0].ms[1] / rows[1].ms[1]);
  r.json = {{"schema", "mmfs-bench-capsule/1"},
            {"profile", o.profile},
            {"records", o.records},
            {"attributes", o.attributes},
            {"capsule", {{"records", resolved.format.records}, {"sectors", resolved.format.total},
                         {"blocks", resolved.format.blocks}, {"bands", resolved.bands},
                         {"split_capsules", resolved.split}}},
            {"capsule_paper_records", {{"records", paper_cap.format.records}, {"sectors", paper_cap.format.total},
                                       {"blocks", paper_cap.format.blocks}, {"bands", paper_cap.bands},
                                       {"split_capsules", paper_cap.split}}},
            {"normal", {{"page_bytes", o.page_bytes}, {"page_records", o.page_records}, {"pages", pages}}},
            {"rows", jrows},
            {"a1_speedup", speedup}};
  return r;
}

}  // namespace mmfs::bench
