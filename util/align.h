// util/align.h: rounding unsigned integers to multiples, the one home of
// div_up / align_up (sizes to sectors, blocks, granules).
//
//   div_up(a, b)           ceil(a / b), for any a (never overflows)
//   align_up(v, a)         the least multiple of a that is >= v
//   checked_align_up(v, a) the same, nullopt when it does not fit the type
//   align_down(v, a)       the greatest multiple of a that is <= v
//   is_aligned(v, a)       v is a multiple of a
//
// Both arguments are integers whose common type is unsigned (an unsigned
// value and a literal mix: align_up(bytes, 4096)); the result has that type.
// a > 0 (a == 0 divides by zero, as the division it replaces).
#pragma once

#include <concepts>
#include <limits>
#include <optional>
#include <type_traits>

namespace mmfs::util {

template <class A, class B>
concept UnsignedPair = std::integral<A> && std::integral<B> && std::unsigned_integral<std::common_type_t<A, B>>;

template <class A, class B>
  requires UnsignedPair<A, B>
constexpr std::common_type_t<A, B> div_up(A a, B b) {
  using T = std::common_type_t<A, B>;
  using W = std::common_type_t<T, unsigned>;  // no promotion to int
  const W x = T(a), y = T(b);
  return T(x / y + W(x % y != 0));
}

// Wraps around (as unsigned arithmetic does) when the multiple does not fit
// the type; checked_align_up says so instead.
template <class A, class B>
  requires UnsignedPair<A, B>
constexpr std::common_type_t<A, B> align_up(A v, B a) {
  using T = std::common_type_t<A, B>;
  using W = std::common_type_t<T, unsigned>;  // no promotion to int
  return T(W(div_up(v, a)) * W(T(a)));
}

template <class A, class B>
  requires UnsignedPair<A, B>
constexpr std::optional<std::common_type_t<A, B>> checked_align_up(A v, B a) {
  using T = std::common_type_t<A, B>;
  const T q = div_up(v, a);
  if (q > std::numeric_limits<T>::max() / T(a)) return std::nullopt;
  using W = std::common_type_t<T, unsigned>;  // no promotion to int
  return T(W(q) * W(T(a)));
}

template <class A, class B>
  requires UnsignedPair<A, B>
constexpr std::common_type_t<A, B> align_down(A v, B a) {
  using T = std::common_type_t<A, B>;
  using W = std::common_type_t<T, unsigned>;  // no promotion to int
  const W x = T(v), y = T(a);
  return T(x / y * y);
}

template <class A, class B>
  requires UnsignedPair<A, B>
constexpr bool is_aligned(A v, B a) {
  using T = std::common_type_t<A, B>;
  return T(v) % T(a) == 0;
}

}  // namespace mmfs::util
