// Space for a placement confined to a member set (geometry/member_subset.h;
// docs/copies-on-members.md, piece 3): the volume's free space on the set's
// members, handed out in the set's own sub-volume LBNs.
//
// The volume's Allocator stays the one free map (rebuilt at mount from the
// extent maps, checked by mmfsck), so this keeps none of its own. An
// allocation takes a snapshot of what the volume's map leaves free on the
// set's members, lets an Allocator over the set's geometry choose from it
// with the same rules as for any array (whole tracks from the bottom up,
// track groups for MultiMap, ...), and takes the chosen sectors in the
// volume's map. Another allocation may take some of them between the
// snapshot and that step; then everything taken is returned and the
// allocation starts again from a new snapshot.
//
// Thread-safe as the volume's Allocator is; it and the set must outlive this.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "fs/meta/allocator.h"
#include "geometry/member_subset.h"

namespace mmfs::fs {

// Extents as runs of LBNs (geom::MemberSubset's form).
std::vector<geom::LbnRun> as_runs(const std::vector<Extent>& extents);

class SubsetAllocator final : public SpaceSource {
 public:
  SubsetAllocator(Allocator& volume, const geom::MemberSubset& set) : volume_(volume), set_(set) {}

  // The space a layout over set.geometry() asks for, as sub-VLBN extents,
  // taken in the volume's free map. 0, or ENOSPC (or EAGAIN after repeated
  // races) with nothing taken.
  int allocate(const layouts::SpaceRequest& request, std::vector<Extent>* out) override;
  // Returns sub-VLBN extents to the volume's free map; false as
  // Allocator::free (a part of it already free, or outside the data area).
  bool free(const Extent& e) override;
  // The volume's free sectors on the set's members.
  std::uint64_t free_sectors() const override;

 private:
  // The set's free space now: an Allocator over its geometry with everything
  // but what the volume's map has free on the set's members in use.
  std::unique_ptr<Allocator> snapshot() const;

  Allocator& volume_;
  const geom::MemberSubset& set_;
};

}  // namespace mmfs::fs
