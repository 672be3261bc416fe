#include "fs/array/chunk_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <system_error>
#include <thread>

#include "util/align.h"

namespace mmfs::fs {

std::uint64_t ChunkReader::prefetch_depth(std::uint64_t chunk_bytes) const {
  return std::clamp<std::uint64_t>(kPrefetchChunks * base_chunk_bytes_ / std::max<std::uint64_t>(1, chunk_bytes),
                                    kMinPrefetchDepth, kPrefetchDepth);
}

std::string ChunkReader::chunk_key(const ChunkSource& source, const DataView& view, std::uint64_t index,
                                   std::uint64_t* generation) const {
  // A key of a generation a write is just leaving is only dropped sooner.
  *generation = source.generation();
  return fmt::format("{}#{}#{}#{}@{}#{}", view.spelling, *generation, view.chunk_bytes, view.served,
                     view.served_epoch, index);
}

std::shared_ptr<std::promise<ChunkReader::Chunk>> ChunkReader::find_or_reserve(const std::string& key,
                                                                             std::uint64_t generation,
                                                                             std::uint64_t bytes, bool reader,
                                                                             std::shared_future<Chunk>* future) {
  auto it = std::find_if(cache_.begin(), cache_.end(), [&](const CacheEntry& e) { return e.key == key; });
  if (it != cache_.end()) {
    *future = it->chunk;
    if (reader) it->unread = false;
    cache_.splice(cache_.begin(), cache_, it);
    return nullptr;
  }
  auto promise = std::make_shared<std::promise<Chunk>>();
  *future = promise->get_future().share();
  cache_.push_front({key, *future, generation, !reader, bytes});
  // Chunks of older contents go first; then the least recently used one a
  // reader has taken; prefetched chunks wait for theirs unless nothing else
  // is left. An entry evicted while loading still serves its waiters.
  cache_.remove_if([&](const CacheEntry& e) { return e.generation < generation; });
  const std::uint64_t byte_limit = std::max(kCacheBytes, 3 * bytes);
  auto over = [&] {
    std::uint64_t held = 0;
    for (const CacheEntry& e : cache_) held += e.bytes;
    return cache_.size() > 1 && (cache_.size() > kCachedChunks || held > byte_limit);
  };
  while (over()) {
    auto victim = std::find_if(cache_.rbegin(), cache_.rend(), [](const CacheEntry& e) { return !e.unread; });
    if (victim == cache_.rend()) {
      ++stats_.evicted_unread;
      cache_.pop_back();
    } else {
      cache_.erase(std::next(victim).base());
    }
  }
  ++stats_.loads;
  if (!reader) ++stats_.prefetched;
  return promise;
}

int ChunkReader::fill(ChunkSource& source, const DataView& view, std::uint64_t index, const std::string& key,
                      std::promise<Chunk>& promise, const std::function<void()>& device_done, std::string* message) {
  auto buf = std::make_shared<AlignedBuffer>();
  int r;
  try {
    r = source.load_chunk(view, index, buf.get(), message, device_done);
  } catch (const std::bad_alloc&) {
    *message = "out of memory loading a chunk";
    r = ENOMEM;
  } catch (const std::exception& e) {
    *message = fmt::format("loading a chunk failed: {}", e.what());
    r = EIO;
  }
  if (r != 0) {
    {
      std::lock_guard lock(mu_);
      cache_.remove_if([&](const CacheEntry& e) { return e.key == key; });
    }
    promise.set_value(nullptr);  // its waiters answer EIO; the next reader tries again
    return r;
  }
  promise.set_value(std::move(buf));
  return 0;
}

int ChunkReader::chunk(ChunkSource& source, const DataView& view, std::uint64_t index, Chunk* out,
                       std::string* message, const std::function<void()>& device_done) {
  // A load by another request that failed (or a prefetch that could not
  // start) leaves nothing: load it here once more, to report this load's own error.
  for (int attempt = 0;; ++attempt) {
    std::uint64_t generation;
    const std::string key = chunk_key(source, view, index, &generation);
    std::shared_future<Chunk> future;
    std::shared_ptr<std::promise<Chunk>> promise;
    {
      std::lock_guard lock(mu_);
      promise = find_or_reserve(key, generation, view.chunk_bytes, true, &future);
    }
    if (promise)
      if (int r = fill(source, view, index, key, *promise, device_done, message)) return r;
    *out = future.get();
    if (*out) return 0;
    if (attempt == 1) {
      if (message->empty()) *message = "reading the chunk failed in another request";
      return EIO;
    }
  }
}

bool ChunkReader::holds_view(const ChunkSource& source, const std::string& spelling) const {
  const std::uint64_t generation = source.generation();
  const std::string prefix = spelling + "#";  // chunk_key's first field
  std::lock_guard lock(mu_);
  return std::any_of(cache_.begin(), cache_.end(), [&](const CacheEntry& e) {
    return e.generation == generation && e.key.starts_with(prefix);
  });
}

ChunkStats ChunkReader::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void ChunkReader::clear() {
  std::lock_guard lock(mu_);
  cache_.clear();
}

int ChunkReader::reader_chunk(const std::shared_ptr<ChunkSource>& source, const DataView& view,
                              std::uint64_t index, std::uint64_t chunks, Chunk* out, std::string* message) {
  bool sequential;
  {
    std::lock_guard lock(mu_);
    // The kernel's read-ahead may send neighbouring requests out of order.
    sequential = index + 1 >= reader_at_ && index <= reader_at_ + 1;
    reader_at_ = index;
  }
  // On a miss the reader loads the chunk itself; the next ones' device reads
  // start as soon as this one's are done.
  auto next = [&] {
    if (sequential) fill_pipeline(source, view, chunks);
  };
  if (int r = chunk(*source, view, index, out, message, next)) return r;
  if (sequential) fill_pipeline(source, view, chunks);
  return 0;
}

bool ChunkReader::prefetch_next_view(const std::shared_ptr<ChunkSource>& source, const DataView& view,
                                     std::uint64_t chunks, std::uint64_t current_bytes) {
  if (view.chunk_bytes == 0) return true;
  const std::uint64_t current_chunks = util::div_up(current_bytes, view.chunk_bytes);
  if (current_bytes >= kCacheBytes || current_chunks >= kCachedChunks) return true;
  const std::uint64_t room = std::min<std::uint64_t>((kCacheBytes - current_bytes) / view.chunk_bytes,
                                                     kCachedChunks - current_chunks);
  bool all = true;
  for (std::uint64_t k = 0; k < std::min(room, chunks); ++k) all = prefetch(source, view, k, chunks, false) && all;
  return all;
}

void ChunkReader::fill_pipeline(const std::shared_ptr<ChunkSource>& source, const DataView& view,
                                std::uint64_t chunks) {
  std::uint64_t at;
  {
    std::lock_guard lock(mu_);
    at = reader_at_;
  }
  for (std::uint64_t k = 1; k <= prefetch_depth(view.chunk_bytes); ++k) prefetch(source, view, at + k, chunks);
}

bool ChunkReader::prefetch(const std::shared_ptr<ChunkSource>& source, const DataView& view, std::uint64_t index,
                           std::uint64_t chunks, bool chain) {
  if (index >= chunks) return true;
  std::uint64_t generation;
  std::string key = chunk_key(*source, view, index, &generation);
  std::shared_ptr<std::promise<Chunk>> promise;
  {
    std::lock_guard lock(mu_);
    const std::uint64_t depth = prefetch_depth(view.chunk_bytes);
    if (quiesced_ || std::uint64_t(prefetching_) >= depth || prefetch_on_device_ >= kDeviceLoads) return false;
    if (index > reader_at_ + depth) return false;  // too far ahead: its cache slot would evict what is read
    std::shared_future<Chunk> future;
    // Reserved now, so a reader arriving before the thread waits for it.
    promise = find_or_reserve(key, generation, view.chunk_bytes, false, &future);
    if (!promise) return true;  // cached or being loaded
    ++prefetching_;
    ++prefetch_on_device_;
  }
  // The source owns this reader: holding the source keeps both alive.
  std::weak_ptr<ChunkSource> weak = source;
  auto task = [this, weak, view, index, chunks, key, promise, chain] {
    auto self = weak.lock();
    if (!self) {
      promise->set_value(nullptr);
      return;
    }
    bool on_device = true;
    // Leaves the device to the next load and starts it.
    auto device_done = [&] {
      {
        std::lock_guard lock(mu_);
        --prefetch_on_device_;
        on_device = false;
      }
      if (chain) fill_pipeline(self, view, chunks);
    };
    std::string ignored;  // the reader that needs the chunk reports the error
    fill(*self, view, index, key, *promise, device_done, &ignored);
    std::lock_guard lock(mu_);
    if (on_device) --prefetch_on_device_;
    --prefetching_;
    prefetch_done_.notify_all();
  };
  try {
    std::thread(std::move(task)).detach();
    return true;
  } catch (const std::system_error&) {
    // No thread to spare: give the slot back; a reader loads the chunk.
    std::lock_guard lock(mu_);
    cache_.remove_if([&](const CacheEntry& e) { return e.key == key; });
    promise->set_value(nullptr);
    --prefetch_on_device_;
    --prefetching_;
    prefetch_done_.notify_all();
    return false;
  }
}

void ChunkReader::quiesce() {
  std::unique_lock lock(mu_);
  quiesced_ = true;
  prefetch_done_.wait(lock, [&] { return prefetching_ == 0; });
}

void ChunkReader::wait_for_prefetches() {
  std::unique_lock lock(mu_);
  prefetch_done_.wait(lock, [&] { return prefetching_ == 0; });
}

}  // namespace mmfs::fs
