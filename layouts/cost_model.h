// The analytic I/O cost model of MultiMap (Shao et al., CMU-PDL-05-102,
// Appendix A, Eq. 7-15) for the Naive (row-major) and MultiMap layouts.
//
// A range query of q_i cells along Dim_i (Dim_0 = the primary dimension, laid
// along the track) in a dataset of S_i cells per dimension costs
//   C = C_pos + C_xfer,   C_xfer = sigma * prod q_i                 (Eq. 7, 10)
// and C_pos charges C_init once, plus, per "jump" (two query-adjacent cells on
// non-contiguous LBNs), Seek(d) + RotLat, where d is the jump's distance in
// tracks (Eq. 9 for Naive, Eq. 12 for MultiMap). MultiMap charges alpha per
// step to an adjacent block inside a basic cube K_0 x ... x K_{n-1} and a
// jump per crossing into another basic cube; N_jmp(q, K, S) (Eq. 13-15) is the
// expected number of crossings along one dimension for a query whose start is
// uniform over the S - q + 1 possible positions.
//
// A beam along Dim_k is q_k = S_k, q_i = 1 for i != k; its per-cell cost is
// the total divided by S_k.
//
// Everything here is a pure function of its arguments. Sizes are cell counts
// passed as doubles; they must be positive integers (q_i <= S_i) or the
// functions throw std::invalid_argument.
//
// Two places where the model as printed is knowingly kept (see cost_model.cc):
//  * Eq. 13-15 (expected_jumps_paper) disagree with a brute-force count of
//    cube-boundary crossings except when q < K and K divides S; the costs use
//    the exact count, expected_jumps().
//  * Eq. 9 and Eq. 12 round a distance in tracks with a bracket the paper's
//    text extraction leaves ambiguous; CostParams::distance_rounding picks it
//    (default: ceiling).
//  * Eq. 11 charges alpha for q_i steps along a line of q_i cells;
//    CostParams::alpha_per_transition = true charges q_i - 1 (default: false,
//    as printed).
#pragma once

#include <cstddef>
#include <functional>
#include <span>

namespace mmfs::layouts {

// How Eq. 9 and the outer bracket of Eq. 12 turn "LBN distance / T" into the
// track distance handed to Seek(d).
enum class TrackRounding {
  kCeil,   // ceil(x / T): any jump leaves the track (the reading used by default)
  kFloor,  // floor(x / T): a stride shorter than a track is no seek at all
  kNone,   // x / T unrounded; Seek gets a fractional track count
};

struct CostParams {
  double sigma_ms = 0.015;     // sigma: transfer time of one block (next sequential block)
  double alpha_ms = 1.5;       // alpha: time to access an adjacent block (semi-sequential)
  double rot_lat_ms = 3.0;     // RotLat: average rotational latency per jump
  double c_init_ms = 8.3;      // C_init: initial positioning (avg seek + RotLat)
  double track_sectors = 686;  // T
  std::function<double(double tracks)> seek_ms;  // Seek(d): seek time for a jump of d tracks (required)
  TrackRounding distance_rounding = TrackRounding::kCeil;
  // Eq. 11 charges alpha * (q_i - N_jmp) adjacent-block steps per Dim_i line
  // of q_i cells (false, as printed). true charges alpha * (q_i - 1 - N_jmp):
  // one step per transition between consecutive cells, as Eq. 8 does for
  // Naive jumps, so that a line of one cell costs no step. Table 3's MultiMap
  // "Calculated" column only comes out with true (see test_cost_model.cc).
  bool alpha_per_transition = false;
};

// Total I/O time (ms) of query q in a Naive (row-major, Dim_0 fastest) layout
// of a dataset S: Eq. 7-9.
double naive_cost_ms(const CostParams& p, std::span<const double> q, std::span<const double> S);

// Total I/O time (ms) of query q in a MultiMap layout of dataset S with basic
// cube K: Eq. 10-12, with N_jmp = expected_jumps (exact), not Eq. 13-15.
double multimap_cost_ms(const CostParams& p, std::span<const double> q, std::span<const double> S,
                        std::span<const double> K);

// Expected number of basic-cube boundaries crossed by q consecutive cells
// starting uniformly at one of the S - q + 1 positions of a dimension of S
// cells cut into cubes of K cells (the last one possibly partial). Exact: this
// is the average over every start s in [0, S - q] of the number of multiples
// of K in (s, s + q). This is what Eq. 13-15 are meant to compute; it is the
// N_jmp multimap_cost_ms uses.
double expected_jumps(double q, double K, double S);

// Eq. 13-15 exactly as printed. Equal to expected_jumps() when q < K and K
// divides S; otherwise generally not (see cost_model.cc). Kept for reference.
double expected_jumps_paper(double q, double K, double S);

// d_i of Eq. 9 (Naive, i >= 1): track distance of a jump along Dim_i.
double naive_jump_tracks(const CostParams& p, std::span<const double> q, std::span<const double> S,
                         std::size_t i);

// d_i of Eq. 12 (MultiMap, i >= 0): track distance of a jump from one basic
// cube to the next along Dim_i.
double multimap_jump_tracks(const CostParams& p, std::span<const double> S, std::span<const double> K,
                            std::size_t i);

}  // namespace mmfs::layouts
