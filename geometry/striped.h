// A volume of p devices of one geometry, striped track by track:
// StripedGeometry presents p members of one member geometry (ZonedDisk,
// MemStore or Flash) as one volume LBN space (VLBNs). Pure model: no I/O.
//
// Papers: Atropos (shared/papers/002_*) §2.2 and §5.3 — the stripe unit is
// the exact track of the member, not 32–64 KiB, so that a track-sized,
// track-aligned request is served by zero-latency firmware without a head
// switch — and §3.3.1 (zones: stripe units follow the zone's track length);
// MultiMap (shared/papers/000_*) §3.3 (GETADJACENT inside the volume
// manager) and §4.5 (several disks: basic cubes declustered over the disks,
// each one laid out on a single disk).
//
// Mapping. A stripe unit is exactly one member track (zone-aware: a track of
// the outer zone is longer than one of the inner zone; flash's short last
// track stays short). Volume track t lives on member k = t mod p as member
// track m = t / p; VLBNs count the volume tracks in order, so consecutive
// volume tracks rotate round-robin over the members and a sequential scan of
// p tracks reads one whole track on every member. With L(m) the first member
// LBN of member track m and N(m) its length, volume track t = m·p + k starts
// at VLBN p·L(m) + k·N(m) (the p·L(m) sectors of member tracks < m on every
// member, then k copies of track m). Conversely, member track m holds
// VLBN v exactly when L(m) <= v / p < L(m+1), so locate() is one member
// track_boundaries() call: O(1) whatever p.
//
// Geometry functions:
// * capacity_sectors = p · member capacity; tracks = p · member tracks;
//   largest_zone_tracks = p · the member's; zone_bounds(v) = [p·zlo,
//   p·(zhi+1)) for the member zone [zlo, zhi] of v's member LBN (the same
//   member tracks on every member, all of one length).
// * track_of / track_boundaries: the volume track above; its length equals
//   the member track's length.
// * skew, depth, adjacency_angle: the member's (skew of the member sector
//   v maps to; every member has the same physical layout).
// * parallelism() = the MEMBER's parallelism, not p times it. It is used
//   (layouts/capsule, fs/table/capsule_table) as the size of one parallel access
//   within one equivalence class, and an equivalence class lives on one
//   member; the volume as a whole moves members() · parallelism() LBNs at
//   once, but only when they sit on different members (the service model
//   below accounts for that).
// * equivalent(v): the member's class of v's member LBN, translated to VLBNs
//   on the same member (MEMS only; disks and flash throw NotSupported as the
//   member does). conflicting(a, b): false for different members (separate
//   devices never share a component), the member's answer otherwise.
// * quadrangle(B): the member's Atropos parameters (N, H, d, w, ... are
//   per-disk quantities; Atropos' p is members()).
// * definition(): the member definition plus "members": p and
//   "striping": "track". StripedGeometry::from_json() reads that form back,
//   and load_geometry() (geometry/load.cc) dispatches a definition with
//   "members" to it: a volume of several devices stores this form in its
//   superblocks (docs/on-disk-format.md).
// * info(): the member's info with the volume's capacity, tracks and zones
//   (first_lbn and sectors scaled by p), plus "members", "striping" and
//   "member": {capacity_sectors, tracks}.
//
// GETADJACENT. adjacent(v, step) must be reachable without rotational
// latency, i.e. on the SAME member: it is the member's adjacent(m, step) of
// v's member LBN m, mapped back to the volume on that member — `step`
// member tracks away, hence step·p volume tracks away. Consequence for
// layouts: MultiMap over a striped volume keeps every basic cube (its Dim1..
// hops along adjacent blocks) on one member, while Dim0 (along a track)
// rotates over the members one track at a time, exactly MultiMap §4.5's
// "decluster the basic cubes, keep each one on one disk". A track-group
// request of c consecutive volume tracks spans about c/p tracks on each
// member (split() turns it into at most p member requests, one contiguous
// run each, served in parallel); a basic cube whose Dim0 extent is one track
// T and whose deeper dimensions use adjacency is read from one member only,
// so a layout that wants all p members busy must put successive cubes (or
// successive tracks of a cube row) on successive volume tracks.
//
// Service time. make_service_model(): a batch is split request by request
// (split()); each member's own model serves its part as one batch (its SPTF
// reorders it); the members work in parallel, so the batch takes the max of
// the members' times. Members that finish early idle until the slowest one
// is done (their platters keep turning), so every member clock equals the
// volume clock after each batch. With p = 1 the model is the member's model
// exactly. A zero-sector request on p > 1 has nothing to wait for and is
// dropped (as the MEMS and flash models treat it).
//
// Errors: GeometryError(OutOfRange) for a VLBN (or request) past the volume,
// a member index >= p or a member LBN past the member; Invalid for p == 0, a
// null or striped member, a capacity that does not fit, a bad step. With
// p = 1 every function answers exactly as the member does (definition() and
// info() add the striping keys).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "geometry/geometry.h"

namespace mmfs::geom {

class StripedGeometry final : public Geometry {
 public:
  // A sector of the volume on its member: member index in [0, p), member LBN.
  struct MemberLbn {
    std::uint32_t member = 0;
    Lbn lbn = 0;
    bool operator==(const MemberLbn&) const = default;
  };

  // Takes the member geometry (all p members are copies of it). Throws
  // Invalid for p == 0, a null or striped member, or a volume too large.
  StripedGeometry(std::unique_ptr<Geometry> member, std::uint32_t members);
  // Reads definition()'s form: a member definition (load_geometry() form,
  // "profile" allowed) plus "members" (required, >= 1) and "striping"
  // (optional, only "track"). Throws Invalid naming the field.
  static std::unique_ptr<StripedGeometry> from_json(const nlohmann::json& j);

  const Geometry& member() const { return *member_; }
  std::uint32_t members() const { return p_; }

  // VLBN -> (member, member LBN); OutOfRange past the volume.
  MemberLbn locate(Lbn vlbn) const;
  // (member, member LBN) -> VLBN; OutOfRange for member >= p or a member LBN
  // past the member.
  Lbn volume_lbn(std::uint32_t member, Lbn member_lbn) const;
  Lbn volume_lbn(MemberLbn m) const { return volume_lbn(m.member, m.lbn); }
  // A volume request as member requests: at most one per member (a
  // request's pieces on one member are consecutive member tracks, hence one
  // contiguous run), in the order their first sectors appear in the volume
  // request. Sectors are conserved. A zero-sector request gives none.
  // OutOfRange when the request starts or ends past the volume.
  std::vector<std::pair<std::uint32_t, Request>> split(const Request& r) const;

  DeviceKind kind() const override { return member_->kind(); }
  std::uint32_t sector_size() const override { return member_->sector_size(); }
  Lbn capacity_sectors() const override { return capacity_; }
  std::uint64_t tracks() const override { return member_->tracks() * p_; }
  std::uint64_t largest_zone_tracks() const override { return member_->largest_zone_tracks() * p_; }
  TrackBounds zone_bounds(Lbn lbn) const override;
  std::uint64_t track_of(Lbn lbn) const override;
  TrackBounds track_boundaries(Lbn lbn) const override;
  double skew(Lbn lbn) const override;
  double adjacency_angle() const override { return member_->adjacency_angle(); }
  std::uint32_t depth() const override { return member_->depth(); }
  Lbn adjacent(Lbn lbn, std::uint32_t step) const override;
  Lbn adjacent_n(Lbn lbn, std::uint32_t step, std::uint64_t count) const override;
  std::uint32_t parallelism() const override { return member_->parallelism(); }
  std::vector<Lbn> equivalent(Lbn lbn) const override;
  bool conflicting(Lbn a, Lbn b) const override;
  QuadrangleParams quadrangle(std::uint32_t block) const override { return member_->quadrangle(block); }
  nlohmann::json definition() const override;
  nlohmann::json info() const override;
  std::unique_ptr<ServiceTimeModel> make_service_model() const override;
  // The machine's part of a read is the member's: striping changes the
  // device, not the host a read is handed over by.
  HostCost host_cost() const override { return member_->host_cost(); }

 private:
  // v's member track: its member bounds, the member index k and offset in it.
  struct Place {
    TrackBounds mtrack;  // member LBNs of the member track
    std::uint32_t member = 0;
    std::uint64_t offset = 0;  // within the track
  };
  Place place(Lbn vlbn) const;

  std::unique_ptr<Geometry> member_;
  std::uint32_t p_ = 1;
  Lbn capacity_ = 0;
};

}  // namespace mmfs::geom
