#include "indexes/scan.h"

#include <roaring/roaring.hh>

#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace mmfs::indexes {
namespace {

// The scan compares elements in their own type, not through value_key (an
// out-of-line call per element would cost several times the memory
// bandwidth). A closed key range is a closed interval of element values,
// because keys order values; its two ends are found once per call by
// binary search over the values in order, asking value_key — so this file
// needs no knowledge of how keys are made.

template <typename T>
struct Bounds {
  T low, high;  // low <= x && high >= x
};

// The values of T in ascending order as positions 0..2^bits-1. Integers:
// offset binary. Floats: the usual sortable form of the bit pattern, which
// puts negative NaNs first and positive NaNs last; -0.0 and +0.0 are
// neighbours and compare equal, as they share a key.
template <typename T>
struct Order {
  using Bits = std::conditional_t<sizeof(T) == 1, std::uint8_t,
               std::conditional_t<sizeof(T) == 2, std::uint16_t,
               std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>>;
  static constexpr Bits kSign = Bits(Bits(1) << (8 * sizeof(T) - 1));

  static T at(Bits position) {
    Bits bits;
    if constexpr (std::is_floating_point_v<T>) {
      bits = (position & kSign) ? Bits(position ^ kSign) : Bits(~position);
    } else if constexpr (std::is_signed_v<T>) {
      bits = Bits(position ^ kSign);
    } else {
      bits = position;
    }
    return std::bit_cast<T>(bits);
  }
};

template <typename T>
bool value_is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) return x != x;
  return false;
}

template <typename T>
std::uint64_t key_of(ValueType t, T x) {
  return value_key(t, reinterpret_cast<const std::byte*>(&x));
}

// The first position (in Order) whose value is in [lo, +inf) of keys — or a
// positive NaN — and the last whose value is in (-inf, hi] of keys — or a
// negative NaN. Both predicates are monotone along Order.
template <typename T>
std::optional<typename Order<T>::Bits> first_at_or_above(ValueType t, std::uint64_t lo) {
  using Bits = typename Order<T>::Bits;
  Bits a = 0, b = std::numeric_limits<Bits>::max();  // answer in [a, b]
  auto ok = [&](Bits p) {
    T x = Order<T>::at(p);
    if (value_is_nan(x)) return (p & Order<T>::kSign) != 0;
    return key_of(t, x) >= lo;
  };
  if (!ok(b)) return std::nullopt;
  while (a < b) {
    Bits m = Bits(a + (b - a) / 2);
    if (ok(m)) b = m; else a = Bits(m + 1);
  }
  return a;
}

template <typename T>
std::optional<typename Order<T>::Bits> last_at_or_below(ValueType t, std::uint64_t hi) {
  using Bits = typename Order<T>::Bits;
  Bits a = 0, b = std::numeric_limits<Bits>::max();
  auto ok = [&](Bits p) {
    T x = Order<T>::at(p);
    if (value_is_nan(x)) return (p & Order<T>::kSign) == 0;
    return key_of(t, x) <= hi;
  };
  if (!ok(a)) return std::nullopt;
  while (a < b) {
    Bits m = Bits(b - (b - a) / 2);
    if (ok(m)) a = m; else b = Bits(m - 1);
  }
  return a;
}

// The element interval of a key range; nullopt when no value has a key in it.
template <typename T>
std::optional<Bounds<T>> bounds_of(ValueType t, std::pair<std::uint64_t, std::uint64_t> range) {
  auto first = first_at_or_above<T>(t, range.first);
  auto last = last_at_or_below<T>(t, range.second);
  if (!first || !last || *first > *last) return std::nullopt;
  T low = Order<T>::at(*first), high = Order<T>::at(*last);
  if (value_is_nan(low) || value_is_nan(high)) return std::nullopt;
  return Bounds<T>{low, high};
}

template <typename T>
T load(const std::byte* p) {
  T x;
  std::memcpy(&x, p, sizeof(T));
  return x;
}

// The per-element test, specialised for the shapes KeySets usually have: one
// range (a comparison or an interval), two (`!=`), or any number.
template <typename T, int kRanges, bool kNan>
struct Matcher {
  const Bounds<T>* bounds;
  std::size_t n;
  bool operator()(T x) const {
    bool m = false;
    if constexpr (kRanges == 1) {
      m = (x >= bounds[0].low) & (x <= bounds[0].high);
    } else if constexpr (kRanges == 2) {
      m = ((x >= bounds[0].low) & (x <= bounds[0].high)) | ((x >= bounds[1].low) & (x <= bounds[1].high));
    } else {
      for (std::size_t i = 0; i < n; ++i) m |= (x >= bounds[i].low) & (x <= bounds[i].high);
    }
    if constexpr (kNan) m |= value_is_nan(x);
    return m;
  }
};

// Rows are gathered as 32-bit offsets within one 2^32-row bucket of the
// 64-bit map, so that CRoaring's own bulk insertion (which keeps its place
// between ascending values) builds the bucket; the bucket is then merged in
// one union. Rows of buckets above the first go through the 64-bit map's
// addMany.
class RowSink {
 public:
  RowSink(std::uint64_t first_row, Bitmap* out) : out_(out), high_(first_row >> 32) {}
  std::uint32_t* buffer() { return buffer_.data(); }
  static constexpr std::size_t kCapacity = 4096;
  void flush(std::size_t n) {
    if (n == 0) return;
    if (high_ == 0) {
      low_bucket_.addMany(n, buffer_.data());
      return;
    }
    std::array<std::uint64_t, kCapacity> rows;
    for (std::size_t i = 0; i < n; ++i) rows[i] = (high_ << 32) | buffer_[i];
    out_->addMany(n, rows.data());
  }
  void set_high(std::uint64_t high) { high_ = high; }
  void finish() {
    if (!low_bucket_.isEmpty()) *out_ |= Bitmap(low_bucket_);
  }

 private:
  Bitmap* out_;
  std::uint64_t high_;
  Roaring low_bucket_;
  std::array<std::uint32_t, kCapacity> buffer_;
};

template <typename T, typename M>
void scan_typed(const M& match, const std::byte* elements, std::size_t count, std::uint64_t first_row, Bitmap* out) {
  RowSink sink(first_row, out);
  std::size_t i = 0;
  while (i < count) {
    // One block never crosses a 2^32-row boundary nor overfills the buffer.
    std::uint64_t row = first_row + i;
    std::uint64_t to_boundary = (std::uint64_t(1) << 32) - (row & 0xffffffffu);
    std::size_t block = std::size_t(std::min<std::uint64_t>({count - i, RowSink::kCapacity, to_boundary}));
    sink.set_high(row >> 32);
    std::uint32_t base = std::uint32_t(row);
    std::uint32_t* buf = sink.buffer();
    std::size_t n = 0;
    const std::byte* p = elements + i * sizeof(T);
    for (std::size_t j = 0; j < block; ++j) {
      buf[n] = base + std::uint32_t(j);  // written always, kept when it matches: no branch
      n += match(load<T>(p + j * sizeof(T)));
    }
    sink.flush(n);
    i += block;
  }
  sink.finish();
}

template <typename T, typename M>
std::uint64_t count_typed(const M& match, const std::byte* elements, std::size_t count) {
  std::uint64_t n = 0;
  for (std::size_t j = 0; j < count; ++j) n += match(load<T>(elements + j * sizeof(T)));
  return n;
}

template <typename T, typename M>
std::size_t match_typed(const M& match, const std::byte* elements, std::size_t count, std::uint32_t* out) {
  std::size_t n = 0;
  for (std::size_t j = 0; j < count; ++j) {
    out[n] = std::uint32_t(j);  // written always, kept when it matches: no branch
    n += match(load<T>(elements + j * sizeof(T)));
  }
  return n;
}

// Resolves the KeySet to element bounds and calls `body(matcher)` with the
// matcher specialised for its shape.
template <typename T, typename Body>
auto with_matcher(ValueType t, const KeySet& keys, Body&& body) {
  std::vector<Bounds<T>> bounds;
  for (const auto& r : keys.ranges)
    if (auto b = bounds_of<T>(t, r)) bounds.push_back(*b);
  bool nan = keys.nan && std::is_floating_point_v<T>;
  const Bounds<T>* data = bounds.data();
  std::size_t n = bounds.size();
  if (nan) {
    if (n == 1) return body(Matcher<T, 1, true>{data, n});
    if (n == 2) return body(Matcher<T, 2, true>{data, n});
    return body(Matcher<T, 0, true>{data, n});
  }
  if (n == 1) return body(Matcher<T, 1, false>{data, n});
  if (n == 2) return body(Matcher<T, 2, false>{data, n});
  return body(Matcher<T, 0, false>{data, n});
}

template <typename Fn>
auto dispatch(ValueType t, Fn&& fn) {
  switch (t) {
    case ValueType::I8: return fn(std::int8_t{});
    case ValueType::U8: return fn(std::uint8_t{});
    case ValueType::I16: return fn(std::int16_t{});
    case ValueType::U16: return fn(std::uint16_t{});
    case ValueType::I32: return fn(std::int32_t{});
    case ValueType::U32: return fn(std::uint32_t{});
    case ValueType::I64: return fn(std::int64_t{});
    case ValueType::U64: return fn(std::uint64_t{});
    case ValueType::F32: return fn(float{});
    case ValueType::F64: return fn(double{});
  }
  return fn(double{});
}

}  // namespace

void scan_keys(ValueType t, const KeySet& keys, const std::byte* elements, std::size_t count, std::uint64_t first_row,
               Bitmap* out) {
  if (count == 0 || (keys.ranges.empty() && !keys.nan)) return;
  dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    with_matcher<T>(t, keys, [&](const auto& match) { scan_typed<T>(match, elements, count, first_row, out); });
  });
}

std::size_t matching_indices(ValueType t, const KeySet& keys, const std::byte* elements, std::size_t count,
                             std::uint32_t* out) {
  if (count == 0 || (keys.ranges.empty() && !keys.nan)) return 0;
  return dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    return with_matcher<T>(t, keys, [&](const auto& match) { return match_typed<T>(match, elements, count, out); });
  });
}

std::uint64_t count_keys(ValueType t, const KeySet& keys, const std::byte* elements, std::size_t count) {
  if (count == 0 || (keys.ranges.empty() && !keys.nan)) return 0;
  return dispatch(t, [&](auto tag) {
    using T = decltype(tag);
    return with_matcher<T>(t, keys, [&](const auto& match) { return count_typed<T>(match, elements, count); });
  });
}

PrefixMatcher::PrefixMatcher(ValueType t, const KeySet& keys, std::uint32_t unknown_bytes)
    : t_(t), ranges_(normalized(keys).ranges),
      mask_(unknown_bytes >= 8 ? ~std::uint64_t(0) : (std::uint64_t(1) << (8 * unknown_bytes)) - 1) {
  if (unknown_bytes >= itemsize(t)) throw std::invalid_argument("PrefixMatcher: no byte of the element is known");
}

}  // namespace mmfs::indexes
