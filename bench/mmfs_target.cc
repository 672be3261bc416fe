#include "bench/mmfs_target.h"

#include <fmt/format.h>

#include <algorithm>

#include "bench/fresh_allocation.h"

namespace mmfs::bench {
namespace {

class MmfsTarget final : public Target {
 public:
  MmfsTarget(const geom::Geometry& geometry, std::unique_ptr<layouts::Layout> layout)
      : geometry_(geometry), layout_(std::move(layout)) {}
  std::string name() const override { return "mmfs-" + layout_->name(); }
  std::string kind() const override { return "mmfs"; }
  std::string label() const override { return layout_->name(); }
  layouts::IoPlan plan(const layouts::Selection& selection) const override {
    // ArrayFile::plan: default PlanOptions, then the idle-device model.
    layouts::IoPlan p = layouts::plan_selection(*layout_, selection);
    layouts::model_plan(p, geometry_);
    return p;
  }
  nlohmann::json describe() const override {
    nlohmann::json j = layout_->describe();
    j["first_lbn"] = layout_->extents().empty() ? 0 : layout_->extents().front().start;
    j["cell_bytes"] = layout_->grid().cell_bytes();
    return j;
  }

 private:
  const geom::Geometry& geometry_;
  std::unique_ptr<layouts::Layout> layout_;
};

std::unique_ptr<layouts::Layout> build_layout(const geom::Geometry& geometry, const MmfsArraySpec& spec) {
  std::vector<std::uint32_t> order = spec.order.empty() ? layouts::CellGrid::default_order(spec.shape.size()) : spec.order;
  std::vector<std::uint64_t> cell = spec.cell.empty() ? daemon_cell(geometry, spec) : spec.cell;
  return layouts::make_layout(spec.layout, geometry, layouts::CellGrid(spec.shape, spec.itemsize, cell, order));
}

}  // namespace

std::uint32_t daemon_default_cell_bytes(const geom::Geometry& geometry) {
  return layouts::CellGrid::default_cell_bytes(geometry.sector_size());
}

std::vector<std::uint64_t> daemon_cell(const geom::Geometry& geometry, const MmfsArraySpec& spec) {
  std::vector<std::uint32_t> order = spec.order.empty() ? layouts::CellGrid::default_order(spec.shape.size()) : spec.order;
  return layouts::CellGrid::default_cell(spec.shape, spec.itemsize, daemon_default_cell_bytes(geometry), order);
}

std::unique_ptr<Target> make_mmfs_target(const geom::Geometry& geometry, const MmfsArraySpec& spec,
                                         geom::Lbn first_lbn) {
  auto layout = build_layout(geometry, spec);
  layout->place(allocate_fresh(geometry, layout->space(), first_lbn));
  return std::make_unique<MmfsTarget>(geometry, std::move(layout));
}

std::unique_ptr<Target> make_mmfs_target(const geom::Geometry& geometry, const MmfsArraySpec& spec,
                                         std::vector<layouts::Extent> extents) {
  auto layout = build_layout(geometry, spec);
  layout->place(std::move(extents));
  return std::make_unique<MmfsTarget>(geometry, std::move(layout));
}

}  // namespace mmfs::bench
