// The read side of an array file: the decoded chunks of recent reads (of the
// file and of its views) and the prefetch pipeline of sequential readers.
//
// A view is read in chunks (layouts::SelectionChunks); a chunk is loaded once
// by whoever asks first, and readers arriving meanwhile wait for that load.
// A reader that moves on sequentially gets the chunks after its own loaded
// ahead, on background threads: at most `depth` chunks ahead of it, at most
// kDeviceLoads of them reading the device at once, and each load starts the
// next as soon as its device reads are done, so the device streams while
// earlier chunks are verified and gathered.
//
// The chunks themselves come from a ChunkSource (the array file), which
// knows its placement; this class knows only keys, generations and threads.
// Thread-safe. Its mutex is taken under the source's placement lock (a load
// starts prefetches), never the other way round.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <string>

#include "fs/array/view_types.h"
#include "fs/device/block_device.h"

namespace mmfs::fs {

// How a file's reads went through its chunk cache.
struct ChunkStats {
  std::uint64_t loads = 0;           // chunks read from the device
  std::uint64_t prefetched = 0;      // of which loaded ahead of their reader
  std::uint64_t evicted_unread = 0;  // prefetched chunks dropped before a reader took them
};

class ChunkSource {
 public:
  virtual ~ChunkSource() = default;
  // Loads chunk `index` of `view` (whose chunk_bytes is set) into *out;
  // `device_done` runs once its device reads are done.
  virtual int load_chunk(const DataView& view, std::uint64_t index, AlignedBuffer* out, std::string* message,
                         const std::function<void()>& device_done) = 0;
  // The contents' generation now: bumped by every change, so a chunk of an
  // older one is never served again.
  virtual std::uint64_t generation() const = 0;
};

class ChunkReader {
 public:
  using Chunk = std::shared_ptr<const AlignedBuffer>;

  // `base_chunk_bytes`: the volume's chunk size, by which the pipeline's
  // depth is measured (kPrefetchChunks of them ahead).
  explicit ChunkReader(std::uint64_t base_chunk_bytes) : base_chunk_bytes_(base_chunk_bytes) {}

  // Chunk `index` (of `chunks`) of `view` for a reader: from the cache, else
  // loaded here; a reader that moved to it from the chunk before (or stayed)
  // gets the chunks after it prefetched. `source` is kept alive by the
  // background loads it starts (it owns this reader).
  int reader_chunk(const std::shared_ptr<ChunkSource>& source, const DataView& view, std::uint64_t index,
                   std::uint64_t chunks, Chunk* out, std::string* message);

  // Loads the first chunks of `view` (of `chunks`) in the background: the
  // view a reader is expected to read after the `current_bytes` it reads now
  // (the next enclosing box of a Zarr scan, DataView::next_within). As many
  // as the pipeline and the cache have room for beside the current ones.
  // False when the pipeline was too full for some of them: ask again later.
  bool prefetch_next_view(const std::shared_ptr<ChunkSource>& source, const DataView& view, std::uint64_t chunks,
                          std::uint64_t current_bytes);

  // Whether some chunk of the view spelled `spelling` is cached or loading,
  // of the source's current contents.
  bool holds_view(const ChunkSource& source, const std::string& spelling) const;

  ChunkStats stats() const;
  // Drops every cached chunk (the file was removed).
  void clear();
  // Stops prefetching and waits for the loads in flight.
  void quiesce();
  // Waits for the loads in flight, without stopping new ones.
  void wait_for_prefetches();

  // Room for the chunk a reader is in, the one before it (requests still in
  // flight) and the prefetched ones ahead: at most this many, and this many
  // bytes unless three chunks need more.
  static constexpr std::size_t kCachedChunks = 6;
  static constexpr std::uint64_t kCacheBytes = 192ull << 20;

 private:
  // Chunks a sequential reader has prefetched ahead of it: the bytes of
  // kPrefetchChunks chunks of the volume's size (96 MiB), in chunks of this
  // view's, and never fewer than two, or the pipeline stalls: with one load
  // at a time the device waits while that load verifies and gathers its
  // chunk (a full read in 128 MiB chunks ran at the sum of the two, 1.4 s
  // for 2 GiB, instead of the larger, 1.0 s).
  std::uint64_t prefetch_depth(std::uint64_t chunk_bytes) const;
  std::string chunk_key(const ChunkSource& source, const DataView& view, std::uint64_t index,
                        std::uint64_t* generation) const;
  int chunk(ChunkSource& source, const DataView& view, std::uint64_t index, Chunk* out, std::string* message,
            const std::function<void()>& device_done);
  // Under mu_: the cached (or loading) chunk's future, or a new entry whose
  // promise the caller must fulfil (with fill()). A reader's lookup marks the
  // chunk taken; a prefetch's leaves it waiting for its reader.
  std::shared_ptr<std::promise<Chunk>> find_or_reserve(const std::string& key, std::uint64_t generation,
                                                       std::uint64_t bytes, bool reader,
                                                       std::shared_future<Chunk>* future);
  // Loads a reserved chunk into its promise (null on failure, the entry dropped).
  int fill(ChunkSource& source, const DataView& view, std::uint64_t index, const std::string& key,
           std::promise<Chunk>& promise, const std::function<void()>& device_done, std::string* message);
  // Loads chunk `index` in the background unless it is cached, too far ahead
  // of the reader, or the pipeline is full. `chain`: its device reads done,
  // it fills the pipeline after the reader (not for another view than the
  // reader's: the reader's place says nothing about that one). True when
  // the chunk is cached, loading or now started; false when the pipeline had
  // no room for it.
  bool prefetch(const std::shared_ptr<ChunkSource>& source, const DataView& view, std::uint64_t index,
                std::uint64_t chunks, bool chain = true);
  // Prefetches the chunks after the reader's, as far as the pipeline allows.
  void fill_pipeline(const std::shared_ptr<ChunkSource>& source, const DataView& view, std::uint64_t chunks);

  static constexpr int kPrefetchDepth = 3;
  static constexpr int kMinPrefetchDepth = 2;
  static constexpr std::uint64_t kPrefetchChunks = 3;
  static constexpr int kDeviceLoads = 2;

  struct CacheEntry {
    std::string key;
    std::shared_future<Chunk> chunk;
    std::uint64_t generation = 0;  // of the contents it holds: older ones are never read again
    bool unread = false;           // prefetched, not yet taken by a reader: evicted last
    std::uint64_t bytes = 0;       // the chunk's size (its view's chunk_bytes)
  };
  const std::uint64_t base_chunk_bytes_;
  mutable std::mutex mu_;
  std::list<CacheEntry> cache_;  // most recent first
  ChunkStats stats_;
  int prefetching_ = 0;          // background loads running
  int prefetch_on_device_ = 0;   // of which still reading the device
  std::uint64_t reader_at_ = 0;  // the chunk a reader last took
  bool quiesced_ = false;
  std::condition_variable prefetch_done_;
};

}  // namespace mmfs::fs
