// Large I/O buffers kept mapped between uses.
//
// A view read puts its cells in a buffer of megabytes and gathers the view
// into another. Mapped afresh for every read, each buffer's pages are
// faulted in and zeroed by the kernel while io_uring pins them for O_DIRECT;
// on a virtual machine that hands freed memory back to its host, touching
// them again also costs a host fault per page (docs/measurements.md,
// "Buffers in pages or huge pages").
//
// The pool keeps buffers of 2 MiB multiples (transparent huge pages)
// mapped and touched after use, up to a limit of idle bytes. Idle memory is a
// set of address ranges: a taker gets the front of the smallest range that
// fits, and ranges given back are joined with the idle ranges they meet, so
// small buffers do not hold on to large ones. The daemon fills the pool when
// it starts (`-o io_buffers=SIZE`), so the reads of a new mount find resident
// memory too. Kept memory is never freed, so the guest never reports it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace mmfs::fs {

class BufferPool {
 public:
  // Buffers are multiples of this, aligned to it (one PMD: a huge page).
  static constexpr std::size_t kGranule = std::size_t(2) << 20;
  // A full read streams chunks of up to 128 MiB: the chunk a reader is in,
  // the one loading ahead and its device buffer come and go in the pool's
  // idle memory, which must hold two of them or every other chunk is mapped
  // (and zeroed) afresh. The daemon fills kDefaultFill at mount; the rest
  // of the limit is kept as reads give it back.
  static constexpr std::size_t kDefaultLimit = std::size_t(256) << 20;
  static constexpr std::size_t kDefaultFill = std::size_t(128) << 20;

  // The process's pool, which AlignedBuffer draws its large buffers from.
  static BufferPool& shared();

  BufferPool() = default;
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A buffer of at least `bytes`, aligned to kGranule: the smallest kept one
  // that fits, or a new mapping. *mapped receives its size, to give back.
  // Throws std::bad_alloc when the kernel refuses the mapping.
  std::byte* take(std::size_t bytes, std::size_t* mapped);
  // Returns a buffer from take(). It is kept, joined with the idle ranges it
  // meets, while the idle bytes stay under the limit (the least recently
  // given ranges are unmapped first), or unmapped.
  void give(std::byte* buffer, std::size_t mapped);

  // Idle bytes kept at most; lowering it unmaps the excess now. 0: none kept.
  void set_limit(std::size_t bytes);
  std::size_t limit() const;
  // Maps and touches `bytes` (rounded down to kGranule, at most what the
  // limit leaves room for) as one range, and keeps it idle. Returns the bytes
  // now idle.
  std::size_t prefault(std::size_t bytes);

  struct Stats {
    std::uint64_t idle_bytes = 0;    // kept, waiting for a taker
    std::uint64_t in_use_bytes = 0;  // taken and not yet given back
    std::uint64_t takes = 0;
    std::uint64_t reused = 0;        // takes served by a kept buffer
    std::uint64_t mapped = 0;        // takes that needed a new mapping
    std::uint64_t unmapped = 0;      // buffers given back beyond the limit
  };
  Stats stats() const;

 private:
  struct Kept {
    std::byte* data;
    std::size_t bytes;
    std::uint64_t given;  // when it was given back (a counter), for eviction
  };
  static std::byte* map(std::size_t bytes);
  static void unmap(std::byte* data, std::size_t bytes);
  void keep_locked(std::byte* data, std::size_t bytes);
  void evict_locked(std::size_t room, std::vector<Kept>* out);

  mutable std::mutex mu_;
  std::vector<Kept> kept_;
  std::size_t limit_ = kDefaultLimit;
  std::uint64_t clock_ = 0;
  Stats stats_;
};

}  // namespace mmfs::fs
