// Quadrangle-array layouts (layouts/quadrangle_array.h) and the checks of
// their cells and extents against AtroposVolume and StripedGeometry, shared
// by the layout's tests and the allocator's tests of its stripes.
#pragma once

#include <catch2/catch.hpp>

#include <memory>
#include <set>
#include <vector>

#include "geometry/geometry.h"
#include "geometry/zoned_disk.h"
#include "layouts/quadrangle_array.h"
#include "tests/unit/support/layout_test_support.h"
#include "tests/unit/support/quadrangle_test_support.h"

namespace mmfs::layouts::testing {

// An array: shape, dtype size, cell, order and the depth split (empty: the layout's).
struct Array {
  std::vector<std::uint64_t> shape;
  std::uint32_t itemsize;
  std::vector<std::uint64_t> cell;
  std::vector<std::uint32_t> order;
  std::vector<std::uint64_t> depth_cube = {};
};

// Every cell: one run of spc sectors whose volume LBNs map (StripedGeometry::
// locate) to exactly AtroposVolume's (device, DLBN) of the QuadrangleLayout's
// volume sectors; no two cells share a sector; no residual sector is used.
inline void check_cells(const QuadrangleArrayLayout& l) {
  const geom::Geometry& g = l.geometry();
  const AtroposVolume& v = l.volume();
  const geom::ZonedDisk::Zone& zone = member_disk(g).zones()[l.zone()];
  std::set<geom::Lbn> used;
  for_each_cell(l.grid().grid(), [&](const std::vector<std::uint64_t>& cell) {
    Run r[2];
    REQUIRE(l.cell_runs(cell, r) == 1);
    REQUIRE(r[0].sectors == l.sectors_per_cell());
    VolumeRun vr[2];
    REQUIRE(l.quadrangles().cell_runs(cell, vr) == 1);
    REQUIRE(l.batch_key(cell) == v.coord(vr[0].sector / v.block_sectors()).quadrangle);
    for (std::uint32_t s = 0; s < r[0].sectors; ++s) {
      const DeviceBlock want = v.locate_sector(vr[0].sector + s);
      const testing::MemberSector got = member_sector(g, r[0].lbn + s);
      REQUIRE(got == testing::MemberSector{want.device, want.dlbn});
      REQUIRE((got.lbn - zone.first_lbn) % v.stripe_unit_sectors() < std::uint64_t(v.width()) * v.block_sectors());
      REQUIRE(used.insert(r[0].lbn + s).second);
    }
  });
  CHECK(used.size() == l.grid().cells() * l.sectors_per_cell());
}

// Every extent is whole stripes of the layout's zone: d*p volume tracks of
// exactly N sectors from a volume track aligned to d*p from the zone start
// (member 0, a member track d-aligned from the zone's first track).
inline void check_extents(const QuadrangleArrayLayout& l) {
  const geom::Geometry& g = l.geometry();
  const AtroposVolume& v = l.volume();
  const std::uint32_t p = members_of(g);
  const geom::ZonedDisk::Zone& zone = member_disk(g).zones()[l.zone()];
  std::uint64_t stripes = 0;
  for (const Extent& e : l.extents()) {
    REQUIRE(e.sectors > 0);
    REQUIRE(e.sectors % (std::uint64_t(v.depth()) * p * v.stripe_unit_sectors()) == 0);
    REQUIRE(g.zone_bounds(e.start) == g.zone_bounds(e.start + e.sectors - 1));
    REQUIRE(g.zone_bounds(e.start).low == l.zone_first_lbn());
    REQUIRE(g.track_length(e.start) == v.stripe_unit_sectors());
    REQUIRE(g.track_boundaries(e.start).low == e.start);
    REQUIRE((g.track_of(e.start) - g.track_of(l.zone_first_lbn())) % (std::uint64_t(v.depth()) * p) == 0);
    const testing::MemberSector m = member_sector(g, e.start);
    REQUIRE(m.member == 0);
    const std::uint64_t member_track = (m.lbn - zone.first_lbn) / v.stripe_unit_sectors();
    REQUIRE(member_track % v.depth() == 0);
    REQUIRE(member_track + e.sectors / (std::uint64_t(p) * v.stripe_unit_sectors()) <= zone.tracks);
    stripes += e.sectors / (std::uint64_t(v.depth()) * p * v.stripe_unit_sectors());
  }
  CHECK(stripes == l.space().groups);
}

inline std::unique_ptr<QuadrangleArrayLayout> make(const geom::Geometry& g, const Array& a) {
  return std::make_unique<QuadrangleArrayLayout>(g, CellGrid(a.shape, a.itemsize, a.cell, a.order), a.depth_cube);
}

}  // namespace mmfs::layouts::testing
