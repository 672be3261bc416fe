// An array file's self-description: its schema attributes as getfattr shows
// them, A@/info, the device plan of a view (A@/plan) and the sectors of one
// element (A@/lbn).
#include "fs/array/array_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "fs/array/array_file_internal.h"
#include "fs/array/array_layout.h"
#include "fs/array/copy_spec.h"
#include "layouts/capsule.h"
#include "layouts/default_layout.h"
#include "layouts/model_default.h"
#include "layouts/multimap.h"
#include "layouts/plod.h"
#include "layouts/quadrangle_array.h"
#include "layouts/selection_chunks.h"

namespace mmfs::fs {

using layouts::CellGrid;
using layouts::DimRange;
using layouts::Selection;
using detail::add_host_time;
using detail::is_mloc;

std::string ArrayFile::attr_text(std::string_view name) const {
  std::shared_lock lock(mu_);
  // mloc bins equal-frequency by default, whatever the dtype (mloc_params).
  if (name == "bins" && is_mloc(schema_) && schema_.bins.empty()) return "100";
  std::string text = schema_attr_text(schema_, name);
  if (!text.empty()) return text;
  if (name == "cell" || name == "basic_cube" || name == "chunk") return placement_->chosen_attr(name);
  return text;
}

nlohmann::json ArrayFile::info() const {
  std::shared_lock lock(mu_);
  const CellGrid& g = grid_locked();
  nlohmann::json j;
  j["shape"] = g.shape();
  j["dims"] = dim_names(schema_);
  j["dtype"] = schema_.dtype.name;
  j["itemsize"] = g.itemsize();
  j["layout"] = schema_.layout;
  {
    const layouts::DefaultLayout rule = layouts::default_layout(ctx_.geometry);
    if (!schema_.layout_rule.empty()) {
      j["layout_rule"] = schema_.layout_rule;
      // The model's prices of every candidate (the same now as when it chose: the rule is pure).
      if (schema_.layout_rule.starts_with(layouts::kModelRulePrefix) && !schema_.cell.empty()) {
        const bool given = schema_.layout_rule.find(layouts::kGivenCell) != std::string::npos;
        const std::vector<std::uint32_t> order =
            schema_.order.empty() ? CellGrid::default_order(schema_.shape.size()) : schema_.order;
        const std::string key = encode_schema(schema_);
        std::lock_guard choice_lock(choice_mu_);
        if (choice_key_ != key) {
          choice_json_ = layouts::choose_by_model(ctx_.geometry, schema_.shape, schema_.dtype.itemsize, order,
                                                  given ? std::span<const std::uint64_t>(schema_.cell)
                                                        : std::span<const std::uint64_t>())
                             .to_json();
          choice_key_ = key;
        }
        j["layout_choice"] = choice_json_;
      }
    }
    else if (schema_.layout_set) j["layout_rule"] = "user.mmfs.layout";
    else  // created before the model chose the default: the geometry's rule chose it
      j["layout_rule"] = schema_.layout == rule.layout ? rule.rule
                                                        : "user.mmfs.layout (the volume's default is " + rule.layout + ")";
  }
  // An mloc image orders its chunks along the Hilbert curve whatever the
  // order says; its chunk grid has the default order. Show the attribute.
  j["order"] = is_mloc(schema_) && !schema_.order.empty() ? schema_.order : g.order();
  j["cell"] = g.cell();
  j["priority"] = schema_.priority;
  j["chunk"] = schema_.chunk.empty() ? nlohmann::json(nullptr) : nlohmann::json(schema_.chunk);
  j["compress"] = schema_.compress;
  j["index"] = schema_.index;
  j["bins"] = is_mloc(schema_) && schema_.bins.empty() ? "100" : schema_attr_text(schema_, "bins");
  j["bytes"] = bytes_.load();
  std::uint64_t sectors = 0;
  for (const Extent& e : placement_->extents()) sectors += e.sectors;
  std::uint64_t copy_bytes = 0;
  for (const ArrayCopy& c : copies_) copy_bytes += c.placement->device_bytes();
  j["device_bytes"] = {{"data", sectors * ctx_.geometry.sector_size()},
                       {"index", index_ ? index_->device_bytes() : 0},
                       {"copies", copy_bytes}};
  if (placement_lost_locked(0)) j["member_lost"] = true;
  if (const ArrayState* cells = cells_locked(); cells && !cells->lost().isEmpty()) {
    // Cells whose bytes a failed member took (a lagging copy promoted): they
    // read as errors until written whole.
    j["lost_cells"] = cells->lost().cardinality();
    j["first_lost_cell"] = cells->lost().minimum();
  }
  if (!copies_.empty()) {
    // Each copy: its placement, whether it serves views, and its space.
    nlohmann::json list = nlohmann::json::array();
    for (std::size_t i = 0; i < copies_.size(); ++i) {
      const ArrayCopy& c = copies_[i];
      const CellGrid& cg = c.placement->grid();
      nlohmann::json one = {{"copy", i + 1},
                            {"layout", c.spec.layout},
                            {"spec", copies_text({c.spec})},
                            {"order", cg.order()},
                            {"cell", cg.cell()},
                            {"state", c.current() ? "current" : "behind"},
                            {"cells_behind", c.behind.cardinality()},
                            {"device_bytes", c.placement->device_bytes()},
                            {"extents", c.placement->extents().size()}};
      if (placement_lost_locked(std::uint32_t(i + 1))) one["member_lost"] = true;
      c.placement->describe(&one);
      list.push_back(std::move(one));
    }
    j["copies"] = std::move(list);
    if (!catch_up_error_.empty()) j["copies_error"] = catch_up_error_;
  }
  if (!index_damage_.empty()) j["index_detail"] = {{"damaged", index_damage_}};
  if (index_) {
    const auto& h = index_->header();
    j["index_detail"] = {{"bins", h.binning().bins()},
                         {"coarse_bins", h.coarse_bins()},
                         {"bitmaps", h.directory().size()},
                         {"object_bytes", index_->object_bytes()},
                         {"provisional", index_->provisional()}};
    // Where it lies (the object's extents, then the delta's), as A@/lbn
    // says where an element lies: for tools and for tests that damage it.
    nlohmann::json lbns = nlohmann::json::array();
    for (const Extent& e : index_->extents()) lbns.push_back({e.start, e.sectors});
    j["index_detail"]["lbns"] = std::move(lbns);
    // The edges between the value bins (bin i+1 starts at edges[i]; the
    // first bin starts at the dtype's smallest value), when few enough to show.
    const indexes::Binning& b = h.binning();
    if (b.value_bins() <= 1024) {
      nlohmann::json edges = nlohmann::json::array();
      for (std::size_t i = 1; i < b.lower().size(); ++i) edges.push_back(indexes::key_value(b.type(), b.lower()[i]));
      j["index_detail"]["edges"] = edges;
    }
  }
  j["extents"] = placement_->extents().size();
  j["geometry"] = ctx_.geometry_name;
  // Sealed mloc: the image's chunk and levels; being written: the staging cells.
  if (is_mloc(schema_) && !image_locked() && placement_->readable()) j["mloc"] = {{"sealed", false}, {"staging", "naive"}};
  placement_->describe(&j);
  return j;
}

namespace {

// The plan of the reads a view's read makes through one placement: one per
// chunk it is read in (load_chunk plans ch.selection(c), a single chunk
// included), issued one after another; one plan of the whole selection
// would join requests no read ever joins.
void plan_through(const Placement& placement, const DataView& view, std::uint64_t budget,
                  const geom::Geometry& geometry, nlohmann::json* out) {
  if (!placement.chunks_by_model()) {
    const layouts::IoPlan p = placement.modeled_plan(view.selection, view.plod_bytes);
    const geom::HostCost host = geometry.host_cost();
    *out = placement.on_volume(p).to_json();
    add_host_time(host, p.modeled_ms, layouts::modeled_read_ms({&p, 1}, host), out);
    return;
  }
  const layouts::SelectionChunks ch(view.selection, placement.grid(), budget);
  std::vector<layouts::IoPlan> parts;
  parts.reserve(ch.count());
  for (std::uint64_t c = 0; c < ch.count(); ++c) parts.push_back(placement.modeled_plan(ch.selection(c), 0));
  const double read_ms = layouts::modeled_read_ms(parts, geometry.host_cost());
  const layouts::IoPlan all = layouts::concatenate_plans(std::move(parts));
  *out = placement.on_volume(all).to_json();
  add_host_time(geometry.host_cost(), all.modeled_ms, read_ms, out);
  (*out)["chunks"] = ch.count();
  (*out)["chunk_bytes"] = budget;
}

}  // namespace

int ArrayFile::plan(const DataView& view, nlohmann::json* out, std::string* message) const {
  std::shared_lock lock(mu_);
  try {
    std::uint32_t served = 0;
    std::uint64_t budget = 0;
    if (view.copy >= 0) {
      if (std::size_t(view.copy) > copies_.size()) {
        *message = fmt::format("copy {} does not exist (the array has {} copies)", view.copy, copies_.size());
        return ENOENT;
      }
      served = std::uint32_t(view.copy);
      budget = chunk_bytes_locked(view.selection, view.spelling, served);
    } else {
      served = serving_locked(view.selection, view.spelling, &budget);
    }
    plan_through(placement_at(served), view, budget, ctx_.geometry, out);
    if (view.within && view.plod_bytes == 0) {
      // A Zarr chunk thinner than the cells: what its read does (choose_within).
      nlohmann::json within = {{"box", view.within->spelling}};
      if (single_run_placement_locked(view.selection)) {
        within["read"] = "alone";
      } else {
        double alone_ms = 0, box_ms = 0;
        const bool alone = alone_beats_box_locked(view, &alone_ms, &box_ms);
        within["read"] = alone ? "alone while the box is cold" : "through the box";
        within["box_modeled_ms"] = box_ms;
      }
      (*out)["within"] = std::move(within);
    }
    if (copies_.empty()) return 0;
    // Which placement serves the view, and what each would cost.
    (*out)["served_by"] = served;
    nlohmann::json all = nlohmann::json::array();
    for (std::uint32_t k = 0; k <= copies_.size(); ++k) {
      nlohmann::json one;
      if (k == served) one = *out;
      else plan_through(placement_at(k), view, chunk_bytes_locked(view.selection, view.spelling, k), ctx_.geometry,
                        &one);
      all.push_back({{"copy", k},
                     {"layout", k == 0 ? schema_.layout : copies_[k - 1].spec.layout},
                     {"state", k == 0 || copies_[k - 1].current() ? "current" : "behind"},
                     {"requests", one["requests"]},
                     {"modeled_ms", one["modeled_ms"]}});
    }
    (*out)["copies"] = std::move(all);
    return 0;
  } catch (const std::exception& e) {
    *message = fmt::format("planning {} failed: {}", view.spelling, e.what());
    return EINVAL;
  }
}

int ArrayFile::lbn_text(std::span<const std::uint64_t> coords, std::string* out, std::string* message,
                        int copy) const {
  std::shared_lock lock(mu_);
  if (copy < 0 || std::size_t(copy) > copies_.size()) {
    *message = fmt::format("copy {} does not exist (the array has {} copies)", copy, copies_.size());
    return ENOENT;
  }
  geom::Lbn lbn = 0;
  std::uint32_t offset = 0;
  if (int r = placement_at(std::uint32_t(copy)).element_location(coords, &lbn, &offset, message)) return r;
  *out = fmt::format("{} {}\n", lbn, offset);
  return 0;
}

}  // namespace mmfs::fs
