// The helpers the index builder, planner and delta share
// (indexes/bitmap_index.cc): encoding names, which directory ids hold what
// per encoding, rows added by bucket, how a bin relates to a key set, and
// rows bucketed by bin with their key statistics, against hand computation
// and brute force.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "indexes/binning.h"
#include "indexes/bitmap_index.h"
#include "indexes/index_internal.h"

using namespace mmfs::indexes;
using detail::BinClass;

namespace {

using Ranges = std::vector<std::pair<std::uint64_t, std::uint64_t>>;

BinStats bin_stats(std::uint64_t rows, std::uint64_t min_key, std::uint64_t max_key) {
  BinStats s;
  s.rows = rows;
  s.min_key = min_key;
  s.max_key = max_key;
  return s;
}

}  // namespace

TEST_CASE("encodings: the six names round-trip; other spellings are refused", "[indexes][bitmap_index]") {
  const std::pair<const char*, Encoding> names[] = {{"e1", Encoding::E1},   {"bn", Encoding::BN},
                                                    {"range", Encoding::Range}, {"interval", Encoding::Interval},
                                                    {"re", Encoding::RE},   {"ie", Encoding::IE}};
  for (const auto& [name, e] : names) {
    CHECK(parse_encoding(name) == e);
    CHECK(encoding_name(e) == name);
  }
  for (const char* bad : {"", "E1", "e2", "bitslice", "range ", " re", "equality", "none"})
    CHECK_FALSE(parse_encoding(bad).has_value());
}

TEST_CASE("encodings: which directory ids hold what, for B value bins and C coarse bins", "[indexes][bitmap_index]") {
  for (std::uint32_t B : {1u, 2u, 3u, 7u, 8u, 9u, 100u}) {
    for (std::uint32_t C : {0u, 1u, 2u, 5u, 8u}) {
      for (bool nan : {false, true}) {
        INFO("B " << B << " C " << C << " nan " << nan);
        const std::uint32_t m = (B + 1) / 2;  // an interval's width: ceil(B / 2)
        std::uint32_t slices = 0;             // ceil(log2 B)
        while ((std::uint32_t(1) << slices) < B) ++slices;
        const std::uint32_t fine[] = {B, slices, B - 1, B - m + 1, B, B};
        const std::uint32_t coarse_re = C < 2 ? 0 : C - 1, coarse_ie = C < 2 ? 0 : C - (C + 1) / 2 + 1;
        const std::uint32_t coarse[] = {0, 0, 0, 0, coarse_re, coarse_ie};
        for (std::size_t e = 0; e < 6; ++e) {
          detail::Layout l{Encoding(e), B, nan, C};
          CHECK(l.fine_count() == fine[e]);
          CHECK(l.nan_id() == fine[e]);
          CHECK(l.coarse_first() == fine[e] + (nan ? 1 : 0));
          CHECK(l.coarse_count() == coarse[e]);
          CHECK(l.total() == fine[e] + (nan ? 1 : 0) + coarse[e]);
        }
      }
    }
  }
}

TEST_CASE("add_rows: ascending rows of one bucket land in that bucket", "[indexes][bitmap_index]") {
  const std::uint64_t bucket = std::uint64_t(1) << 32;
  std::mt19937_64 rng(3);
  for (std::uint64_t high : {std::uint64_t(0), std::uint64_t(5)}) {
    std::set<std::uint64_t> want;
    for (int i = 0; i < 3000; ++i) want.insert(high * bucket + rng() % 200000);
    const std::vector<std::uint64_t> rows(want.begin(), want.end());
    Bitmap b;
    detail::add_rows(&b, rows.data(), rows.size());
    detail::add_rows(&b, rows.data(), 0);
    CHECK(rows_of(b) == rows);
  }
}

TEST_CASE("classify: a bin is empty, sure, skipped or maybe, from its keys and the keys present",
          "[indexes][bitmap_index]") {
  // Keys 10..20 and 40..50.
  const KeySet keys{Ranges{{10, 20}, {40, 50}}, false};
  // No row: empty, whatever the keys.
  CHECK(detail::classify(keys, {10, 20}, bin_stats(0, 12, 13)) == BinClass::Empty);
  // The bin's whole key range inside one range of the set: sure.
  CHECK(detail::classify(keys, {12, 18}, bin_stats(5, 12, 18)) == BinClass::Sure);
  CHECK(detail::classify(keys, {40, 50}, bin_stats(5, 40, 40)) == BinClass::Sure);
  // The bin straddles the set, but the keys present lie inside it: sure.
  CHECK(detail::classify(keys, {0, 30}, bin_stats(5, 11, 19)) == BinClass::Sure);
  // ... or outside it entirely: skipped, also between two ranges.
  CHECK(detail::classify(keys, {0, 30}, bin_stats(5, 21, 30)) == BinClass::Skip);
  CHECK(detail::classify(keys, {0, 100}, bin_stats(5, 21, 39)) == BinClass::Skip);
  CHECK(detail::classify(keys, {0, 100}, bin_stats(5, 51, 99)) == BinClass::Skip);
  // ... or across an end of a range: maybe.
  CHECK(detail::classify(keys, {0, 30}, bin_stats(5, 5, 15)) == BinClass::Maybe);
  CHECK(detail::classify(keys, {0, 100}, bin_stats(5, 15, 45)) == BinClass::Maybe);  // spans the gap
  // A bin spanning two ranges is not inside one.
  CHECK(detail::classify(keys, {10, 50}, bin_stats(5, 10, 50)) == BinClass::Maybe);
  // Rows without key statistics (min above max): maybe unless the bin's keys decide.
  CHECK(detail::classify(keys, {0, 30}, bin_stats(5, ~0ull, 0)) == BinClass::Maybe);
  CHECK(detail::classify(keys, {10, 20}, bin_stats(5, ~0ull, 0)) == BinClass::Sure);
  // No keys at all: nothing is inside, everything present is skipped.
  CHECK(detail::classify(KeySet{}, {0, 30}, bin_stats(5, 1, 2)) == BinClass::Skip);
}

TEST_CASE("bucket_by_bin: rows grouped by bin in row order, with each bin's rows and keys",
          "[indexes][bitmap_index]") {
  std::mt19937_64 rng(9);
  auto key = [](std::int32_t v) { return std::uint64_t(std::int64_t(v)) ^ (std::uint64_t(1) << 63); };
  // Bins: below -10, [-10, 0), [0, 25), at or above 25.
  const std::vector<std::uint64_t> lower{min_key(ValueType::I32), key(-10), key(0), key(25)};
  const Binning binning(ValueType::I32, lower);
  std::vector<std::int32_t> values(777);
  for (auto& v : values) v = std::int32_t(rng() % 100) - 50;
  const std::uint64_t first_row = 1000;
  std::vector<BinStats> stats(binning.bins());
  stats[2] = bin_stats(1, key(3), key(3));  // statistics of earlier pieces are kept and widened
  const detail::Bucketed got = detail::bucket_by_bin(binning, first_row,
                                                     reinterpret_cast<const std::byte*>(values.data()),
                                                     values.size(), &stats);
  std::vector<std::vector<std::uint64_t>> want(4);
  auto bin_of = [](std::int32_t v) { return v < -10 ? 0 : v < 0 ? 1 : v < 25 ? 2 : 3; };
  for (std::size_t i = 0; i < values.size(); ++i) want[bin_of(values[i])].push_back(first_row + i);
  REQUIRE(got.bin_start.size() == 5);
  CHECK(got.bin_start[0] == 0);
  CHECK(got.rows.size() == values.size());
  for (std::size_t b = 0; b < 4; ++b) {
    INFO("bin " << b);
    CHECK(got.bin_start[b + 1] - got.bin_start[b] == want[b].size());
    CHECK(std::vector<std::uint64_t>(got.rows.begin() + got.bin_start[b], got.rows.begin() + got.bin_start[b + 1]) ==
          want[b]);
    std::int32_t lo = 1000, hi = -1000;
    for (std::size_t i = 0; i < values.size(); ++i)
      if (bin_of(values[i]) == int(b)) {
        lo = std::min(lo, values[i]);
        hi = std::max(hi, values[i]);
      }
    if (b == 2) {
      lo = std::min(lo, 3);
      hi = std::max(hi, 3);
    }
    CHECK(stats[b].rows == want[b].size() + (b == 2 ? 1 : 0));
    CHECK(stats[b].min_key == key(lo));
    CHECK(stats[b].max_key == key(hi));
  }
}
