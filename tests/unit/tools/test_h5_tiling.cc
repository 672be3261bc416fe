// tools/h5/transfer_tiling: chunk-aligned boxes and their C-order runs,
// checked against brute force (every element in exactly one box, runs equal
// to the box's elements walked in C order, alignment, budget).
#include <catch2/catch.hpp>

#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "tools/h5/transfer_tiling.h"

using mmfs::h5::Box;
using mmfs::h5::Run;
using mmfs::h5::TransferTiling;

namespace {

using Shape = std::vector<std::uint64_t>;

std::uint64_t prod(const Shape& s) { return std::accumulate(s.begin(), s.end(), std::uint64_t{1}, std::multiplies<>()); }

// Every check of the contract for one tiling.
void check_tiling(const Shape& shape, std::uint32_t itemsize, const Shape& chunk, std::uint64_t budget) {
  CAPTURE(shape, itemsize, chunk, budget);
  const TransferTiling t(shape, itemsize, chunk, budget);
  const std::size_t n = shape.size();
  std::vector<int> covered(prod(shape), 0);
  Shape clipped_chunk(n);
  for (std::size_t d = 0; d < n; ++d) clipped_chunk[d] = std::min(chunk[d], shape[d]);
  const std::uint64_t chunk_bytes = prod(clipped_chunk) * itemsize;
  std::uint64_t total = 0;
  std::uint64_t previous_first = 0;

  for (std::uint64_t i = 0; i < t.box_count(); ++i) {
    const Box b = t.box(i);
    REQUIRE(b.start.size() == n);
    REQUIRE(b.count.size() == n);
    // Chunk alignment: starts on a chunk boundary, ends on one or at the edge.
    for (std::size_t d = 0; d < n; ++d) {
      REQUIRE(b.count[d] >= 1);
      REQUIRE(b.start[d] + b.count[d] <= shape[d]);
      REQUIRE(b.start[d] % clipped_chunk[d] == 0);
      const std::uint64_t end = b.start[d] + b.count[d];
      REQUIRE((end == shape[d] || end % clipped_chunk[d] == 0));
    }
    // Budget: a box fits it, unless it is a single chunk bigger than it.
    const std::uint64_t bytes = b.elements() * itemsize;
    REQUIRE(bytes <= std::max(budget, chunk_bytes));
    REQUIRE(bytes <= t.max_box_bytes());
    total += bytes;

    // Brute force: the box's elements in C order, as array byte offsets.
    std::vector<std::uint64_t> expected;
    std::vector<std::uint64_t> at(n, 0);
    for (std::uint64_t k = 0; k < b.elements(); ++k) {
      std::uint64_t linear = 0;
      for (std::size_t d = 0; d < n; ++d) linear = linear * shape[d] + b.start[d] + at[d];
      expected.push_back(linear * itemsize);
      ++covered[linear];
      for (std::size_t d = n; d-- > 0;) {
        if (++at[d] < b.count[d]) break;
        at[d] = 0;
      }
    }
    // The runs, expanded element by element, are exactly that sequence, and
    // consecutive in the buffer.
    std::vector<std::uint64_t> got;
    std::uint64_t buffer_at = 0, last_end = 0;
    bool first = true;
    const auto runs = t.runs(b);
    REQUIRE(runs.size() == t.run_count(b));
    for (const Run& r : runs) {
      REQUIRE(r.length == t.run_length(b));
      REQUIRE(r.length % itemsize == 0);
      REQUIRE(r.buffer_offset == buffer_at);
      // Maximal: two runs never touch (they would have been one).
      if (!first) REQUIRE(r.array_offset > last_end);
      first = false;
      last_end = r.array_offset + r.length;
      for (std::uint64_t o = 0; o < r.length; o += itemsize) got.push_back(r.array_offset + o);
      buffer_at += r.length;
    }
    REQUIRE(buffer_at == bytes);
    REQUIRE(got == expected);
    // C order of boxes: first elements increase.
    if (i > 0) REQUIRE(expected.front() > previous_first);
    previous_first = expected.front();
  }
  REQUIRE(total == prod(shape) * itemsize);
  REQUIRE(total == t.total_bytes());
  for (std::size_t e = 0; e < covered.size(); ++e) {
    CAPTURE(e);
    REQUIRE(covered[e] == 1);
  }
}

}  // namespace

TEST_CASE("tiling: brute force over random shapes, chunks and budgets", "[h5]") {
  std::mt19937_64 rng(12345);
  auto pick = [&](std::uint64_t lo, std::uint64_t hi) { return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 400; ++trial) {
    const std::size_t rank = pick(1, 4);
    Shape shape(rank), chunk(rank);
    for (std::size_t d = 0; d < rank; ++d) {
      shape[d] = pick(1, rank <= 2 ? 40 : 12);
      // Mostly within the dimension, sometimes beyond it (extendible HDF5
      // datasets), sometimes all ones (contiguous storage).
      chunk[d] = pick(1, shape[d] + 3);
    }
    if (trial % 7 == 0) chunk.assign(rank, 1);
    const std::uint32_t itemsize = std::array<std::uint32_t, 4>{1, 2, 4, 8}[pick(0, 3)];
    const std::uint64_t budget = pick(1, prod(shape) * itemsize * 2);
    check_tiling(shape, itemsize, chunk, budget);
  }
}

TEST_CASE("tiling: boxes span whole trailing dimensions when the budget allows", "[h5]") {
  // 1000^3 float32 in 64^3 chunks, 64 MiB: whole last dimension, then as many
  // chunks of the middle one as fit (16 Mi elements / (64*1000) = 262 -> 256).
  TransferTiling t(Shape{1000, 1000, 1000}, 4, Shape{64, 64, 64}, 64u << 20);
  CHECK(t.box_shape() == Shape{64, 256, 1000});
  const Box b = t.box(0);
  CHECK(t.run_count(b) == 64);
  CHECK(t.run_length(b) == 256u * 1000 * 4);

  // Everything fits: one box, one run.
  TransferTiling whole(Shape{30, 40, 50}, 8, Shape{7, 11, 13}, 1u << 20);
  CHECK(whole.box_count() == 1);
  CHECK(whole.runs(whole.box(0)) == std::vector<Run>{{0, 0, 30 * 40 * 50 * 8}});

  // Whole trailing dimensions, first dimension in multiples of its chunk.
  TransferTiling rows(Shape{100, 10, 10}, 8, Shape{3, 5, 5}, 8 * 100 * 7);
  CHECK(rows.box_shape() == Shape{6, 10, 10});
  CHECK(rows.box_count() == 17);
  CHECK(rows.box(16).count == Shape{4, 10, 10});  // clipped at the edge
}

TEST_CASE("tiling: contiguous storage moves C-order slabs", "[h5]") {
  TransferTiling t(Shape{10, 1000}, 8, Shape{1, 1}, 8 * 2500);
  CHECK(t.box_shape() == Shape{2, 1000});
  CHECK(t.box_count() == 5);
  for (std::uint64_t i = 0; i < 5; ++i) {
    const auto runs = t.runs(t.box(i));
    REQUIRE(runs.size() == 1);
    CHECK(runs[0].array_offset == i * 2 * 1000 * 8);
    CHECK(runs[0].length == 2 * 1000 * 8);
  }
  // A row longer than the budget: pieces of one row.
  TransferTiling long_rows(Shape{3, 1000}, 8, Shape{1, 1}, 8 * 300);
  CHECK(long_rows.box_shape() == Shape{1, 300});
  CHECK(long_rows.box_count() == 3 * 4);
  CHECK(long_rows.box(3).count == Shape{1, 100});
}

TEST_CASE("tiling: a chunk bigger than the budget is a box of one chunk", "[h5]") {
  TransferTiling t(Shape{100, 100}, 8, Shape{50, 50}, 1000);
  CHECK(t.box_shape() == Shape{50, 50});
  CHECK(t.max_box_bytes() == 50 * 50 * 8);
  CHECK(t.box_count() == 4);
  check_tiling({100, 100}, 8, {50, 50}, 1000);
  check_tiling({7, 9, 11}, 4, {7, 9, 11}, 1);
}

TEST_CASE("tiling: rank 0 is one element", "[h5]") {
  TransferTiling t(Shape{}, 8, Shape{}, 1024);
  CHECK(t.box_count() == 1);
  CHECK(t.total_bytes() == 8);
  CHECK(t.runs(t.box(0)) == std::vector<Run>{{0, 0, 8}});
}

TEST_CASE("tiling: bad arguments are refused", "[h5]") {
  CHECK_THROWS_AS(TransferTiling(Shape{10, 10}, 8, Shape{1}, 100), std::invalid_argument);
  CHECK_THROWS_AS(TransferTiling(Shape{10, 0}, 8, Shape{1, 1}, 100), std::invalid_argument);
  CHECK_THROWS_AS(TransferTiling(Shape{10, 10}, 8, Shape{1, 0}, 100), std::invalid_argument);
  CHECK_THROWS_AS(TransferTiling(Shape{1ull << 40, 1ull << 30}, 8, Shape{1, 1}, 100), std::invalid_argument);
  TransferTiling t(Shape{10}, 1, Shape{1}, 100);
  CHECK_THROWS_AS(t.box(1), std::out_of_range);
}
