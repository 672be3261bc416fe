// RemappedBatch (fs/device/remapped_batch.h): the requests of a remapping
// device as pieces of one batch below — bad requests refused alone, each
// request's result its first failing piece's, done() once per request when
// its last piece arrives, and a request without pieces a success.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstring>
#include <vector>

#include "fs/device/fault_device.h"
#include "fs/device/remapped_batch.h"
#include "tests/unit/support/fs_test_support.h"

using namespace mmfs;
using fs::IoRequest;
using fs::RemappedBatch;

TEST_CASE("remapped batch: pieces land below in order; results and done per request", "[remapped_batch]") {
  fs::MemoryDevice below(64 * 512, 512);
  fs::testing::RefDevice ref(below);
  fs::AlignedBuffer a(3 * 512), b(512), c(512);
  for (std::size_t i = 0; i < 3 * 512; ++i) a.data()[i] = std::byte(i / 512 + 1);
  std::memset(b.data(), 9, 512);
  std::vector<IoRequest> batch{{IoRequest::Op::Write, 0, 3 * 512, a.data(), 0},
                               {IoRequest::Op::Write, 100, 512, b.data(), 0},  // not whole sectors
                               {IoRequest::Op::Write, 512, 512, c.data(), 0}};  // gets no piece
  RemappedBatch pieces(batch);
  REQUIRE(pieces.check(0, 512, 8 * 512));
  CHECK(pieces.add(0, {{10, 1}, {20, 2}}, 512, static_cast<std::byte*>(batch[0].buffer)) == 3 * 512);
  CHECK_FALSE(pieces.check(1, 512, 8 * 512));
  REQUIRE(pieces.check(2, 512, 8 * 512));
  std::vector<std::size_t> done;
  CHECK(pieces.submit(ref, [&](std::size_t i) { done.push_back(i); }) == EINVAL);
  CHECK(batch[0].result == 0);
  CHECK(batch[1].result == EINVAL);
  CHECK(batch[2].result == 0);
  CHECK(done == std::vector<std::size_t>{0});
  CHECK(below.bytes()[10 * 512] == std::byte(1));
  CHECK(below.bytes()[20 * 512] == std::byte(2));
  CHECK(below.bytes()[21 * 512 + 511] == std::byte(3));
  // A piece that fails below fails its request only.
  ref.failing.emplace_back(20 * 512, 21 * 512);
  std::vector<IoRequest> reads{{IoRequest::Op::Read, 0, 512, b.data(), 0}, {IoRequest::Op::Read, 512, 512, c.data(), 0}};
  RemappedBatch again(reads);
  REQUIRE(again.check(0, 512, 8 * 512));
  REQUIRE(again.check(1, 512, 8 * 512));
  again.add(0, {{10, 1}}, 512, b.data());
  again.add(1, {{20, 1}}, 512, c.data());
  CHECK(again.submit(ref) == EIO);
  CHECK(reads[0].result == 0);
  CHECK(reads[1].result == EIO);
  CHECK(b.data()[0] == std::byte(1));
}
