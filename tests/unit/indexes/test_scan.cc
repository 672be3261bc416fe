// The index-less scan (indexes/scan.h): scan_keys and count_keys against
// contains() for every dtype, PrefixMatcher's decisions from an element's
// high bytes against all its completions, -0.0, NaN and infinities, and the
// scan's throughput (a benchmark, hidden).
#include <catch2/catch.hpp>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "indexes/bitmap.h"
#include "indexes/scan.h"
#include "indexes/values.h"

using namespace mmfs::indexes;

namespace {

template <typename T>
std::vector<T> special_values() {
  using L = std::numeric_limits<T>;
  std::vector<T> v{T(0), T(1), L::lowest(), L::max(), L::min(), T(L::max() - 1), T(L::lowest() + 1)};
  if constexpr (std::is_floating_point_v<T>) {
    v.insert(v.end(), {T(-0.0), L::infinity(), -L::infinity(), L::quiet_NaN(), -L::quiet_NaN(), L::denorm_min(),
                       -L::denorm_min(), T(0.1), T(-2.5), std::nextafter(T(1), T(2))});
    T nan_payload = std::bit_cast<T>(std::bit_cast<std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>(
                                         L::quiet_NaN()) |
                                     1);
    v.push_back(nan_payload);
  } else if constexpr (std::is_signed_v<T>) {
    v.push_back(T(-1));
  }
  return v;
}

template <typename T>
std::vector<T> random_elements(std::mt19937_64& rng, std::size_t n) {
  std::vector<T> specials = special_values<T>();
  std::vector<T> out(n);
  for (auto& x : out) {
    std::uint64_t r = rng();
    if (r % 4 == 0) {
      x = specials[(r >> 8) % specials.size()];
    } else if constexpr (std::is_floating_point_v<T>) {
      x = T(std::int64_t(r >> 40) % 200 - 100) / T(4);  // repeats, so ranges' ends hit elements
    } else {
      x = T(std::int64_t(r >> 40) % 200 - 100);
    }
  }
  return out;
}

template <typename T>
std::uint64_t key(ValueType t, T x) {
  return value_key(t, reinterpret_cast<const std::byte*>(&x));
}

// Disjoint ascending key ranges whose ends are keys of elements, their
// neighbours, or the type's extremes.
template <typename T>
KeySet random_keys(std::mt19937_64& rng, ValueType t, const std::vector<T>& elements) {
  std::vector<std::uint64_t> points;
  std::size_t n = 2 * (rng() % 4);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t k;
    T x = elements[rng() % elements.size()];
    switch (rng() % 5) {
      case 0: k = min_key(t); break;
      case 1: k = max_key(t); break;
      default: k = is_nan(t, reinterpret_cast<const std::byte*>(&x)) ? min_key(t) : key(t, x);
    }
    if (rng() % 3 == 0 && k > min_key(t)) --k;
    if (rng() % 3 == 0 && k < max_key(t)) ++k;
    points.push_back(k);
  }
  std::sort(points.begin(), points.end());
  KeySet s;
  for (std::size_t i = 0; i + 1 < points.size(); i += 2) {
    if (!s.ranges.empty() && points[i] <= s.ranges.back().second) continue;
    s.ranges.push_back({points[i], points[i + 1]});
  }
  s.nan = rng() % 2;
  return s;
}

template <typename T>
void check_scan(ValueType t) {
  std::mt19937_64 rng(std::uint64_t(t) + 100);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<T> elements = random_elements<T>(rng, 1 + rng() % 9000);
    KeySet keys = random_keys(rng, t, elements);
    // Rows near 2^32 cross a bucket of the 64-bit map.
    std::uint64_t first = trial % 3 == 0 ? (std::uint64_t(1) << 32) - rng() % 5000 : rng() % 100000;
    const auto* bytes = reinterpret_cast<const std::byte*>(elements.data());
    Bitmap expect;
    std::uint64_t matches = 0;
    for (std::size_t i = 0; i < elements.size(); ++i)
      if (contains(keys, t, bytes + i * sizeof(T))) {
        expect.add(first + i);
        ++matches;
      }
    // scan_keys adds to what is there: a row far away stays.
    Bitmap got;
    got.add(std::uint64_t(1) << 40);
    expect.add(std::uint64_t(1) << 40);
    scan_keys(t, keys, bytes, elements.size(), first, &got);
    INFO(type_name(t) << " trial " << trial << " ranges " << keys.ranges.size() << " nan " << keys.nan);
    REQUIRE(same_rows(got, expect));
    REQUIRE(count_keys(t, keys, bytes, elements.size()) == matches);
    // matching_indices: the same elements, as ascending indices.
    std::vector<std::uint32_t> indices(elements.size() + 1, 0xFFFFFFFFu);
    const std::size_t n = matching_indices(t, keys, bytes, elements.size(), indices.data());
    REQUIRE(n == matches);
    std::size_t k = 0;
    for (std::size_t i = 0; i < elements.size(); ++i)
      if (contains(keys, t, bytes + i * sizeof(T))) REQUIRE(indices[k++] == i);
    CHECK(indices[elements.size()] == 0xFFFFFFFFu);  // nothing written past `count`
  }
}

}  // namespace

namespace {

// PrefixMatcher against contains() of the element's completions: a Yes or
// No holds for the lowest and highest completion, the element itself and
// random ones; a Maybe only where a range's end lies between the two ends'
// keys or an end is NaN.
template <typename T>
void check_prefix_matcher(ValueType t) {
  std::mt19937_64 rng(std::uint64_t(t) + 300);
  std::size_t decided = 0, maybes = 0;
  for (int trial = 0; trial < 60; ++trial) {
    std::vector<T> elements = random_elements<T>(rng, 1 + rng() % 2000);
    KeySet keys = random_keys(rng, t, elements);
    const KeySet norm = normalized(keys);
    for (std::uint32_t unknown = 1; unknown < sizeof(T); ++unknown) {
      const PrefixMatcher match(t, keys, unknown);
      const std::uint64_t mask = (std::uint64_t(1) << (8 * unknown)) - 1;
      for (const T& x : elements) {
        std::uint64_t bits = 0;
        std::memcpy(&bits, &x, sizeof x);
        const std::uint64_t lo = bits & ~mask, hi = lo | mask;
        const PrefixMatch got = match(lo);
        auto in = [&](std::uint64_t v) { return contains(keys, t, reinterpret_cast<const std::byte*>(&v)); };
        INFO(type_name(t) << " unknown " << unknown << " bits " << bits);
        if (got != PrefixMatch::Maybe) {
          ++decided;
          const bool yes = got == PrefixMatch::Yes;
          CHECK(in(lo) == yes);
          CHECK(in(hi) == yes);
          CHECK(in(bits) == yes);
          for (int i = 0; i < 2; ++i) CHECK(in(lo | (rng() & mask)) == yes);
          continue;
        }
        ++maybes;
        const auto* a = reinterpret_cast<const std::byte*>(&lo);
        const auto* b = reinterpret_cast<const std::byte*>(&hi);
        if (is_float(t) && (is_nan(t, a) || is_nan(t, b))) continue;
        std::uint64_t k1 = value_key(t, a), k2 = value_key(t, b);
        if (k1 > k2) std::swap(k1, k2);
        bool end_inside = false;
        for (auto [x0, y0] : norm.ranges) end_inside |= (k1 < x0 && x0 <= k2) || (k1 <= y0 && y0 < k2);
        CHECK(end_inside);
      }
    }
  }
  // Maybe is exact (above); these elements are small integers, so many
  // share their high bytes with a range's end and only some are decided.
  CHECK(decided > 0);
  CHECK(maybes > 0);
}

}  // namespace

TEST_CASE("scan_keys and count_keys agree with contains() for every dtype", "[index][scan]") {
  check_scan<std::int8_t>(ValueType::I8);
  check_scan<std::uint8_t>(ValueType::U8);
  check_scan<std::int16_t>(ValueType::I16);
  check_scan<std::uint16_t>(ValueType::U16);
  check_scan<std::int32_t>(ValueType::I32);
  check_scan<std::uint32_t>(ValueType::U32);
  check_scan<std::int64_t>(ValueType::I64);
  check_scan<std::uint64_t>(ValueType::U64);
  check_scan<float>(ValueType::F32);
  check_scan<double>(ValueType::F64);
}

TEST_CASE("PrefixMatcher decides from the high bytes exactly when every completion agrees", "[index][scan]") {
  check_prefix_matcher<std::int16_t>(ValueType::I16);
  check_prefix_matcher<std::uint16_t>(ValueType::U16);
  check_prefix_matcher<std::int32_t>(ValueType::I32);
  check_prefix_matcher<std::uint32_t>(ValueType::U32);
  check_prefix_matcher<std::int64_t>(ValueType::I64);
  check_prefix_matcher<std::uint64_t>(ValueType::U64);
  check_prefix_matcher<float>(ValueType::F32);
  check_prefix_matcher<double>(ValueType::F64);
  // -0.0 and +0.0 are one value; NaN ends leave it to the whole element.
  const KeySet zero{{{key(ValueType::F64, 0.0), key(ValueType::F64, 0.0)}}, false};
  const PrefixMatcher m(ValueType::F64, zero, 4);
  std::uint64_t neg_zero = 0;
  const double nz = -0.0;
  std::memcpy(&neg_zero, &nz, 8);
  CHECK(m(neg_zero) == PrefixMatch::Maybe);  // -0.0 down to -tiny: some are 0, some not
  const double big = 1e300;
  std::uint64_t big_bits = 0;
  std::memcpy(&big_bits, &big, 8);
  CHECK(m(big_bits & ~0xFFFFFFFFull) == PrefixMatch::No);
  const std::uint64_t nan_prefix = 0x7FF8000000000000ull;
  CHECK(PrefixMatcher(ValueType::F64, KeySet{{}, true}, 4)(nan_prefix) == PrefixMatch::Maybe);
  CHECK_THROWS(PrefixMatcher(ValueType::F64, zero, 8));
}

TEST_CASE("scan_keys: -0.0 is 0, NaN only by the nan flag, infinities are values", "[index][scan]") {
  std::vector<double> v{-0.0, 0.0, std::nan(""), -INFINITY, INFINITY, 1.5};
  const auto* bytes = reinterpret_cast<const std::byte*>(v.data());
  auto rows = [&](KeySet s) {
    Bitmap b;
    scan_keys(ValueType::F64, s, bytes, v.size(), 0, &b);
    CHECK(count_keys(ValueType::F64, s, bytes, v.size()) == b.cardinality());
    return b.toString();
  };
  std::uint64_t zero = key(ValueType::F64, 0.0);
  CHECK(rows({{{zero, zero}}, false}) == "{0,1}");
  CHECK(rows({{{min_key(ValueType::F64), max_key(ValueType::F64)}}, false}) == "{0,1,3,4,5}");
  CHECK(rows({{}, true}) == "{2}");
  CHECK(rows({{{max_key(ValueType::F64), max_key(ValueType::F64)}}, true}) == "{2,4}");
  CHECK(rows({{}, false}) == "{}");
}

TEST_CASE("scan_keys: float64 throughput, one range", "[.][bench][index][scan]") {
  std::mt19937_64 rng(5);
  std::vector<double> v(std::size_t(1) << 24);  // 128 MiB
  for (auto& x : v) x = std::uniform_real_distribution<double>(0, 1000)(rng);
  const auto* bytes = reinterpret_cast<const std::byte*>(v.data());
  for (double selectivity : {0.001, 0.01, 0.1, 0.5}) {
    KeySet s{{{key(ValueType::F64, 100.0), key(ValueType::F64, 100.0 + 1000 * selectivity)}}, false};
    double best_scan = 1e9, best_count = 1e9;
    std::uint64_t matched = 0;
    for (int rep = 0; rep < 5; ++rep) {
      Bitmap b;
      auto t0 = std::chrono::steady_clock::now();
      for (std::size_t off = 0; off < v.size(); off += std::size_t(1) << 22)  // 32 MiB chunks
        scan_keys(ValueType::F64, s, bytes + off * 8, std::size_t(1) << 22, off, &b);
      auto t1 = std::chrono::steady_clock::now();
      matched = count_keys(ValueType::F64, s, bytes, v.size());
      auto t2 = std::chrono::steady_clock::now();
      best_scan = std::min(best_scan, std::chrono::duration<double>(t1 - t0).count());
      best_count = std::min(best_count, std::chrono::duration<double>(t2 - t1).count());
      REQUIRE(b.cardinality() == matched);
    }
    double gb = double(v.size() * 8) / 1e9;
    WARN("selectivity " << selectivity << ": scan_keys " << gb / best_scan << " GB/s, count_keys "
                        << gb / best_count << " GB/s (" << matched << " rows)");
  }
}
