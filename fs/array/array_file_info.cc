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
#include "layouts/capsule.h"
#include "layouts/default_layout.h"
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
  if (name == "cell") return layouts::join(grid_locked().cell());
  if (name == "basic_cube") {
    if (const auto* mm = dynamic_cast<const layouts::MultiMapLayout*>(&state_->layout()))
      return layouts::join(mm->basic_cube());
    if (const auto* quad = dynamic_cast<const layouts::QuadrangleArrayLayout*>(&state_->layout()))
      return layouts::join(quad->quadrangles().cube());  // the depth split; the primary's entry is the row
    return "none";
  }
  if (name == "chunk") return mloc_ ? layouts::join(mloc_->grid().chunk()) : "none";
  return text;
}

nlohmann::json ArrayFile::info() const {
  std::shared_lock lock(mu_);
  const CellGrid& g = grid_locked();
  nlohmann::json j;
  j["shape"] = g.shape();
  j["dtype"] = schema_.dtype.name;
  j["itemsize"] = g.itemsize();
  j["layout"] = schema_.layout;
  {
    const layouts::DefaultLayout rule = layouts::default_layout(ctx_.geometry);
    j["layout_rule"] = schema_.layout == rule.layout
                           ? rule.rule
                           : "user.mmfs.layout (the volume's default is " + rule.layout + ")";
  }
  // An mloc image orders its chunks along the Hilbert curve whatever the
  // order says; its chunk grid has the default order. Show the attribute.
  j["order"] = is_mloc(schema_) && !schema_.order.empty() ? schema_.order : g.order();
  j["cell"] = g.cell();
  if (state_)
    if (const auto* mm = dynamic_cast<const layouts::MultiMapLayout*>(&state_->layout()))
      j["basic_cube"] = mm->basic_cube();
  if (state_)
    if (const auto* cap = dynamic_cast<const layouts::CapsuleLayout*>(&state_->layout())) {
      nlohmann::json d = cap->describe();
      j["capsule"] = {{"sectors", d["capsule_sectors"]},     {"records", d["records_per_capsule"]},
                      {"attributes", d["attributes"]},       {"capsules", d["capsules"]},
                      {"bands", d["bands"]},                 {"split_capsules", d["split_capsules"]},
                      {"parallelism", d["parallelism"]}};
    }
  if (state_)
    if (const auto* quad = dynamic_cast<const layouts::QuadrangleArrayLayout*>(&state_->layout())) {
      nlohmann::json d = quad->describe();
      for (const char* key : {"layout", "cell", "order", "sectors_per_cell", "extents"}) d.erase(key);
      j["quadrangle"] = std::move(d);
    }
  j["priority"] = schema_.priority;
  j["chunk"] = mloc_ ? nlohmann::json(mloc_->grid().chunk())
                    : schema_.chunk.empty() ? nlohmann::json(nullptr) : nlohmann::json(schema_.chunk);
  j["compress"] = schema_.compress;
  j["index"] = schema_.index;
  j["bins"] = is_mloc(schema_) && schema_.bins.empty() ? "100" : schema_attr_text(schema_, "bins");
  j["bytes"] = bytes_.load();
  std::uint64_t sectors = 0;
  for (const Extent& e : state_ ? state_->layout().extents() : mloc_->extents()) sectors += e.sectors;
  j["device_bytes"] = {{"data", sectors * ctx_.geometry.sector_size()},
                       {"index", index_ ? index_->device_bytes() : 0}};
  if (!index_damage_.empty()) j["index_detail"] = {{"damaged", index_damage_}};
  if (index_) {
    const auto& h = index_->header();
    j["index_detail"] = {{"bins", h.binning().bins()},
                         {"coarse_bins", h.coarse_bins()},
                         {"bitmaps", h.directory().size()},
                         {"object_bytes", index_->object_bytes()},
                         {"provisional", index_->provisional()}};
    // The edges between the value bins (bin i+1 starts at edges[i]; the
    // first bin starts at the dtype's smallest value), when few enough to show.
    const indexes::Binning& b = h.binning();
    if (b.value_bins() <= 1024) {
      nlohmann::json edges = nlohmann::json::array();
      for (std::size_t i = 1; i < b.lower().size(); ++i) edges.push_back(indexes::key_value(b.type(), b.lower()[i]));
      j["index_detail"]["edges"] = edges;
    }
  }
  j["extents"] = state_ ? state_->layout().extents().size() : mloc_->extents().size();
  j["geometry"] = ctx_.geometry_name;
  if (state_) {
    j["sectors_per_cell"] = state_->layout().sectors_per_cell();
    j["cells"] = g.cells();
  }
  if (is_mloc(schema_)) {
    // Sealed: the image's levels; being written: the staging cells.
    j["mloc"] = mloc_ ? mloc_->describe() : nlohmann::json{{"sealed", false}, {"staging", "naive"}};
  }
  return j;
}

int ArrayFile::plan(const DataView& view, nlohmann::json* out, std::string* message) const {
  std::shared_lock lock(mu_);
  try {
    if (!state_) {
      const layouts::IoPlan p = mloc_->plan(view.selection, view.plod_bytes, ctx_.geometry);
      const geom::HostCost host = ctx_.geometry.host_cost();
      *out = p.to_json();
      add_host_time(host, p.modeled_ms, layouts::modeled_read_ms({&p, 1}, host), out);
      return 0;
    }
    // The plan of the reads this view's read makes: one per chunk it is read
    // in (load_chunk plans ch.selection(c), a single chunk included), issued
    // one after another; one plan of the whole selection would join requests
    // no read ever joins.
    const std::uint64_t budget = chunk_bytes_locked(view.selection, view.spelling);
    const layouts::SelectionChunks ch(view.selection, grid_locked(), budget);
    std::vector<layouts::IoPlan> parts;
    parts.reserve(ch.count());
    for (std::uint64_t c = 0; c < ch.count(); ++c) {
      layouts::IoPlan p = state_->plan(ch.selection(c));
      if (p.whole_cells_ms < 0) layouts::model_plan(p, ctx_.geometry);  // else modeled when it was chosen
      parts.push_back(std::move(p));
    }
    const double read_ms = layouts::modeled_read_ms(parts, ctx_.geometry.host_cost());
    const layouts::IoPlan all = layouts::concatenate_plans(std::move(parts));
    *out = all.to_json();
    add_host_time(ctx_.geometry.host_cost(), all.modeled_ms, read_ms, out);
    (*out)["chunks"] = ch.count();
    (*out)["chunk_bytes"] = budget;
  } catch (const std::exception& e) {
    *message = fmt::format("planning {} failed: {}", view.spelling, e.what());
    return EINVAL;
  }
  return 0;
}

int ArrayFile::lbn_text(std::span<const std::uint64_t> coords, std::string* out, std::string* message) const {
  std::shared_lock lock(mu_);
  if (!state_) {
    geom::Lbn lbn = 0;
    std::uint32_t offset = 0;
    if (int r = mloc_->element_location(coords, &lbn, &offset, message)) return r;
    *out = fmt::format("{} {}\n", lbn, offset);
    return 0;
  }
  geom::Lbn lbn = 0;
  std::uint32_t offset = 0;
  state_->element_location(coords, &lbn, &offset);
  *out = fmt::format("{} {}\n", lbn, offset);
  return 0;
}

}  // namespace mmfs::fs
