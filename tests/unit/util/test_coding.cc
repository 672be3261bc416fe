// util/coding.h: fixed-width little- and big-endian integers, against the
// byte loops the call sites used to write out (the on-disk bytes must not
// change), at run time and at compile time.
#include <catch2/catch.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>

#include "util/coding.h"

using namespace mmfs::util;

namespace {

// The loops as the call sites wrote them.
template <class T>
std::string loop_le(T v) {
  std::string s;
  for (std::size_t i = 0; i < sizeof(T); ++i) s.push_back(char((std::uint64_t(v) >> (8 * i)) & 0xff));
  return s;
}
template <class T>
std::string loop_be(T v) {
  std::string s;
  for (int i = int(sizeof(T)) - 1; i >= 0; --i) s.push_back(char((std::uint64_t(v) >> (8 * i)) & 0xff));
  return s;
}

// Constant evaluation takes the loop path.
constexpr std::array<unsigned char, 8> be_bytes(std::uint64_t v) {
  std::array<unsigned char, 8> b{};
  put_be64(b.data(), v);
  return b;
}
constexpr std::array<unsigned char, 4> le_bytes(std::uint32_t v) {
  std::array<unsigned char, 4> b{};
  put_le32(b.data(), v);
  return b;
}
constexpr std::uint64_t round_trip_be(std::uint64_t v) {
  std::array<char, 8> b{};
  put_be64(b.data(), v);
  return get_be64(b.data());
}
constexpr std::int32_t round_trip_le_signed(std::int32_t v) {
  std::array<std::byte, 4> b{};
  put_le(b.data(), v);
  return get_le<std::int32_t>(b.data());
}

static_assert(be_bytes(0x0102030405060708ull)[0] == 0x01 && be_bytes(0x0102030405060708ull)[7] == 0x08);
static_assert(le_bytes(0xa1b2c3d4u)[0] == 0xd4 && le_bytes(0xa1b2c3d4u)[3] == 0xa1);
static_assert(round_trip_be(0xfedcba9876543210ull) == 0xfedcba9876543210ull);
static_assert(round_trip_le_signed(-2) == -2);
static_assert(byteswap(std::uint16_t(0x1234)) == 0x3412);
static_assert(byteswap(0x11223344u) == 0x44332211u);
static_assert(byteswap(std::uint64_t(0x0102030405060708ull)) == 0x0807060504030201ull);

}  // namespace

TEST_CASE("coding: the byte layout of every width in either order", "[util][coding]") {
  std::string s;
  append_le16(s, 0x0102);
  append_le32(s, 0x03040506u);
  append_le64(s, 0x0708090a0b0c0d0eull);
  CHECK(s == std::string("\x02\x01\x06\x05\x04\x03\x0e\x0d\x0c\x0b\x0a\x09\x08\x07", 14));
  s.clear();
  append_be16(s, 0x0102);
  append_be32(s, 0x03040506u);
  append_be64(s, 0x0708090a0b0c0d0eull);
  CHECK(s == std::string("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e", 14));

  std::byte b[8];
  put_le64(b, 0x8877665544332211ull);
  CHECK(std::to_integer<int>(b[0]) == 0x11);
  CHECK(std::to_integer<int>(b[7]) == 0x88);
  CHECK(get_le64(b) == 0x8877665544332211ull);
  CHECK(get_be64(b) == 0x1122334455667788ull);
  CHECK(get_le32(b) == 0x44332211u);
  CHECK(get_be32(b + 4) == 0x55667788u);
  CHECK(get_le16(b + 6) == 0x8877);
  CHECK(get_be16(b + 6) == 0x7788);
}

TEST_CASE("coding: the same bytes as the hand-written loops, and back", "[util][coding]") {
  std::mt19937_64 rng(42);
  for (int n = 0; n < 2000; ++n) {
    // Values of every magnitude: all bits, and the top bytes clear.
    const std::uint64_t v = rng() >> (rng() % 64);
    const auto v32 = std::uint32_t(v);
    const auto v16 = std::uint16_t(v);
    std::string s;
    append_le64(s, v);
    REQUIRE(s == loop_le(v));
    s.clear();
    append_be64(s, v);
    REQUIRE(s == loop_be(v));
    s.clear();
    append_le32(s, v32);
    REQUIRE(s == loop_le(v32));
    s.clear();
    append_be32(s, v32);
    REQUIRE(s == loop_be(v32));
    s.clear();
    append_le16(s, v16);
    REQUIRE(s == loop_le(v16));

    // Pointers of every byte type, unaligned.
    char c[9];
    unsigned char u[9];
    std::byte y[9];
    put_le64(c + 1, v);
    put_be64(u + 1, v);
    put_le32(y + 1, v32);
    REQUIRE(std::string_view(c + 1, 8) == loop_le(v));
    REQUIRE(std::string_view(reinterpret_cast<const char*>(u + 1), 8) == loop_be(v));
    REQUIRE(std::string_view(reinterpret_cast<const char*>(y + 1), 4) == loop_le(v32));
    REQUIRE(get_le64(c + 1) == v);
    REQUIRE(get_be64(u + 1) == v);
    REQUIRE(get_le32(y + 1) == v32);
    put_be16(c, v16);
    REQUIRE(get_be16(c) == v16);
    put_be32(y, v32);
    REQUIRE(get_be32(y) == v32);
  }
}

TEST_CASE("coding: any integer type, signed ones as two's complement", "[util][coding]") {
  std::string s;
  append_le<std::int32_t>(s, -1);
  append_le<std::uint8_t>(s, 0xab);
  append_le<char>(s, 'z');
  append_be<std::int16_t>(s, -2);
  append_le<std::int64_t>(s, -3);
  CHECK(s == std::string("\xff\xff\xff\xff\xab" "z" "\xff\xfe" "\xfd\xff\xff\xff\xff\xff\xff\xff", 16));
  CHECK(get_le<std::int32_t>(s.data()) == -1);
  CHECK(get_le<std::uint8_t>(s.data() + 4) == 0xab);
  CHECK(get_le<char>(s.data() + 5) == 'z');
  CHECK(get_be<std::int16_t>(s.data() + 6) == -2);
  CHECK(get_le<std::int64_t>(s.data() + 8) == -3);
}

TEST_CASE("coding: take_* read off the front of a view and refuse a short one", "[util][coding]") {
  std::string s;
  append_le64(s, 7);
  append_be64(s, 9);
  append_le32(s, 11);
  std::string_view view = s;
  std::uint64_t a = 0, b = 0;
  std::uint32_t c = 0;
  REQUIRE(take_le64(view, &a));
  REQUIRE(take_be64(view, &b));
  REQUIRE(take_le32(view, &c));
  CHECK(a == 7);
  CHECK(b == 9);
  CHECK(c == 11);
  CHECK(view.empty());

  std::string_view short_view = std::string_view(s).substr(0, 7);
  std::uint64_t untouched = 5;
  CHECK_FALSE(take_le64(short_view, &untouched));
  CHECK(untouched == 5);
  CHECK(short_view.size() == 7);  // nothing consumed
  std::uint32_t w = 0;
  CHECK(take_le32(short_view, &w));
  CHECK(short_view.size() == 3);
  CHECK_FALSE(take_le32(short_view, &w));
}
