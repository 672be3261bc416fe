// The pool of large I/O buffers (see buffer_pool.h).
#include "fs/util/buffer_pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "util/align.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
// An idle buffer is poisoned: a use after give() is still reported, as it
// would be if the buffer had been freed.
#define MMFS_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define MMFS_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define MMFS_POISON(p, n) ((void)(p), (void)(n))
#define MMFS_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace mmfs::fs {

namespace {
// Whole granules, at least one.
std::size_t whole_granules(std::size_t bytes) {
  return std::max(BufferPool::kGranule, util::align_up(bytes, BufferPool::kGranule));
}
}  // namespace

BufferPool& BufferPool::shared() {
  // Never destroyed: buffers may be given back by static destructors.
  static BufferPool* pool = new BufferPool();
  return *pool;
}

BufferPool::~BufferPool() {
  for (const Kept& k : kept_) unmap(k.data, k.bytes);
}

std::byte* BufferPool::map(std::size_t bytes) {
  // Over-map by one granule and trim, for a granule-aligned start: the
  // kernel backs an aligned range with huge pages.
  const std::size_t span = bytes + kGranule;
  void* raw = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto base = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = util::align_up(base, kGranule);
  if (aligned > base) ::munmap(raw, aligned - base);
  if (const std::size_t tail = base + span - (aligned + bytes); tail > 0)
    ::munmap(reinterpret_cast<void*>(aligned + bytes), tail);
  auto* data = reinterpret_cast<std::byte*>(aligned);
  ::madvise(data, bytes, MADV_HUGEPAGE);  // advice only: failure is harmless
  return data;
}

void BufferPool::unmap(std::byte* data, std::size_t bytes) {
  MMFS_UNPOISON(data, bytes);
  ::munmap(data, bytes);
}

std::byte* BufferPool::take(std::size_t bytes, std::size_t* mapped) {
  if (bytes > (std::size_t(1) << 48)) throw std::bad_alloc();  // no address space holds it
  const std::size_t want = whole_granules(bytes);
  {
    std::lock_guard lock(mu_);
    ++stats_.takes;
    auto best = kept_.end();
    for (auto it = kept_.begin(); it != kept_.end(); ++it)
      if (it->bytes >= want && (best == kept_.end() || it->bytes < best->bytes)) best = it;
    if (best != kept_.end()) {
      // The front of the smallest range that fits; the rest stays kept.
      std::byte* data = best->data;
      if (best->bytes > want) {
        best->data += want;
        best->bytes -= want;
      } else {
        kept_.erase(best);
      }
      *mapped = want;
      ++stats_.reused;
      stats_.idle_bytes -= want;
      stats_.in_use_bytes += want;
      MMFS_UNPOISON(data, want);
      return data;
    }
  }
  std::byte* data = map(want);
  std::lock_guard lock(mu_);
  ++stats_.mapped;
  stats_.in_use_bytes += want;
  *mapped = want;
  return data;
}

void BufferPool::keep_locked(std::byte* data, std::size_t bytes) {
  // Ranges that meet are joined (whichever mappings they came from: munmap
  // and madvise take any range), so a large taker finds them whole again.
  Kept joined{data, bytes, ++clock_};
  for (auto it = kept_.begin(); it != kept_.end();) {
    if (it->data + it->bytes == joined.data) {
      joined.data = it->data;
      joined.bytes += it->bytes;
    } else if (joined.data + joined.bytes == it->data) {
      joined.bytes += it->bytes;
    } else {
      ++it;
      continue;
    }
    it = kept_.erase(it);
  }
  kept_.push_back(joined);
  stats_.idle_bytes += bytes;
}

void BufferPool::evict_locked(std::size_t room, std::vector<Kept>* out) {
  // The least recently given first, until `room` more idle bytes fit under
  // the limit; of the last one only the granules that must go.
  std::sort(kept_.begin(), kept_.end(), [](const Kept& a, const Kept& b) { return a.given < b.given; });
  std::size_t drop = 0;
  while (drop < kept_.size() && stats_.idle_bytes + room > limit_) {
    Kept& k = kept_[drop];
    const std::size_t over = stats_.idle_bytes + room - limit_;
    if (over < k.bytes) {
      const std::size_t cut = whole_granules(over);
      if (cut < k.bytes) {
        out->push_back({k.data + (k.bytes - cut), cut, k.given});
        k.bytes -= cut;
        stats_.idle_bytes -= cut;
        ++stats_.unmapped;
        break;
      }
    }
    stats_.idle_bytes -= k.bytes;
    out->push_back(k);
    ++stats_.unmapped;
    ++drop;
  }
  kept_.erase(kept_.begin(), kept_.begin() + std::ptrdiff_t(drop));
}

void BufferPool::give(std::byte* buffer, std::size_t mapped) {
  if (buffer == nullptr) return;
  std::vector<Kept> drop;
  bool keep = false;
  {
    std::lock_guard lock(mu_);
    stats_.in_use_bytes -= mapped;
    if (mapped <= limit_) {
      evict_locked(mapped, &drop);
      MMFS_POISON(buffer, mapped);  // under the lock: a taker may have it the moment it is kept
      keep_locked(buffer, mapped);
      keep = true;
    } else {
      ++stats_.unmapped;
    }
  }
  if (!keep) unmap(buffer, mapped);
  for (const Kept& k : drop) unmap(k.data, k.bytes);  // outside the lock: munmap takes time
}

void BufferPool::set_limit(std::size_t bytes) {
  std::vector<Kept> drop;
  {
    std::lock_guard lock(mu_);
    limit_ = bytes;
    evict_locked(0, &drop);
  }
  for (const Kept& k : drop) unmap(k.data, k.bytes);
}

std::size_t BufferPool::limit() const {
  std::lock_guard lock(mu_);
  return limit_;
}

std::size_t BufferPool::prefault(std::size_t bytes) {
  std::size_t size;
  {
    std::lock_guard lock(mu_);
    const std::size_t room = limit_ > stats_.idle_bytes ? limit_ - stats_.idle_bytes : 0;
    size = util::align_down(std::min(bytes, room), kGranule);
  }
  if (size > 0) {
    std::byte* data = map(size);
    std::memset(data, 0, size);  // the touch is the point: the pages are resident from now on
    MMFS_POISON(data, size);
    std::vector<Kept> drop;
    {
      std::lock_guard lock(mu_);
      evict_locked(size, &drop);  // gives taken meanwhile may have filled the room
      keep_locked(data, size);
    }
    for (const Kept& k : drop) unmap(k.data, k.bytes);
  }
  return stats().idle_bytes;
}

BufferPool::Stats BufferPool::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace mmfs::fs
