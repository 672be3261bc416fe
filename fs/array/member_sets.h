// Placements confined to a member set of a volume of several devices
// (docs/copies-on-members.md, piece 4): on a volume of p > 1 stripe members,
// an array with copies keeps each placement (the primary and every copy) on
// its own set of members, so a lost member loses at most one copy of any
// cell (a fractured mirror).
//
// A MemberSetSite is everything a placement needs to live on a set: the
// set's own geometry (geom::MemberSubset, a striped volume of |set| members
// on which every layout and the model run unchanged), a SectorIo over the
// set's BlockDevice (fs/device/subset_device.h), and its share of the
// volume's free space (fs/meta/subset_allocator.h). The placement's layout
// works in the set's own LBNs (sub-VLBNs) throughout; only what leaves the
// placement is translated to the volume's LBNs: the extent maps the store
// keeps (so the allocator's rebuild at mount and mmfsck see volume LBNs as
// for any array), A@/lbn and the requests A@/plan shows.
//
// A volume extent map cannot say where one of the layout's extents ends and
// the next begins once two are contiguous on the set (MultiMap's track
// groups must come back as they were handed out), so the layout's own list
// is kept beside it, in an xattr record outside the user namespace
// (kSetExtentsRecord), checked against the volume's map at every open.
//
// The placements of one array share nothing but the registry (MemberSets),
// which hands out one site per set for the mount's lifetime, so every
// placement on a set shares one SectorIo (one model clock per set).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fs/device/sector_io.h"
#include "fs/device/subset_device.h"
#include "fs/meta/allocator.h"
#include "fs/meta/subset_allocator.h"
#include "geometry/member_subset.h"
#include "geometry/striped.h"
#include "layouts/io_plan.h"
#include "layouts/layout.h"

namespace mmfs::fs {

// The xattr record of a placement's extents in its set's LBNs: slot 0 the
// primary, k a copy's slot.
std::string set_extents_record(std::uint8_t slot);

class MemberSetSite {
 public:
  MemberSetSite(Allocator& volume_allocator, BlockDevice& volume_device, const geom::StripedGeometry& volume,
                std::vector<std::uint32_t> members);

  const std::vector<std::uint32_t>& members() const { return set_.members(); }
  // The set as a volume of its own: what the placement's layout is built on.
  const geom::Geometry& geometry() const { return set_.geometry(); }
  SectorIo& io() { return *io_; }

  // Space in the set's LBNs, taken in the volume's free map (SubsetAllocator).
  int allocate(const layouts::SpaceRequest& request, std::vector<layouts::Extent>* out) {
    return allocator_.allocate(request, out);
  }
  std::uint64_t free_sectors() const { return allocator_.free_sectors(); }
  // The same space for objects that allocate their own (an mloc image).
  SpaceSource& space() { return allocator_; }
  // Gives set extents back to the volume's free map.
  void free(const std::vector<layouts::Extent>& extents);

  // The same sectors in the volume's LBNs: extents cut where the set's
  // tracks change member, merged where contiguous on the volume.
  std::vector<layouts::Extent> to_volume(const std::vector<layouts::Extent>& extents) const;
  geom::Lbn to_volume(geom::Lbn lbn) const { return set_.to_parent(lbn); }
  // A plan's requests in the volume's LBNs (as the set's device issues
  // them: each request split where it changes member), for A@/plan.
  layouts::IoPlan to_volume(const layouts::IoPlan& plan) const;

 private:
  geom::MemberSubset set_;
  SubsetDevice device_;
  std::unique_ptr<SectorIo> io_;
  SubsetAllocator allocator_;
};

class MemberSets {
 public:
  // `volume`: the mounted volume's geometry; sets exist only when it is a
  // StripedGeometry of several members. The arguments must outlive this.
  MemberSets(Allocator& allocator, BlockDevice& device, const geom::Geometry& volume);

  // The volume's stripe members (1: a single device, no sets).
  std::uint32_t stripe_members() const;
  // The members placement k (0: the primary) of `placements` lies on: empty
  // (the whole volume) on a single device or for a lone placement.
  std::vector<std::uint32_t> members_for(std::uint32_t placements, std::uint32_t k) const;
  // The site of a set (the same object for the mount's lifetime), or null
  // with *message saying why (no such members on this volume).
  MemberSetSite* site(const std::vector<std::uint32_t>& members, std::string* message);
  // The sets' device counters added into `volume_stats` (SectorIo::stats of
  // the volume): the set devices' requests reach the volume's device
  // without passing its SectorIo.
  void add_stats(nlohmann::json* volume_stats) const;

 private:
  Allocator& allocator_;
  BlockDevice& device_;
  const geom::StripedGeometry* striped_;  // null: one device
  mutable std::mutex mu_;
  std::map<std::vector<std::uint32_t>, std::unique_ptr<MemberSetSite>> sites_;
};

}  // namespace mmfs::fs
