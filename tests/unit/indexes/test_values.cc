// indexes/values.h: order keys and the exact key sets of comparisons.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "indexes/values.h"

using namespace mmfs::indexes;

namespace {

template <class T>
std::uint64_t key(ValueType t, T v) {
  std::byte b[sizeof(T)];
  std::memcpy(b, &v, sizeof v);
  return value_key(t, b);
}
template <class T>
bool in(const KeySet& s, ValueType t, T v) {
  std::byte b[sizeof(T)];
  std::memcpy(b, &v, sizeof v);
  return contains(s, t, b);
}
Number num(const char* text) {
  auto n = parse_number(text);
  REQUIRE(n);
  return *n;
}
KeySet cmp(ValueType t, CompareOp op, const char* c) { return compare_keys(t, op, num(c)); }

}  // namespace

TEST_CASE("dtype names and aliases", "[indexes][values]") {
  CHECK(value_type("int8") == ValueType::I8);
  CHECK(value_type("<f8") == ValueType::F64);
  CHECK(value_type("u4") == ValueType::U32);
  CHECK(!value_type("float16"));
  CHECK(!value_type("<float64"));
  CHECK(type_name(ValueType::U16) == "uint16");
  CHECK(itemsize(ValueType::I64) == 8);
  CHECK(is_float(ValueType::F32));
  CHECK(!is_float(ValueType::U64));
}

TEST_CASE("keys preserve order for every dtype", "[indexes][values]") {
  std::mt19937_64 rng(7);
  auto check_sorted = [](ValueType t, auto values) {
    std::sort(values.begin(), values.end());
    for (std::size_t i = 1; i < values.size(); ++i) {
      auto a = key(t, values[i - 1]), b = key(t, values[i]);
      INFO(type_name(t) << " " << double(values[i - 1]) << " " << double(values[i]));
      CHECK((values[i - 1] < values[i] ? a < b : a == b));
      CHECK(a >= min_key(t));
      CHECK(b <= max_key(t));
    }
  };
  std::vector<std::int64_t> i64{INT64_MIN, INT64_MIN + 1, -1, 0, 1, INT64_MAX - 1, INT64_MAX};
  std::vector<std::uint64_t> u64{0, 1, (1ull << 63) - 1, 1ull << 63, UINT64_MAX};
  std::vector<double> f64{-INFINITY, -1e300, -1.0, -0.0, 0.0, 5e-324, 1.0, 1e300, INFINITY};
  std::vector<float> f32{-INFINITY, -3.4e38f, -1.0f, -0.0f, 0.0f, 1e-45f, 0.1f, INFINITY};
  for (int i = 0; i < 200; ++i) {
    i64.push_back(std::int64_t(rng()));
    u64.push_back(rng());
    f64.push_back(std::ldexp(double(std::int64_t(rng())), int(rng() % 200) - 100));
    f32.push_back(float(std::ldexp(double(std::int32_t(rng())), int(rng() % 100) - 80)));
  }
  check_sorted(ValueType::I64, i64);
  check_sorted(ValueType::U64, u64);
  check_sorted(ValueType::F64, f64);
  check_sorted(ValueType::F32, f32);
  check_sorted(ValueType::I8, std::vector<std::int8_t>{-128, -1, 0, 1, 127});
  check_sorted(ValueType::U8, std::vector<std::uint8_t>{0, 1, 128, 255});
  check_sorted(ValueType::I16, std::vector<std::int16_t>{-32768, -1, 0, 32767});
  check_sorted(ValueType::U32, std::vector<std::uint32_t>{0, 1, 0x80000000u, 0xFFFFFFFFu});
  CHECK(key(ValueType::F64, -0.0) == key(ValueType::F64, 0.0));
  CHECK(key(ValueType::F32, -0.0f) == key(ValueType::F32, 0.0f));
  CHECK(min_key(ValueType::I64) == key(ValueType::I64, INT64_MIN));
  CHECK(max_key(ValueType::U8) == key(ValueType::U8, std::uint8_t(255)));
  CHECK(key_value(ValueType::I32, key(ValueType::I32, -5)) == -5);
  CHECK(key_value(ValueType::F32, key(ValueType::F32, 0.1f)) == double(0.1f));
  CHECK(key_value(ValueType::F64, max_key(ValueType::F64)) == INFINITY);
}

TEST_CASE("parse_number", "[indexes][values]") {
  CHECK(num("12").integer == __int128(12));
  CHECK(num("-9223372036854775809").integer == -(__int128(1) << 63) - 1);
  CHECK(!num("2.5").integer);
  CHECK(num("2.5").value == 2.5);
  CHECK(num(".5").value == 0.5);
  CHECK(num("1e3").value == 1000);
  CHECK(num("-inf").value == -INFINITY);
  CHECK(num("Inf").value == INFINITY);
  CHECK(std::isnan(num("NaN").value));
  CHECK(num("1e999").value == INFINITY);
  CHECK(num("1e-999").value == 0);
  for (const char* bad : {"", "-", "1.", "e5", "1e", "1e+", "0x10", "1,5", " 1", "--1", "nan1", "+nan", "infinity"}) {
    INFO(bad);
    CHECK(!parse_number(bad));
  }
}

TEST_CASE("int64 comparisons are exact at the extremes", "[indexes][values]") {
  const ValueType t = ValueType::I64;
  const std::int64_t lo = INT64_MIN, hi = INT64_MAX;
  // x <= 9223372036854775807: everything; x < it: all but INT64_MAX.
  CHECK(cmp(t, CompareOp::Le, "9223372036854775807").ranges == KeySet{{{min_key(t), max_key(t)}}}.ranges);
  CHECK(!in(cmp(t, CompareOp::Lt, "9223372036854775807"), t, hi));
  CHECK(in(cmp(t, CompareOp::Lt, "9223372036854775807"), t, hi - 1));
  CHECK(in(cmp(t, CompareOp::Eq, "9223372036854775807"), t, hi));
  CHECK(!in(cmp(t, CompareOp::Eq, "9223372036854775807"), t, hi - 1));
  // 2^63 is beyond int64: == selects nothing, < everything, > nothing.
  CHECK(cmp(t, CompareOp::Eq, "9223372036854775808").ranges.empty());
  CHECK(in(cmp(t, CompareOp::Lt, "9223372036854775808"), t, hi));
  CHECK(cmp(t, CompareOp::Gt, "9223372036854775808").ranges.empty());
  CHECK(cmp(t, CompareOp::Ge, "9223372036854775807").ranges == KeySet{{{max_key(t), max_key(t)}}}.ranges);
  // The same near 2^63 as a decimal a double would round: 9223372036854775807.5
  CHECK(cmp(t, CompareOp::Ge, "9223372036854775807.5").ranges.empty());
  CHECK(in(cmp(t, CompareOp::Le, "9223372036854775806.9"), t, hi - 1));
  CHECK(!in(cmp(t, CompareOp::Le, "9223372036854775806.9"), t, hi));
  // Below the range.
  CHECK(cmp(t, CompareOp::Lt, "-9223372036854775809").ranges.empty());
  CHECK(cmp(t, CompareOp::Le, "-9223372036854775808").ranges == KeySet{{{min_key(t), min_key(t)}}}.ranges);
  CHECK(in(cmp(t, CompareOp::Gt, "-9223372036854775809"), t, lo));
  CHECK(!in(cmp(t, CompareOp::Gt, "-9223372036854775808"), t, lo));
  // Non-integral constants.
  CHECK(in(cmp(t, CompareOp::Lt, "2.5"), t, std::int64_t(2)));
  CHECK(!in(cmp(t, CompareOp::Lt, "2.5"), t, std::int64_t(3)));
  CHECK(in(cmp(t, CompareOp::Gt, "-2.5"), t, std::int64_t(-2)));
  CHECK(!in(cmp(t, CompareOp::Gt, "-2.5"), t, std::int64_t(-3)));
  CHECK(in(cmp(t, CompareOp::Ge, "-2.5"), t, std::int64_t(-2)));
  CHECK(cmp(t, CompareOp::Eq, "2.5").ranges.empty());
  CHECK(in(cmp(t, CompareOp::Ne, "2.5"), t, std::int64_t(2)));
  CHECK(in(cmp(t, CompareOp::Eq, "-0.0"), t, std::int64_t(0)));
  CHECK(in(cmp(t, CompareOp::Eq, "25e-1"), t, std::int64_t(2)) == false);
  CHECK(in(cmp(t, CompareOp::Eq, "2000e-3"), t, std::int64_t(2)));
  // Huge and infinite constants saturate.
  CHECK(in(cmp(t, CompareOp::Lt, "1e300"), t, hi));
  CHECK(cmp(t, CompareOp::Gt, "1e300").ranges.empty());
  CHECK(in(cmp(t, CompareOp::Gt, "-inf"), t, lo));
  CHECK(cmp(t, CompareOp::Lt, "-inf").ranges.empty());
  CHECK(cmp(t, CompareOp::Le, "inf").ranges.size() == 1);
  // NaN constant: only != matches, and on integers NaN never is an element.
  CHECK(cmp(t, CompareOp::Eq, "nan") == KeySet{});
  CHECK(cmp(t, CompareOp::Lt, "nan") == KeySet{});
  CHECK(cmp(t, CompareOp::Ne, "nan") == KeySet{{{min_key(t), max_key(t)}}, false});
  // uint64 beyond int64's range.
  const ValueType u = ValueType::U64;
  CHECK(in(cmp(u, CompareOp::Eq, "18446744073709551615"), u, UINT64_MAX));
  CHECK(cmp(u, CompareOp::Gt, "18446744073709551615").ranges.empty());
  CHECK(in(cmp(u, CompareOp::Gt, "9223372036854775808"), u, (1ull << 63) + 1));
  CHECK(!in(cmp(u, CompareOp::Gt, "9223372036854775808"), u, 1ull << 63));
  CHECK(cmp(u, CompareOp::Lt, "0").ranges.empty());
  CHECK(in(cmp(u, CompareOp::Le, "-0.0"), u, std::uint64_t(0)));
  // int8 saturation.
  CHECK(cmp(ValueType::I8, CompareOp::Ge, "128").ranges.empty());
  CHECK(in(cmp(ValueType::I8, CompareOp::Ge, "127"), ValueType::I8, std::int8_t(127)));
  CHECK(in(cmp(ValueType::I8, CompareOp::Gt, "-129"), ValueType::I8, std::int8_t(-128)));
}

TEST_CASE("float comparisons: -0, inf, nan and float32 widened", "[indexes][values]") {
  const ValueType d = ValueType::F64, f = ValueType::F32;
  CHECK(in(cmp(d, CompareOp::Eq, "0"), d, -0.0));
  CHECK(in(cmp(d, CompareOp::Eq, "-0.0"), d, 0.0));
  CHECK(!in(cmp(d, CompareOp::Lt, "0"), d, -0.0));
  CHECK(in(cmp(d, CompareOp::Lt, "0"), d, -5e-324));
  CHECK(!in(cmp(d, CompareOp::Gt, "-0.0"), d, 0.0));
  CHECK(in(cmp(d, CompareOp::Gt, "-0.0"), d, 5e-324));
  CHECK(in(cmp(d, CompareOp::Eq, "inf"), d, double(INFINITY)));
  CHECK(!in(cmp(d, CompareOp::Lt, "inf"), d, double(INFINITY)));
  CHECK(in(cmp(d, CompareOp::Lt, "inf"), d, 1e308));
  CHECK(cmp(d, CompareOp::Gt, "inf").ranges.empty());
  CHECK(in(cmp(d, CompareOp::Le, "-inf"), d, -double(INFINITY)));
  CHECK(in(cmp(d, CompareOp::Gt, "1e300"), d, double(INFINITY)));
  CHECK(!in(cmp(d, CompareOp::Gt, "1e300"), d, 1e300));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (CompareOp op : {CompareOp::Eq, CompareOp::Lt, CompareOp::Le, CompareOp::Gt, CompareOp::Ge}) {
    CHECK(!in(cmp(d, op, "1"), d, nan));
    CHECK(cmp(d, op, "nan") == KeySet{});
  }
  CHECK(in(cmp(d, CompareOp::Ne, "1"), d, nan));
  CHECK(in(cmp(d, CompareOp::Ne, "nan"), d, nan));
  CHECK(in(cmp(d, CompareOp::Ne, "nan"), d, 1.0));

  // float32 vs 0.1: float(0.1) = 0.100000001490116 > 0.1 (as doubles).
  const float f01 = 0.1f, below = std::nextafter(f01, 0.0f);
  CHECK(in(cmp(f, CompareOp::Gt, "0.1"), f, f01));
  CHECK(!in(cmp(f, CompareOp::Gt, "0.1"), f, below));
  CHECK(!in(cmp(f, CompareOp::Le, "0.1"), f, f01));
  CHECK(in(cmp(f, CompareOp::Le, "0.1"), f, below));
  CHECK(cmp(f, CompareOp::Eq, "0.1").ranges.empty());
  CHECK(in(cmp(f, CompareOp::Eq, "0.5"), f, 0.5f));
  CHECK(in(cmp(f, CompareOp::Lt, "0.5"), f, std::nextafter(0.5f, 0.0f)));
  CHECK(!in(cmp(f, CompareOp::Lt, "0.5"), f, 0.5f));
  // Beyond float32's range.
  CHECK(in(cmp(f, CompareOp::Gt, "1e300"), f, float(INFINITY)));
  CHECK(!in(cmp(f, CompareOp::Gt, "1e300"), f, std::numeric_limits<float>::max()));
  CHECK(in(cmp(f, CompareOp::Lt, "-1e300"), f, -float(INFINITY)));
  CHECK(in(cmp(f, CompareOp::Gt, "1e-300"), f, std::numeric_limits<float>::denorm_min()));
  CHECK(!in(cmp(f, CompareOp::Gt, "1e-300"), f, 0.0f));
  CHECK(!in(cmp(f, CompareOp::Lt, "-1e-300"), f, -0.0f));

  // Brute force: random float32 values against random constants.
  std::mt19937 rng(3);
  for (int i = 0; i < 2000; ++i) {
    float x = float(std::ldexp(double(std::int32_t(rng())), int(rng() % 60) - 60));
    double c = std::ldexp(double(std::int32_t(rng())), int(rng() % 60) - 60);
    if (i % 3 == 0) c = double(x);
    if (i % 7 == 0) c = std::nextafter(double(x), INFINITY);
    Number n;
    n.value = c;
    double w = double(x);
    CHECK(in(compare_keys(f, CompareOp::Lt, n), f, x) == (w < c));
    CHECK(in(compare_keys(f, CompareOp::Le, n), f, x) == (w <= c));
    CHECK(in(compare_keys(f, CompareOp::Gt, n), f, x) == (w > c));
    CHECK(in(compare_keys(f, CompareOp::Ge, n), f, x) == (w >= c));
    CHECK(in(compare_keys(f, CompareOp::Eq, n), f, x) == (w == c));
  }
}

TEST_CASE("intervals and complements", "[indexes][values]") {
  const ValueType t = ValueType::I32, d = ValueType::F64;
  KeySet s = interval_keys(t, num("-2.5"), num("3"));
  CHECK(in(s, t, -2));
  CHECK(!in(s, t, -3));
  CHECK(in(s, t, 3));
  CHECK(!in(s, t, 4));
  CHECK(interval_keys(t, num("3"), num("2")).ranges.empty());
  CHECK(interval_keys(t, num("2.1"), num("2.9")).ranges.empty());
  CHECK(interval_keys(d, num("nan"), num("2")) == KeySet{});
  KeySet c = complement(t, s);
  for (int v : {-100, -3, -2, 0, 3, 4, INT32_MAX, INT32_MIN}) CHECK(in(c, t, v) != in(s, t, v));
  CHECK(!c.nan);
  CHECK(complement(t, complement(t, s)) == s);
  CHECK(complement(t, KeySet{}) == KeySet{{{min_key(t), max_key(t)}}, false});
  CHECK(complement(d, KeySet{}).nan);
  KeySet full = complement(d, KeySet{});
  CHECK(complement(d, full) == KeySet{});
  KeySet two{{{min_key(d), key(d, -1.0)}, {key(d, 1.0), max_key(d)}}, false};
  KeySet mid = complement(d, two);
  CHECK(mid.nan);
  CHECK(mid.ranges == std::vector<std::pair<std::uint64_t, std::uint64_t>>{{key(d, -1.0) + 1, key(d, 1.0) - 1}});
}
