// Seek time as a function of cylinder distance, in the three regions of
// MultiMap Fig. 1: constant (settle) up to C cylinders, a + b*sqrt(d) up to
// L cylinders, then linear up to the full stroke.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>

namespace mmfs::geom {

struct SeekParams {
  double settle_ms = 1.0;               // seek time for 1..C cylinders
  std::uint64_t settle_cylinders = 1;   // C
  // C < d <= L: sqrt_a_ms + sqrt_b_ms * sqrt(d). Negative = not given:
  // then a = 0 and b = settle_ms / sqrt(C), continuous at C.
  double sqrt_a_ms = -1.0;
  double sqrt_b_ms = -1.0;
  std::uint64_t linear_cylinders = 0;   // L; 0 = no linear region
  double full_stroke_ms = 0.0;          // seek over the whole stroke (linear region end)
};

class SeekProfile {
 public:
  SeekProfile() = default;
  // `max_distance` is the full stroke (cylinders - 1). Throws GeometryError(Invalid).
  SeekProfile(const SeekParams& params, std::uint64_t max_distance);

  // Seek time in ms for a move of `distance` cylinders (0 -> 0 ms).
  double seek_ms(std::uint64_t distance) const {
    if (distance == 0) return 0.0;
    if (distance <= p_.settle_cylinders) return p_.settle_ms;
    return slow_region_ms(distance);
  }
  // The largest distance whose seek takes at most `budget_ms` (monotone search).
  std::uint64_t max_distance_within(double budget_ms) const;
  // Mean seek time over uniformly random pairs of cylinders in [0, span).
  double mean_random_seek_ms(std::uint64_t span) const;

  const SeekParams& params() const { return p_; }
  std::uint64_t max_distance() const { return max_distance_; }
  nlohmann::json to_json() const;

 private:
  double slow_region_ms(std::uint64_t distance) const;

  SeekParams p_;
  double a_ = 0, b_ = 0;            // sqrt region coefficients
  double lin_a_ = 0, lin_b_ = 0;    // linear region: lin_a + lin_b * d
  std::uint64_t max_distance_ = 0;
};

}  // namespace mmfs::geom
