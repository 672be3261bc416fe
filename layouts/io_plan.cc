#include "layouts/io_plan.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <optional>

#include "layouts/cell_blocks.h"
#include "layouts/touched_runs.h"

#include "geometry/striped.h"

namespace mmfs::layouts {
namespace {

struct Piece {
  std::uint64_t key;
  Lbn lbn;
  std::uint32_t sectors;
};

// Joins pieces (sorted by key, then LBN) of one key that continue each other
// (or repeat sectors already covered, as two cells wrapping in one track can),
// or that start at most `gap` sectors after the previous one's end: reading
// the gap costs less than another request (Layout::merge_gap_sectors).
std::vector<Piece> merge_pieces(const std::vector<Piece>& pieces, std::uint64_t gap) {
  std::vector<Piece> merged;
  for (const Piece& p : pieces) {
    if (!merged.empty() && merged.back().key == p.key && p.lbn <= merged.back().lbn + merged.back().sectors + gap &&
        p.lbn >= merged.back().lbn) {
      Lbn end = std::max<Lbn>(merged.back().lbn + merged.back().sectors, p.lbn + p.sectors);
      if (end - merged.back().lbn <= UINT32_MAX) {
        merged.back().sectors = std::uint32_t(end - merged.back().lbn);
        continue;
      }
    }
    merged.push_back(p);
  }
  return merged;
}

// Issues merged pieces `queue_depth` at a time (layouts without batch groups).
void cut_by_depth(const std::vector<Piece>& merged, std::uint32_t queue_depth, IoPlan& plan) {
  std::size_t q = std::max<std::uint32_t>(1, queue_depth);
  for (std::size_t i = 0; i < merged.size(); i += q) {
    IoBatch b;
    for (std::size_t j = i; j < std::min(merged.size(), i + q); ++j)
      b.requests.push_back({merged[j].lbn, merged[j].sectors});
    plan.batches.push_back(std::move(b));
  }
}

void count_requests(IoPlan& plan, std::uint32_t sector_size) {
  for (const IoBatch& b : plan.batches)
    for (const geom::Request& r : b.requests) {
      ++plan.requests;
      plan.sectors += r.sectors;
    }
  plan.bytes_read = plan.sectors * sector_size;
}

void join_member_batches(IoPlan& plan, const geom::StripedGeometry& g);

// Sorts, merges contiguous pieces (and those `gap` apart) and cuts the result into batches.
IoPlan build(const Layout& layout, std::vector<Piece>& pieces, std::uint64_t cells, std::uint64_t useful,
             const PlanOptions& options, std::uint64_t gap) {
  IoPlan plan;
  plan.cells = cells;
  plan.bytes_useful = useful;
  const bool grouped = layout.has_batch_groups();
  if (!grouped)
    for (Piece& p : pieces) p.key = 0;
  if (grouped || options.order == IssueOrder::Lbn) {
    const auto before = [](const Piece& a, const Piece& b) { return a.key != b.key ? a.key < b.key : a.lbn < b.lbn; };
    // A naive layout's cells come in LBN order already: a check, not a sort
    // (a tenth of the CPU of pricing a box on several copies).
    if (!std::is_sorted(pieces.begin(), pieces.end(), before)) std::sort(pieces.begin(), pieces.end(), before);
  }
  plan.merge_gap_sectors = std::uint32_t(gap);
  std::vector<Piece> merged = merge_pieces(pieces, gap);
  if (grouped) {
    // One batch per group (a basic cube's tracks), groups in the order of their first sector.
    std::size_t i = 0;
    while (i < merged.size()) {
      IoBatch b;
      std::uint64_t key = merged[i].key;
      for (; i < merged.size() && merged[i].key == key; ++i) b.requests.push_back({merged[i].lbn, merged[i].sectors});
      plan.batches.push_back(std::move(b));
    }
    std::sort(plan.batches.begin(), plan.batches.end(),
              [](const IoBatch& a, const IoBatch& b) { return a.requests.front().lbn < b.requests.front().lbn; });
  } else {
    cut_by_depth(merged, options.queue_depth, plan);
  }
  if (const auto* striped = dynamic_cast<const geom::StripedGeometry*>(&layout.geometry()))
    join_member_batches(plan, *striped);
  count_requests(plan, layout.geometry().sector_size());
  return plan;
}

// On a volume of several devices (geometry/striped.h) the devices work in
// parallel: the r-th batch of every member joins one batch, so a plan of one
// batch per quadrangle (or basic cube) keeps all members busy at once. Each
// member still serves its part of a joined batch as it would have served its
// own batch (the striped model and StripedDevice split it per member).
void join_member_batches(IoPlan& plan, const geom::StripedGeometry& g) {
  if (g.members() < 2 || plan.batches.size() < 2) return;
  std::vector<std::vector<IoBatch>> per(g.members());
  std::vector<std::uint32_t> first_seen;
  for (IoBatch& b : plan.batches) {
    const std::uint32_t m = g.locate(b.requests.front().lbn).member;
    if (per[m].empty()) first_seen.push_back(m);
    per[m].push_back(std::move(b));
  }
  plan.batches.clear();
  for (std::size_t round = 0;; ++round) {
    IoBatch joined;
    for (std::uint32_t m : first_seen)
      if (round < per[m].size())
        joined.requests.insert(joined.requests.end(), per[m][round].requests.begin(), per[m][round].requests.end());
    if (joined.requests.empty()) break;
    plan.batches.push_back(std::move(joined));
  }
}

void add_runs(const Layout& layout, std::span<const std::uint64_t> cell, std::span<const Run> runs,
              std::vector<Piece>& pieces) {
  std::uint64_t key = layout.has_batch_groups() ? layout.batch_key(cell) : 0;
  for (const Run& r : runs) pieces.push_back({key, r.lbn, r.sectors});
}

void add_cell(const Layout& layout, std::span<const std::uint64_t> cell, std::vector<Piece>& pieces) {
  Run runs[2];
  add_runs(layout, cell, {runs, layout.cell_runs(cell, runs)}, pieces);
}

// The sectors of the blocks in `mask` of `cell` (each `block_sectors` of
// the cell's sectors, found through its one or two runs).
void add_blocks(const Layout& layout, std::span<const std::uint64_t> cell, std::span<const Run> runs,
                const BlockMask& mask, std::uint32_t block_sectors, std::vector<Piece>& pieces) {
  const std::uint64_t key = layout.has_batch_groups() ? layout.batch_key(cell) : 0;
  const std::uint32_t blocks = layout.sectors_per_cell() / block_sectors;
  for (std::uint32_t b = 0; b < blocks; ++b)
    if (mask.has(b))
      for_each_block_piece(runs, b, block_sectors,
                           [&](Lbn lbn, std::uint32_t sectors, std::uint64_t) { pieces.push_back({key, lbn, sectors}); });
}

// Visits every cell of the product of the per-dimension cell lists, the
// primary dimension fastest (the order a scan along it would fetch cells in):
// visit(cell, idx), idx[d] the cell's index in touched[d].
template <class Visit>
void for_each_touched(const CellGrid& g, const std::vector<std::vector<std::uint64_t>>& touched, Visit&& visit) {
  const std::size_t n = g.dims();
  for (std::size_t d = 0; d < n; ++d)
    if (touched[d].empty()) return;
  const auto& order = g.order();
  std::vector<std::size_t> idx(n, 0);
  std::vector<std::uint64_t> cell(n);
  for (std::size_t d = 0; d < n; ++d) cell[d] = touched[d][0];
  while (true) {
    visit(std::span<const std::uint64_t>(cell), std::span<const std::size_t>(idx));
    std::size_t i = 0;
    for (; i < n; ++i) {
      std::uint32_t d = order[i];
      if (++idx[d] < touched[d].size()) {
        cell[d] = touched[d][idx[d]];
        break;
      }
      idx[d] = 0;
      cell[d] = touched[d][0];
    }
    if (i == n) return;
  }
}

}  // namespace

nlohmann::json IoPlan::to_json() const {
  nlohmann::json b = nlohmann::json::array();
  for (const IoBatch& batch : batches) {
    nlohmann::json reqs = nlohmann::json::array();
    for (const geom::Request& r : batch.requests) reqs.push_back({r.lbn, r.sectors});
    b.push_back(std::move(reqs));
  }
  nlohmann::json j = {{"batches", std::move(b)},    {"requests", requests},         {"cells", cells},
                      {"bytes_read", bytes_read},   {"bytes_useful", bytes_useful}, {"modeled_ms", modeled_ms},
                      {"merge_gap_sectors", merge_gap_sectors}, {"cell_reads", partial_cells ? "partial" : "whole"}};
  if (whole_cells_ms >= 0) j["whole_cells_modeled_ms"] = whole_cells_ms;
  return j;
}

IoPlan plan_selection(const Layout& layout, const Selection& selection, const PlanOptions& options) {
  const CellGrid& g = layout.grid();
  const std::size_t n = g.dims();
  std::vector<std::vector<std::uint64_t>> touched(n);
  std::uint64_t cells = 1;
  for (std::size_t d = 0; d < n; ++d) {
    touched[d] = cells_touched(selection.dims()[d], g.cell()[d]);
    cells *= touched[d].size();
  }
  std::vector<Piece> pieces;
  const std::uint32_t block_sectors = options.block_sectors;
  const bool blocked = block_sectors > 0 && layout.sectors_per_cell() > block_sectors &&
                       layout.sectors_per_cell() % block_sectors == 0;
  std::optional<CellBlocks> blocks;
  if (blocked)
    blocks.emplace(g, selection, std::uint64_t(block_sectors) * layout.geometry().sector_size(),
                   layout.sectors_per_cell() / block_sectors);
  // The cells' runs are kept when they are needed again: by the blocks-only
  // plan below, or by the caller's read (options.runs).
  std::optional<TouchedRuns> local;
  TouchedRuns* runs = options.runs;
  if (!runs && blocked) runs = &local.emplace();
  if (runs) runs->prepare(touched);
  bool cut = false;  // some cell holds the selection in only some of its blocks
  pieces.reserve(cells);
  for_each_touched(g, touched, [&](std::span<const std::uint64_t> cell, std::span<const std::size_t> idx) {
    if (runs)
      add_runs(layout, cell, runs->of(layout, runs->position(idx), cell), pieces);
    else
      add_cell(layout, cell, pieces);
    if (blocks && !cut) cut = !blocks->full(blocks->of(cell));
  });
  const std::uint64_t useful = selection.elements() * g.itemsize();
  IoPlan whole = build(layout, pieces, cells, useful, options, options.merge_gaps ? layout.merge_gap_sectors() : 0);
  if (!cut) return whole;
  // A choice to make: the blocks-only plan too (a second walk over the
  // cells, for views that cut some; their masks and runs are kept by now).
  std::vector<Piece> partial;
  for_each_touched(g, touched, [&](std::span<const std::uint64_t> cell, std::span<const std::size_t> idx) {
    add_blocks(layout, cell, runs->of(layout, runs->position(idx), cell), blocks->of(cell), block_sectors, partial);
  });
  IoPlan part = build(layout, partial, cells, useful, options,
                      options.merge_gaps ? layout.merge_gap_sectors(block_sectors) : 0);
  const double whole_ms = model_plan(whole, layout.geometry());
  if (model_plan(part, layout.geometry()) < whole_ms) {
    part.partial_cells = true;
    part.whole_cells_ms = whole_ms;
    return part;
  }
  whole.whole_cells_ms = whole_ms;
  return whole;
}

IoPlan plan_cells(const Layout& layout, std::span<const std::uint64_t> cells_flat, std::uint64_t useful_bytes,
                  const PlanOptions& options) {
  const std::size_t n = layout.grid().dims();
  std::vector<Piece> pieces;
  pieces.reserve(cells_flat.size() / n);
  for (std::size_t i = 0; i + n <= cells_flat.size(); i += n) add_cell(layout, cells_flat.subspan(i, n), pieces);
  return build(layout, pieces, cells_flat.size() / n, useful_bytes, options,
               options.merge_gaps ? layout.merge_gap_sectors() : 0);
}

IoPlan combine_plans(std::span<const IoPlan> plans, std::uint32_t sector_size, std::uint32_t queue_depth) {
  IoPlan out;
  std::vector<Piece> pieces;
  for (const IoPlan& p : plans) {
    out.cells += p.cells;
    out.bytes_useful += p.bytes_useful;
    for (const IoBatch& b : p.batches)
      for (const geom::Request& r : b.requests) pieces.push_back({0, r.lbn, r.sectors});
  }
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.lbn < b.lbn; });
  cut_by_depth(merge_pieces(pieces, 0), queue_depth, out);
  count_requests(out, sector_size);
  return out;
}

IoPlan concatenate_plans(std::vector<IoPlan>&& parts) {
  IoPlan out;
  bool choice = false;
  double whole_ms = 0;
  for (IoPlan& p : parts) {
    std::move(p.batches.begin(), p.batches.end(), std::back_inserter(out.batches));
    out.cells += p.cells;
    out.requests += p.requests;
    out.sectors += p.sectors;
    out.bytes_read += p.bytes_read;
    out.bytes_useful += p.bytes_useful;
    out.merge_gap_sectors = std::max(out.merge_gap_sectors, p.merge_gap_sectors);
    out.modeled_ms += p.modeled_ms;
    out.partial_cells = out.partial_cells || p.partial_cells;
    choice = choice || p.whole_cells_ms >= 0;
    whole_ms += p.whole_cells_ms >= 0 ? p.whole_cells_ms : p.modeled_ms;
  }
  out.whole_cells_ms = choice ? whole_ms : -1;
  return out;
}

double serve_plan(const IoPlan& plan, geom::ServiceTimeModel& model, double gap_ms) {
  double ms = 0;
  for (std::size_t i = 0; i < plan.batches.size(); ++i) {
    if (i && gap_ms > 0) {
      model.idle(gap_ms);
      ms += gap_ms;
    }
    ms += model.serve(plan.batches[i].requests);
  }
  return ms;
}

double model_plan(IoPlan& plan, const geom::Geometry& geometry) {
  auto model = geometry.make_service_model();
  model->reset();
  plan.modeled_ms = serve_plan(plan, *model);
  return plan.modeled_ms;
}

double modeled_read_ms(std::span<const IoPlan> parts, const geom::HostCost& host) {
  constexpr double kMiB = 1 << 20;
  double device_done = 0, cells_done = 0, handed_over = 0;
  for (const IoPlan& p : parts) {
    // Requests arrive in waves of the queue depth whatever the plan's batch
    // groups (a basic cube's can hold 128 requests): the daemon works on a
    // cell as soon as its requests are in.
    const double waves = std::ceil(double(p.requests) / Layout::kPlanDepth);
    const double batches = std::max({1.0, double(p.batches.size()), waves});
    const double first_arrives = device_done + p.modeled_ms / batches;
    device_done += p.modeled_ms;
    const double cells_ms =
        (double(p.bytes_read) * host.verify_ms_per_mib + double(p.bytes_useful) * host.gather_ms_per_mib) / kMiB;
    // Each batch's cells once it has arrived: the work starts with the first
    // and cannot end before the last batch's share after the device is done.
    cells_done = std::max(std::max(cells_done, first_arrives) + cells_ms, device_done + cells_ms / batches);
    handed_over = std::max(handed_over, cells_done) + double(p.bytes_useful) / kMiB * host.ms_per_mib;
  }
  return host.request_ms + handed_over;
}

}  // namespace mmfs::layouts
