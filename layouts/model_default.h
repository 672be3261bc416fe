// The default layout and cell of a new array, chosen by the volume's own
// model for the array's shape (docs/layouts.md, "The default, chosen by the
// model"): every candidate placement is laid out on a hypothetical extent,
// a standard mix of views is planned on it as the daemon plans them
// (layouts/io_plan.h) and priced from an idle device (plus the host's part
// on a measured volume), and the candidate whose worst view is fastest
// wins. Computed once, when the array is created: the choice is stored with
// the schema (layout and cell), so a later change of this rule never moves
// an array, and the reason with it for A@/info.
//
// The mix: the middle slice along each dimension, the beam along each
// dimension through the middle, and a box of about 1/20 of each side in the
// middle. Candidates: naive, zorder, hilbert and multimap, each with the
// default cell (one 4 KiB unit, layouts/cell_grid.h) and cells of 8 KiB and
// 64 KiB shaped like the array; multimap only where its basic cube exists.
//
// Pure: no device is touched. Deterministic for a geometry and a shape.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "geometry/geometry.h"
#include "layouts/selection.h"

namespace mmfs::layouts {

struct PricedView {
  std::string view;  // as A@/ spells it: "slice/0/128", "box/..."
  double ms = 0;
};

struct PricedCandidate {
  std::string layout;
  std::vector<std::uint64_t> cell;
  std::vector<PricedView> views;
  double worst_ms = 0;
  std::string worst_view;
};

struct ModelChoice {
  std::string layout;
  std::vector<std::uint64_t> cell;
  double worst_ms = 0;
  std::string rule;                         // one line for A@/info "layout_rule"
  std::vector<PricedCandidate> candidates;  // every candidate priced, in the order tried
  std::vector<std::uint64_t> priced_shape;  // the shape the views were priced on (a proxy of a large array)
  nlohmann::json to_json() const;           // A@/info "layout_choice"
};

// What the rule says when user.mmfs.cell was given (only layouts were compared).
inline constexpr std::string_view kGivenCell = " with the given cell";
// The rule's first words: A@/info recognises a choice of the model by them.
inline constexpr std::string_view kModelRulePrefix = "chosen by the volume's model";

// Whether a stored layout_rule says the model chose the cell too (not only
// the layout, for a cell the user gave).
inline bool cell_chosen_by_model(std::string_view rule) {
  return rule.starts_with(kModelRulePrefix) && rule.find(kGivenCell) == std::string_view::npos;
}

// Arrays larger than this are priced on a proxy shape (choose_by_model).
inline constexpr std::uint64_t kMaxPricedBytes = 1ull << 30;

// The standard view mix of an array of `shape`.
std::vector<std::pair<std::string, Selection>> standard_views(std::span<const std::uint64_t> shape);

// Chooses among the candidates (the top of this file). `order` is the
// array's dimension priority; `cell`, when given (user.mmfs.cell set), is
// the only cell tried. Never fails: when no candidate can be laid out (a
// shape too small for any), naive with the first cell.
ModelChoice choose_by_model(const geom::Geometry& geometry, std::span<const std::uint64_t> shape,
                            std::uint32_t itemsize, std::span<const std::uint32_t> order,
                            std::span<const std::uint64_t> cell = {});

}  // namespace mmfs::layouts
