// The MEMS paper's devices for the unit tests: the G2 MEMStore of Table 3 and
// the small device of Table 2 (Figures 2 and 3), with M and p as parameters.
#pragma once

#include <cstdint>

#include "geometry/memstore.h"

namespace mmfs::geom::testing {

inline MemsParams mems(std::uint32_t p, std::uint32_t N, std::uint32_t Sx, std::uint32_t Sy, std::uint32_t M) {
  MemsParams m;
  m.p = p;
  m.N = N;
  m.Sx = Sx;
  m.Sy = Sy;
  m.M = M;
  return m;
}

// Table 3 (p may be raised, as §5.1 does for p = 20).
inline MemsParams g2(std::uint32_t M = 0, std::uint32_t p = 10) { return mems(p, 100, 2500, 27, M); }
// Table 2's device (p = 3, N = 9, Sy = 3), Sx cylinders (3 in the paper).
inline MemsParams toy(std::uint32_t M = 0, std::uint32_t Sx = 3) { return mems(3, 9, Sx, 3, M); }

}  // namespace mmfs::geom::testing
