// The pool of large I/O buffers (fs/util/buffer_pool.h) and AlignedBuffer's use of it.
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#include "fs/array/array_state.h"
#include "fs/device/block_device.h"
#include "fs/util/buffer_pool.h"

using mmfs::fs::AlignedBuffer;
using mmfs::fs::BufferPool;

namespace {

constexpr std::size_t MiB = std::size_t(1) << 20;

// How many of the pages of [p, p + bytes) are resident.
std::size_t resident_pages(const std::byte* p, std::size_t bytes) {
  const std::size_t page = std::size_t(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> v((bytes + page - 1) / page);
  REQUIRE(mincore(const_cast<std::byte*>(p), bytes, v.data()) == 0);
  return std::size_t(std::count_if(v.begin(), v.end(), [](unsigned char c) { return c & 1; }));
}

}  // namespace

TEST_CASE("a buffer given back is the next taker's, aligned to a huge page", "[buffer_pool]") {
  BufferPool pool;
  std::size_t mapped = 0;
  std::byte* a = pool.take(3 * MiB, &mapped);
  CHECK(mapped == 4 * MiB);  // rounded up to the granule
  CHECK(reinterpret_cast<std::uintptr_t>(a) % BufferPool::kGranule == 0);
  std::memset(a, 0x5a, mapped);  // every byte is the caller's
  CHECK(pool.stats().in_use_bytes == 4 * MiB);
  pool.give(a, mapped);
  CHECK(pool.stats().idle_bytes == 4 * MiB);
  CHECK(pool.stats().in_use_bytes == 0);

  std::size_t again = 0;
  std::byte* b = pool.take(4 * MiB, &again);
  CHECK(b == a);
  CHECK(again == 4 * MiB);
  const auto s = pool.stats();
  CHECK(s.takes == 2);
  CHECK(s.reused == 1);
  CHECK(s.mapped == 1);
  CHECK(s.idle_bytes == 0);
  pool.give(b, again);
  std::size_t none = 0;
  CHECK_THROWS_AS(pool.take(std::size_t(1) << 50, &none), std::bad_alloc);  // a size no address space holds
  CHECK(pool.stats().in_use_bytes == 0);
}

TEST_CASE("a taker gets the front of the smallest idle range that fits", "[buffer_pool]") {
  BufferPool pool;
  pool.set_limit(16 * MiB);
  REQUIRE(pool.prefault(16 * MiB) == 16 * MiB);
  std::size_t ma = 0, mb = 0;
  std::byte* p = pool.take(4 * MiB, &ma);
  CHECK(pool.take(2 * MiB, &mb) == p + 4 * MiB);
  pool.give(p, ma);  // idle: [p, 4) and [p + 6, 10)
  CHECK(pool.stats().idle_bytes == 14 * MiB);
  std::size_t mc = 0, md = 0;
  CHECK(pool.take(3 * MiB, &mc) == p);  // the 4 MiB range, not the 10
  CHECK(pool.take(8 * MiB, &md) == p + 6 * MiB);
  CHECK(pool.stats().idle_bytes == 2 * MiB);
  CHECK(pool.stats().mapped == 0);

  SECTION("ranges given back are joined, so a large taker finds them whole") {
    pool.give(p + 4 * MiB, mb);
    pool.give(p, mc);
    pool.give(p + 6 * MiB, md);
    CHECK(pool.stats().idle_bytes == 16 * MiB);
    std::size_t all = 0;
    CHECK(pool.take(16 * MiB, &all) == p);
    CHECK(all == 16 * MiB);
    CHECK(pool.stats().mapped == 0);
    pool.give(p, all);
  }
  SECTION("nothing idle fits: a new mapping") {
    std::size_t m = 0;
    std::byte* fresh = pool.take(4 * MiB, &m);
    CHECK((fresh < p || fresh >= p + 16 * MiB));
    CHECK(pool.stats().mapped == 1);
    pool.give(fresh, m);
    pool.give(p + 4 * MiB, mb);
    pool.give(p, mc);
    pool.give(p + 6 * MiB, md);
  }
}

TEST_CASE("idle memory stays under the limit, the least recently given goes first", "[buffer_pool]") {
  BufferPool pool;
  pool.set_limit(8 * MiB);
  REQUIRE(pool.prefault(8 * MiB) == 8 * MiB);
  std::size_t m1 = 0, m2 = 0, m3 = 0;
  std::byte* p = pool.take(4 * MiB, &m1);
  CHECK(pool.take(4 * MiB, &m2) == p + 4 * MiB);
  std::byte* x = pool.take(4 * MiB, &m3);  // a new mapping
  pool.give(p, m1);
  pool.give(x, m3);
  CHECK(pool.stats().idle_bytes == 8 * MiB);
  pool.give(p + 4 * MiB, m2);  // 12 > 8: [p, p + 4 MiB), given first, is unmapped
  auto s = pool.stats();
  CHECK(s.idle_bytes == 8 * MiB);
  CHECK(s.unmapped == 1);
  std::vector<unsigned char> v(4 * MiB / std::size_t(sysconf(_SC_PAGESIZE)));
  errno = 0;
  CHECK(mincore(p, 4 * MiB, v.data()) == -1);
  CHECK(errno == ENOMEM);  // no longer mapped
  CHECK(resident_pages(p + 4 * MiB, 4 * MiB) == v.size());

  SECTION("a buffer larger than the limit is unmapped at once") {
    std::size_t m = 0;
    std::byte* big = pool.take(10 * MiB, &m);
    pool.give(big, m);
    CHECK(pool.stats().idle_bytes == 8 * MiB);
    CHECK(pool.stats().unmapped == 2);
  }
  SECTION("a limit of 0 keeps nothing") {
    pool.set_limit(0);
    CHECK(pool.stats().idle_bytes == 0);
    std::size_t m = 0;
    const auto reused = pool.stats().reused;
    std::byte* d = pool.take(2 * MiB, &m);
    pool.give(d, m);
    CHECK(pool.stats().idle_bytes == 0);
    CHECK(pool.stats().reused == reused);
  }
}

TEST_CASE("prefault maps one resident range within the limit's room", "[buffer_pool]") {
  BufferPool pool;
  pool.set_limit(64 * MiB);
  CHECK(pool.prefault(100 * MiB) == 64 * MiB);  // no more than the limit
  CHECK(pool.stats().mapped == 0);
  std::size_t m = 0;
  std::byte* p = pool.take(64 * MiB, &m);
  CHECK(m == 64 * MiB);
  CHECK(resident_pages(p, m) == m / std::size_t(sysconf(_SC_PAGESIZE)));
  CHECK(pool.stats().reused == 1);
  pool.give(p, m);
  CHECK(pool.prefault(8 * MiB) == 64 * MiB);  // no room left: nothing more
  CHECK(pool.stats().idle_bytes == 64 * MiB);
}

TEST_CASE("large AlignedBuffers come from the shared pool and are cleared when asked", "[buffer_pool][block_device]") {
  BufferPool& shared = BufferPool::shared();
  std::byte* first = nullptr;
  {
    AlignedBuffer dirty(5 * MiB, AlignedBuffer::Uninitialized{});
    first = dirty.data();
    CHECK(reinterpret_cast<std::uintptr_t>(first) % BufferPool::kGranule == 0);
    std::memset(dirty.data(), 0xff, dirty.size());
  }
  const auto before = shared.stats();
  AlignedBuffer zeroed(5 * MiB);
  CHECK(shared.stats().reused == before.reused + 1);  // the 6 MiB given back, or other idle memory
  CHECK(std::all_of(zeroed.data(), zeroed.data() + zeroed.size(), [](std::byte b) { return b == std::byte{0}; }));

  // Moves carry the pool buffer; only the last owner gives it back.
  std::byte* const z = zeroed.data();
  AlignedBuffer moved(std::move(zeroed));
  CHECK(zeroed.data() == nullptr);
  CHECK(moved.data() == z);
  AlignedBuffer small(64 * 1024);
  small = std::move(moved);
  CHECK(small.data() == z);
  const auto in_use = shared.stats().in_use_bytes;
  small = AlignedBuffer();
  CHECK(shared.stats().in_use_bytes == in_use - 6 * MiB);
}

TEST_CASE("I/O buffers of any size come from the pool, other small buffers do not", "[buffer_pool][block_device]") {
  // DMA into 4 KiB pages costs a virtio host a segment per page (block_device.h).
  BufferPool& shared = BufferPool::shared();
  const auto before = shared.stats();
  {
    AlignedBuffer io(3 * 4096, AlignedBuffer::ForIo{});
    CHECK(reinterpret_cast<std::uintptr_t>(io.data()) % BufferPool::kGranule == 0);
    CHECK(io.size() == 3 * 4096);
    CHECK(shared.stats().in_use_bytes == before.in_use_bytes + BufferPool::kGranule);
    std::memset(io.data(), 0xab, io.size());
    AlignedBuffer ordinary(3 * 4096, AlignedBuffer::Uninitialized{});
    AlignedBuffer cleared(3 * 4096);
    CHECK(shared.stats().in_use_bytes == before.in_use_bytes + BufferPool::kGranule);
    CHECK(shared.stats().takes == before.takes + 1);
  }
  CHECK(shared.stats().in_use_bytes == before.in_use_bytes);
  AlignedBuffer none(0, AlignedBuffer::ForIo{});
  CHECK(none.data() == nullptr);
  AlignedBuffer page(AlignedBuffer::kOnePage, AlignedBuffer::ForIo{});  // one segment either way
  CHECK(page.data() != nullptr);
  CHECK(page.size() == AlignedBuffer::kOnePage);
  CHECK(shared.stats().takes == before.takes + 1);

  // A view's device reads land in such a buffer, however few its sectors
  // (here two requests of a small plan, placed one after the other).
  mmfs::layouts::IoPlan plan;
  plan.batches.push_back({{{100, 2}, {40, 1}}});
  mmfs::fs::SectorBuffer sectors(plan, 4096);
  const auto runs = sectors.runs();
  REQUIRE(runs.size() == 2);
  CHECK(runs[0].lbn == 40);
  CHECK(reinterpret_cast<std::uintptr_t>(runs[0].buffer) % BufferPool::kGranule == 0);
  CHECK(runs[1].buffer == runs[0].buffer + 4096);
  CHECK(shared.stats().in_use_bytes == before.in_use_bytes + BufferPool::kGranule);
}

#if defined(__SANITIZE_ADDRESS__)
TEST_CASE("an idle buffer is poisoned under ASan", "[buffer_pool]") {
  BufferPool pool;
  std::size_t m = 0;
  std::byte* p = pool.take(2 * MiB, &m);
  CHECK_FALSE(__asan_address_is_poisoned(p + 100));
  pool.give(p, m);
  CHECK(__asan_address_is_poisoned(p + 100));
  CHECK(pool.take(2 * MiB, &m) == p);
  CHECK_FALSE(__asan_address_is_poisoned(p + 100));
  pool.give(p, m);
}
#endif
