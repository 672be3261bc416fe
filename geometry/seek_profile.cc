#include "geometry/seek_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "geometry/types.h"

namespace mmfs::geom {

SeekProfile::SeekProfile(const SeekParams& params, std::uint64_t max_distance)
    : p_(params), max_distance_(max_distance) {
  if (p_.settle_cylinders == 0)
    throw GeometryError(ErrorKind::Invalid, "geometry field 'settle_cylinders': must be at least 1");
  bool has_sqrt = p_.sqrt_a_ms >= 0 || p_.sqrt_b_ms >= 0;
  if (has_sqrt && (p_.sqrt_a_ms < 0 || p_.sqrt_b_ms < 0))
    throw GeometryError(ErrorKind::Invalid,
                        "geometry field 'seek': sqrt_a_ms and sqrt_b_ms must be given together");
  if (has_sqrt) {
    a_ = p_.sqrt_a_ms;
    b_ = p_.sqrt_b_ms;
  } else {
    a_ = 0.0;
    b_ = p_.settle_ms / std::sqrt(double(p_.settle_cylinders));
  }
  std::uint64_t L = p_.linear_cylinders;
  if (L != 0) {
    if (L <= p_.settle_cylinders || L >= max_distance_)
      throw GeometryError(ErrorKind::Invalid,
                          fmt::format("geometry field 'seek.linear_cylinders': {} must lie between "
                                      "settle_cylinders ({}) and the full stroke ({})",
                                      L, p_.settle_cylinders, max_distance_));
    double at_L = a_ + b_ * std::sqrt(double(L));
    if (p_.full_stroke_ms < at_L)
      throw GeometryError(ErrorKind::Invalid,
                          fmt::format("geometry field 'seek.full_stroke_ms': {} ms is shorter than the "
                                      "seek at linear_cylinders ({:.3f} ms)",
                                      p_.full_stroke_ms, at_L));
    // The linear region joins the sqrt region at L and ends at the full stroke.
    lin_b_ = (p_.full_stroke_ms - at_L) / double(max_distance_ - L);
    lin_a_ = at_L - lin_b_ * double(L);
  }
}

double SeekProfile::slow_region_ms(std::uint64_t distance) const {
  double t = (p_.linear_cylinders != 0 && distance > p_.linear_cylinders)
                 ? lin_a_ + lin_b_ * double(distance)
                 : a_ + b_ * std::sqrt(double(distance));
  // Past C a seek never beats the settle time, whatever the fitted curve says.
  return std::max(t, p_.settle_ms);
}

std::uint64_t SeekProfile::max_distance_within(double budget_ms) const {
  if (budget_ms < p_.settle_ms) return 0;
  std::uint64_t lo = std::min(p_.settle_cylinders, max_distance_), hi = max_distance_;
  while (lo < hi) {  // largest d in [lo, hi] with seek_ms(d) <= budget
    std::uint64_t mid = lo + (hi - lo + 1) / 2;
    if (seek_ms(mid) <= budget_ms + 1e-12) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

double SeekProfile::mean_random_seek_ms(std::uint64_t span) const {
  if (span < 2) return 0.0;
  // P(|X-Y| = d) = 2(span-d)/span^2 for d >= 1.
  double sum = 0;
  for (std::uint64_t d = 1; d < span; ++d) sum += 2.0 * double(span - d) * seek_ms(d);
  return sum / (double(span) * double(span));
}

nlohmann::json SeekProfile::to_json() const {
  nlohmann::json j = {{"sqrt_a_ms", a_}, {"sqrt_b_ms", b_}};
  if (p_.linear_cylinders != 0) {
    j["linear_cylinders"] = p_.linear_cylinders;
    j["full_stroke_ms"] = p_.full_stroke_ms;
  }
  return j;
}

}  // namespace mmfs::geom
