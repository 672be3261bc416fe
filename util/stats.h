// util/stats.h: summaries of measured samples.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace mmfs::util {

// The middle sample (the mean of the two middle ones for an even count); 0
// for none.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace mmfs::util
