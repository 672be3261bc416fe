// The members of an Atropos volume behind a volume geometry: a plain zoned
// disk is one member (p = 1, volume LBN = DLBN); a StripedGeometry over a
// zoned disk has p members and maps (member k, DLBN) to the volume LBN that
// StripedGeometry::volume_lbn gives (geometry/striped.h). Member track m of
// every member is then the p consecutive volume tracks [m*p, m*p+p): one row
// (Atropos' rectangle) of a quadrangle stripe.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string_view>

#include "geometry/geometry.h"
#include "geometry/striped.h"
#include "geometry/zoned_disk.h"
#include "layouts/atropos.h"

namespace mmfs::layouts {

class AtroposMembers {
 public:
  // Throws GeometryError(NotSupported), naming `what`, when the volume's
  // devices are not zoned disks (MEMS, flash): quadrangles are built from a
  // disk's tracks and head switches.
  AtroposMembers(const geom::Geometry& volume, std::string_view what)
      : volume_(volume), striped_(dynamic_cast<const geom::StripedGeometry*>(&volume)) {
    const geom::Geometry& member = striped_ ? striped_->member() : volume;
    disk_ = dynamic_cast<const geom::ZonedDisk*>(&member);
    if (!disk_)
      throw geom::GeometryError(
          geom::ErrorKind::NotSupported,
          fmt::format("{} needs a disk volume (Atropos quadrangles are built from a disk's tracks and head "
                      "switches); the volume's geometry '{}' is a {} device",
                      what, volume.name(),
                      volume.kind() == geom::DeviceKind::Mems ? "MEMS" : geom::to_string(volume.kind())));
    p_ = striped_ ? striped_->members() : 1;
  }

  const geom::Geometry& volume() const { return volume_; }
  const geom::ZonedDisk& disk() const { return *disk_; }
  const geom::StripedGeometry* striped() const { return striped_; }
  std::uint32_t devices() const { return p_; }

  // (member, DLBN) -> volume LBN, and back.
  geom::Lbn volume_lbn(const DeviceBlock& at) const {
    return striped_ ? striped_->volume_lbn(at.device, at.dlbn) : at.dlbn;
  }
  DeviceBlock member_of(geom::Lbn lbn) const {
    if (!striped_) return {0, lbn};
    const geom::StripedGeometry::MemberLbn m = striped_->locate(lbn);
    return {m.member, m.lbn};
  }
  // The first volume LBN of member zone `zone` (its first track on member 0).
  geom::Lbn zone_first_lbn(std::uint32_t zone) const {
    return volume_lbn({0, disk_->zones().at(zone).first_lbn});
  }

 private:
  const geom::Geometry& volume_;
  const geom::StripedGeometry* striped_ = nullptr;
  const geom::ZonedDisk* disk_ = nullptr;
  std::uint32_t p_ = 1;
};

}  // namespace mmfs::layouts
