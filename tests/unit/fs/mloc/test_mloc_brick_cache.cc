// The process-wide cache of decoded mloc chunks (fs/mloc/mloc_brick_cache.h).
#include <catch2/catch.hpp>

#include <algorithm>

#include "fs/mloc/mloc_brick_cache.h"

using mmfs::fs::AlignedBuffer;
using mmfs::fs::MlocBrickCache;

namespace {

MlocBrickCache::Brick brick(std::size_t bytes, std::byte fill) {
  auto b = std::make_shared<AlignedBuffer>(bytes, AlignedBuffer::Uninitialized{});
  std::fill(b->data(), b->data() + bytes, fill);
  return b;
}

}  // namespace

TEST_CASE("mloc brick cache: found by owner and rank, with enough byte groups", "[mloc]") {
  MlocBrickCache cache(1 << 20);
  cache.put(1, 7, 3, brick(4096, std::byte{1}));
  REQUIRE(cache.find(1, 7, 3));
  CHECK(cache.find(1, 7, 3)->data()[0] == std::byte{1});
  CHECK(cache.find(1, 7, 2));   // fewer groups: the same brick serves
  CHECK_FALSE(cache.find(1, 7, 4));  // more groups than decoded
  CHECK_FALSE(cache.find(2, 7, 1));  // another image's chunk 7
  CHECK_FALSE(cache.find(1, 8, 1));

  // A fuller brick replaces it; a poorer one does not.
  cache.put(1, 7, 7, brick(4096, std::byte{2}));
  CHECK(cache.find(1, 7, 7)->data()[0] == std::byte{2});
  cache.put(1, 7, 1, brick(4096, std::byte{3}));
  CHECK(cache.find(1, 7, 1)->data()[0] == std::byte{2});
  CHECK(cache.bytes() == 4096);
}

TEST_CASE("mloc brick cache: bounded in bytes, least recently used out first", "[mloc]") {
  MlocBrickCache cache(3 * 4096);
  for (std::uint64_t r = 0; r < 3; ++r) cache.put(1, r, 1, brick(4096, std::byte(r)));
  CHECK(cache.bytes() == 3 * 4096);
  REQUIRE(cache.find(1, 0, 1));  // 0 is now the most recent: 1 goes next
  cache.put(1, 3, 1, brick(4096, std::byte{3}));
  CHECK(cache.bytes() == 3 * 4096);
  CHECK(cache.find(1, 0, 1));
  CHECK_FALSE(cache.find(1, 1, 1));
  CHECK(cache.find(1, 2, 1));
  CHECK(cache.find(1, 3, 1));

  // A brick larger than the whole cache is not kept and evicts nothing.
  cache.put(1, 9, 1, brick(4 * 4096, std::byte{9}));
  CHECK_FALSE(cache.find(1, 9, 1));
  CHECK(cache.bytes() == 3 * 4096);

  // A brick held by a reader outlives its eviction.
  auto held = cache.find(1, 2, 1);
  for (std::uint64_t r = 10; r < 13; ++r) cache.put(1, r, 1, brick(4096, std::byte{0}));
  CHECK_FALSE(cache.find(1, 2, 1));
  CHECK(held->data()[0] == std::byte{2});
}

TEST_CASE("mloc brick cache: drop forgets one owner's bricks only", "[mloc]") {
  MlocBrickCache cache(1 << 20);
  const auto a = MlocBrickCache::new_owner(), b = MlocBrickCache::new_owner();
  CHECK(a != b);
  for (std::uint64_t r = 0; r < 4; ++r) {
    cache.put(a, r, 1, brick(512, std::byte{1}));
    cache.put(b, r, 1, brick(512, std::byte{2}));
  }
  cache.drop(a);
  CHECK(cache.bytes() == 4 * 512);
  for (std::uint64_t r = 0; r < 4; ++r) {
    CHECK_FALSE(cache.find(a, r, 1));
    CHECK(cache.find(b, r, 1));
  }
}

TEST_CASE("mloc brick cache: an evicted brick no one holds is a spare buffer of its size", "[mloc]") {
  MlocBrickCache cache(8192);
  CHECK_FALSE(cache.take_spare(4096));
  cache.put(1, 1, 1, brick(4096, std::byte{1}));
  auto held = cache.find(1, 1, 1);  // a reader still holds chunk 1
  cache.put(1, 2, 1, brick(4096, std::byte{2}));
  cache.put(1, 3, 1, brick(4096, std::byte{3}));  // evicts chunk 1: held, so not a spare
  CHECK_FALSE(cache.take_spare(4096));
  CHECK(held->data()[0] == std::byte{1});
  held.reset();
  cache.put(1, 4, 1, brick(4096, std::byte{4}));  // evicts chunk 2: no one holds it
  CHECK_FALSE(cache.take_spare(2048));             // only a buffer of the size asked for
  auto spare = cache.take_spare(4096);
  REQUIRE(spare);
  CHECK(spare->size() == 4096);
  CHECK(spare->data()[0] == std::byte{2});
  CHECK_FALSE(cache.take_spare(4096));  // handed out once
  CHECK(cache.find(1, 3, 1));
  CHECK(cache.find(1, 4, 1));
  CHECK_FALSE(cache.find(1, 2, 1));
}

TEST_CASE("mloc brick cache: read buffers are lent and given back, largest first, bounded", "[mloc]") {
  MlocBrickCache cache(1 << 20);
  CHECK(cache.take_buffer().size() == 0);  // none yet: the reader allocates its own
  cache.give_buffer(AlignedBuffer(8192));
  cache.give_buffer(AlignedBuffer(16384));
  cache.give_buffer(AlignedBuffer());  // an empty one is not kept
  CHECK(cache.take_buffer().size() == 16384);
  CHECK(cache.take_buffer().size() == 8192);
  CHECK(cache.take_buffer().size() == 0);
  for (int i = 0; i < 20; ++i) cache.give_buffer(AlignedBuffer(4096));  // more than it keeps
  int kept = 0;
  while (cache.take_buffer().size() == 4096) ++kept;
  CHECK(kept > 0);
  CHECK(kept < 20);
}
