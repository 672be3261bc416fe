// Decoded mloc chunks (bricks), shared by every image of the process and
// bounded in bytes, least recently used out first.
//
// Why: views are served in C-order pieces (layouts/selection_chunks.h) that
// are row slabs thinner than an mloc chunk when the array is wide, so the
// pieces of one sequential read need the same chunks in turn; decoding a
// chunk costs a fetch of all its units (one per bin and byte group) and a
// scatter. One cache for the process keeps the memory bound independent of
// how many mloc arrays are open.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "fs/device/sector_io.h"

namespace mmfs::fs {

class MlocBrickCache {
 public:
  using Brick = std::shared_ptr<const AlignedBuffer>;
  explicit MlocBrickCache(std::uint64_t capacity_bytes) : capacity_(capacity_bytes) {}

  // The process's cache.
  static MlocBrickCache& shared();
  // A fresh owner id: one per image, so a new image never sees an old one's bricks.
  static std::uint64_t new_owner();

  // The brick of (owner, rank) holding at least its first `groups` byte
  // groups, or nullptr.
  Brick find(std::uint64_t owner, std::uint64_t rank, std::uint32_t groups);
  // Keeps `brick` (replacing an entry with fewer groups); bricks larger than
  // the whole capacity are not kept.
  void put(std::uint64_t owner, std::uint64_t rank, std::uint32_t groups, Brick brick);
  // A buffer of `size` bytes that an evicted brick no longer needs, or
  // nullptr: decoding into it spares the page faults (and the kernel's zero
  // fill) of a fresh 2 MiB buffer per chunk.
  std::shared_ptr<AlignedBuffer> take_spare(std::uint64_t size);
  // Read buffers lent between reads, on the same terms: the largest spare
  // (an empty buffer when there is none), and back when the read is done.
  AlignedBuffer take_buffer();
  void give_buffer(AlignedBuffer buffer);
  // Drops every brick of `owner`.
  void drop(std::uint64_t owner);
  std::uint64_t bytes() const;

 private:
  struct Key {
    std::uint64_t owner, rank;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const { return std::hash<std::uint64_t>()(k.owner * 0x9E3779B97F4A7C15ull ^ k.rank); }
  };
  struct Entry {
    Key key;
    std::uint32_t groups;
    Brick brick;
  };
  void erase_locked(std::list<Entry>::iterator it);
  void keep_spare_locked(std::shared_ptr<AlignedBuffer> spare);
  static constexpr std::size_t kMaxSpares = 8;
  static constexpr std::uint64_t kMaxSpareBytes = 96ull << 20;

  const std::uint64_t capacity_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<Key, std::list<Entry>::iterator, KeyHash> at_;
  std::uint64_t bytes_ = 0;
  std::vector<std::shared_ptr<AlignedBuffer>> spares_;  // evicted or given back, held by no one else
  std::uint64_t spare_bytes_ = 0;
};

}  // namespace mmfs::fs
