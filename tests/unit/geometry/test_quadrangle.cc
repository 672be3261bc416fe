// Atropos §3.2 quadrangle parameters (Eq. 1-5, Table 2).
#include <catch2/catch.hpp>

#include "geometry/load.h"
#include "geometry/quadrangle.h"

using namespace mmfs::geom;

TEST_CASE("quadrangle: Atropos Table 2, Atlas 10K III row") {
  QuadrangleParams q = compute_quadrangle(686, 139, 1);
  CHECK(q == QuadrangleParams{.N = 686, .H = 139, .b = 26, .d = 5, .w = 26, .R = 10, .Dmax = 5});
  // "If H = 136, Dmax = 6 and b = 1" (§5.2.4).
  QuadrangleParams q136 = compute_quadrangle(686, 136, 1);
  CHECK(q136.Dmax == 6);
  CHECK(q136.b == 1);
}

TEST_CASE("quadrangle: the profiles' outer zones give Table 2's Dmax and b") {
  auto atlas = load_geometry("atlas10k3");
  CHECK(atlas->quadrangle(1) == compute_quadrangle(686, 139, 1));
  auto cheetah = load_geometry("cheetah36es");
  QuadrangleParams c = cheetah->quadrangle(1);
  CHECK(c.N == 736);
  CHECK(c.Dmax == 6);
  CHECK(c.b == 7);
}

TEST_CASE("quadrangle: d*b sectors plus d-1 head switches fit one revolution (Eq. 1)") {
  for (std::uint32_t N : {21u, 396u, 574u, 686u, 736u}) {
    for (std::uint32_t H : {0u, 3u, 50u, 139u}) {
      if (H >= N) continue;
      for (std::uint32_t B : {1u, 2u, 8u, 16u, 64u}) {
        if (B > N) continue;
        QuadrangleParams q = compute_quadrangle(N, H, B);
        INFO("N=" << N << " H=" << H << " B=" << B);
        REQUIRE(q.d >= 1);
        CHECK(q.b >= B);  // Eq. 3 with d = Dmax never shrinks the block
        CHECK(q.d * q.b + (q.d - 1) * H <= N);
        CHECK(q.w * q.b + q.R == N);
        CHECK(q.R < q.b);
        // One more track would break the one-revolution bound.
        CHECK((q.d + 1) * B + q.d * H > N);
      }
    }
  }
}

TEST_CASE("quadrangle: impossible block sizes are rejected") {
  CHECK_THROWS_AS(compute_quadrangle(686, 139, 0), GeometryError);
  CHECK_THROWS_AS(compute_quadrangle(686, 139, 687), GeometryError);
  CHECK_THROWS_AS(load_geometry("mems-g2")->quadrangle(1), GeometryError);
}
