// Element values as the indexes see them: a dtype, an order-preserving
// 64-bit key per element, and the set of keys a comparison selects.
//
// Every comparison of docs/reference.md §5 is turned into a KeySet once, exactly, for the
// array's dtype: `x < 2.5` on int32 becomes keys of [INT32_MIN, 2]; `x > 0.1`
// on float32 becomes keys above the largest float32 <= 0.1. Elements are
// compared with the constant as written, exactly (float32 elements are
// widened to float64; integers are never rounded through a double). NaN
// elements match only `!=` (numpy's rule); -0.0 and +0.0 are one value.
// Pure: no I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mmfs::indexes {

enum class ValueType : std::uint8_t { I8, U8, I16, U16, I32, U32, I64, U64, F32, F64 };

// Canonical dtype names of docs/reference.md §1 (int8 ... float64); nullopt otherwise.
std::optional<ValueType> value_type(std::string_view dtype);
std::string_view type_name(ValueType t);
std::uint32_t itemsize(ValueType t);
bool is_float(ValueType t);

// The order key of a (little-endian) element: for any two non-NaN elements
// a < b  <=>  key(a) < key(b), and a == b <=> key(a) == key(b) (so -0.0 and
// +0.0 share a key). Keys of NaN elements are meaningless: test is_nan first.
std::uint64_t value_key(ValueType t, const std::byte* element);
bool is_nan(ValueType t, const std::byte* element);
// Smallest and largest key a non-NaN element of the type can have.
std::uint64_t min_key(ValueType t);
std::uint64_t max_key(ValueType t);
// The element value of a key, as a double (for display: 64-bit integers
// beyond 2^53 are rounded).
double key_value(ValueType t, std::uint64_t key);

// A comparison constant as written in a condition.
struct Number {
  std::string text;                        // as written
  double value = 0;                        // correctly rounded; ±inf; NaN for "nan"
  std::optional<__int128> integer;         // exact, when the text is an integer literal
};
// Accepts [+-]digits[.digits][(e|E)[+-]digits], [+-].digits..., [+-]inf, nan
// (case-insensitive words). nullopt for anything else.
std::optional<Number> parse_number(std::string_view text);

enum class CompareOp : std::uint8_t { Eq, Ne, Lt, Le, Gt, Ge };

// The keys a comparison selects: closed key intervals, ascending, disjoint,
// within [min_key, max_key]; `nan` when NaN elements match too.
struct KeySet {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  bool nan = false;
  bool operator==(const KeySet&) const = default;
};
KeySet compare_keys(ValueType t, CompareOp op, const Number& constant);
// `x in [low, high]` (closed; empty when low > high or either is NaN).
KeySet interval_keys(ValueType t, const Number& low, const Number& high);
KeySet complement(ValueType t, const KeySet& s);  // NaN flips too
bool contains(const KeySet& s, ValueType t, const std::byte* element);
// Ranges sorted, overlapping and adjacent ones merged (what contains() and
// the index planner expect).
KeySet normalized(const KeySet& keys);
// The keys of either set (x matches a OR x matches b), normalized.
KeySet unite(const KeySet& a, const KeySet& b);

}  // namespace mmfs::indexes
