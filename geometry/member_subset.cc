#include "geometry/member_subset.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "geometry/load.h"

namespace mmfs::geom {

namespace {

[[noreturn]] void invalid(const std::string& why) {
  throw GeometryError(ErrorKind::Invalid, fmt::format("member set: {}", why));
}

// Appends `run`, merged into the last run when they touch.
void append(std::vector<LbnRun>& out, LbnRun run) {
  if (run.count == 0) return;
  if (!out.empty() && out.back().first + out.back().count == run.first)
    out.back().count += run.count;
  else
    out.push_back(run);
}

// Calls piece(first, n) for each piece of `runs` cut at the track boundaries
// of `g`, in order; OutOfRange for a run past `g` (`whose` names it).
template <class Piece>
void for_each_track_piece(const Geometry& g, const std::vector<LbnRun>& runs, const char* whose, Piece&& piece) {
  for (LbnRun run : runs) {
    if (run.count > g.capacity_sectors() || run.first > g.capacity_sectors() - run.count)
      throw GeometryError(ErrorKind::OutOfRange, fmt::format("run [{}, +{}) is past the {} sectors of {}", run.first,
                                                             run.count, g.capacity_sectors(), whose));
    while (run.count > 0) {
      const TrackBounds t = g.track_boundaries(run.first);
      const std::uint64_t n = std::min<std::uint64_t>(run.count, t.high - run.first + 1);
      piece(run.first, n);
      run.first += n;
      run.count -= n;
    }
  }
}

}  // namespace

MemberSubset::MemberSubset(const StripedGeometry& parent, std::vector<std::uint32_t> members)
    : parent_(parent), members_(std::move(members)), index_(parent.members(), -1) {
  if (members_.empty()) invalid("no member");
  for (std::size_t k = 0; k < members_.size(); ++k) {
    const std::uint32_t m = members_[k];
    if (m >= parent.members())
      invalid(fmt::format("member {} of a {}-member volume does not exist", m, parent.members()));
    if (index_[m] >= 0) invalid(fmt::format("member {} is named twice", m));
    index_[m] = int(k);
  }
  // Every member is a copy of the parent's member geometry.
  auto member = load_geometry(parent.member().definition());
  member->set_name(parent.member().name());
  sub_ = std::make_unique<StripedGeometry>(std::move(member), std::uint32_t(members_.size()));
  sub_->set_name(parent.name());
}

std::vector<std::uint32_t> MemberSubset::members_for(std::uint32_t p, std::uint32_t placements, std::uint32_t k) {
  if (p == 0 || placements == 0 || k >= placements)
    invalid(fmt::format("placement {} of {} on {} members", k, placements, p));
  if (p < placements) return {k % p};
  std::vector<std::uint32_t> out;
  for (std::uint32_t m = k; m < p; m += placements) out.push_back(m);
  return out;
}

bool MemberSubset::is_whole_volume() const {
  if (members_.size() != parent_.members()) return false;
  for (std::size_t k = 0; k < members_.size(); ++k)
    if (members_[k] != k) return false;
  return true;
}

Lbn MemberSubset::to_parent(Lbn sub_lbn) const {
  const StripedGeometry::MemberLbn m = sub_->locate(sub_lbn);  // OutOfRange past the subset
  return parent_.volume_lbn(members_[m.member], m.lbn);
}

bool MemberSubset::contains(Lbn vlbn) const {
  if (vlbn >= parent_.capacity_sectors()) return false;
  return index_[parent_.locate(vlbn).member] >= 0;
}

Lbn MemberSubset::to_sub(Lbn vlbn) const {
  const StripedGeometry::MemberLbn m = parent_.locate(vlbn);  // OutOfRange past the volume
  const int k = index_[m.member];
  if (k < 0)
    throw GeometryError(ErrorKind::OutOfRange,
                        fmt::format("VLBN {} lies on member {}, outside the member set", vlbn, m.member));
  return sub_->volume_lbn(std::uint32_t(k), m.lbn);
}

std::vector<LbnRun> MemberSubset::to_parent(const std::vector<LbnRun>& sub_runs) const {
  std::vector<LbnRun> out;
  // The rest of a sub-track is one run on one member track.
  for_each_track_piece(*sub_, sub_runs, "the member set",
                       [&](Lbn first, std::uint64_t n) { append(out, {to_parent(first), n}); });
  return out;
}

std::vector<LbnRun> MemberSubset::to_sub(const std::vector<LbnRun>& runs) const {
  std::vector<LbnRun> out;
  for_each_track_piece(parent_, runs, "the volume", [&](Lbn first, std::uint64_t n) {
    append(out, {to_sub(first), n});  // OutOfRange off the set
  });
  return out;
}

std::vector<LbnRun> MemberSubset::on_set(const std::vector<LbnRun>& runs) const {
  std::vector<LbnRun> out;
  for_each_track_piece(parent_, runs, "the volume", [&](Lbn first, std::uint64_t n) {
    if (contains(first)) append(out, {to_sub(first), n});
  });
  return out;
}

}  // namespace mmfs::geom
