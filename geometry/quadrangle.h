// Atropos quadrangle parameters (Atropos §3.2, Eq. 1-5; docs/reference.md §7 `quadrangle`).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

namespace mmfs::geom {

struct QuadrangleParams {
  std::uint32_t N = 0;     // sectors per track of the zone
  std::uint32_t H = 0;     // head switch (track skew) in sectors
  std::uint32_t b = 0;     // sectors read per track (block size after fitting d)
  std::uint32_t d = 0;     // quadrangle depth in tracks (= Dmax)
  std::uint32_t w = 0;     // quadrangle width in blocks: floor(N / b)
  std::uint32_t R = 0;     // residual sectors per track: N - w*b
  std::uint32_t Dmax = 0;  // floor((N + H) / (B + H)), Eq. 4
  bool operator==(const QuadrangleParams&) const = default;
};

// Computes the layout for a track of N sectors with head switch H and a
// requested block size B (in sectors). Throws GeometryError(Invalid) when
// no quadrangle fits (B > N, N == 0).
QuadrangleParams compute_quadrangle(std::uint32_t N, std::uint32_t H, std::uint32_t B);

// {"N", "H", "b", "d", "w", "R", "Dmax"}: the form every report of the
// parameters uses (mmfs-geom quadrangle, /.mmfs/geometry, a layout's info).
nlohmann::json to_json(const QuadrangleParams& q);

}  // namespace mmfs::geom
