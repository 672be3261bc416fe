// The MultiMap analytic cost model (see cost_model.h).
//
// Readings of the printed equations (CMU-PDL-05-102, Appendix A):
//
// Eq. 9 and Eq. 12. The text we work from is a LaTeX extraction in which the
//   bracket around "(LBN distance) / T" is a plain \left[ ... \right], while
//   Eq. 13 and Eq. 6 come out as \lceil and \lfloor, so the extraction does not
//   say which it is. We default to the ceiling: a jump to a non-contiguous LBN
//   is charged a seek of at least one track, matching "d_j is the distance the
//   disk heads move ... expressed as the number of tracks" with Seek(d) >= the
//   settle time for d >= 1. CostParams::distance_rounding can select floor
//   (a stride shorter than a track is no seek, the paper's "two consecutive
//   blocks are often on the same track" for Naive Dim_1) or no rounding. The
//   inner bracket of Eq. 12, [S_j / K_j], is the number of basic cubes along
//   Dim_j; it is always a ceiling (a partial last cube is still a cube that is
//   laid out between the two cubes of a jump).
//
// Eq. 8 and Eq. 11 are implemented term by term as printed, including two
//   features that a physical derivation would write differently:
//   * Eq. 11's Dim_0 term (Seek(d_0) + RotLat) N_jmp(q_0, K_0, S_0) is charged
//     once, not once per Dim_0 row of the query (no prod_{j>=1} q_j factor).
//   * Eq. 11 charges alpha (q_i - N_jmp) adjacent-block steps for q_i cells,
//     i.e. one more step than the q_i - 1 transitions between them (Eq. 8, by
//     contrast, charges q_i - 1 jumps per Dim_i line). So every dimension with
//     q_i = 1 still costs alpha per line: a beam along Dim_2 of a 3-D dataset
//     pays alpha twice per cell. CostParams::alpha_per_transition = true uses
//     q_i - 1 - N_jmp instead; it is off by default (printed form).
//
// Eq. 13-15. N_jmp is meant to be the expected number of basic-cube
//   boundaries crossed by q consecutive cells whose start s is uniform over
//   [0, S - q]: the number of multiples of K in (s, s + q). Counting exactly:
//   the crossings are ceil(q/K) - 1 when the offset s mod K is below
//     Loc_K = K - ((q - 1) mod K)
//   and ceil(q/K) otherwise, and the number of such "good" starts among the
//   n = S - q + 1 starts is
//     Loc_S = floor(n / K) Loc_K + min(Loc_K, n mod K),
//   so N_jmp = ceil(q/K) - Loc_S / n. The printed Eq. 15,
//   Loc_K = K - (q mod (K + 1)) + 1, equals this Loc_K only for q <= K, and the
//   printed Eq. 14, Loc_S = Loc_K (floor(S/K) - floor(q/K)) + floor((S mod K) /
//   Loc_K), is guaranteed to equal this Loc_S only when K divides S and q < K
//   (elsewhere it agrees only by coincidence). Otherwise the printed formulas
//   are off: e.g. q = 1, K = 2, S = 3 gives 1/3 instead of 0
//   (a single cell never crosses a boundary); q = K = 4, S = 8 gives 0.8
//   instead of 0.6; q = S = 259, K = 128 gives 3 instead of 2. The cost
//   functions use the exact count (expected_jumps); the printed one is kept as
//   expected_jumps_paper.
#include "layouts/cost_model.h"
#include "util/align.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace mmfs::layouts {

namespace {

constexpr double kMaxExactInt = 9007199254740992.0;  // 2^53

// A cell count: a finite integer in [1, 2^53].
std::uint64_t as_count(double v, const char* what) {
  if (!(v >= 1.0) || v > kMaxExactInt || std::floor(v) != v)
    throw std::invalid_argument(fmt::format("{} must be a positive integer cell count, got {}", what, v));
  return static_cast<std::uint64_t>(v);
}

void check_params(const CostParams& p) {
  if (!p.seek_ms) throw std::invalid_argument("CostParams::seek_ms is not set");
  if (!(p.track_sectors > 0.0) || !std::isfinite(p.track_sectors))
    throw std::invalid_argument(fmt::format("track length T must be positive, got {}", p.track_sectors));
}

void check_query(std::span<const double> q, std::span<const double> S) {
  if (q.empty()) throw std::invalid_argument("query has no dimensions");
  if (q.size() != S.size())
    throw std::invalid_argument(fmt::format("query has {} dimensions, dataset has {}", q.size(), S.size()));
  for (std::size_t i = 0; i < q.size(); ++i) {
    const std::string qi = fmt::format("q[{}]", i), si = fmt::format("S[{}]", i);
    if (as_count(q[i], qi.c_str()) > as_count(S[i], si.c_str()))
      throw std::invalid_argument(fmt::format("q[{}] = {} exceeds S[{}] = {}", i, q[i], i, S[i]));
  }
}

void check_cube(std::span<const double> S, std::span<const double> K) {
  if (K.size() != S.size())
    throw std::invalid_argument(
        fmt::format("basic cube has {} dimensions, dataset has {}", K.size(), S.size()));
  for (std::size_t i = 0; i < K.size(); ++i) as_count(K[i], fmt::format("K[{}]", i).c_str());
}

double round_tracks(const CostParams& p, double lbn_distance) {
  const double x = lbn_distance / p.track_sectors;
  switch (p.distance_rounding) {
    case TrackRounding::kCeil:
      return std::ceil(x);
    case TrackRounding::kFloor:
      return std::floor(x);
    case TrackRounding::kNone:
      return x;
  }
  return x;
}

// prod_{j=from}^{n-1} q_j
double product_from(std::span<const double> v, std::size_t from) {
  double r = 1.0;
  for (std::size_t j = from; j < v.size(); ++j) r *= v[j];
  return r;
}

double naive_distance(const CostParams& p, std::span<const double> q, std::span<const double> S,
                      std::size_t i) {
  // Eq. 9: [ (prod_{j<i} S_j - q_0 + 1 - sum_{j=1}^{i-1} (q_j - 1) prod_{k<j} S_k) / T ]
  double stride = 1.0;  // prod_{j<i} S_j
  for (std::size_t j = 0; j < i; ++j) stride *= S[j];
  double lbn = stride - q[0] + 1.0;
  double lower = S[0];  // prod_{k<j} S_k for j = 1
  for (std::size_t j = 1; j < i; ++j) {
    lbn -= (q[j] - 1.0) * lower;
    lower *= S[j];
  }
  return round_tracks(p, lbn);
}

double multimap_distance(const CostParams& p, std::span<const double> S, std::span<const double> K,
                         std::size_t i) {
  // Eq. 12: [ prod_i K_i / T ] * prod_{j<i} ceil(S_j / K_j)
  double d = round_tracks(p, product_from(K, 0));
  for (std::size_t j = 0; j < i; ++j) d *= std::ceil(S[j] / K[j]);
  return d;
}

}  // namespace

double expected_jumps(double q, double K, double S) {
  const std::uint64_t qq = as_count(q, "q"), kk = as_count(K, "K"), ss = as_count(S, "S");
  if (qq > ss) throw std::invalid_argument(fmt::format("q = {} exceeds S = {}", q, S));
  const std::uint64_t starts = ss - qq + 1;
  const std::uint64_t most = util::div_up(qq, kk);  // ceil(q/K): crossings from a bad start
  const std::uint64_t loc_k = kk - (qq - 1) % kk;  // good offsets in one cube (ceil(q/K) - 1 crossings)
  const std::uint64_t loc_s = (starts / kk) * loc_k + std::min(loc_k, starts % kk);
  return static_cast<double>(most) - static_cast<double>(loc_s) / static_cast<double>(starts);
}

double expected_jumps_paper(double q, double K, double S) {
  as_count(q, "q");
  as_count(K, "K");
  as_count(S, "S");
  if (q > S) throw std::invalid_argument(fmt::format("q = {} exceeds S = {}", q, S));
  const double c = std::ceil(q / K);
  const double loc_k = K - std::fmod(q, K + 1.0) + 1.0;  // Eq. 15
  const double loc_s =                                   // Eq. 14
      loc_k * (std::floor(S / K) - std::floor(q / K)) + std::floor(std::fmod(S, K) / loc_k);
  const double p_min = loc_s / (S - q + 1.0);
  return (c - 1.0) * p_min + c * (1.0 - p_min);  // Eq. 13
}

double naive_jump_tracks(const CostParams& p, std::span<const double> q, std::span<const double> S,
                         std::size_t i) {
  check_params(p);
  check_query(q, S);
  if (i < 1 || i >= q.size())
    throw std::invalid_argument(fmt::format("Naive jump dimension {} outside [1, {})", i, q.size()));
  return naive_distance(p, q, S, i);
}

double multimap_jump_tracks(const CostParams& p, std::span<const double> S, std::span<const double> K,
                            std::size_t i) {
  check_params(p);
  check_cube(S, K);
  for (std::size_t j = 0; j < S.size(); ++j) as_count(S[j], fmt::format("S[{}]", j).c_str());
  if (i >= S.size())
    throw std::invalid_argument(fmt::format("MultiMap jump dimension {} outside [0, {})", i, S.size()));
  return multimap_distance(p, S, K, i);
}

double naive_cost_ms(const CostParams& p, std::span<const double> q, std::span<const double> S) {
  check_params(p);
  check_query(q, S);
  const std::size_t n = q.size();
  const double xfer = p.sigma_ms * product_from(q, 0);  // Eq. 7
  double pos = p.c_init_ms;                             // Eq. 8
  for (std::size_t i = 1; i < n; ++i) {
    const double jumps = (q[i] - 1.0) * product_from(q, i + 1);
    pos += (p.seek_ms(naive_distance(p, q, S, i)) + p.rot_lat_ms) * jumps;
  }
  return pos + xfer;
}

double multimap_cost_ms(const CostParams& p, std::span<const double> q, std::span<const double> S,
                        std::span<const double> K) {
  check_params(p);
  check_query(q, S);
  check_cube(S, K);
  const std::size_t n = q.size();
  const double xfer = p.sigma_ms * product_from(q, 0);  // Eq. 10
  // Eq. 11, first two terms: C_init and the Dim_0 cube crossings (charged once, as printed).
  double pos = p.c_init_ms +
               (p.seek_ms(multimap_distance(p, S, K, 0)) + p.rot_lat_ms) * expected_jumps(q[0], K[0], S[0]);
  for (std::size_t i = 1; i < n; ++i) {
    const double nj = expected_jumps(q[i], K[i], S[i]);
    const double steps = (p.alpha_per_transition ? q[i] - 1.0 : q[i]) - nj;
    const double line = p.alpha_ms * steps + (p.seek_ms(multimap_distance(p, S, K, i)) + p.rot_lat_ms) * nj;
    pos += line * product_from(q, i + 1);
  }
  return pos + xfer;
}

}  // namespace mmfs::layouts
