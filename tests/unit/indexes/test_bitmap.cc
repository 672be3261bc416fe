// Row bitmaps (indexes/bitmap.h) against brute force: built from words and
// sliced back into them, counted across several, ORed in serialized, widened
// to 64-bit rows; set operations, serialization and the query mask.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "indexes/bitmap.h"
#include "tests/unit/support/index_test_support.h"

using namespace mmfs::indexes;
using mmfs::indexes::testing::as_bytes;

TEST_CASE("a bitmap from words equals the one built row by row", "[indexes][encodings]") {
  std::mt19937_64 rng(7);
  // Chunks of 2^16 rows (1024 words) that are empty, sparse (array
  // containers, up to the 4096-row limit), dense (bitsets), all set (a run
  // after optimization), with a last partial chunk.
  for (std::size_t words_n : {1ul, 1023ul, 1024ul, 1025ul, 6 * 1024ul + 17}) {
    std::vector<std::uint64_t> words(words_n, 0);
    for (std::size_t chunk = 0; chunk * 1024 < words_n; ++chunk) {
      const std::size_t first = chunk * 1024, n = std::min<std::size_t>(1024, words_n - first);
      switch (chunk % 6) {
        case 0: break;  // empty
        case 1:         // exactly 4096 rows: still an array
          for (std::size_t i = 0; i < n && i < 64; ++i) words[first + i] = ~0ull;
          break;
        case 2:  // 4097 rows: the first bitset
          for (std::size_t i = 0; i < n && i < 64; ++i) words[first + i] = ~0ull;
          if (n > 64) words[first + 64] = 1;
          break;
        case 3:
          for (std::size_t i = 0; i < n; ++i) words[first + i] = rng() & rng();
          break;
        case 4:
          for (std::size_t i = 0; i < n; ++i) words[first + i] = ~0ull;
          break;
        default: words[first + n - 1] = 1ull << 63;
      }
    }
    Bitmap expected;
    for (std::size_t w = 0; w < words_n; ++w)
      for (unsigned b = 0; b < 64; ++b)
        if ((words[w] >> b) & 1) expected.add(std::uint64_t(w) * 64 + b);
    expected.runOptimize();
    expected.shrinkToFit();
    const Bitmap got = bitmap_of_words(words);
    CHECK(same_rows(got, expected));
    CHECK(got.cardinality() == expected.cardinality());
    CHECK(serialize(got) == serialize(expected));  // the same containers, so the same stored bytes
    // Not run-optimized: the same rows, and they combine like any bitmap.
    const Bitmap plain = bitmap_of_words(words, 0, false);
    CHECK(same_rows(plain, expected));
    Bitmap both = plain;
    both |= got;
    CHECK(same_rows(both, expected));
    CHECK(same_rows(plain & got, expected));
  }
  CHECK(bitmap_of_words({}).isEmpty());
}

TEST_CASE("a slice of rows as words and back (bitmap_of_words at a row, or_rows_into)", "[indexes][encodings]") {
  std::mt19937_64 rng(17);
  for (int trial = 0; trial < 30; ++trial) {
    // Arrays, bitsets and runs over several 2^16-row chunks, sometimes in the
    // second bucket (rows past 2^32) and sometimes reaching past the slice.
    const std::uint64_t base = (trial % 3 == 2) ? (std::uint64_t(1) << 32) - 3 * 65536 : 0;
    Bitmap b;
    for (int i = 0; i < 2000; ++i) b.add(base + rng() % (6 * 65536));
    for (std::uint64_t r = base + 65536 * (rng() % 5); r % 65536 != 65535; r += 1 + rng() % 2) b.add(r);
    b |= range_bitmap(base + rng() % (3 * 65536), base + 3 * 65536 + rng() % (3 * 65536));
    b.runOptimize();
    const std::uint64_t first = base + 65536 * (rng() % 3);
    const std::size_t n_words = 1 + rng() % (3 * 1024 + 500);  // not always whole containers
    std::vector<std::uint64_t> words(n_words, 0);
    or_rows_into(b, first, words);
    std::uint64_t wrong = 0, seen = 0;
    for (std::uint64_t i = 0; i < 64 * n_words; ++i) {
      const bool bit = (words[i / 64] >> (i % 64)) & 1;
      seen += bit;
      wrong += bit != b.contains(first + i);
    }
    INFO("trial " << trial);
    CHECK(wrong == 0);
    CHECK(seen > 0);
    if (first + 64 * n_words <= (std::uint64_t(1) << 32)) {
      Bitmap expected;
      for (std::uint64_t i = 0; i < 64 * n_words; ++i)
        if (b.contains(first + i)) expected.add(first + i);
      CHECK(same_rows(bitmap_of_words(words, first), expected));
    }
  }
  std::vector<std::uint64_t> one(1, 1);
  CHECK_THROWS_AS(bitmap_of_words(one, 100), std::invalid_argument);
  CHECK_THROWS_AS(bitmap_of_words(one, std::uint64_t(1) << 32), std::invalid_argument);
  CHECK_THROWS_AS(or_rows_into(Bitmap{}, 3, one), std::invalid_argument);
}

TEST_CASE("counting rows in all of some bitmaps and none of others", "[indexes][encodings]") {
  std::mt19937_64 rng(5);
  // Sparse (arrays), dense (bitsets) and run-optimized bitmaps over several
  // 2^16-row chunks, some past 2^32 (a second bucket).
  auto random_bitmap = [&](int kind) {
    Bitmap b;
    const std::uint64_t base = (rng() % 4 == 0) ? (std::uint64_t(1) << 32) - 70000 : 0;
    if (kind == 0) {
      for (int i = 0; i < 2000; ++i) b.add(base + rng() % 400000);
    } else if (kind == 1) {
      for (std::uint64_t r = base; r < base + 400000; ++r)
        if (rng() % 3) b.add(r);
    } else {
      b = range_bitmap(base + rng() % 200000, base + 200000 + rng() % 200000);
      b.runOptimize();
    }
    b.add(std::uint64_t(1) << 32 | (rng() % 1000));
    return b;
  };
  for (int trial = 0; trial < 40; ++trial) {
    const std::size_t n_all = 1 + rng() % 4, n_none = rng() % 3;
    std::vector<Bitmap> all, none;
    for (std::size_t i = 0; i < n_all; ++i) all.push_back(random_bitmap(int(rng() % 3)));
    for (std::size_t i = 0; i < n_none; ++i) none.push_back(random_bitmap(int(rng() % 3)));
    Bitmap expected = all[0];
    for (std::size_t i = 1; i < all.size(); ++i) expected &= all[i];
    for (const Bitmap& b : none) expected -= b;
    std::vector<const Bitmap*> a, z;
    for (const Bitmap& b : all) a.push_back(&b);
    for (const Bitmap& b : none) z.push_back(&b);
    INFO("trial " << trial);
    CHECK(count_all_none(a, z) == expected.cardinality());
  }
  CHECK(count_all_none({}, {}) == 0);
}

TEST_CASE("a serialized bitmap ORed into words equals its decoded rows", "[indexes][encodings]") {
  std::mt19937_64 rng(11);
  const std::uint64_t rows = 5 * 65536 + 300;
  std::vector<std::uint64_t> words((rows + 65535) / 65536 * 1024, 0);
  Bitmap expected;
  for (int trial = 0; trial < 6; ++trial) {
    // Arrays, bitsets and runs (after runOptimize), over several chunks.
    Bitmap b;
    for (int i = 0; i < 3000; ++i) b.add(rng() % rows);
    b |= range_bitmap(rng() % rows / 2, rows / 2 + rng() % (rows / 2));
    for (std::uint64_t r = 65536ull * (trial % 5); r < 65536ull * (trial % 5) + 65536; r += 1 + rng() % 3) b.add(r);
    b.runOptimize();
    const std::string bytes = serialize(b);
    REQUIRE(or_serialized_into(as_bytes(bytes), words));
    expected |= b;
    CHECK(same_rows(bitmap_of_words(words), expected));
  }
  // A row past the words, or malformed bytes: refused.
  Bitmap far;
  far.add(rows + 70000);
  CHECK(!or_serialized_into(as_bytes(serialize(far)), words));
  Bitmap high;
  high.add(std::uint64_t(1) << 33);
  CHECK(!or_serialized_into(as_bytes(serialize(high)), words));
  std::string bad = serialize(expected);
  bad.resize(bad.size() - 3);
  CHECK(!or_serialized_into(as_bytes(bad), words));
}

TEST_CASE("rows widened to 64 bits in order (toUint64Array, one pass and two threads)", "[indexes][encodings]") {
  std::mt19937_64 rng(29);
  // Below and above the two-thread threshold (2^20 rows), in one bucket and
  // across two (rows past 2^32), with arrays, bitsets and runs.
  for (const std::uint64_t rows : {std::uint64_t(1000), std::uint64_t(3) << 20}) {
    for (const bool two_buckets : {false, true}) {
      Bitmap b;
      std::vector<std::uint64_t> expected;
      const std::uint64_t span = two_buckets ? (std::uint64_t(1) << 33) : (std::uint64_t(1) << 26);
      for (std::uint64_t i = 0; i < rows / 2; ++i) expected.push_back(rng() % span);
      const std::uint64_t run_at = (std::uint64_t(1) << 32) - 70000;  // a run over a bucket's end
      for (std::uint64_t i = 0; i < rows / 2; ++i) expected.push_back(run_at + i);
      for (std::uint64_t r : expected) b.add(r);
      b.runOptimize();
      std::sort(expected.begin(), expected.end());
      expected.erase(std::unique(expected.begin(), expected.end()), expected.end());
      REQUIRE(b.cardinality() == expected.size());
      std::vector<std::uint64_t> got(expected.size() + 1, 0xDEADBEEF);
      b.toUint64Array(got.data());
      CHECK(got.back() == 0xDEADBEEF);  // nothing written past the rows
      got.pop_back();
      // A count, not the vectors: Catch2 would print millions of rows.
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < got.size(); ++i) wrong += got[i] != expected[i];
      CHECK(wrong == 0);
    }
  }
}

namespace {

using RowSet = std::set<std::uint64_t>;

// Random rows over two 2^32-row buckets, dense in places (bitsets), sparse in
// others (arrays) and in runs.
RowSet random_rows(std::mt19937_64& rng) {
  RowSet s;
  const std::uint64_t bucket = std::uint64_t(1) << 32;
  for (int i = 0; i < 500; ++i) s.insert(rng() % 300000);
  for (std::uint64_t r = 70000; r < 90000; ++r)
    if (rng() % 2) s.insert(r);
  const std::uint64_t run = rng() % 200000;
  for (std::uint64_t r = run; r < run + 5000; ++r) s.insert(r);
  for (int i = 0; i < 300; ++i) s.insert(bucket + rng() % 100000);
  if (rng() % 2) s.insert(bucket - 1);
  return s;
}

Bitmap bitmap_of(const RowSet& s) {
  Bitmap b;
  for (std::uint64_t r : s) b.add(r);
  return b;
}

std::vector<std::uint64_t> rows(const RowSet& s) { return {s.begin(), s.end()}; }

}  // namespace

TEST_CASE("bitmaps: union, intersection, counts and subsets equal the row sets'", "[indexes][bitmap]") {
  std::mt19937_64 rng(23);
  for (int trial = 0; trial < 20; ++trial) {
    const std::size_t n = 1 + rng() % 5;
    std::vector<RowSet> sets(n);
    std::vector<Bitmap> maps;
    for (auto& s : sets) {
      s = random_rows(rng);
      maps.push_back(bitmap_of(s));
      if (rng() % 2) maps.back().runOptimize();
    }
    RowSet all;
    for (const auto& s : sets) all.insert(s.begin(), s.end());
    std::vector<const Bitmap*> parts;
    for (const Bitmap& b : maps) parts.push_back(&b);
    INFO("trial " << trial << " parts " << n);
    const Bitmap u = union_all(parts);
    CHECK(rows_of(u) == rows(all));
    CHECK(u.cardinality() == all.size());
    RowSet both;
    for (std::uint64_t r : sets[0])
      if (sets[n - 1].count(r)) both.insert(r);
    CHECK(rows_of(intersect(maps[0], maps[n - 1])) == rows(both));
    CHECK(and_count(maps[0], maps[n - 1]) == both.size());
    CHECK(is_subset(maps[0], u));
    CHECK(is_subset(intersect(maps[0], maps[n - 1]), maps[0]));
    CHECK(is_subset(u, maps[0]) == (all.size() == sets[0].size()));
    CHECK(same_rows(u, bitmap_of(all)));
    // Serialized and read back.
    Bitmap back;
    REQUIRE(deserialize(as_bytes(serialize(u)), &back));
    CHECK(rows_of(back) == rows(all));
  }
  CHECK(union_all({}).isEmpty());
  CHECK(rows_of(Bitmap()).empty());
  Bitmap one;
  one.add(std::uint64_t(7));
  CHECK_FALSE(is_subset(one, Bitmap()));
  CHECK(is_subset(Bitmap(), one));
  CHECK_FALSE(same_rows(one, Bitmap()));
  CHECK(and_count(one, Bitmap()) == 0);
}

TEST_CASE("bitmaps: ranges, rows added by bucket, and the query mask of rows past 2^32", "[indexes][bitmap]") {
  const std::uint64_t bucket = std::uint64_t(1) << 32;
  CHECK(rows_of(range_bitmap(3, 8)) == std::vector<std::uint64_t>{3, 4, 5, 6, 7});
  CHECK(range_bitmap(5, 5).isEmpty());
  const Bitmap across = range_bitmap(bucket - 2, bucket + 3);
  CHECK(rows_of(across) == std::vector<std::uint64_t>{bucket - 2, bucket - 1, bucket, bucket + 1, bucket + 2});
  Bitmap b;
  const std::vector<std::uint32_t> low{0, 9, 65536, 4000000000u};
  add_rows32(&b, 0, low.data(), low.size());
  add_rows32(&b, 3, low.data(), 2);
  add_rows32(&b, 1, low.data(), 0);
  CHECK(rows_of(b) == std::vector<std::uint64_t>{0, 9, 65536, 4000000000u, 3 * bucket, 3 * bucket + 9});
  // Rows past 2^32 are kept in the mask's 64-bit format: it is longer than the 32-bit one of rows below.
  Bitmap low_rows;
  low_rows.add(std::uint64_t(5));
  Bitmap high_rows = low_rows;
  high_rows.add(bucket + 5);
  const std::string small = portable_mask(low_rows, 10), large = portable_mask(high_rows, bucket + 10);
  CHECK(Roaring::readSafe(small.data(), small.size()).contains(5));
  CHECK(large != small);
  Bitmap back;
  REQUIRE(deserialize(as_bytes(large), &back));
  CHECK(rows_of(back) == std::vector<std::uint64_t>{5, bucket + 5});
}

TEST_CASE("bitmaps: deserialize refuses truncated and padded bytes", "[indexes][bitmap]") {
  Bitmap b = range_bitmap(100, 5000);
  b.add(std::uint64_t(1) << 33);
  const std::string s = serialize(b);
  Bitmap out;
  REQUIRE(deserialize(as_bytes(s), &out));
  for (std::size_t cut = 0; cut < s.size(); ++cut) {
    INFO("cut at " << cut);
    CHECK_FALSE(deserialize(as_bytes(s.substr(0, cut)), &out));
  }
  CHECK_FALSE(deserialize(as_bytes(s + std::string(1, '\0')), &out));
}
