// PLoD's byte fill (layouts/plod.h): the kept bytes, the fill of the dropped
// ones per dtype, and the word-at-a-time path against the byte definition.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "layouts/plod.h"

using mmfs::layouts::apply_plod;

namespace {

std::vector<std::byte> bytes_of(std::initializer_list<unsigned> list) {
  std::vector<std::byte> out;
  for (unsigned b : list) out.push_back(std::byte(b));
  return out;
}

std::vector<std::byte> f64_bytes(std::initializer_list<double> values) {
  std::vector<std::byte> out(values.size() * 8);
  std::memcpy(out.data(), values.begin(), out.size());
  return out;
}

std::uint64_t bits_of(double d) {
  std::uint64_t u;
  std::memcpy(&u, &d, 8);
  return u;
}

}  // namespace

TEST_CASE("apply_plod: float64 keeps the top bytes and fills 0x7F then 0xFF", "[plod]") {
  // 1.0 = 0x3FF0000000000000: little-endian 00 00 00 00 00 00 F0 3F.
  auto one = f64_bytes({1.0});
  REQUIRE(one == bytes_of({0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xF0, 0x3F}));
  apply_plod(one, 8, true, 2);
  CHECK(one == bytes_of({0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F, 0xF0, 0x3F}));

  auto k1 = f64_bytes({1.0});
  apply_plod(k1, 8, true, 1);
  CHECK(k1 == bytes_of({0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F, 0x3F}));

  auto k7 = f64_bytes({1.0});
  apply_plod(k7, 8, true, 7);
  CHECK(k7 == bytes_of({0x7F, 0x00, 0x00, 0x00, 0x00, 0x00, 0xF0, 0x3F}));

  // Several elements, K = 3: (bits & top 3 bytes) | 0x0000007FFFFFFFFF.
  const double values[] = {1.0, -2.5, 3.141592653589793, 1e300, -0.0};
  auto many = f64_bytes({values[0], values[1], values[2], values[3], values[4]});
  apply_plod(many, 8, true, 3);
  for (std::size_t i = 0; i < 5; ++i) {
    std::uint64_t got;
    std::memcpy(&got, many.data() + 8 * i, 8);
    CHECK(got == ((bits_of(values[i]) & 0xFFFFFF0000000000ull) | 0x0000007FFFFFFFFFull));
  }
  // The filled value lies inside the interval the kept bytes define: 12
  // mantissa bits are kept, so pi is off by less than pi * 2^-12.
  double pi3;
  std::memcpy(&pi3, many.data() + 16, 8);
  CHECK(pi3 != values[2]);
  CHECK(std::abs(pi3 - values[2]) < values[2] * std::ldexp(1.0, -12));

  // K = itemsize and K = 0: unchanged.
  auto same = f64_bytes({3.141592653589793, -2.5});
  const auto before = same;
  apply_plod(same, 8, true, 8);
  CHECK(same == before);
  apply_plod(same, 8, true, 0);
  CHECK(same == before);
}

TEST_CASE("apply_plod: other dtypes fill zeros", "[plod]") {
  // int32 0x12345678 and 0x0A0B0C0D, little-endian, K = 2.
  auto i32 = bytes_of({0x78, 0x56, 0x34, 0x12, 0x0D, 0x0C, 0x0B, 0x0A});
  apply_plod(i32, 4, false, 2);
  CHECK(i32 == bytes_of({0x00, 0x00, 0x34, 0x12, 0x00, 0x00, 0x0B, 0x0A}));
  auto i32k3 = bytes_of({0x78, 0x56, 0x34, 0x12});
  apply_plod(i32k3, 4, false, 3);
  CHECK(i32k3 == bytes_of({0x00, 0x56, 0x34, 0x12}));
  // float32 is not float64: zeros too.
  auto f32 = bytes_of({0xDB, 0x0F, 0x49, 0x40});
  apply_plod(f32, 4, false, 1);
  CHECK(f32 == bytes_of({0x00, 0x00, 0x00, 0x40}));
  // int64 (not float64) with K = 2.
  auto i64 = bytes_of({1, 2, 3, 4, 5, 6, 7, 8});
  apply_plod(i64, 8, false, 2);
  CHECK(i64 == bytes_of({0, 0, 0, 0, 0, 0, 7, 8}));
  // int8: K = 1 = itemsize.
  auto i8 = bytes_of({1, 2, 3});
  apply_plod(i8, 1, false, 1);
  CHECK(i8 == bytes_of({1, 2, 3}));
  auto i16 = bytes_of({0x34, 0x12});
  apply_plod(i16, 2, false, 2);
  CHECK(i16 == bytes_of({0x34, 0x12}));

  std::vector<std::byte> empty;
  apply_plod(empty, 4, false, 2);
  CHECK(empty.empty());

  auto bad = bytes_of({1, 2, 3});
  CHECK_THROWS_AS(apply_plod(bad, 2, false, 1), std::invalid_argument);  // not whole elements
  CHECK_THROWS_AS(apply_plod(i32, 4, false, 5), std::invalid_argument);
  CHECK_THROWS_AS(apply_plod(i32, 0, false, 0), std::invalid_argument);
}

TEST_CASE("apply_plod: word-at-a-time equals the byte-by-byte definition", "[plod]") {
  // Every itemsize, every K and both fills, on bytes that are not a multiple
  // of any word boundary's pattern.
  std::vector<std::byte> src(8 * 257);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = std::byte((i * 131 + 7) & 0xFF);
  for (std::uint32_t itemsize : {1u, 2u, 4u, 8u})
    for (std::uint32_t keep = 0; keep <= itemsize; ++keep)
      for (bool f64 : {false, true}) {
        if (f64 && itemsize != 8) continue;
        std::vector<std::byte> got(src.begin(), src.begin() + itemsize * 257);
        apply_plod(got, itemsize, f64, keep);
        for (std::size_t e = 0; e < 257; ++e)
          for (std::uint32_t b = 0; b < itemsize; ++b) {
            std::byte want = src[e * itemsize + b];
            std::uint32_t dropped = itemsize - keep;
            if (keep != 0 && b < dropped)
              want = f64 ? (b == dropped - 1 ? std::byte{0x7F} : std::byte{0xFF}) : std::byte{0};
            INFO("itemsize " << itemsize << " keep " << keep << " f64 " << f64 << " element " << e << " byte " << b);
            REQUIRE(got[e * itemsize + b] == want);
          }
      }
}
