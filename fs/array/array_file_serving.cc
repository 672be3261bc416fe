// Which placement serves a view (ArrayFile::serving_locked): the primary or
// a current copy, whichever the volume's model reads it in least time
// (docs/reference.md, "Copies"), as A@/plan prices it. Two shortcuts keep
// the choice cheaper than the read it chooses for: a placement that reads
// the view in one request of about its own bytes (a copy chunked as the
// reader chunks) takes it unpriced, and on flash so does the first that
// reads it in one small request. A placement that cannot be read (an
// unreadable mloc primary) is never chosen.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "fs/array/array_file.h"
#include "fs/array/array_file_internal.h"
#include "layouts/selection_chunks.h"

namespace mmfs::fs {

using layouts::Selection;

double ArrayFile::view_cost_locked(std::uint32_t k, const Selection& selection, std::uint64_t budget,
                                   const layouts::IoPlan* whole) const {
  // The read as A@/plan prices it: every chunk of a view of a few, and of a
  // longer one its first, middle and last chunk, scaled to all of them.
  constexpr std::uint64_t kPricedChunks = 16;
  const Placement& p = placement_at(k);
  if (!p.chunks_by_model()) return whole ? whole->modeled_ms : p.modeled_plan(selection, 0).modeled_ms;
  const layouts::SelectionChunks ch(selection, p.grid(), budget);
  const std::uint64_t n = ch.count();
  std::vector<layouts::IoPlan> parts;
  if (n == 1 && whole) {
    parts.push_back(*whole);
  } else if (n <= kPricedChunks) {
    for (std::uint64_t c = 0; c < n; ++c) parts.push_back(p.modeled_plan(ch.selection(c), 0));
  } else {
    for (std::uint64_t c : {std::uint64_t{0}, n / 2, n - 1}) parts.push_back(p.modeled_plan(ch.selection(c), 0));
  }
  const double ms = layouts::modeled_read_ms(parts, ctx_.geometry.host_cost());
  return n <= kPricedChunks ? ms : ms * double(n) / double(parts.size());
}

double ArrayFile::serving_cost_locked(const Selection& selection, const std::string& spelling) const {
  std::uint64_t budget = 0;
  double ms = 0;
  const std::uint32_t k = serving_locked(selection, spelling, &budget, &ms);
  return std::isfinite(ms) ? ms : view_cost_locked(k, selection, budget);  // priced once, not again
}

std::optional<std::uint32_t> ArrayFile::single_run_placement_locked(
    const Selection& selection, std::vector<std::optional<layouts::IoPlan>>* plans) const {
  if (plans) plans->assign(copies_.size() + 1, std::nullopt);
  // Few cells at most: pricing one placement is then cheap, and a
  // selection of many cells is no single run of any cell layout.
  constexpr std::uint64_t kMaxCells = 4;
  for (std::uint32_t k = 0; k <= copies_.size(); ++k) {
    if (!servable_locked(k)) continue;
    const Placement& p = placement_at(k);
    const std::vector<std::uint64_t>& cell = p.grid().cell();
    if (cell.size() != selection.dims().size()) continue;
    std::uint64_t cells = 1;
    for (std::size_t d = 0; d < cell.size() && cells <= kMaxCells; ++d) {
      const layouts::DimRange& r = selection.dims()[d];
      if (r.stop <= r.start || cell[d] == 0) return std::nullopt;
      cells *= util::div_up(r.stop, cell[d]) - r.start / cell[d];
    }
    if (cells > kMaxCells) continue;
    const layouts::IoPlan plan = p.modeled_plan(selection, 0);
    if (plan.requests == 1 && plan.bytes_read * 4 <= plan.bytes_useful * 5) return k;
    if (plans) (*plans)[k] = plan;
  }
  return std::nullopt;
}

std::uint32_t ArrayFile::serving_locked(const Selection& selection, const std::string& spelling,
                                        std::uint64_t* budget, double* priced_ms) const {
  if (priced_ms) *priced_ms = std::numeric_limits<double>::quiet_NaN();
  if (copies_.empty()) {
    *budget = chunk_bytes_locked(selection, spelling, 0);
    return 0;
  }
  std::uint32_t current = 0;  // one bit per current copy
  for (std::size_t i = 0; i < copies_.size(); ++i)
    if (copies_[i].current()) current |= 1u << i;
  const std::uint64_t epoch = placement_epoch_.load();
  {
    std::lock_guard lock(budget_mu_);
    auto it = serving_cache_.find(spelling);
    if (it != serving_cache_.end() && it->second.epoch == epoch && it->second.current == current) {
      *budget = it->second.budget;
      return it->second.copy;
    }
  }
  std::uint32_t best = 0;
  auto remember = [&] {
    std::lock_guard lock(budget_mu_);
    if (serving_cache_.size() >= 256) serving_cache_.clear();
    serving_cache_[spelling] = ServingChoice{epoch, current, best, *budget};
    return best;
  };
  std::vector<std::optional<layouts::IoPlan>> priced;  // plans the single-run test made, priced once
  if (auto fit = single_run_placement_locked(selection, &priced)) {
    best = *fit;
    *budget = chunk_bytes_locked(selection, spelling, best);
    return remember();
  }
  // On flash one request of a few sectors costs the device's latency from
  // any placement (no seek, its bytes a small part): the first placement
  // that reads the view so serves it, the others unpriced (a point view
  // priced on three placements spent a tenth of a millisecond on it).
  constexpr std::uint64_t kTinyRead = 16 << 10;
  if (ctx_.geometry.kind() == geom::DeviceKind::Flash)
    for (std::uint32_t k = 0; k < priced.size(); ++k)
      if (servable_locked(k) && priced[k] && priced[k]->requests == 1 && priced[k]->bytes_read <= kTinyRead) {
        best = k;
        *budget = chunk_bytes_locked(selection, spelling, best);
        return remember();
      }
  *budget = chunk_bytes_locked(selection, spelling, 0);
  double best_cost =
      servable_locked(0) ? view_cost_locked(0, selection, *budget, priced[0] ? &*priced[0] : nullptr)
                         : std::numeric_limits<double>::infinity();
  for (std::uint32_t k = 1; k <= copies_.size(); ++k) {
    if (!servable_locked(k)) continue;
    const std::uint64_t b = chunk_bytes_locked(selection, spelling, k);
    const double cost = view_cost_locked(k, selection, b, priced[k] ? &*priced[k] : nullptr);
    if (cost < best_cost) {
      best = k;
      best_cost = cost;
      *budget = b;
    }
  }
  if (priced_ms) *priced_ms = best_cost;
  return remember();
}

}  // namespace mmfs::fs
