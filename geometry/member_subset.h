// A set of members of a striped volume, seen as a striped volume of its own
// (docs/copies-on-members.md, piece 1). Pure model: no I/O.
//
// Copies of an array on a volume of several members keep each copy of a
// cell on a different member by confining each placement to its own member
// set. A member set of p' members of the same member geometry is itself a
// StripedGeometry of p' members (`geometry()`), so every layout and the
// planner's model run on it unchanged; this class translates its LBNs (the
// sub-VLBNs) to the volume's (VLBNs) and back.
//
// Mapping. Sub-volume track t' = m·p' + k' is member track m of member
// set[k'], which is volume track m·p + set[k'] (geometry/striped.h): a
// sub-VLBN is located on its sub-member by the subset's own geometry and
// mapped to the volume by the parent's volume_lbn(). Runs of sub-VLBNs
// become runs of VLBNs cut at sub-track boundaries (two consecutive
// sub-tracks lie on different members, or p'/p tracks apart), merged where
// the volume's runs touch.
//
// Which members a placement gets: with `placements` placements (the primary
// and its copies), placement k uses the members m ≡ k (mod placements)
// (`members_for`). A volume with fewer members than placements has too few
// to keep the placements apart: then placement k uses member k mod p, and
// placements share members.
//
// Errors: GeometryError(Invalid) for an empty set, a member >= p, or one
// named twice; OutOfRange for an LBN past the subset (to_parent) or a VLBN
// on a member outside the set (to_sub).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "geometry/striped.h"

namespace mmfs::geom {

// A run of consecutive LBNs.
struct LbnRun {
  Lbn first = 0;
  std::uint64_t count = 0;
  bool operator==(const LbnRun&) const = default;
};

class MemberSubset {
 public:
  // `members`: indices of the parent's members, in the order the subset
  // stripes over them (sub-member k' is parent member members[k']).
  MemberSubset(const StripedGeometry& parent, std::vector<std::uint32_t> members);

  // The members placement `k` of `placements` uses on a volume of `p` members (see above).
  static std::vector<std::uint32_t> members_for(std::uint32_t p, std::uint32_t placements, std::uint32_t k);

  const StripedGeometry& geometry() const { return *sub_; }
  const std::vector<std::uint32_t>& members() const { return members_; }
  bool is_whole_volume() const;

  // Sub-VLBN -> VLBN.
  Lbn to_parent(Lbn sub_lbn) const;
  // VLBN -> sub-VLBN; OutOfRange when the VLBN's member is not in the set.
  Lbn to_sub(Lbn vlbn) const;
  bool contains(Lbn vlbn) const;
  // Runs of sub-VLBNs as runs of VLBNs (the same sectors, in the same
  // order), cut at sub-track boundaries and merged where contiguous.
  std::vector<LbnRun> to_parent(const std::vector<LbnRun>& sub_runs) const;
  // The inverse, for runs that lie on the set's members only.
  std::vector<LbnRun> to_sub(const std::vector<LbnRun>& runs) const;
  // The parts of VLBN runs that lie on the set's members, as runs of
  // sub-VLBNs (in the order met, merged where contiguous); the rest is left
  // out. The free space of a volume seen from a member set.
  std::vector<LbnRun> on_set(const std::vector<LbnRun>& runs) const;

 private:
  const StripedGeometry& parent_;
  std::vector<std::uint32_t> members_;
  std::vector<int> index_;  // parent member -> position in members_, -1 when outside
  std::unique_ptr<StripedGeometry> sub_;
};

}  // namespace mmfs::geom
