// The MultiMap analytic cost model (layouts/cost_model.h): Eq. 7-15 of
// CMU-PDL-05-102 Appendix A, checked against hand computations, a brute-force
// count of basic-cube crossings, and the 3-D rows of the paper's Table 3.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "layouts/cost_model.h"

using mmfs::layouts::CostParams;
using mmfs::layouts::expected_jumps;
using mmfs::layouts::expected_jumps_paper;
using mmfs::layouts::multimap_cost_ms;
using mmfs::layouts::multimap_jump_tracks;
using mmfs::layouts::naive_cost_ms;
using mmfs::layouts::naive_jump_tracks;
using mmfs::layouts::TrackRounding;
using V = std::vector<double>;

namespace {

// Average over every start s in [0, S - q] of the number of multiples of K in
// (s, s + q): the cube boundaries crossed between consecutive cells s..s+q-1.
double brute_jumps(std::uint64_t q, std::uint64_t K, std::uint64_t S) {
  std::uint64_t total = 0;
  for (std::uint64_t s = 0; s + q <= S; ++s)
    for (std::uint64_t b = s + 1; b < s + q; ++b) total += (b % K == 0);
  return static_cast<double>(total) / static_cast<double>(S - q + 1);
}

// Seek(d) for the Maxtor Atlas 10k III as the paper describes it, d in tracks.
// The experiment disks have R = 4 surfaces (§5.1), so a cylinder is 4 tracks.
//  * d = 0: no seek.
//  * up to C = 17 cylinders (68 tracks): settle time, 1.0 ms (§3.2: constant
//    for distances up to C, "slightly less than 1 ms"; Fig. 6: 0.8-1.2 ms).
//  * beyond C, piecewise linear in sqrt(cylinders) (Fig. 1: square-root region)
//    through two points the paper gives:
//      24.5 cylinders (98 tracks, the 67081-LBN stride of Naive Dim_2): 1.3 ms
//        (§5.3: "a short seek (1.3 ms for both disks)");
//      10334 cylinders (a third of the 31002): 5.3 ms, the average seek
//        (A.3: C_init = 8.3 ms = RotLat 3 ms + the average seek at a third of
//        the total cylinder distance);
//    and continued with the last slope past 10334 cylinders.
// Values used by Table 3: Seek(1 track) = 1.0, Seek(87..98) = 1.19-1.30,
// Seek(12517) = 3.41, Seek(37551) = 5.10 ms.
double atlas_seek_ms(double tracks) {
  if (tracks <= 0) return 0.0;
  const double cyl = tracks / 4.0;
  if (cyl <= 17.0) return 1.0;
  const double x = std::sqrt(cyl);
  const double x17 = std::sqrt(17.0), x24 = std::sqrt(24.5), x10k = std::sqrt(10334.0);
  if (cyl <= 24.5) return 1.0 + (1.3 - 1.0) * (x - x17) / (x24 - x17);
  return 1.3 + (5.3 - 1.3) * (x - x24) / (x10k - x24);
}

// The A.3 parameters: sigma 0.015 ms, alpha 1.5 ms, RotLat 3 ms, C_init 8.3 ms, T 686.
CostParams atlas_params() {
  CostParams p;
  p.seek_ms = atlas_seek_ms;
  return p;
}

// Table 3, 3-D experiments: per disk a 259^3 chunk; beams along Dim_0..2 in
// ms per cell (the beam's total / 259), 1%/2%/3% cubes (edges 10/20/30 cells)
// in ms per query.
const V kS3 = {259, 259, 259};
// MultiMap's basic cube. §5.3 uses D = 128, so Eq. 3 bounds K_1 <= 128; K_0 =
// S_0 = 259 <= T and K_2 = S_2 = 259 (Eq. 1, 2). The paper does not print the
// cube it used. K_1 = 259 (no Dim_1 cube crossings at all) comes 1-3 % closer
// to Table 3 but breaks Eq. 3.
const V kK3 = {259, 128, 259};

struct Row {
  const char* name;
  V q;
  double divisor;  // 259 for beams (per cell), 1 for cubes (per query)
  double paper_naive, paper_multimap;  // Table 3 "Calculated"
};
const std::vector<Row> kTable3 = {
    {"beam Dim_0", {259, 1, 1}, 259, 0.03, 0.03}, {"beam Dim_1", {1, 259, 1}, 259, 2.7, 1.5},
    {"beam Dim_2", {1, 1, 259}, 259, 4.3, 1.5},   {"1% cube", {10, 10, 10}, 1, 291, 168},
    {"2% cube", {20, 20, 20}, 1, 1156, 723},      {"3% cube", {30, 30, 30}, 1, 2632, 1758},
};

double rel_err(double model, double paper) { return std::abs(model - paper) / paper; }

}  // namespace

TEST_CASE("expected_jumps is the exact mean number of cube crossings", "[cost]") {
  // Hand-counted cases.
  CHECK(expected_jumps(1, 4, 13) == 0.0);  // one cell never crosses
  CHECK(expected_jumps(3, 5, 12) == Approx(0.4));  // S not a multiple of K: starts 3, 4, 8, 9 of 0..9
  CHECK(expected_jumps(10, 128, 259) == Approx(12.0 / 250));  // starts 119..127 and 247..249 cross once
  CHECK(expected_jumps(4, 4, 8) == Approx(0.6));              // q = K: starts 1, 2, 3 of 0..4 cross once
  CHECK(expected_jumps(8, 4, 16) == Approx(15.0 / 9));        // q = 2K: 1 jump from s = 0, 4, 8, else 2
  CHECK(expected_jumps(6, 4, 12) == Approx(8.0 / 7));         // q > K: only s = 3 crosses twice
  CHECK(expected_jumps(12, 4, 13) == Approx(2.5));            // q = 3K, S = 3K + 1: 2 then 3
  CHECK(expected_jumps(259, 128, 259) == 2.0);                // one start, crossing 128 and 256
  CHECK(expected_jumps(5, 1, 9) == 4.0);                      // K = 1: every step crosses
  CHECK(expected_jumps(5, 100, 9) == 0.0);                    // K > S: one partial cube

  // Everything small, against brute force.
  for (std::uint64_t K = 1; K <= 10; ++K)
    for (std::uint64_t S = 1; S <= 40; ++S)
      for (std::uint64_t q = 1; q <= S; ++q) {
        INFO("q=" << q << " K=" << K << " S=" << S);
        REQUIRE(expected_jumps(q, K, S) == Approx(brute_jumps(q, K, S)).margin(1e-12));
      }
}

TEST_CASE("Eq. 13-15 as printed agree with brute force only for q < K with K | S", "[cost]") {
  for (std::uint64_t K = 2; K <= 10; ++K)
    for (std::uint64_t S = K; S <= 60; S += K)
      for (std::uint64_t q = 1; q < K && q <= S; ++q) {
        INFO("q=" << q << " K=" << K << " S=" << S);
        REQUIRE(expected_jumps_paper(q, K, S) == Approx(brute_jumps(q, K, S)).margin(1e-12));
      }
  // Outside that region the printed formula is wrong:
  //  * Eq. 14's last term floor((S mod K) / Loc_K) counts phantom starts in the
  //    partial last cube: a single cell is charged crossings.
  CHECK(brute_jumps(1, 2, 3) == 0.0);
  CHECK(expected_jumps_paper(1, 2, 3) == Approx(1.0 / 3));
  //  * q = K with K | S: Eq. 14's floor(S/K) - floor(q/K) drops the last cube's aligned start.
  CHECK(brute_jumps(4, 4, 8) == Approx(0.6));
  CHECK(expected_jumps_paper(4, 4, 8) == Approx(0.8));
  //  * q > K: Eq. 15's q mod (K + 1) is not the offset that matters ((q - 1) mod K is).
  CHECK(brute_jumps(6, 4, 12) == Approx(8.0 / 7));
  CHECK(expected_jumps_paper(6, 4, 12) == Approx(6.0 / 7));
  CHECK(brute_jumps(8, 4, 16) == Approx(15.0 / 9));
  CHECK(expected_jumps_paper(8, 4, 16) == Approx(14.0 / 9));
  //  * Table 3's MultiMap Dim_1 beam with K_1 = 128: 3 expected jumps instead of 2.
  CHECK(expected_jumps_paper(259, 128, 259) == Approx(3.0));
  // It does agree on the query sizes of the Table 3 cubes (q < K_1 = 128).
  for (double q : {10.0, 20.0, 30.0})
    CHECK(expected_jumps_paper(q, 128, 259) == Approx(expected_jumps(q, 128, 259)));
}

TEST_CASE("jump distances in tracks, Eq. 9 and Eq. 12", "[cost]") {
  CostParams p = atlas_params();
  // Naive Dim_1 stride: S_0 - q_0 + 1 LBNs; Dim_2 stride: S_0 S_1 - q_0 + 1 - (q_1 - 1) S_0.
  CHECK(naive_jump_tracks(p, V{1, 259, 1}, kS3, 1) == 1);             // ceil(259 / 686)
  CHECK(naive_jump_tracks(p, V{1, 1, 259}, kS3, 2) == 98);            // ceil(67081 / 686)
  CHECK(naive_jump_tracks(p, V{10, 10, 10}, kS3, 2) == 95);           // ceil(64741 / 686)
  CHECK(naive_jump_tracks(p, V{30, 30, 30}, kS3, 2) == 87);           // ceil(59541 / 686)
  p.distance_rounding = TrackRounding::kFloor;
  CHECK(naive_jump_tracks(p, V{1, 259, 1}, kS3, 1) == 0);
  CHECK(naive_jump_tracks(p, V{1, 1, 259}, kS3, 2) == 97);
  p.distance_rounding = TrackRounding::kNone;
  CHECK(naive_jump_tracks(p, V{1, 259, 1}, kS3, 1) == Approx(259.0 / 686));
  // MultiMap: ceil(prod K / T) tracks per cube, times the cubes laid out in between.
  p.distance_rounding = TrackRounding::kCeil;
  CHECK(multimap_jump_tracks(p, kS3, kK3, 0) == 12517);  // ceil(259 * 128 * 259 / 686)
  CHECK(multimap_jump_tracks(p, kS3, kK3, 1) == 12517);  // x ceil(259 / 259)
  CHECK(multimap_jump_tracks(p, kS3, kK3, 2) == 37551);  // x ceil(259 / 128) = 3
  CHECK_THROWS_AS(naive_jump_tracks(p, V{1, 1, 1}, kS3, 0), std::invalid_argument);
  CHECK_THROWS_AS(multimap_jump_tracks(p, kS3, kK3, 3), std::invalid_argument);
}

TEST_CASE("Naive cost, Eq. 7-9, hand-computed", "[cost]") {
  CostParams p;  // sigma 0.015, RotLat 3, C_init 8.3
  p.seek_ms = [](double d) { return d / 10; };
  p.track_sectors = 8;
  // S = 10^3, q = (2, 3, 4), T = 8:
  //   d_1 = ceil((10 - 2 + 1) / 8) = 2, d_2 = ceil((100 - 2 + 1 - 2 * 10) / 8) = 10;
  //   Dim_1 jumps (q_1 - 1) q_2 = 8, Dim_2 jumps q_2 - 1 = 3.
  CHECK(naive_cost_ms(p, V{2, 3, 4}, V{10, 10, 10}) ==
        Approx(8.3 + (0.2 + 3) * 8 + (1.0 + 3) * 3 + 0.015 * 24));
  // One dimension: C_init + transfer.
  CHECK(naive_cost_ms(p, V{7}, V{9}) == Approx(8.3 + 0.015 * 7));
  // A single cell in 3-D: no jumps.
  CHECK(naive_cost_ms(p, V{1, 1, 1}, V{10, 10, 10}) == Approx(8.3 + 0.015));
}

TEST_CASE("MultiMap cost, Eq. 10-12, hand-computed", "[cost]") {
  CostParams p;  // sigma 0.015, alpha 1.5, RotLat 3, C_init 8.3
  p.seek_ms = [](double d) { return d / 10; };
  p.track_sectors = 8;
  // S = (16, 12), K = (8, 4), q = (8, 6), T = 8:
  //   d_0 = ceil(32 / 8) = 4, d_1 = 4 * ceil(16 / 8) = 8;
  //   N_jmp(8, 8, 16) = 7/9, N_jmp(6, 4, 12) = 8/7.
  const double n0 = 7.0 / 9, n1 = 8.0 / 7;
  CHECK(expected_jumps(8, 8, 16) == Approx(n0));
  CHECK(expected_jumps(6, 4, 12) == Approx(n1));
  const double printed = 8.3 + (0.4 + 3) * n0 + (1.5 * (6 - n1) + (0.8 + 3) * n1) + 0.015 * 48;
  CHECK(multimap_cost_ms(p, V{8, 6}, V{16, 12}, V{8, 4}) == Approx(printed));
  p.alpha_per_transition = true;
  CHECK(multimap_cost_ms(p, V{8, 6}, V{16, 12}, V{8, 4}) == Approx(printed - 1.5));

  // K = S: no cube crossings, so the cost cannot depend on Seek.
  CostParams q = atlas_params();
  q.seek_ms = [](double) { return 1e9; };
  // As printed, alpha per cell of every Dim_i line, i >= 1: q_1 q_2 + q_2 steps.
  CHECK(multimap_cost_ms(q, V{5, 6, 7}, kS3, kS3) == Approx(8.3 + 1.5 * (6 * 7 + 7) + 0.015 * 210));
  q.alpha_per_transition = true;  // (q_1 - 1) q_2 + (q_2 - 1) steps
  CHECK(multimap_cost_ms(q, V{5, 6, 7}, kS3, kS3) == Approx(8.3 + 1.5 * (5 * 7 + 6) + 0.015 * 210));
}

TEST_CASE("cost model rejects malformed input", "[cost]") {
  CostParams p = atlas_params();
  CHECK_THROWS_AS(naive_cost_ms(p, V{1, 2}, V{3}), std::invalid_argument);           // rank mismatch
  CHECK_THROWS_AS(naive_cost_ms(p, V{}, V{}), std::invalid_argument);                // no dimensions
  CHECK_THROWS_AS(naive_cost_ms(p, V{4}, V{3}), std::invalid_argument);              // q > S
  CHECK_THROWS_AS(naive_cost_ms(p, V{0}, V{3}), std::invalid_argument);              // q = 0
  CHECK_THROWS_AS(naive_cost_ms(p, V{1.5}, V{3}), std::invalid_argument);            // not a cell count
  CHECK_THROWS_AS(multimap_cost_ms(p, V{1, 1}, V{3, 3}, V{3}), std::invalid_argument);
  CHECK_THROWS_AS(multimap_cost_ms(p, V{1, 1}, V{3, 3}, V{3, 0}), std::invalid_argument);
  CHECK_THROWS_AS(expected_jumps(5, 2, 4), std::invalid_argument);
  CHECK_THROWS_AS(expected_jumps_paper(5, 2, 4), std::invalid_argument);
  CHECK_THROWS_AS(expected_jumps(2, 0, 4), std::invalid_argument);
  CostParams no_seek;
  CHECK_THROWS_AS(naive_cost_ms(no_seek, V{1}, V{3}), std::invalid_argument);
  p.track_sectors = 0;
  CHECK_THROWS_AS(naive_cost_ms(p, V{1}, V{3}), std::invalid_argument);
}

// Table 3 (3-D rows), with the paper's A.3 parameters, atlas_seek_ms and
// K = (259, 128, 259). "model" columns are what the equations give; they are
// pinned so that a change to the model shows up here. Model vs. Calculated:
//
//                    Naive                        MultiMap
//   row         paper  printed   floor       paper  printed  per-transition
//   beam Dim_0  0.03   0.0470    0.0470      0.03   0.0586   0.0470
//   beam Dim_1  2.7    4.032     3.035       1.5    1.591    1.579
//   beam Dim_2  4.3    4.330     4.321       1.5    3.047    1.541
//   1% cube     291    421.8     331.7       168    190.7    174.2
//   2% cube     1156   1728.8    1348.6      723    767.3    735.8
//   3% cube     2632   4015.0    3144.7      1758   1828.8   1782.3
//
// "printed" is the default CostParams (ceiling in Eq. 9/12, alpha (q_i - N)
// in Eq. 11). "floor" is distance_rounding = kFloor; "per-transition" is
// alpha_per_transition = true (the rounding does not matter for MultiMap
// here: its jumps are thousands of tracks).
//
// Gaps that no Seek(d) can close:
//  * Dim_0 beams: C_init / 259 alone is 0.032 ms per cell, so the total is
//    sigma + C_init / 259 = 0.047 ms per cell in both layouts, not 0.03.
//  * Naive Dim_1 beam and cubes: each Dim_1 jump costs Seek + RotLat >= 3 ms,
//    so even with Seek = 0 the model gives 3.04 / 320 / 1325 / 3110 (see the
//    next test) above the paper's 2.7 / 291 / 1156 / 2632. The paper's values
//    behave as if a Dim_1 stride of g < T LBNs cost about (g / T) (one
//    revolution + Seek(1)) = (g / 686) * 7 ms, i.e. a rotational delay
//    proportional to the stride rather than RotLat; that reproduces the Naive
//    column within 2 %, but it is not what Eq. 8 prints.
//  * MultiMap beam along Dim_2 as printed: Eq. 11 charges alpha for the single
//    cell of every Dim_1 line, i.e. alpha twice per cell (3.05 vs 1.5).
TEST_CASE("Table 3 (3-D), equations as printed", "[cost]") {
  const CostParams p = atlas_params();
  const std::vector<double> naive = {0.04705, 4.0316, 4.3304, 421.751, 1728.758, 4014.989};
  const std::vector<double> multimap = {0.05863, 1.59075, 3.04705, 190.656, 767.300, 1828.790};
  for (std::size_t r = 0; r < kTable3.size(); ++r) {
    const Row& row = kTable3[r];
    INFO(row.name);
    const double n = naive_cost_ms(p, row.q, kS3) / row.divisor;
    const double m = multimap_cost_ms(p, row.q, kS3, kK3) / row.divisor;
    CHECK(n == Approx(naive[r]).epsilon(1e-4));
    CHECK(m == Approx(multimap[r]).epsilon(1e-4));
  }
  // Within 25 % of Table 3: Naive Dim_2; MultiMap Dim_1 and the three cubes.
  CHECK(rel_err(naive_cost_ms(p, kTable3[2].q, kS3) / 259, 4.3) < 0.01);
  CHECK(rel_err(multimap_cost_ms(p, kTable3[1].q, kS3, kK3) / 259, 1.5) < 0.07);
  for (std::size_t r = 3; r < 6; ++r)
    CHECK(rel_err(multimap_cost_ms(p, kTable3[r].q, kS3, kK3), kTable3[r].paper_multimap) < 0.14);
  // Not within 25 %: the Dim_0 beams, Naive Dim_1 and cubes (+45..53 %), MultiMap Dim_2 (+103 %).
  for (std::size_t r : {0u, 1u, 3u, 4u, 5u}) {
    const Row& row = kTable3[r];
    INFO(row.name);
    CHECK(rel_err(naive_cost_ms(p, row.q, kS3) / row.divisor, row.paper_naive) > 0.25);
  }
  CHECK(rel_err(multimap_cost_ms(p, kTable3[2].q, kS3, kK3) / 259, 1.5) > 1.0);
}

TEST_CASE("Table 3 (3-D), floor distances and alpha per transition", "[cost]") {
  CostParams p = atlas_params();
  p.distance_rounding = TrackRounding::kFloor;
  p.alpha_per_transition = true;
  const std::vector<double> naive = {0.04705, 3.03546, 4.32129, 331.667, 1348.577, 3144.706};
  const std::vector<double> multimap = {0.04705, 1.57916, 1.54125, 174.156, 735.800, 1782.290};
  for (std::size_t r = 0; r < kTable3.size(); ++r) {
    const Row& row = kTable3[r];
    INFO(row.name);
    const double n = naive_cost_ms(p, row.q, kS3) / row.divisor;
    const double m = multimap_cost_ms(p, row.q, kS3, kK3) / row.divisor;
    CHECK(n == Approx(naive[r]).epsilon(1e-4));
    CHECK(m == Approx(multimap[r]).epsilon(1e-4));
    if (r == 0) {
      // sigma + C_init / 259 in both layouts; the paper's 0.03 is below C_init / 259.
      CHECK(n == Approx(0.015 + 8.3 / 259));
      CHECK(m == Approx(0.015 + 8.3 / 259));
      continue;
    }
    CHECK(rel_err(n, row.paper_naive) <= 0.25);   // +0.5 .. +19.5 %
    CHECK(rel_err(m, row.paper_multimap) <= 0.06);  // +1.4 .. +5.3 %
  }
}

TEST_CASE("Table 3's Naive Dim_1 values are below what Eq. 7-9 allow with RotLat = 3 ms", "[cost]") {
  CostParams p = atlas_params();
  p.seek_ms = [](double) { return 0.0; };  // the cheapest possible seek profile
  for (std::size_t r : {1u, 3u, 4u, 5u}) {
    const Row& row = kTable3[r];
    INFO(row.name);
    CHECK(naive_cost_ms(p, row.q, kS3) / row.divisor > row.paper_naive * 1.1);
  }
  CHECK(naive_cost_ms(p, kTable3[1].q, kS3) / 259 == Approx((8.3 + 0.015 * 259 + 3.0 * 258) / 259));
}
