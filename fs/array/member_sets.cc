// Placements on member sets (fs/array/member_sets.h).
#include "fs/array/member_sets.h"

#include <fmt/format.h>

#include <algorithm>

namespace mmfs::fs {

using layouts::Extent;

std::string set_extents_record(std::uint8_t slot) {
  return slot == 0 ? std::string("mmfs.set_extents") : fmt::format("mmfs.set_extents.{}", slot);
}

MemberSetSite::MemberSetSite(Allocator& volume_allocator, BlockDevice& volume_device,
                             const geom::StripedGeometry& volume, std::vector<std::uint32_t> members)
    : set_(volume, std::move(members)),
      device_(volume_device, set_),
      io_(std::make_unique<SectorIo>(device_, set_.geometry())),
      allocator_(volume_allocator, set_) {}

void MemberSetSite::free(const std::vector<Extent>& extents) {
  for (const Extent& e : extents) allocator_.free(e);
}

std::vector<Extent> MemberSetSite::to_volume(const std::vector<Extent>& extents) const {
  std::vector<Extent> out;
  for (const geom::LbnRun& r : set_.to_parent(as_runs(extents))) out.push_back({r.first, r.count});
  return out;
}

layouts::IoPlan MemberSetSite::to_volume(const layouts::IoPlan& plan) const {
  layouts::IoPlan out = plan;
  out.requests = 0;
  for (layouts::IoBatch& b : out.batches) {
    std::vector<geom::Request> requests;
    for (const geom::Request& q : b.requests)
      for (const geom::LbnRun& r : set_.to_parent(std::vector<geom::LbnRun>{{q.lbn, q.sectors}}))
        requests.push_back({r.first, std::uint32_t(r.count)});
    out.requests += requests.size();
    b.requests = std::move(requests);
  }
  return out;
}

MemberSets::MemberSets(Allocator& allocator, BlockDevice& device, const geom::Geometry& volume)
    : allocator_(allocator), device_(device), striped_(dynamic_cast<const geom::StripedGeometry*>(&volume)) {}

std::uint32_t MemberSets::stripe_members() const { return striped_ ? striped_->members() : 1; }

std::vector<std::uint32_t> MemberSets::members_for(std::uint32_t placements, std::uint32_t k) const {
  if (stripe_members() < 2 || placements < 2) return {};
  return geom::MemberSubset::members_for(stripe_members(), placements, k);
}

MemberSetSite* MemberSets::site(const std::vector<std::uint32_t>& members, std::string* message) {
  if (!striped_) {
    *message = fmt::format("the placement lies on members {} of a volume of several devices; this volume has one",
                           fmt::join(members, ","));
    return nullptr;
  }
  std::lock_guard lock(mu_);
  auto it = sites_.find(members);
  if (it != sites_.end()) return it->second.get();
  try {
    auto site = std::make_unique<MemberSetSite>(allocator_, device_, *striped_, members);
    return sites_.emplace(members, std::move(site)).first->second.get();
  } catch (const std::exception& e) {
    *message = fmt::format("the placement's members {} are not a set of this volume's {}: {}", fmt::join(members, ","),
                           striped_->members(), e.what());
    return nullptr;
  }
}

void MemberSets::add_stats(nlohmann::json* volume_stats) const {
  std::lock_guard lock(mu_);
  for (const auto& [members, site] : sites_) {
    const nlohmann::json s = site->io().stats();
    for (const auto& item : s.items()) {
      if (item.key() == "sector_size" || !volume_stats->contains(item.key())) continue;
      nlohmann::json& v = (*volume_stats)[item.key()];
      if (!v.is_number() || !item.value().is_number()) continue;
      if (v.is_number_float() || item.value().is_number_float())
        v = v.get<double>() + item.value().get<double>();
      else
        v = v.get<std::uint64_t>() + item.value().get<std::uint64_t>();
    }
  }
}

}  // namespace mmfs::fs
