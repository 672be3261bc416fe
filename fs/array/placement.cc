#include "fs/array/placement.h"

#include "fs/array/member_sets.h"

#include <fmt/format.h>

#include <cerrno>

#include "layouts/capsule.h"
#include "layouts/multimap.h"
#include "layouts/quadrangle_array.h"

namespace mmfs::fs {

namespace {

class CellPlacement final : public Placement {
 public:
  // A placement on a member set is modeled on the set's geometry (the
  // requests its device serves); what it shows is in the volume's LBNs.
  CellPlacement(std::unique_ptr<ArrayState> state, const geom::Geometry& geometry)
      : state_(std::move(state)),
        geometry_(state_->site() ? state_->site()->geometry() : geometry),
        volume_extents_(state_->volume_extents()) {}

  const layouts::CellGrid& grid() const override { return state_->grid(); }
  bool holds_data() const override { return state_->holds_data(); }
  const std::vector<Extent>& extents() const override { return volume_extents_; }
  std::uint64_t device_bytes() const override {
    std::uint64_t sectors = 0;
    for (const Extent& e : extents()) sectors += e.sectors;
    return sectors * geometry_.sector_size();
  }

  int read_selection(const layouts::Selection& selection, std::uint32_t, std::byte* out, std::uint64_t* bytes_read,
                     std::string* message, const std::function<void()>& device_done, AlignedBuffer* scratch,
                     bool, std::uint64_t* bad_cell) override {
    std::uint64_t bad = kNoBadCell;  // stays: the device failed, not a checksum
    if (int r = state_->read_selection(selection, out, &bad, device_done, bytes_read, scratch)) {
      if (bad_cell) *bad_cell = bad;
      *message = r == EIO && bad != kNoBadCell ? state_->failure_message(bad)
                 : r == ENOMEM                 ? "out of memory while verifying the cells read"
                                               : "device read failed";
      return r;
    }
    return 0;
  }
  layouts::IoPlan plan(const layouts::Selection& selection, std::uint32_t) const override {
    return state_->plan(selection);
  }
  layouts::IoPlan modeled_plan(const layouts::Selection& selection, std::uint32_t keep) const override {
    layouts::IoPlan p = plan(selection, keep);
    if (p.whole_cells_ms < 0) layouts::model_plan(p, geometry_);  // else modeled when it was chosen
    return p;
  }
  bool chunks_by_model() const override { return true; }

  int element_location(std::span<const std::uint64_t> coords, geom::Lbn* lbn, std::uint32_t* offset,
                       std::string*) const override {
    state_->element_location(coords, lbn, offset);
    if (const MemberSetSite* site = state_->site()) *lbn = site->to_volume(*lbn);
    return 0;
  }
  void describe(nlohmann::json* info) const override {
    nlohmann::json& j = *info;
    const layouts::Layout& layout = state_->layout();
    if (const auto* mm = dynamic_cast<const layouts::MultiMapLayout*>(&layout)) j["basic_cube"] = mm->basic_cube();
    if (const auto* cap = dynamic_cast<const layouts::CapsuleLayout*>(&layout)) {
      nlohmann::json d = cap->describe();
      j["capsule"] = {{"sectors", d["capsule_sectors"]}, {"records", d["records_per_capsule"]},
                      {"attributes", d["attributes"]},   {"capsules", d["capsules"]},
                      {"bands", d["bands"]},             {"split_capsules", d["split_capsules"]},
                      {"parallelism", d["parallelism"]}};
    }
    if (const auto* quad = dynamic_cast<const layouts::QuadrangleArrayLayout*>(&layout)) {
      nlohmann::json d = quad->describe();
      for (const char* key : {"layout", "cell", "order", "sectors_per_cell", "extents"}) d.erase(key);
      j["quadrangle"] = std::move(d);
    }
    j["sectors_per_cell"] = layout.sectors_per_cell();
    j["cells"] = grid().cells();
    if (const MemberSetSite* site = state_->site()) j["members"] = site->members();
  }
  layouts::IoPlan on_volume(const layouts::IoPlan& plan) const override {
    const MemberSetSite* site = state_->site();
    return site ? site->to_volume(plan) : plan;
  }
  std::string chosen_attr(std::string_view name) const override {
    if (name == "cell") return layouts::join(grid().cell());
    if (name == "basic_cube") {
      if (const auto* mm = dynamic_cast<const layouts::MultiMapLayout*>(&state_->layout()))
        return layouts::join(mm->basic_cube());
      if (const auto* quad = dynamic_cast<const layouts::QuadrangleArrayLayout*>(&state_->layout()))
        return layouts::join(quad->quadrangles().cube());  // the depth split; the primary's entry is the row
    }
    return "none";
  }

  ArrayState* cells() override { return state_.get(); }
  MemberSetSite* site() const override { return state_->site(); }

 private:
  std::unique_ptr<ArrayState> state_;
  const geom::Geometry& geometry_;
  std::vector<Extent> volume_extents_;
};

class ImagePlacement final : public Placement {
 public:
  // As a CellPlacement: on a member set, modeled on the set's geometry and
  // shown in the volume's LBNs.
  ImagePlacement(std::unique_ptr<MlocImage> image, const geom::Geometry& geometry, MemberSetSite* site)
      : image_(std::move(image)),
        geometry_(site ? site->geometry() : geometry),
        site_(site),
        volume_extents_(site ? site->to_volume(image_->extents()) : image_->extents()) {}

  const layouts::CellGrid& grid() const override { return image_->chunk_cells(); }
  bool holds_data() const override { return image_->holds_data(); }
  const std::vector<Extent>& extents() const override { return volume_extents_; }
  std::uint64_t device_bytes() const override { return image_->device_bytes(); }

  int read_selection(const layouts::Selection& selection, std::uint32_t keep, std::byte* out,
                     std::uint64_t* bytes_read, std::string* message, const std::function<void()>& device_done,
                     AlignedBuffer*, bool once, std::uint64_t* bad_cell) override {
    if (bad_cell) *bad_cell = kNoBadCell;
    const int r = image_->read_selection(selection, keep, out, bytes_read, message, once);
    if (device_done) device_done();
    return r;
  }
  layouts::IoPlan plan(const layouts::Selection& selection, std::uint32_t keep) const override {
    return image_->plan(selection, keep, geometry_);
  }
  layouts::IoPlan modeled_plan(const layouts::Selection& selection, std::uint32_t keep) const override {
    return plan(selection, keep);
  }
  bool chunks_by_model() const override { return false; }

  int element_location(std::span<const std::uint64_t> coords, geom::Lbn* lbn, std::uint32_t* offset,
                       std::string* message) const override {
    const int r = image_->element_location(coords, lbn, offset, message);
    if (r == 0 && site_) *lbn = site_->to_volume(*lbn);
    return r;
  }
  void describe(nlohmann::json* info) const override {
    (*info)["chunk"] = image_->grid().chunk();
    (*info)["mloc"] = image_->describe();
    if (site_) (*info)["members"] = site_->members();
  }
  layouts::IoPlan on_volume(const layouts::IoPlan& plan) const override {
    return site_ ? site_->to_volume(plan) : plan;
  }
  std::string chosen_attr(std::string_view name) const override {
    if (name == "cell") return layouts::join(grid().cell());
    if (name == "chunk") return layouts::join(image_->grid().chunk());
    return "none";
  }

  MlocImage* image() override { return image_.get(); }
  MemberSetSite* site() const override { return site_; }

 private:
  std::unique_ptr<MlocImage> image_;
  const geom::Geometry& geometry_;
  MemberSetSite* site_;
  std::vector<Extent> volume_extents_;
};

class UnreadablePlacement final : public Placement {
 public:
  UnreadablePlacement(std::unique_ptr<Placement> stand_in, std::vector<Extent> stored, std::uint64_t sector_bytes,
                      std::string why)
      : stand_in_(std::move(stand_in)), stored_(std::move(stored)), sector_bytes_(sector_bytes), why_(std::move(why)) {}

  const layouts::CellGrid& grid() const override { return stand_in_->grid(); }
  bool holds_data() const override { return true; }
  const std::vector<Extent>& extents() const override { return stored_; }
  std::uint64_t device_bytes() const override {
    std::uint64_t sectors = 0;
    for (const Extent& e : stored_) sectors += e.sectors;
    return sectors * sector_bytes_;
  }
  int read_selection(const layouts::Selection&, std::uint32_t, std::byte*, std::uint64_t*, std::string* message,
                     const std::function<void()>& device_done, AlignedBuffer*, bool, std::uint64_t* bad_cell) override {
    if (bad_cell) *bad_cell = kNoBadCell;
    if (device_done) device_done();
    *message = why_;
    return EIO;
  }
  layouts::IoPlan plan(const layouts::Selection& selection, std::uint32_t keep) const override {
    return stand_in_->plan(selection, keep);
  }
  layouts::IoPlan modeled_plan(const layouts::Selection& selection, std::uint32_t keep) const override {
    return stand_in_->modeled_plan(selection, keep);
  }
  bool chunks_by_model() const override { return false; }
  int element_location(std::span<const std::uint64_t>, geom::Lbn*, std::uint32_t*,
                       std::string* message) const override {
    *message = why_;
    return ENODATA;
  }
  void describe(nlohmann::json* info) const override {
    stand_in_->describe(info);
    info->erase("mloc");  // the stand-in's, not the stored image's
    (*info)["unreadable"] = why_;
  }
  layouts::IoPlan on_volume(const layouts::IoPlan& plan) const override { return stand_in_->on_volume(plan); }
  std::string chosen_attr(std::string_view name) const override { return stand_in_->chosen_attr(name); }
  MemberSetSite* site() const override { return stand_in_->site(); }
  bool readable() const override { return false; }

 private:
  std::unique_ptr<Placement> stand_in_;
  std::vector<Extent> stored_;
  std::uint64_t sector_bytes_;
  std::string why_;
};

}  // namespace

std::unique_ptr<Placement> unreadable_placement(std::unique_ptr<Placement> stand_in, std::vector<Extent> stored,
                                                std::uint64_t sector_bytes, std::string why) {
  return std::make_unique<UnreadablePlacement>(std::move(stand_in), std::move(stored), sector_bytes, std::move(why));
}

std::unique_ptr<Placement> cell_placement(std::unique_ptr<ArrayState> state, const geom::Geometry& geometry) {
  return std::make_unique<CellPlacement>(std::move(state), geometry);
}

std::unique_ptr<Placement> image_placement(std::unique_ptr<MlocImage> image, const geom::Geometry& geometry,
                                           MemberSetSite* site) {
  return std::make_unique<ImagePlacement>(std::move(image), geometry, site);
}

}  // namespace mmfs::fs
