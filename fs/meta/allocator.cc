#include "fs/meta/allocator.h"

#include <algorithm>
#include <cerrno>

namespace mmfs::fs {

Allocator::Allocator(const geom::Geometry& geometry, Lbn first, Lbn end)
    : geometry_(geometry), first_(first), end_(std::max(first, end)) {
  if (end_ > first_) {
    free_[first_] = end_;
    free_total_ = end_ - first_;
  }
}

bool Allocator::is_free_locked(Lbn start, Lbn end) const {
  auto it = free_.upper_bound(start);
  if (it == free_.begin()) return false;
  --it;
  return it->first <= start && end <= it->second;
}

void Allocator::take_locked(Lbn start, Lbn end) {
  auto it = std::prev(free_.upper_bound(start));
  Lbn a = it->first, b = it->second;
  free_.erase(it);
  if (a < start) free_[a] = start;
  if (end < b) free_[end] = b;
  free_total_ -= end - start;
}

void Allocator::give_locked(Lbn start, Lbn end) {
  auto next = free_.lower_bound(start);
  if (next != free_.end() && next->first == end) {  // merge with the run after
    end = next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->second == start) {  // merge with the run before
      prev->second = end;
      return;
    }
  }
  free_[start] = end;
}

bool Allocator::mark_used(const Extent& e) {
  std::lock_guard lock(mu_);
  Lbn end = e.start + e.sectors;
  if (e.sectors == 0 || e.start < first_ || end > end_ || end < e.start || !is_free_locked(e.start, end)) return false;
  take_locked(e.start, end);
  return true;
}

bool Allocator::free(const Extent& e) {
  std::lock_guard lock(mu_);
  Lbn end = e.start + e.sectors;
  if (e.sectors == 0 || e.start < first_ || end > end_ || end < e.start) return false;
  // Nothing of it may be free already.
  auto it = free_.upper_bound(e.start);
  if (it != free_.begin() && std::prev(it)->second > e.start) return false;
  if (it != free_.end() && it->first < end) return false;
  std::vector<Extent> kept = withheld_ ? withheld_(e) : std::vector<Extent>{};
  std::sort(kept.begin(), kept.end(), [](const Extent& a, const Extent& b) { return a.start < b.start; });
  Lbn at = e.start;
  auto give = [&](Lbn to) {
    if (to <= at) return;
    give_locked(at, to);
    free_total_ += to - at;
  };
  for (const Extent& k : kept) {
    const Lbn from = std::max(k.start, e.start), to = std::min(k.start + k.sectors, end);
    if (from >= to) continue;
    give(from);
    at = std::max(at, to);
  }
  give(end);
  return true;
}

void Allocator::set_withheld(Withheld withheld) {
  std::lock_guard lock(mu_);
  withheld_ = std::move(withheld);
}

Lbn Allocator::track_start_at_or_after(Lbn lbn) const {
  if (lbn >= geometry_.capacity_sectors()) return lbn;
  geom::TrackBounds b = geometry_.track_boundaries(lbn);
  return b.low == lbn ? lbn : b.high + 1;
}

int Allocator::allocate(const layouts::SpaceRequest& req, std::vector<Extent>* out) {
  std::lock_guard lock(mu_);
  std::vector<std::pair<Lbn, Lbn>> taken;
  auto rollback = [&] {
    for (auto& [a, b] : taken) {
      give_locked(a, b);
      free_total_ += b - a;
    }
    return ENOSPC;
  };
  out->clear();
  if (req.shape == layouts::SpaceShape::Runs) {
    // Whole tracks, lowest first, as few runs as the free map allows.
    std::uint64_t need = req.sectors;
    const std::uint64_t unit = std::max<std::uint64_t>(1, req.unit_sectors);
    if (need == 0) return 0;
    while (need > 0) {
      bool found = false;
      for (auto& [a, b] : free_) {
        Lbn start = track_start_at_or_after(a);
        if (start >= b) continue;
        // Whole tracks only: the run ends at a track boundary inside [start, b).
        Lbn stop = start, last_full = start;
        while (stop < b) {
          geom::TrackBounds t = geometry_.track_boundaries(stop);
          if (t.high + 1 > b) break;
          stop = t.high + 1;
          last_full = stop;
          if (stop - start >= need) break;
        }
        // Only whole units count: a layout never places a cell across two
        // extents, so a hole of a track whose length is no multiple of the
        // cell's sectors holds less than its length (once free space is
        // fragmented, an array would otherwise get fewer cells than it has).
        std::uint64_t usable = (last_full - start) / unit * unit;
        if (usable == 0) continue;
        std::uint64_t got = std::min<std::uint64_t>(need, usable);
        // Round the final piece up to a whole track (the rest of the track is the layout's slack).
        Lbn piece_end = start + got;
        if (piece_end < last_full) piece_end = geometry_.track_boundaries(piece_end - 1).high + 1;
        take_locked(start, piece_end);
        taken.push_back({start, piece_end});
        out->push_back({start, got});
        need -= got;
        found = true;
        break;
      }
      if (!found) {
        out->clear();
        return rollback();
      }
    }
    // Each extent covers the whole tracks taken, slack of the last track included.
    for (std::size_t i = 0; i < out->size(); ++i) (*out)[i].sectors = taken[i].second - taken[i].first;
    return 0;
  }
  // Track groups: `groups` runs of group_tracks tracks in one zone each
  // (inside req.within, starting at aligned tracks of zones of exactly
  // req.exact_track_sectors, when the request says so).
  const bool within = req.within.sectors > 0;
  const Lbn within_end = req.within.start + req.within.sectors;
  for (std::uint64_t g = 0; g < req.groups; ++g) {
    bool found = false;
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      Lbn a = it->first, b = it->second;
      if (within && b <= req.within.start) continue;
      if (within && a >= within_end) break;
      Lbn cand = track_start_at_or_after(within ? std::max(a, req.within.start) : a);
      while (!found && cand < b && cand < geometry_.capacity_sectors()) {
        if (within && cand >= within_end) break;
        std::uint64_t T = geometry_.track_length(cand);
        Lbn group_end = cand + req.group_tracks * T;
        const geom::TrackBounds zone = geometry_.zone_bounds(cand);
        Lbn zone_end = std::min<Lbn>(end_, zone.high + 1);
        if (within) zone_end = std::min(zone_end, within_end);
        if (T < req.min_track_sectors || (req.exact_track_sectors && T != req.exact_track_sectors) ||
            group_end > zone_end) {
          cand = zone_end;  // this zone cannot hold the group from here: try the next one
          continue;
        }
        if (const std::uint64_t al = req.align_tracks) {
          const std::uint64_t rel = geometry_.track_of(cand) - geometry_.track_of(zone.low);
          if (rel % al) {
            // The next aligned track (one length within the zone), or the
            // next zone when no group fits before this one's end.
            const Lbn aligned = cand + (al - rel % al) * T;
            cand = aligned + req.group_tracks * T <= zone_end ? aligned : zone_end;
            continue;
          }
        }
        if (const std::uint64_t bt = req.boundary_tracks; bt && req.group_tracks <= bt) {
          const std::uint64_t t = geometry_.track_of(cand);
          if (t / bt != (t + req.group_tracks - 1) / bt) {
            cand += ((t / bt + 1) * bt - t) * T;  // start at the next boundary
            continue;
          }
        }
        if (group_end > b) break;
        found = true;
        break;
      }
      if (found) {  // take it only now: take_locked invalidates `it`
        Lbn group_end = cand + req.group_tracks * geometry_.track_length(cand);
        take_locked(cand, group_end);
        taken.push_back({cand, group_end});
        out->push_back({cand, group_end - cand});
        break;
      }
    }
    if (!found) {
      out->clear();
      return rollback();
    }
  }
  return 0;
}

int Allocator::allocate_small(std::uint64_t sectors, std::vector<Extent>* out) {
  std::lock_guard lock(mu_);
  out->clear();
  if (sectors == 0) return 0;
  if (free_total_ < sectors) return ENOSPC;
  std::uint64_t need = sectors;
  for (auto it = free_.end(); need > 0 && it != free_.begin();) {
    --it;
    Lbn a = it->first, b = it->second;
    std::uint64_t got = std::min<std::uint64_t>(need, b - a);
    Lbn start = b - got;
    take_locked(start, b);
    out->push_back({start, got});
    need -= got;
    it = free_.upper_bound(start);  // the map changed; continue below `start`
  }
  std::reverse(out->begin(), out->end());
  return 0;
}

std::uint64_t Allocator::free_sectors() const {
  std::lock_guard lock(mu_);
  return free_total_;
}

std::vector<Extent> Allocator::free_extents() const {
  std::lock_guard lock(mu_);
  std::vector<Extent> v;
  for (auto& [a, b] : free_) v.push_back({a, b - a});
  return v;
}

}  // namespace mmfs::fs
