// A volume of p devices of one geometry, striped one member track per stripe
// unit (see geometry/striped.h for the mapping and its papers).
#include "geometry/striped.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "geometry/json_fields.h"
#include "geometry/load.h"
#include "geometry/service_time.h"

namespace mmfs::geom {
namespace {

[[noreturn]] void invalid(const std::string& why) {
  throw GeometryError(ErrorKind::Invalid, fmt::format("striped geometry: {}", why));
}

// The members' models side by side. A batch is split per member; each member
// serves its part as one batch; the batch ends when the slowest member is
// done, and the others idle until then, so every member clock stays equal to
// the volume clock.
class StripedServiceModel final : public ServiceTimeModel {
 public:
  explicit StripedServiceModel(const StripedGeometry& g) : g_(g) {
    for (std::uint32_t k = 0; k < g.members(); ++k) models_.push_back(g.member().make_service_model());
    parts_.resize(g.members());
    owners_.resize(g.members());
    orders_.resize(g.members());
    times_.resize(g.members());
  }

  double serve(std::span<const Request> batch, std::vector<std::uint32_t>* order) override {
    if (models_.size() == 1) return models_[0]->serve(batch, order);  // p = 1: the member exactly
    const Lbn cap = g_.capacity_sectors();
    if (batch.size() >= std::numeric_limits<std::uint32_t>::max())
      throw GeometryError(ErrorKind::Invalid, fmt::format("batch of {} requests is too large", batch.size()));
    // Validate everything before any member changes state.
    for (const Request& r : batch)
      if (r.lbn >= cap || r.sectors > cap - r.lbn)
        throw GeometryError(ErrorKind::OutOfRange,
                            fmt::format("request {}:{} goes past the last LBN {} of the {}-member volume {}", r.lbn,
                                        r.sectors, cap - 1, g_.members(), g_.name()));
    for (std::size_t k = 0; k < parts_.size(); ++k) {
      parts_[k].clear();
      owners_[k].clear();
    }
    for (std::uint32_t i = 0; i < batch.size(); ++i) {
      if (batch[i].sectors == 0) continue;  // nothing to wait for
      for (const auto& [k, mr] : g_.split(batch[i])) {
        parts_[k].push_back(mr);
        owners_[k].push_back(i);
      }
    }
    double ms = 0.0;
    for (std::size_t k = 0; k < models_.size(); ++k) {
      times_[k] = parts_[k].empty() ? 0.0 : models_[k]->serve(parts_[k], order ? &orders_[k] : nullptr);
      ms = std::max(ms, times_[k]);
    }
    for (std::size_t k = 0; k < models_.size(); ++k)
      if (ms > times_[k]) models_[k]->idle(ms - times_[k]);  // waits for the slowest member
    if (order) {
      // A request is done when its last piece is; within a member, the j-th
      // of n served pieces is taken to end at (j+1)/n of the member's time (the
      // member models report the order, not the times).
      finish_.assign(batch.size(), 0.0);
      for (std::size_t k = 0; k < models_.size(); ++k) {
        if (parts_[k].empty()) continue;
        const double n = double(orders_[k].size());
        for (std::size_t j = 0; j < orders_[k].size(); ++j) {
          const std::uint32_t i = owners_[k][orders_[k][j]];
          finish_[i] = std::max(finish_[i], times_[k] * double(j + 1) / n);
        }
      }
      order->resize(batch.size());
      std::iota(order->begin(), order->end(), 0u);
      std::stable_sort(order->begin(), order->end(),
                       [&](std::uint32_t a, std::uint32_t b) { return finish_[a] < finish_[b]; });
    }
    clock_ += ms;
    return ms;
  }

  void reset() override {
    for (auto& m : models_) m->reset();
    clock_ = 0.0;
  }
  // Places the head of v's member; the other members stay where they are.
  void place_at(Lbn lbn) override {
    const StripedGeometry::MemberLbn m = g_.locate(lbn);
    models_[m.member]->place_at(m.lbn);
  }
  void idle(double ms) override {
    if (models_.size() == 1) return models_[0]->idle(ms);
    if (!(ms >= 0.0) || std::isinf(ms))
      throw GeometryError(ErrorKind::Invalid, fmt::format("idle time must be a finite number >= 0, got {}", ms));
    for (auto& m : models_) m->idle(ms);
    clock_ += ms;
  }
  double clock_ms() const override { return models_.size() == 1 ? models_[0]->clock_ms() : clock_; }

 private:
  const StripedGeometry& g_;
  std::vector<std::unique_ptr<ServiceTimeModel>> models_;
  double clock_ = 0.0;
  // Reused between batches: per member, its requests, the batch index each
  // came from, and the order it served them in; per request, its finish.
  std::vector<std::vector<Request>> parts_;
  std::vector<std::vector<std::uint32_t>> owners_;
  std::vector<std::vector<std::uint32_t>> orders_;
  std::vector<double> times_;
  std::vector<double> finish_;
};

}  // namespace

StripedGeometry::StripedGeometry(std::unique_ptr<Geometry> member, std::uint32_t members)
    : member_(std::move(member)), p_(members) {
  if (!member_) invalid("no member geometry");
  if (p_ == 0) invalid("'members' must be at least 1");
  if (dynamic_cast<const StripedGeometry*>(member_.get()))
    invalid("a member cannot itself be a striped volume");
  const Lbn mcap = member_->capacity_sectors();
  if (mcap > (std::uint64_t(1) << 63) / member_->sector_size() / p_)
    invalid(fmt::format("{} members of {} sectors of {} bytes do not fit in 63 bits", p_, mcap,
                        member_->sector_size()));
  capacity_ = mcap * p_;
  set_name(member_->name());
}

std::unique_ptr<StripedGeometry> StripedGeometry::from_json(const nlohmann::json& j) {
  if (!j.is_object()) invalid("the geometry must be a JSON object");
  const auto members = std::uint32_t(jsonf::required_uint(j, "members", "", 1, UINT32_MAX));
  if (auto it = j.find("striping"); it != j.end() && !(it->is_string() && it->get<std::string>() == "track"))
    throw GeometryError(ErrorKind::Invalid,
                        fmt::format("geometry field 'striping': expected \"track\", got {}", it->dump()));
  nlohmann::json member = j;
  member.erase("members");
  member.erase("striping");
  return std::make_unique<StripedGeometry>(load_geometry(member), members);
}

StripedGeometry::Place StripedGeometry::place(Lbn vlbn) const {
  check_lbn(vlbn);
  // Member track m holds v exactly when L(m) <= v/p < L(m+1) (striped.h).
  Place pl;
  pl.mtrack = member_->track_boundaries(vlbn / p_);
  const std::uint64_t off = vlbn - pl.mtrack.low * p_;
  const std::uint64_t len = pl.mtrack.length();
  pl.member = std::uint32_t(off / len);
  pl.offset = off % len;
  return pl;
}

StripedGeometry::MemberLbn StripedGeometry::locate(Lbn vlbn) const {
  const Place pl = place(vlbn);
  return {pl.member, pl.mtrack.low + pl.offset};
}

Lbn StripedGeometry::volume_lbn(std::uint32_t member, Lbn member_lbn) const {
  if (member >= p_)
    throw GeometryError(ErrorKind::OutOfRange,
                        fmt::format("member {} of a {}-member volume {} does not exist", member, p_, name()));
  if (member_lbn >= member_->capacity_sectors())
    throw GeometryError(ErrorKind::OutOfRange,
                        fmt::format("member LBN {} is beyond the capacity of a member of {} ({} sectors)",
                                    member_lbn, name(), member_->capacity_sectors()));
  const TrackBounds b = member_->track_boundaries(member_lbn);
  return b.low * p_ + std::uint64_t(member) * b.length() + (member_lbn - b.low);
}

std::vector<std::pair<std::uint32_t, Request>> StripedGeometry::split(const Request& r) const {
  if (r.lbn >= capacity_ || r.sectors > capacity_ - r.lbn)
    throw GeometryError(ErrorKind::OutOfRange,
                        fmt::format("request {}:{} goes past the last LBN {} of the {}-member volume {}", r.lbn,
                                    r.sectors, capacity_ - 1, p_, name()));
  std::vector<std::pair<std::uint32_t, Request>> out;
  if (r.sectors == 0) return out;
  const Place first = place(r.lbn), last = place(r.lbn + r.sectors - 1);
  // Member k's part runs from its first volume track at or after the first
  // sector's to its last at or before the last sector's: consecutive member
  // tracks, so one contiguous member run [start, end).
  for (std::uint32_t i = 0; i < p_; ++i) {
    const std::uint32_t k = (first.member + i) % p_;
    const Lbn start = k == first.member ? first.mtrack.low + first.offset
                      : k > first.member ? first.mtrack.low
                                         : first.mtrack.high + 1;  // from the next member track
    const Lbn end = k == last.member ? last.mtrack.low + last.offset + 1
                    : k < last.member ? last.mtrack.high + 1
                                      : last.mtrack.low;  // up to the previous member track
    if (end > start) out.push_back({k, Request{start, std::uint32_t(end - start)}});
  }
  return out;
}

TrackBounds StripedGeometry::zone_bounds(Lbn lbn) const {
  const MemberLbn m = locate(lbn);
  const TrackBounds z = member_->zone_bounds(m.lbn);
  return {z.low * p_, (z.high + 1) * p_ - 1};
}

std::uint64_t StripedGeometry::track_of(Lbn lbn) const {
  const Place pl = place(lbn);
  return member_->track_of(pl.mtrack.low) * p_ + pl.member;
}

TrackBounds StripedGeometry::track_boundaries(Lbn lbn) const {
  const Place pl = place(lbn);
  const Lbn low = pl.mtrack.low * p_ + std::uint64_t(pl.member) * pl.mtrack.length();
  return {low, low + pl.mtrack.length() - 1};
}

double StripedGeometry::skew(Lbn lbn) const { return member_->skew(locate(lbn).lbn); }

Lbn StripedGeometry::adjacent(Lbn lbn, std::uint32_t step) const {
  const MemberLbn m = locate(lbn);
  return volume_lbn(m.member, member_->adjacent(m.lbn, step));
}

Lbn StripedGeometry::adjacent_n(Lbn lbn, std::uint32_t step, std::uint64_t count) const {
  const MemberLbn m = locate(lbn);
  return volume_lbn(m.member, member_->adjacent_n(m.lbn, step, count));
}

std::vector<Lbn> StripedGeometry::equivalent(Lbn lbn) const {
  const MemberLbn m = locate(lbn);
  std::vector<Lbn> out = member_->equivalent(m.lbn);
  for (Lbn& l : out) l = volume_lbn(m.member, l);
  std::sort(out.begin(), out.end());
  return out;
}

bool StripedGeometry::conflicting(Lbn a, Lbn b) const {
  const MemberLbn ma = locate(a), mb = locate(b);
  if (ma.member != mb.member) return false;  // separate devices share nothing
  return member_->conflicting(ma.lbn, mb.lbn);
}

nlohmann::json StripedGeometry::definition() const {
  nlohmann::json j = member_->definition();
  j["members"] = p_;
  j["striping"] = "track";
  return j;
}

nlohmann::json StripedGeometry::info() const {
  nlohmann::json j = member_->info();
  j["profile"] = name();
  j["member"] = {{"capacity_sectors", member_->capacity_sectors()}, {"tracks", member_->tracks()}};
  j["members"] = p_;
  j["striping"] = "track";
  j["capacity_sectors"] = capacity_;
  j["capacity_bytes"] = capacity_ * sector_size();
  j["tracks"] = tracks();
  // A member zone [a, b) is the volume zone [p·a, p·b).
  if (auto it = j.find("zones"); it != j.end() && it->is_array())
    for (auto& z : *it) {
      if (z.contains("first_lbn")) z["first_lbn"] = z["first_lbn"].get<std::uint64_t>() * p_;
      if (z.contains("sectors")) z["sectors"] = z["sectors"].get<std::uint64_t>() * p_;
    }
  return j;
}

std::unique_ptr<ServiceTimeModel> StripedGeometry::make_service_model() const {
  return std::make_unique<StripedServiceModel>(*this);
}

}  // namespace mmfs::geom
