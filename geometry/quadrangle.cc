#include "geometry/quadrangle.h"

#include <fmt/format.h>

#include "geometry/types.h"

namespace mmfs::geom {

QuadrangleParams compute_quadrangle(std::uint32_t N, std::uint32_t H, std::uint32_t B) {
  if (N == 0) throw GeometryError(ErrorKind::Invalid, "quadrangle: track has no sectors");
  if (B == 0 || B > N)
    throw GeometryError(ErrorKind::Invalid,
                        fmt::format("quadrangle: block size {} must be in 1..{} sectors", B, N));
  QuadrangleParams q;
  q.N = N;
  q.H = H;
  // Eq. 4: the most tracks from which B sectors each fit in one revolution.
  q.Dmax = (N + H) / (B + H);
  q.d = q.Dmax;
  // Eq. 3 with d fixed: as many sectors per track as the revolution allows.
  q.b = (N + H) / q.d - H;
  q.w = N / q.b;          // Eq. 5
  q.R = N - q.w * q.b;    // residual sectors skipped on every track
  return q;
}

nlohmann::json to_json(const QuadrangleParams& q) {
  return {{"N", q.N}, {"H", q.H}, {"b", q.b}, {"d", q.d}, {"w", q.w}, {"R", q.R}, {"Dmax", q.Dmax}};
}

}  // namespace mmfs::geom
