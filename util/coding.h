// util/coding.h: fixed-width integers as bytes, little- or big-endian, the
// one home of every byte encoding of the project (as LevelDB's util/coding.h).
//
//   put_le32(p, v) / get_le32(p)       4 bytes at p, least significant first
//   put_be64(p, v) / get_be64(p)       8 bytes at p, most significant first
//   append_le64(s, v)                  the same appended to a std::string
//   take_le64(view, &v)                reads 8 bytes off the front of a view (false when short)
//   put_le<T> / get_le<T> / ...        the same for any integer type, sizeof(T) bytes
//
// p is a std::byte, char or unsigned char (std::uint8_t) pointer; nothing is
// aligned. Signed integers are their two's complement. The on-disk formats
// name which order they use (docs/on-disk-format.md): little-endian fields,
// big-endian inode numbers in metadata keys (so keys sort by number).
#pragma once

#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

namespace mmfs::util {

// A byte of a buffer: std::byte, char or unsigned char (std::uint8_t).
template <class B>
concept ByteType = std::same_as<std::remove_const_t<B>, std::byte> || std::same_as<std::remove_const_t<B>, char> ||
                   std::same_as<std::remove_const_t<B>, unsigned char>;

// The integers that encode: every integer type but bool.
template <class T>
concept FixedInt = std::integral<T> && !std::same_as<std::remove_cv_t<T>, bool>;

// v with its bytes in the opposite order (std::byteswap is C++23).
template <std::unsigned_integral U>
constexpr U byteswap(U v) {
  if constexpr (sizeof(U) == 1) {
    return v;
  } else if constexpr (sizeof(U) == 2) {
    return __builtin_bswap16(v);
  } else if constexpr (sizeof(U) == 4) {
    return __builtin_bswap32(v);
  } else {
    static_assert(sizeof(U) == 8, "8-, 16-, 32- and 64-bit integers");
    return __builtin_bswap64(v);
  }
}

namespace detail {

template <ByteType B>
constexpr B to_byte(unsigned v) {
  return static_cast<B>(static_cast<unsigned char>(v & 0xffu));
}
template <ByteType B>
constexpr unsigned from_byte(B b) {
  return static_cast<unsigned char>(b);
}

// The value in the given order, as bytes at p; a loop at compile time, one
// unaligned store (and a byte swap when the orders differ) at run time.
template <std::endian Order, FixedInt T, ByteType B>
constexpr void put(B* p, T v) {
  using U = std::make_unsigned_t<T>;
  const U u = static_cast<U>(v);
  if (std::is_constant_evaluated()) {
    for (std::size_t i = 0; i < sizeof(U); ++i) {
      const std::size_t shift = Order == std::endian::little ? 8 * i : 8 * (sizeof(U) - 1 - i);
      p[i] = to_byte<B>(unsigned(std::uint64_t(u) >> shift));
    }
  } else {
    const U w = Order == std::endian::native ? u : byteswap(u);
    std::memcpy(p, &w, sizeof w);
  }
}

template <std::endian Order, FixedInt T, ByteType B>
constexpr T get(const B* p) {
  using U = std::make_unsigned_t<T>;
  if (std::is_constant_evaluated()) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < sizeof(U); ++i) {
      const std::size_t shift = Order == std::endian::little ? 8 * i : 8 * (sizeof(U) - 1 - i);
      v |= std::uint64_t(from_byte(p[i])) << shift;
    }
    return static_cast<T>(static_cast<U>(v));
  } else {
    U w;
    std::memcpy(&w, p, sizeof w);
    return static_cast<T>(Order == std::endian::native ? w : byteswap(w));
  }
}

}  // namespace detail

// Any integer type: sizeof(T) bytes at p.
template <FixedInt T, ByteType B>
constexpr void put_le(B* p, T v) {
  detail::put<std::endian::little>(p, v);
}
template <FixedInt T, ByteType B>
constexpr void put_be(B* p, T v) {
  detail::put<std::endian::big>(p, v);
}
template <FixedInt T, ByteType B>
constexpr T get_le(const B* p) {
  return detail::get<std::endian::little, T>(p);
}
template <FixedInt T, ByteType B>
constexpr T get_be(const B* p) {
  return detail::get<std::endian::big, T>(p);
}

// The fixed widths by name.
template <ByteType B> constexpr void put_le16(B* p, std::uint16_t v) { put_le(p, v); }
template <ByteType B> constexpr void put_le32(B* p, std::uint32_t v) { put_le(p, v); }
template <ByteType B> constexpr void put_le64(B* p, std::uint64_t v) { put_le(p, v); }
template <ByteType B> constexpr void put_be16(B* p, std::uint16_t v) { put_be(p, v); }
template <ByteType B> constexpr void put_be32(B* p, std::uint32_t v) { put_be(p, v); }
template <ByteType B> constexpr void put_be64(B* p, std::uint64_t v) { put_be(p, v); }
template <ByteType B> constexpr std::uint16_t get_le16(const B* p) { return get_le<std::uint16_t>(p); }
template <ByteType B> constexpr std::uint32_t get_le32(const B* p) { return get_le<std::uint32_t>(p); }
template <ByteType B> constexpr std::uint64_t get_le64(const B* p) { return get_le<std::uint64_t>(p); }
template <ByteType B> constexpr std::uint16_t get_be16(const B* p) { return get_be<std::uint16_t>(p); }
template <ByteType B> constexpr std::uint32_t get_be32(const B* p) { return get_be<std::uint32_t>(p); }
template <ByteType B> constexpr std::uint64_t get_be64(const B* p) { return get_be<std::uint64_t>(p); }

// Appended to a string (metadata records and keys are strings).
template <FixedInt T>
inline void append_le(std::string& s, T v) {
  char b[sizeof(T)];
  put_le(b, v);
  s.append(b, sizeof b);
}
template <FixedInt T>
inline void append_be(std::string& s, T v) {
  char b[sizeof(T)];
  put_be(b, v);
  s.append(b, sizeof b);
}
inline void append_le16(std::string& s, std::uint16_t v) { append_le(s, v); }
inline void append_le32(std::string& s, std::uint32_t v) { append_le(s, v); }
inline void append_le64(std::string& s, std::uint64_t v) { append_le(s, v); }
inline void append_be16(std::string& s, std::uint16_t v) { append_be(s, v); }
inline void append_be32(std::string& s, std::uint32_t v) { append_be(s, v); }
inline void append_be64(std::string& s, std::uint64_t v) { append_be(s, v); }

// Read off the front of a view: false (and nothing consumed) when it is shorter.
template <FixedInt T>
constexpr bool take_le(std::string_view& s, T* v) {
  if (s.size() < sizeof(T)) return false;
  *v = get_le<T>(s.data());
  s.remove_prefix(sizeof(T));
  return true;
}
template <FixedInt T>
constexpr bool take_be(std::string_view& s, T* v) {
  if (s.size() < sizeof(T)) return false;
  *v = get_be<T>(s.data());
  s.remove_prefix(sizeof(T));
  return true;
}
constexpr bool take_le32(std::string_view& s, std::uint32_t* v) { return take_le(s, v); }
constexpr bool take_le64(std::string_view& s, std::uint64_t* v) { return take_le(s, v); }
constexpr bool take_be64(std::string_view& s, std::uint64_t* v) { return take_be(s, v); }

}  // namespace mmfs::util
