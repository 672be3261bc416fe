// util/align.h (rounding to multiples) and util/stats.h (median).
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "util/align.h"
#include "util/stats.h"

using namespace mmfs::util;

namespace {

static_assert(div_up(0u, 4u) == 0 && div_up(1u, 4u) == 1 && div_up(4u, 4u) == 1 && div_up(5u, 4u) == 2);
static_assert(align_up(std::uint64_t(5), 4096) == 4096 && align_up(std::uint64_t(8192), 4096) == 8192);
static_assert(align_down(std::uint64_t(8191), 4096) == 4096 && align_down(std::uint64_t(4095), 4096) == 0);
static_assert(is_aligned(std::uint64_t(8192), 512) && !is_aligned(std::uint64_t(8193), 512));
// The type is the common one of the arguments: an unsigned value and a literal mix.
static_assert(std::is_same_v<decltype(div_up(std::uint32_t(1), std::uint64_t(2))), std::uint64_t>);
static_assert(std::is_same_v<decltype(align_up(std::uint32_t(1), 8)), std::uint32_t>);
static_assert(std::is_same_v<decltype(align_up(std::size_t(1), 8u)), std::size_t>);
// Narrow types compute without promotion to int.
static_assert(align_up(std::uint16_t(65000), std::uint16_t(512)) == std::uint16_t(65024));
static_assert(div_up(std::uint16_t(65535), std::uint16_t(2)) == 32768);

}  // namespace

TEST_CASE("align: div_up and align_up as the helpers they replace, without their overflow", "[util][align]") {
  std::mt19937_64 rng(7);
  for (int n = 0; n < 5000; ++n) {
    const std::uint64_t v = rng() >> (rng() % 63 + 1);  // below 2^63 (shifts of 1..63): the old form does not overflow
    const std::uint64_t a = (rng() >> (rng() % 64)) | 1;
    if (v > std::numeric_limits<std::uint64_t>::max() - a) continue;
    REQUIRE(div_up(v, a) == (v + a - 1) / a);
    if (a <= (std::uint64_t(1) << 32) && v < (std::uint64_t(1) << 62)) {
      REQUIRE(align_up(v, a) == (v + a - 1) / a * a);
      REQUIRE(checked_align_up(v, a) == align_up(v, a));
    }
    REQUIRE(align_down(v, a) == v / a * a);
    REQUIRE(is_aligned(v, a) == (v % a == 0));
    REQUIRE(is_aligned(align_up(v % (std::uint64_t(1) << 40), a % 65536 + 1), a % 65536 + 1));
  }
  // Where a + b - 1 would wrap: the true quotient.
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  CHECK(div_up(kMax, 2u) == (std::uint64_t(1) << 63));
  CHECK(div_up(kMax, kMax) == 1);
  CHECK(div_up(kMax - 1, kMax) == 1);
  CHECK(align_down(kMax, 4096) == kMax - 4095);
}

TEST_CASE("align: checked_align_up refuses a multiple that does not fit", "[util][align]") {
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  CHECK(checked_align_up(kMax - 4095, 4096) == kMax - 4095);
  CHECK_FALSE(checked_align_up(kMax - 4094, 4096).has_value());
  CHECK_FALSE(checked_align_up(kMax, 2u).has_value());
  CHECK(checked_align_up(kMax, 3u) == kMax);  // 2^64 - 1 is a multiple of 3
  CHECK_FALSE(checked_align_up(kMax - 2, 4u).has_value());
  CHECK(checked_align_up(std::uint32_t(0xfffffe00u), 512) == std::uint32_t(0xfffffe00u));
  CHECK_FALSE(checked_align_up(std::uint32_t(0xfffffe01u), 512).has_value());
  CHECK(checked_align_up(std::uint64_t(0xfffffe01u), 512) == std::uint64_t(0x100000000ull));
  CHECK(checked_align_up(std::uint64_t(0), 4096) == std::uint64_t(0));
}

TEST_CASE("stats: median", "[util][stats]") {
  CHECK(median({}) == 0.0);
  CHECK(median({3.0}) == 3.0);
  CHECK(median({5.0, 1.0, 3.0}) == 3.0);
  CHECK(median({4.0, 1.0, 3.0, 2.0}) == 2.5);
  CHECK(median({1.0, 1.0, 1e300, -1e300}) == 1.0);
  std::vector<double> v = {9.0, 2.0, 7.0};
  CHECK(median(v) == 7.0);
  CHECK(v == std::vector<double>{9.0, 2.0, 7.0});  // takes a copy: the caller's order stays
}
