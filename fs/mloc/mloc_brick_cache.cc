#include "fs/mloc/mloc_brick_cache.h"

#include <algorithm>
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

std::shared_ptr<AlignedBuffer> MlocBrickCache::take_spare(std::uint64_t size) {
  std::lock_guard lock(mu_);
  for (std::size_t i = spares_.size(); i-- > 0;)
    if (spares_[i]->size() == size) {
      auto spare = std::move(spares_[i]);
      spares_.erase(spares_.begin() + std::ptrdiff_t(i));
      spare_bytes_ -= size;
      return spare;
    }
  return nullptr;
}

AlignedBuffer MlocBrickCache::take_buffer() {
  std::lock_guard lock(mu_);
  if (spares_.empty()) return {};
  auto largest = std::max_element(spares_.begin(), spares_.end(),
                                  [](const auto& a, const auto& b) { return a->size() < b->size(); });
  AlignedBuffer out = std::move(**largest);
  spares_.erase(largest);
  spare_bytes_ -= out.size();
  return out;
}

void MlocBrickCache::give_buffer(AlignedBuffer buffer) {
  if (buffer.size() == 0) return;
  auto spare = std::make_shared<AlignedBuffer>(std::move(buffer));
  std::lock_guard lock(mu_);
  keep_spare_locked(std::move(spare));
}

void MlocBrickCache::keep_spare_locked(std::shared_ptr<AlignedBuffer> spare) {
  if (spares_.size() >= kMaxSpares || spare_bytes_ + spare->size() > kMaxSpareBytes) return;  // freed
  spare_bytes_ += spare->size();
  spares_.push_back(std::move(spare));
}

void MlocBrickCache::erase_locked(std::list<Entry>::iterator it) {
  bytes_ -= it->brick->size();
  // The cache made no brick const: bricks are built mutable and shared as const.
  if (it->brick.use_count() == 1) keep_spare_locked(std::const_pointer_cast<AlignedBuffer>(std::move(it->brick)));
  at_.erase(it->key);
  lru_.erase(it);
}

}  // namespace mmfs::fs
