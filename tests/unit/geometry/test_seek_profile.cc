// The three-region seek profile of MultiMap Fig. 1.
#include <catch2/catch.hpp>
#include <cmath>

#include "geometry/seek_profile.h"
#include "geometry/types.h"

using namespace mmfs::geom;

TEST_CASE("seek profile: constant to C, sqrt to L, linear to the full stroke") {
  SeekParams p;
  p.settle_ms = 1.1;
  p.settle_cylinders = 17;
  p.sqrt_a_ms = 0.9;
  p.sqrt_b_ms = 0.08;
  p.linear_cylinders = 400;
  p.full_stroke_ms = 11.0;
  SeekProfile s(p, 31001);
  CHECK(s.seek_ms(0) == 0.0);
  for (std::uint64_t d = 1; d <= 17; ++d) CHECK(s.seek_ms(d) == 1.1);
  CHECK(s.seek_ms(100) == Approx(0.9 + 0.08 * 10.0));
  CHECK(s.seek_ms(400) == Approx(0.9 + 0.08 * 20.0));
  CHECK(s.seek_ms(31001) == Approx(11.0));
  // Linear between L and the full stroke.
  double mid = s.seek_ms((400 + 31001) / 2);
  CHECK(mid == Approx((s.seek_ms(400) + 11.0) / 2).epsilon(1e-3));
  // Monotone over the whole stroke.
  double prev = 0;
  for (std::uint64_t d = 0; d <= 31001; d += 7) {
    CHECK(s.seek_ms(d) >= prev);
    prev = s.seek_ms(d);
  }
}

TEST_CASE("seek profile: max_distance_within inverts seek_ms") {
  SeekParams p;
  p.settle_ms = 1.0;
  p.settle_cylinders = 10;
  SeekProfile s(p, 5000);  // default sqrt region continuous at C
  CHECK(s.max_distance_within(0.5) == 0);
  CHECK(s.max_distance_within(1.0) == 10);
  for (double budget : {1.2, 1.5, 2.0, 5.0}) {
    std::uint64_t d = s.max_distance_within(budget);
    CHECK(s.seek_ms(d) <= budget);
    if (d < 5000) CHECK(s.seek_ms(d + 1) > budget);
  }
}

TEST_CASE("seek profile: bad parameters name the field") {
  SeekParams p;
  p.settle_cylinders = 0;
  CHECK_THROWS_WITH(SeekProfile(p, 100), Catch::Contains("settle_cylinders"));
  SeekParams q;
  q.settle_cylinders = 5;
  q.sqrt_a_ms = 0.5;
  q.sqrt_b_ms = 0.1;
  q.linear_cylinders = 50;
  q.full_stroke_ms = 0.1;  // shorter than the seek at L
  CHECK_THROWS_WITH(SeekProfile(q, 100), Catch::Contains("full_stroke_ms"));
}
