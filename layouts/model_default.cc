#include "layouts/model_default.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <exception>
#include <limits>

#include "layouts/cell_grid.h"
#include "layouts/io_plan.h"
#include "layouts/layout.h"

namespace mmfs::layouts {

namespace {

constexpr const char* kCandidateLayouts[] = {"naive", "zorder", "hilbert", "multimap"};
// Cells shaped like the array besides the default one: the flash default's
// 8 KiB, and 64 KiB, where a device's requests cost more than its bytes.
constexpr std::uint32_t kShapedCellBytes[] = {8192, 65536};

std::string box_spelling(std::span<const std::uint64_t> lo, std::span<const std::uint64_t> hi) {
  std::vector<std::string> parts;
  for (std::size_t d = 0; d < lo.size(); ++d)
    parts.push_back(hi[d] == lo[d] + 1 ? fmt::format("{}", lo[d]) : fmt::format("{}:{}", lo[d], hi[d]));
  return fmt::format("box/{}", fmt::join(parts, ","));
}

std::string ms_text(double ms) { return ms >= 100 ? fmt::format("{:.0f}", ms) : fmt::format("{:.3g}", ms); }

}  // namespace

std::vector<std::pair<std::string, Selection>> standard_views(std::span<const std::uint64_t> shape) {
  const std::size_t n = shape.size();
  std::vector<std::uint64_t> mid(n);
  for (std::size_t d = 0; d < n; ++d) mid[d] = shape[d] / 2;
  std::vector<std::pair<std::string, Selection>> views;
  for (std::size_t d = 0; d < n; ++d)
    views.emplace_back(fmt::format("slice/{}/{}", d, mid[d]), Selection::slice(shape, d, mid[d]));
  if (n > 1) {
    for (std::size_t d = 0; d < n; ++d) {
      std::vector<std::uint64_t> lo = mid, hi = mid;
      for (std::size_t k = 0; k < n; ++k) hi[k] = lo[k] + 1;
      lo[d] = 0;
      hi[d] = shape[d];
      std::vector<std::string> parts;
      for (std::size_t k = 0; k < n; ++k) parts.push_back(k == d ? ":" : fmt::format("{}", mid[k]));
      views.emplace_back(fmt::format("box/{}", fmt::join(parts, ",")), Selection::beam(shape, mid, d));
    }
  }
  std::vector<std::uint64_t> lo(n), hi(n);
  for (std::size_t d = 0; d < n; ++d) {
    const std::uint64_t edge = std::max<std::uint64_t>(1, shape[d] / 20);
    lo[d] = (shape[d] - edge) / 2;
    hi[d] = lo[d] + edge;
  }
  views.emplace_back(box_spelling(lo, hi), Selection::box(lo, hi));
  return views;
}

nlohmann::json ModelChoice::to_json() const {
  nlohmann::json cands = nlohmann::json::array();
  for (const auto& c : candidates) {
    nlohmann::json views = nlohmann::json::object();
    for (const auto& v : c.views) views[v.view] = v.ms;
    cands.push_back({{"layout", c.layout}, {"cell", c.cell}, {"worst_view", c.worst_view},
                     {"worst_ms", c.worst_ms}, {"views_ms", views}});
  }
  return {{"layout", layout}, {"cell", cell}, {"worst_ms", worst_ms}, {"priced_shape", priced_shape},
          {"candidates", cands}};
}

ModelChoice choose_by_model(const geom::Geometry& geometry, std::span<const std::uint64_t> shape,
                            std::uint32_t itemsize, std::span<const std::uint32_t> order,
                            std::span<const std::uint64_t> fixed_cell) {
  std::vector<std::vector<std::uint64_t>> cells;
  if (!fixed_cell.empty()) {
    cells.emplace_back(fixed_cell.begin(), fixed_cell.end());
  } else {
    cells.push_back(
        CellGrid::default_cell(shape, itemsize, CellGrid::default_cell_bytes(geometry.sector_size()), order));
    for (std::uint32_t bytes : kShapedCellBytes) {
      auto c = CellGrid::proportional_cell(shape, itemsize, std::max(bytes, geometry.sector_size()), order);
      if (std::find(cells.begin(), cells.end(), c) == cells.end()) cells.push_back(std::move(c));
    }
  }
  const geom::HostCost host = geometry.host_cost();
  // Planning a view costs time and memory in the cells it touches: a larger
  // array is priced on a proxy in its proportions, every dimension halved in
  // turn (the longest first, never below a candidate's cell) until it holds
  // at most kMaxPricedBytes.
  std::vector<std::uint64_t> priced(shape.begin(), shape.end());
  auto priced_bytes = [&] {
    long double b = itemsize;
    for (auto x : priced) b *= static_cast<long double>(x);
    return b;
  };
  std::vector<std::size_t> by_length(priced.size());
  for (std::size_t d = 0; d < by_length.size(); ++d) by_length[d] = d;
  std::stable_sort(by_length.begin(), by_length.end(), [&](auto a, auto b) { return priced[a] > priced[b]; });
  for (bool halved = true; halved && priced_bytes() > static_cast<long double>(kMaxPricedBytes);) {
    halved = false;
    for (std::size_t d : by_length) {
      if (priced_bytes() <= static_cast<long double>(kMaxPricedBytes)) break;
      std::uint64_t widest_cell = 1;
      for (const auto& c : cells) widest_cell = std::max(widest_cell, c[d]);
      if (priced[d] / 2 < widest_cell) continue;
      priced[d] /= 2;
      halved = true;
    }
  }
  const auto views = standard_views(priced);

  ModelChoice choice;
  choice.priced_shape = priced;
  choice.worst_ms = std::numeric_limits<double>::infinity();
  std::vector<std::string> skipped;
  for (const char* name : kCandidateLayouts) {
    for (const auto& cell : cells) {
      PricedCandidate cand{name, cell, {}, 0, ""};
      try {
        std::vector<std::uint32_t> ord(order.begin(), order.end());
        auto layout = make_layout(name, geometry, CellGrid(priced, itemsize, cell, std::move(ord)));
        layout->place(allocate_linear(geometry, layout->space(), 0));
        for (const auto& [spelling, sel] : views) {
          IoPlan plan = plan_selection(*layout, sel);
          model_plan(plan, geometry);
          const double ms = modeled_read_ms(std::span<const IoPlan>(&plan, 1), host);
          cand.views.push_back({spelling, ms});
          if (ms > cand.worst_ms) {
            cand.worst_ms = ms;
            cand.worst_view = spelling;
          }
        }
      } catch (const std::exception& e) {
        // A layout that cannot place this shape (multimap without a basic
        // cube that satisfies its equations) is not a candidate.
        skipped.push_back(fmt::format("{} {}", name, fmt::join(cell, "x")));
        continue;
      }
      if (cand.worst_ms < choice.worst_ms) {
        choice.worst_ms = cand.worst_ms;
        choice.layout = cand.layout;
        choice.cell = cand.cell;
      }
      choice.candidates.push_back(std::move(cand));
    }
  }
  if (choice.layout.empty()) {
    choice.layout = "naive";
    choice.cell = cells.front();
    choice.worst_ms = 0;
    choice.rule = "chosen by the volume's model: no candidate could place this shape; naive with the default cell";
    return choice;
  }
  // The runner-up: the best candidate of another layout, to say by how much the choice won.
  const PricedCandidate* second = nullptr;
  for (const auto& c : choice.candidates)
    if (c.layout != choice.layout && (!second || c.worst_ms < second->worst_ms)) second = &c;
  const PricedCandidate* chosen = nullptr;
  for (const auto& c : choice.candidates)
    if (c.layout == choice.layout && c.cell == choice.cell) chosen = &c;
  choice.rule = fmt::format(
      "chosen by the volume's model: {} with cell {}, the fastest worst view of {} candidates{} ({} ms, {}){} "
      "over the three middle slices, beams and a 1/20 box{} (layout_choice lists them)",
      choice.layout, fmt::join(choice.cell, ","), choice.candidates.size(),
      fixed_cell.empty() ? "" : std::string(kGivenCell), ms_text(choice.worst_ms),
      chosen ? chosen->worst_view : "",
      second ? fmt::format("; next best {} with cell {}: {} ms", second->layout, fmt::join(second->cell, ","),
                           ms_text(second->worst_ms))
             : "",
      std::equal(priced.begin(), priced.end(), shape.begin(), shape.end())
          ? ""
          : fmt::format(" of a proxy of shape {} in the array's proportions", fmt::join(priced, ",")));
  return choice;
}

}  // namespace mmfs::layouts
