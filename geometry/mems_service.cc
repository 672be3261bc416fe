// MEMStore service-time model; the physics is described in mems_service.h.
#include "geometry/mems_service.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace mmfs::geom {
namespace {

constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
constexpr std::uint64_t kLow32 = 0xffffffffull;

std::uint32_t absdiff(std::uint32_t a, std::uint32_t b) { return a > b ? a - b : b - a; }

}  // namespace

MemsServiceModel::MemsServiceModel(const MemStore& geometry) : g_(geometry), p_(geometry.params()) {
  // MB = 10^6 bytes; row time in ms.
  row_ms_ = double(p_.p) * p_.sector_size / (p_.bandwidth_mb_s * 1e6) * 1e3;
  x_scale_ = p_.x_full_ms / std::sqrt(double(p_.Sx));
  y_scale_ = p_.y_full_ms / std::sqrt(double(p_.Sy));
  reset();
}

void MemsServiceModel::reset() {
  clock_ = 0.0;
  place_at(0);
}

// The sled just finished a request ending before lbn: it sits at the start of
// lbn's row, moving in the direction of lbn's track (global track parity, as
// in MemStore::position).
void MemsServiceModel::place_at(Lbn lbn) {
  const MemStore::Position pos = g_.position(lbn);  // validates lbn
  const bool forward = (lbn / g_.sectors_per_track()) % 2 == 0;
  sled_.x = pos.x;
  sled_.dir = forward ? +1 : -1;
  sled_.u = forward ? pos.y : pos.y + 1;
}

void MemsServiceModel::idle(double ms) {
  if (!(ms >= 0.0) || std::isinf(ms))
    throw GeometryError(ErrorKind::Invalid, fmt::format("idle time must be a finite number >= 0, got {}", ms));
  clock_ += ms;  // the sled keeps its position
}

double MemsServiceModel::x_seek(std::uint32_t dx) const {
  return dx == 0 ? 0.0 : p_.x_settle_ms + x_scale_ * std::sqrt(double(dx));
}

double MemsServiceModel::y_seek(std::uint32_t dy) const { return y_scale_ * std::sqrt(double(dy)); }

// Ahead in the current direction the sled may simply keep moving (passing
// rows at read speed) or seek; anything else needs a reversal (turnaround) on
// top of the Y seek. X and Y move in parallel.
MemsServiceModel::Move MemsServiceModel::move_to(const Sled& from, std::uint32_t x, std::uint32_t y,
                                                 int dir) const {
  const std::uint32_t u0 = dir > 0 ? y : y + 1;  // where reading row y starts
  const std::uint32_t u1 = dir > 0 ? y + 1 : y;  // and ends
  const std::uint32_t dy = absdiff(u0, from.u);
  const bool ahead = dir == from.dir && (dir > 0 ? u0 >= from.u : u0 <= from.u);
  const double ys = ahead ? std::min(dy * row_ms_, y_seek(dy)) : y_seek(dy) + p_.turnaround_ms;
  return {std::max(x_seek(absdiff(x, from.x)), ys), {x, u1, dir}};
}

double MemsServiceModel::positioning_ms(Lbn lbn) const {
  const MemStore::Position pos = g_.position(lbn);
  return std::min(move_to(sled_, pos.x, pos.y, +1).ms, move_to(sled_, pos.x, pos.y, -1).ms);
}

double MemsServiceModel::serve(std::span<const Request> batch, std::vector<std::uint32_t>* order) {
  const Lbn cap = g_.capacity_sectors();
  if (batch.size() >= kNone)
    throw GeometryError(ErrorKind::Invalid, fmt::format("batch of {} requests is too large", batch.size()));
  for (const Request& r : batch)
    if (r.lbn >= cap || r.sectors > cap - r.lbn)
      throw GeometryError(ErrorKind::OutOfRange,
                          fmt::format("request {}:{} goes past the last LBN {} of {}", r.lbn, r.sectors, cap - 1,
                                      g_.name()));
  if (order) {
    order->clear();
    left_.resize(batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i) {
      left_[i] = batch[i].sectors;
      if (batch[i].sectors == 0) order->push_back(std::uint32_t(i));  // nothing to wait for
    }
  }
  split(batch);
  build_groups();
  const double ms = (batch.empty() ? 0.0 : p_.overhead_ms) + schedule(order);
  clock_ += ms;
  return ms;
}

// Cuts every request into row segments: the p sectors of a track row share
// one (x, y), so a request of n sectors yields about n/p segments.
void MemsServiceModel::split(std::span<const Request> batch) {
  segs_.clear();
  const std::uint64_t st = g_.sectors_per_track(), sc = g_.sectors_per_cylinder(), nx = g_.Nx();
  for (std::size_t i = 0; i < batch.size(); ++i) {
    Lbn lbn = batch[i].lbn;
    std::uint64_t n = batch[i].sectors;
    while (n > 0) {
      const std::uint64_t x = lbn / sc, o = lbn % st, r = o / nx, c = o % nx;
      const bool forward = (lbn / st) % 2 == 0;
      const std::uint64_t y = forward ? r : p_.Sy - 1 - r;
      const std::uint64_t len = std::min(n, nx - c);
      segs_.push_back({(y << 32) | x, std::uint32_t(i), std::uint32_t(len)});
      lbn += len;
      n -= len;
    }
  }
}

// Groups the segments by sled position: equal (x, y) at M = 0; with
// micropositioning, segments of the same row whose columns fit in a window
// of 2M + 1 cylinders, every tip within M of the sled. The sled sits at the
// middle of the columns of the group's first-listed request (its "anchor")
// when every sector of the group is within M of that column, else in the
// middle of the group's columns. So sectors a host adds from the equivalence
// class of a request listed first (E_l, MEMS §3.2; the free bandwidth of
// §5.1, geometry/free_bandwidth.h) are read by micropositioned tips without
// moving the sled, wherever in [x - M, x + M] they are.
void MemsServiceModel::build_groups() {
  std::sort(segs_.begin(), segs_.end(), [](const Segment& a, const Segment& b) {
    return a.key != b.key ? a.key < b.key : a.req < b.req;
  });
  groups_.clear();
  const std::uint64_t window = 2 * std::uint64_t(p_.M);
  for (std::size_t i = 0; i < segs_.size();) {
    const std::uint64_t y = segs_[i].key >> 32, x0 = segs_[i].key & kLow32;
    std::uint64_t x1 = x0, sectors = 0;
    std::size_t j = i;
    for (; j < segs_.size() && (segs_[j].key >> 32) == y && (segs_[j].key & kLow32) <= x0 + window; ++j) {
      x1 = segs_[j].key & kLow32;
      sectors += segs_[j].count;
    }
    Group g;
    g.x = std::uint32_t(x0 + (x1 - x0) / 2);
    if (window > 0) {
      std::uint32_t anchor = segs_[i].req;
      for (std::size_t k = i + 1; k < j; ++k) anchor = std::min(anchor, segs_[k].req);
      std::uint64_t a0 = std::numeric_limits<std::uint64_t>::max(), a1 = 0;
      for (std::size_t k = i; k < j; ++k)
        if (segs_[k].req == anchor) {
          a0 = std::min(a0, segs_[k].key & kLow32);
          a1 = std::max(a1, segs_[k].key & kLow32);
        }
      const std::uint64_t a = a0 + (a1 - a0) / 2;
      if (x0 + p_.M >= a && x1 <= a + p_.M) g.x = std::uint32_t(a);
    }
    g.y = std::uint32_t(y);
    g.remaining = sectors;
    g.seg_begin = g.seg_cursor = std::uint32_t(i);
    g.seg_end = std::uint32_t(j);
    groups_.push_back(g);
    i = j;
  }
  byx_.resize(groups_.size());
  for (std::uint32_t i = 0; i < byx_.size(); ++i) byx_[i] = i;
  std::sort(byx_.begin(), byx_.end(), [this](std::uint32_t a, std::uint32_t b) {
    const Group &ga = groups_[a], &gb = groups_[b];
    return ga.x != gb.x ? ga.x < gb.x : ga.y < gb.y;
  });
}

bool MemsServiceModel::continues(std::uint32_t pos, std::uint32_t x, std::int64_t y) const {
  if (pos == kNone) return false;
  const Group& g = groups_[byx_[pos]];
  return g.x == x && std::int64_t(g.y) == y;
}

// Greedy shortest-positioning-time-first over runs. The groups are kept in a
// live list ordered by (x, y), so a run is a stretch of neighbours in it. The
// search walks outwards from the sled's column in both directions and stops on
// a side once the X seek alone is no better than the best candidate (x_seek
// grows with |dx|), so a choice usually looks at only a few groups.
double MemsServiceModel::schedule(std::vector<std::uint32_t>* order) {
  const std::uint32_t n = std::uint32_t(groups_.size());
  if (n == 0) return 0.0;
  next_.resize(n);
  prev_.resize(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    next_[i] = i + 1 < n ? i + 1 : kNone;
    prev_[i] = i > 0 ? i - 1 : kNone;
  }
  // First live position with x >= the sled's, and the one before it.
  std::uint32_t right = std::uint32_t(
      std::lower_bound(byx_.begin(), byx_.end(), sled_.x,
                       [this](std::uint32_t gi, std::uint32_t x) { return groups_[gi].x < x; }) -
      byx_.begin());
  std::uint32_t left = right > 0 ? right - 1 : kNone;
  if (right == n) right = kNone;

  double total = 0.0;
  std::uint32_t live = n;
  while (live > 0) {
    // Choose the run end to enter, and the direction to sweep it.
    Move best{std::numeric_limits<double>::infinity(), {}};
    std::uint32_t best_pos = kNone;
    std::uint32_t r = right, l = left;
    while (r != kNone || l != kNone) {
      for (std::uint32_t* side : {&r, &l}) {
        std::uint32_t& pos = *side;
        if (pos == kNone) continue;
        const Group& g = groups_[byx_[pos]];
        if (x_seek(absdiff(g.x, sled_.x)) >= best.ms) {
          pos = kNone;  // everything further out on this side is no better
          continue;
        }
        for (int dir : {sled_.dir, -sled_.dir}) {  // the current direction wins ties
          // Enter only at the end of a run, sweeping through it.
          if (continues(dir > 0 ? prev_[pos] : next_[pos], g.x, std::int64_t(g.y) - dir)) continue;
          const Move m = move_to(sled_, g.x, g.y, dir);
          if (m.ms < best.ms) {
            best = m;
            best_pos = pos;
          }
        }
        pos = side == &r ? next_[pos] : prev_[pos];
      }
    }

    // Sweep the run: one row time per row, no positioning between rows.
    total += best.ms;
    const int dir = best.after.dir;
    std::uint32_t pos = best_pos;
    for (;;) {
      Group& g = groups_[byx_[pos]];
      const std::uint64_t k = std::min<std::uint64_t>(g.remaining, p_.p);
      total += row_ms_;
      g.remaining -= k;
      if (order) consume(g, k, order);
      sled_ = {g.x, dir > 0 ? g.y + 1 : g.y, dir};
      const std::uint32_t following = dir > 0 ? next_[pos] : prev_[pos];
      const bool more = continues(following, g.x, std::int64_t(g.y) + dir);
      if (g.remaining == 0) {  // unlink; its own links stay valid for the cursor below
        if (prev_[pos] != kNone) next_[prev_[pos]] = next_[pos];
        if (next_[pos] != kNone) prev_[next_[pos]] = prev_[pos];
        --live;
      }
      if (!more) break;
      pos = following;
    }
    // The sled is now in the column of `pos`: restart the search around it.
    const bool pos_live = groups_[byx_[pos]].remaining > 0;
    right = pos_live ? pos : next_[pos];
    left = prev_[pos];
  }
  return total;
}

// Attributes `sectors` served sectors of g to its requests, in segment order,
// and records each request when its last sector is served.
void MemsServiceModel::consume(Group& g, std::uint64_t sectors, std::vector<std::uint32_t>* order) {
  while (sectors > 0 && g.seg_cursor < g.seg_end) {
    const Segment& s = segs_[g.seg_cursor];
    const std::uint64_t take = std::min<std::uint64_t>(sectors, s.count - g.seg_used);
    g.seg_used += std::uint32_t(take);
    sectors -= take;
    left_[s.req] -= take;
    if (left_[s.req] == 0) order->push_back(s.req);
    if (g.seg_used == s.count) {
      ++g.seg_cursor;
      g.seg_used = 0;
    }
  }
}

}  // namespace mmfs::geom
