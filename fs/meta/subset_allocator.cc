#include "fs/meta/subset_allocator.h"

#include <algorithm>
#include <cerrno>

namespace mmfs::fs {

namespace {

constexpr int kAttempts = 8;

}  // namespace

std::vector<geom::LbnRun> as_runs(const std::vector<Extent>& extents) {
  std::vector<geom::LbnRun> runs;
  runs.reserve(extents.size());
  for (const Extent& e : extents) runs.push_back({e.start, e.sectors});
  return runs;
}

std::unique_ptr<Allocator> SubsetAllocator::snapshot() const {
  const geom::Lbn cap = set_.geometry().capacity_sectors();
  auto sub = std::make_unique<Allocator>(set_.geometry(), 0, cap);
  std::vector<geom::LbnRun> free = set_.on_set(as_runs(volume_.free_extents()));
  std::sort(free.begin(), free.end(), [](const geom::LbnRun& a, const geom::LbnRun& b) { return a.first < b.first; });
  geom::Lbn at = 0;
  for (const geom::LbnRun& r : free) {
    if (r.first > at) sub->mark_used({at, r.first - at});
    at = std::max(at, r.first + r.count);
  }
  if (at < cap) sub->mark_used({at, cap - at});
  return sub;
}

int SubsetAllocator::allocate(const layouts::SpaceRequest& request, std::vector<Extent>* out) {
  out->clear();
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    std::vector<Extent> chosen;
    if (int r = snapshot()->allocate(request, &chosen)) return r;
    std::vector<Extent> taken;
    bool raced = false;
    for (const geom::LbnRun& run : set_.to_parent(as_runs(chosen))) {
      const Extent e{run.first, run.count};
      if (!volume_.mark_used(e)) {
        raced = true;  // taken since the snapshot
        break;
      }
      taken.push_back(e);
    }
    if (!raced) {
      *out = std::move(chosen);
      return 0;
    }
    for (const Extent& e : taken) volume_.free(e);
  }
  return EAGAIN;
}

bool SubsetAllocator::free(const Extent& e) {
  if (e.sectors == 0 || e.start >= set_.geometry().capacity_sectors() ||
      e.sectors > set_.geometry().capacity_sectors() - e.start)
    return false;
  bool ok = true;
  for (const geom::LbnRun& run : set_.to_parent({{e.start, e.sectors}})) ok = volume_.free({run.first, run.count}) && ok;
  return ok;
}

std::uint64_t SubsetAllocator::free_sectors() const {
  std::uint64_t n = 0;
  for (const geom::LbnRun& r : set_.on_set(as_runs(volume_.free_extents()))) n += r.count;
  return n;
}

}  // namespace mmfs::fs
