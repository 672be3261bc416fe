#include "fs/mloc_brick_cache.h"

#include <atomic>

namespace mmfs::fs {

namespace {
// Two row slabs of 64^3 float64 chunks across a (1024, 1024) face, the
// bench's array: one being read and the next being filled.
constexpr std::uint64_t kSharedCapacity = 256ull << 20;
}  // namespace

MlocBrickCache& MlocBrickCache::shared() {
  static MlocBrickCache cache(kSharedCapacity);
  return cache;
}

std::uint64_t MlocBrickCache::new_owner() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1);
}

MlocBrickCache::Brick MlocBrickCache::find(std::uint64_t owner, std::uint64_t rank, std::uint32_t groups) {
  std::lock_guard lock(mu_);
  auto it = at_.find({owner, rank});
  if (it == at_.end() || it->second->groups < groups) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->brick;
}

void MlocBrickCache::put(std::uint64_t owner, std::uint64_t rank, std::uint32_t groups, Brick brick) {
  const std::uint64_t size = brick->size();
  if (size > capacity_) return;
  std::lock_guard lock(mu_);
  if (auto it = at_.find({owner, rank}); it != at_.end()) {
    if (it->second->groups >= groups) return;
    erase_locked(it->second);
  }
  lru_.push_front({{owner, rank}, groups, std::move(brick)});
  at_[{owner, rank}] = lru_.begin();
  bytes_ += size;
  while (bytes_ > capacity_) erase_locked(std::prev(lru_.end()));
}

void MlocBrickCache::drop(std::uint64_t owner) {
  std::lock_guard lock(mu_);
  for (auto it = lru_.begin(); it != lru_.end();) {
    auto next = std::next(it);
    if (it->key.owner == owner) erase_locked(it);
    it = next;
  }
}

std::uint64_t MlocBrickCache::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

void MlocBrickCache::erase_locked(std::list<Entry>::iterator it) {
  bytes_ -= it->brick->size();
  at_.erase(it->key);
  lru_.erase(it);
}

}  // namespace mmfs::fs
