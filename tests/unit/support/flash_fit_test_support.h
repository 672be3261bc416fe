// Probe samples for the flash fit and device probe unit tests: what a device
// that is exactly a flash model would measure.
#pragma once

#include <cstdint>
#include <vector>

#include "geometry/flash.h"
#include "geometry/flash_fit.h"

namespace mmfs::geom::testing {

// Samples as a device that is exactly the model `truth` would give them.
inline std::vector<ProbeSample> samples_of(const FlashParams& truth) {
  std::vector<ProbeSample> out;
  for (std::uint32_t depth : {1u, 4u, 16u, 64u})
    for (std::uint32_t bytes = 4096; bytes <= (4u << 20); bytes *= 4) {
      ProbeSample s;
      s.bytes = bytes;
      s.depth = depth;
      s.requests = 1000;
      s.seconds = modeled_ms_per_request(truth, bytes, depth) * 1000 / 1e3;
      s.latency_ms = s.seconds;  // not used by the fit
      out.push_back(s);
    }
  return out;
}

}  // namespace mmfs::geom::testing
