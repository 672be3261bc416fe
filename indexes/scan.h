// Answering atoms without an index: one pass over element bytes. Pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "indexes/bitmap.h"
#include "indexes/values.h"

namespace mmfs::indexes {

// Adds to `out` the rows first_row + i (i < count) whose element is in `keys`.
// Tight per-dtype loops; rows are added in bulk, in ascending order.
void scan_keys(ValueType t, const KeySet& keys, const std::byte* elements, std::size_t count, std::uint64_t first_row,
               Bitmap* out);
// Writes to `out` (room for `count`) the indices i < count, ascending, whose
// element is in `keys`; returns how many. For callers that place matches
// themselves: no bitmap is built. count < 2^32.
std::size_t matching_indices(ValueType t, const KeySet& keys, const std::byte* elements, std::size_t count,
                             std::uint32_t* out);
// Elements known by their high bytes only (MLOC's leading byte groups):
// whether an element matches whatever its unknown low bytes are. `lo` is
// the element's bits (little-endian, itemsize bytes) with the unknown low
// `unknown_bytes` bytes zero; every completion lies between lo and lo with
// those bytes all ones, and for every dtype (the sign in the top byte, the
// float exponent within the top two) the values between are ordered as the
// bits are, so one comparison of the two ends' keys decides.
enum class PrefixMatch : std::uint8_t { No, Yes, Maybe };
class PrefixMatcher {
 public:
  PrefixMatcher(ValueType t, const KeySet& keys, std::uint32_t unknown_bytes);
  // Inline, with value_key's mapping for bits in a register: it runs once
  // per element of an edge bin, millions per query.
  PrefixMatch operator()(std::uint64_t lo) const {
    const std::uint64_t hi = lo | mask_;
    // The high end NaN (the exponent all ones, or unknown): the completions
    // may be NaN, infinite or neither; the whole element decides.
    if (t_ == ValueType::F64 && ((hi >> 52) & 0x7FF) == 0x7FF) return PrefixMatch::Maybe;
    if (t_ == ValueType::F32 && ((hi >> 23) & 0xFF) == 0xFF) return PrefixMatch::Maybe;
    std::uint64_t k1 = key_of_bits(lo), k2 = key_of_bits(hi);
    if (k1 > k2) std::swap(k1, k2);  // negative floats: larger bits, smaller values
    for (const auto& [x, y] : ranges_) {
      if (y < k1) continue;
      if (x > k2) break;
      return x <= k1 && k2 <= y ? PrefixMatch::Yes : PrefixMatch::Maybe;
    }
    return PrefixMatch::No;
  }

 private:
  // value_key of an element's bits (not NaN).
  std::uint64_t key_of_bits(std::uint64_t b) const {
    constexpr std::uint64_t kSign = std::uint64_t(1) << 63;
    switch (t_) {
      case ValueType::I8: return std::uint64_t(std::int64_t(std::int8_t(std::uint8_t(b)))) ^ kSign;
      case ValueType::U8: return std::uint8_t(b);
      case ValueType::I16: return std::uint64_t(std::int64_t(std::int16_t(std::uint16_t(b)))) ^ kSign;
      case ValueType::U16: return std::uint16_t(b);
      case ValueType::I32: return std::uint64_t(std::int64_t(std::int32_t(std::uint32_t(b)))) ^ kSign;
      case ValueType::U32: return std::uint32_t(b);
      case ValueType::I64: return b ^ kSign;
      case ValueType::U64: return b;
      case ValueType::F32: {
        std::uint32_t f = std::uint32_t(b);
        if ((f << 1) == 0) f = 0;  // -0.0 is 0
        return (f >> 31) ? std::uint32_t(~f) : (f | 0x80000000u);
      }
      case ValueType::F64:
        if ((b << 1) == 0) b = 0;
        return (b >> 63) ? ~b : (b | kSign);
    }
    return 0;
  }

  ValueType t_;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges_;  // normalized
  std::uint64_t mask_;
};

// How many of the elements are in `keys`.
std::uint64_t count_keys(ValueType t, const KeySet& keys, const std::byte* elements, std::size_t count);

}  // namespace mmfs::indexes
