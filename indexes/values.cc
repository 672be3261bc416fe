#include "indexes/values.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

namespace mmfs::indexes {

namespace {

constexpr std::uint64_t kSign = 1ull << 63;
using i128 = __int128;

struct TypeInfo {
  std::string_view name;
  std::string_view alias;  // numpy short spelling
  std::uint32_t size;
};
constexpr TypeInfo kTypes[] = {
    {"int8", "i1", 1},   {"uint8", "u1", 1},   {"int16", "i2", 2},   {"uint16", "u2", 2},   {"int32", "i4", 4},
    {"uint32", "u4", 4}, {"int64", "i8", 8},   {"uint64", "u8", 8},  {"float32", "f4", 4},  {"float64", "f8", 8},
};

const TypeInfo& info(ValueType t) { return kTypes[std::size_t(t)]; }

bool is_signed_int(ValueType t) {
  return t == ValueType::I8 || t == ValueType::I16 || t == ValueType::I32 || t == ValueType::I64;
}

template <class T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Keys: signed integers are sign-extended and get their sign bit flipped;
// unsigned ones are their value (zero-extended: already ordered, and
// flipping would break uint64's order); floats use the IEEE sign trick.
std::uint64_t key_of_double(double d) {
  if (d == 0) d = 0;  // -0.0 -> +0.0
  std::uint64_t b = std::bit_cast<std::uint64_t>(d);
  return (b & kSign) ? ~b : (b | kSign);
}
std::uint64_t key_of_float(float f) {
  if (f == 0) f = 0;
  std::uint32_t b = std::bit_cast<std::uint32_t>(f);
  return (b & 0x80000000u) ? std::uint32_t(~b) : (b | 0x80000000u);
}
double double_of_key(std::uint64_t k) {
  std::uint64_t b = (k & kSign) ? (k & ~kSign) : ~k;
  return std::bit_cast<double>(b);
}
float float_of_key(std::uint64_t k) {
  std::uint32_t k32 = std::uint32_t(k);
  std::uint32_t b = (k32 & 0x80000000u) ? (k32 & 0x7FFFFFFFu) : ~k32;
  return std::bit_cast<float>(b);
}

// Integer range of an integer dtype.
std::pair<i128, i128> int_range(ValueType t) {
  switch (t) {
    case ValueType::I8: return {INT8_MIN, INT8_MAX};
    case ValueType::U8: return {0, UINT8_MAX};
    case ValueType::I16: return {INT16_MIN, INT16_MAX};
    case ValueType::U16: return {0, UINT16_MAX};
    case ValueType::I32: return {INT32_MIN, INT32_MAX};
    case ValueType::U32: return {0, UINT32_MAX};
    case ValueType::I64: return {INT64_MIN, INT64_MAX};
    default: return {0, UINT64_MAX};
  }
}
// Key of an integer inside the dtype's range.
std::uint64_t int_key(ValueType t, i128 v) {
  return is_signed_int(t) ? (std::uint64_t(std::int64_t(v)) ^ kSign) : std::uint64_t(v);
}

// A constant as an exact rational's floor plus "has a fractional part";
// magnitudes beyond 2^100 saturate (every dtype lies well inside).
struct Exact {
  i128 floor = 0;
  bool fractional = false;
};
constexpr i128 kHuge = i128(1) << 100;

std::optional<Exact> exact_from_text(std::string_view s) {
  bool neg = false;
  std::size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  std::string digits;
  long long point = -1;
  for (; i < s.size(); ++i) {
    if (s[i] >= '0' && s[i] <= '9') {
      digits.push_back(s[i]);
    } else if (s[i] == '.' && point < 0) {
      point = (long long)digits.size();
    } else {
      break;
    }
  }
  if (digits.empty()) return std::nullopt;
  if (point < 0) point = (long long)digits.size();
  long long exp = 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    bool eneg = false;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) eneg = s[i++] == '-';
    if (i >= s.size()) return std::nullopt;
    for (; i < s.size(); ++i) {
      if (s[i] < '0' || s[i] > '9') return std::nullopt;
      exp = std::min(exp * 10 + (s[i] - '0'), 1000000000ll);
    }
    if (eneg) exp = -exp;
  }
  if (i != s.size()) return std::nullopt;
  // Integer part: the first `point + exp` digits (zero-padded).
  long long int_digits = point + exp;
  i128 mag = 0;
  bool frac = false, huge = false;
  for (long long d = 0; d < (long long)digits.size(); ++d) {
    if (d < int_digits) {
      if (!huge) {
        mag = mag * 10 + (digits[std::size_t(d)] - '0');
        if (mag > kHuge) huge = true;
      }
    } else if (digits[std::size_t(d)] != '0') {
      frac = true;
    }
  }
  for (long long d = (long long)digits.size(); d < int_digits && !huge && mag != 0; ++d) {
    mag *= 10;
    if (mag > kHuge) huge = true;
  }
  if (huge) mag = kHuge;
  Exact e;
  e.fractional = frac;
  e.floor = neg ? -mag - (frac ? 1 : 0) : mag;
  return e;
}

Exact exact_from_double(double v) {
  if (v >= 1e35) return {kHuge, false};
  if (v <= -1e35) return {-kHuge, false};
  double f = std::floor(v);
  return {i128(f), f != v};
}

Exact exact_of(const Number& n) {
  if (n.integer) return {std::clamp<i128>(*n.integer, -kHuge, kHuge), false};
  if (auto e = exact_from_text(n.text)) return *e;
  return exact_from_double(n.value);
}

// The four one-sided bounds of a constant in a dtype's key space: the
// largest key <= / < the constant, the smallest key >= / > it; nullopt when
// no element value qualifies.
using Bound = std::optional<std::uint64_t>;

Bound int_upper(ValueType t, i128 hi) {  // keys of values <= hi
  auto [lo_t, hi_t] = int_range(t);
  if (hi < lo_t) return std::nullopt;
  return int_key(t, std::min(hi, hi_t));
}
Bound int_lower(ValueType t, i128 lo) {  // keys of values >= lo
  auto [lo_t, hi_t] = int_range(t);
  if (lo > hi_t) return std::nullopt;
  return int_key(t, std::max(lo, lo_t));
}

// Float dtypes: elements compare as doubles against the double constant.
Bound float_le(ValueType t, double c, bool strict) {
  if (t == ValueType::F64) {
    if (strict) {
      if (c == -INFINITY) return std::nullopt;
      return key_of_double(c) - 1;
    }
    return key_of_double(c);
  }
  float f = float(c);
  if (strict ? double(f) >= c : double(f) > c) {
    if (f == -INFINITY) return std::nullopt;
    f = std::nextafter(f, -INFINITY);
  }
  return key_of_float(f);
}
Bound float_ge(ValueType t, double c, bool strict) {
  if (t == ValueType::F64) {
    if (strict) {
      if (c == INFINITY) return std::nullopt;
      return key_of_double(c) + 1;
    }
    return key_of_double(c);
  }
  float f = float(c);
  if (strict ? double(f) <= c : double(f) < c) {
    if (f == INFINITY) return std::nullopt;
    f = std::nextafter(f, INFINITY);
  }
  return key_of_float(f);
}

// Largest key of values <= c (strict: < c).
Bound upper_bound_key(ValueType t, const Number& c, bool strict) {
  if (is_float(t)) return float_le(t, c.value, strict);
  Exact e = exact_of(c);
  // x < c  <=>  x <= ceil(c) - 1;  x <= c  <=>  x <= floor(c)
  i128 hi = (strict && !e.fractional) ? e.floor - 1 : e.floor;
  return int_upper(t, hi);
}
// Smallest key of values >= c (strict: > c).
Bound lower_bound_key(ValueType t, const Number& c, bool strict) {
  if (is_float(t)) return float_ge(t, c.value, strict);
  Exact e = exact_of(c);
  // x > c  <=>  x >= floor(c) + 1;  x >= c  <=>  x >= ceil(c)
  i128 lo = (strict || e.fractional) ? e.floor + 1 : e.floor;
  return int_lower(t, lo);
}

KeySet from_bounds(Bound lo, Bound hi) {
  KeySet s;
  if (lo && hi && *lo <= *hi) s.ranges.push_back({*lo, *hi});
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return (x | 0x20) == (y | 0x20);
         });
}

}  // namespace

std::optional<ValueType> value_type(std::string_view dtype) {
  std::string_view d = dtype;
  bool shortform = false;
  if (!d.empty() && (d[0] == '<' || d[0] == '|' || d[0] == '=')) {
    d.remove_prefix(1);
    shortform = true;
  }
  for (std::size_t i = 0; i < std::size(kTypes); ++i) {
    if ((!shortform && d == kTypes[i].name) || d == kTypes[i].alias) return ValueType(i);
  }
  return std::nullopt;
}
std::string_view type_name(ValueType t) { return info(t).name; }
std::uint32_t itemsize(ValueType t) { return info(t).size; }
bool is_float(ValueType t) { return t == ValueType::F32 || t == ValueType::F64; }

std::uint64_t value_key(ValueType t, const std::byte* e) {
  switch (t) {
    case ValueType::I8: return std::uint64_t(std::int64_t(load<std::int8_t>(e))) ^ kSign;
    case ValueType::U8: return load<std::uint8_t>(e);
    case ValueType::I16: return std::uint64_t(std::int64_t(load<std::int16_t>(e))) ^ kSign;
    case ValueType::U16: return load<std::uint16_t>(e);
    case ValueType::I32: return std::uint64_t(std::int64_t(load<std::int32_t>(e))) ^ kSign;
    case ValueType::U32: return load<std::uint32_t>(e);
    case ValueType::I64: return std::uint64_t(load<std::int64_t>(e)) ^ kSign;
    case ValueType::U64: return load<std::uint64_t>(e);
    case ValueType::F32: return key_of_float(load<float>(e));
    case ValueType::F64: return key_of_double(load<double>(e));
  }
  return 0;
}

bool is_nan(ValueType t, const std::byte* e) {
  if (t == ValueType::F32) return std::isnan(load<float>(e));
  if (t == ValueType::F64) return std::isnan(load<double>(e));
  return false;
}

std::uint64_t min_key(ValueType t) {
  if (t == ValueType::F32) return key_of_float(-INFINITY);
  if (t == ValueType::F64) return key_of_double(-INFINITY);
  return int_key(t, int_range(t).first);
}
std::uint64_t max_key(ValueType t) {
  if (t == ValueType::F32) return key_of_float(INFINITY);
  if (t == ValueType::F64) return key_of_double(INFINITY);
  return int_key(t, int_range(t).second);
}

double key_value(ValueType t, std::uint64_t key) {
  if (t == ValueType::F32) return double(float_of_key(key));
  if (t == ValueType::F64) return double_of_key(key);
  if (is_signed_int(t)) return double(std::int64_t(key ^ kSign));
  return double(key);
}

std::optional<Number> parse_number(std::string_view text) {
  Number n;
  n.text = std::string(text);
  std::string_view s = text;
  bool neg = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    neg = s[0] == '-';
    s.remove_prefix(1);
  }
  if (iequals(s, "inf")) {
    n.value = neg ? -INFINITY : INFINITY;
    return n;
  }
  if (iequals(text, "nan")) {
    n.value = std::numeric_limits<double>::quiet_NaN();
    return n;
  }
  // Validate the grammar: digits[.digits] | .digits, then an optional exponent.
  std::size_t i = 0, int_digits = 0, frac_digits = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i, ++int_digits;
  bool has_point = i < s.size() && s[i] == '.';
  if (has_point) {
    ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i, ++frac_digits;
    if (frac_digits == 0) return std::nullopt;
  }
  if (int_digits == 0 && frac_digits == 0) return std::nullopt;
  bool has_exp = i < s.size() && (s[i] == 'e' || s[i] == 'E');
  if (has_exp) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    std::size_t exp_digits = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i, ++exp_digits;
    if (exp_digits == 0) return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  double v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec == std::errc::result_out_of_range) {
    // from_chars leaves v unset: overflow -> inf, underflow -> 0.
    auto e = exact_from_text(s);
    v = (e && e->floor != 0) ? INFINITY : 0.0;
  } else if (r.ec != std::errc()) {
    return std::nullopt;
  }
  n.value = neg ? -v : v;
  if (!has_point && !has_exp) {
    auto e = exact_from_text(text);
    if (e && e->floor > -kHuge && e->floor < kHuge) n.integer = e->floor;
  }
  return n;
}

KeySet compare_keys(ValueType t, CompareOp op, const Number& c) {
  KeySet all{{{min_key(t), max_key(t)}}, is_float(t)};
  if (std::isnan(c.value) && !c.integer) return op == CompareOp::Ne ? all : KeySet{};
  switch (op) {
    case CompareOp::Lt: return from_bounds(min_key(t), upper_bound_key(t, c, true));
    case CompareOp::Le: return from_bounds(min_key(t), upper_bound_key(t, c, false));
    case CompareOp::Gt: return from_bounds(lower_bound_key(t, c, true), max_key(t));
    case CompareOp::Ge: return from_bounds(lower_bound_key(t, c, false), max_key(t));
    case CompareOp::Eq: return from_bounds(lower_bound_key(t, c, false), upper_bound_key(t, c, false));
    case CompareOp::Ne: return complement(t, compare_keys(t, CompareOp::Eq, c));
  }
  return {};
}

KeySet interval_keys(ValueType t, const Number& low, const Number& high) {
  if ((std::isnan(low.value) && !low.integer) || (std::isnan(high.value) && !high.integer)) return {};
  return from_bounds(lower_bound_key(t, low, false), upper_bound_key(t, high, false));
}

KeySet complement(ValueType t, const KeySet& s) {
  KeySet out;
  out.nan = is_float(t) && !s.nan;
  std::uint64_t next = min_key(t);  // first key not yet covered
  bool done = false;
  for (auto [lo, hi] : s.ranges) {
    if (done) break;
    lo = std::max(lo, min_key(t));
    hi = std::min(hi, max_key(t));
    if (lo > hi || hi < next) continue;
    if (lo > next) out.ranges.push_back({next, lo - 1});
    if (hi == max_key(t)) {
      done = true;
    } else {
      next = hi + 1;
    }
  }
  if (!done) out.ranges.push_back({next, max_key(t)});
  return out;
}

bool contains(const KeySet& s, ValueType t, const std::byte* element) {
  if (is_nan(t, element)) return s.nan;
  std::uint64_t k = value_key(t, element);
  auto it = std::upper_bound(s.ranges.begin(), s.ranges.end(), k,
                             [](std::uint64_t key, const auto& r) { return key < r.first; });
  return it != s.ranges.begin() && k <= std::prev(it)->second;
}

KeySet normalized(const KeySet& keys) {
  KeySet out;
  out.nan = keys.nan;
  auto ranges = keys.ranges;
  std::sort(ranges.begin(), ranges.end());
  for (auto [lo, hi] : ranges) {
    if (lo > hi) continue;
    if (!out.ranges.empty() && (out.ranges.back().second == ~0ull || lo <= out.ranges.back().second + 1)) {
      out.ranges.back().second = std::max(out.ranges.back().second, hi);
    } else {
      out.ranges.push_back({lo, hi});
    }
  }
  return out;
}

KeySet unite(const KeySet& a, const KeySet& b) {
  KeySet both = a;
  both.nan = a.nan || b.nan;
  both.ranges.insert(both.ranges.end(), b.ranges.begin(), b.ranges.end());
  return normalized(both);
}

}  // namespace mmfs::indexes
