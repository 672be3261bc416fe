// The Atropos volume mapping (Atropos §3.1-§3.3) against quadrangles built
// by brute force from the disk model's sector angles, and the quadrangle
// layout of arrays on it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "geometry/load.h"
#include "geometry/zoned_disk.h"
#include "layouts/atropos.h"
#include "layouts/quadrangle.h"
#include "tests/unit/support/geometry_errors.h"

using namespace mmfs;
using namespace mmfs::layouts;
using geom::ErrorKind;
using geom::testing::error_of;

namespace {

struct ZoneShape {
  std::uint64_t cylinders;
  std::uint32_t sectors_per_track, skew;
};

// A small disk; track and cylinder skews are equal so that every track switch
// costs the same H the quadrangle parameters assume.
std::unique_ptr<geom::ZonedDisk> disk(std::vector<ZoneShape> zones, std::uint32_t surfaces = 2) {
  geom::DiskParams p;
  p.surfaces = surfaces;
  for (const ZoneShape& z : zones) p.zones.push_back({z.cylinders, z.sectors_per_track, z.skew, z.skew});
  return std::make_unique<geom::ZonedDisk>(p);
}

// Cyclic distance in sectors of a track of n sectors from angle `from` to `to` (degrees).
std::uint64_t sectors_between(double from, double to, std::uint32_t n) {
  double d = std::fmod(to - from, 360.0);
  if (d < 0) d += 360.0;
  return std::uint64_t(std::llround(d / 360.0 * n)) % n;
}

// Quadrangles built by walking the platter: column c of row 0 is block slot c
// of the quadrangle's first track; on each next track it is the block whose
// start the head reaches first after reading b sectors and switching heads
// (H sectors of rotation). VLBNs are numbered row-major across the devices,
// quadrangle stripe after stripe (Figure 3). Returns vlbn -> (device, DLBN).
std::vector<DeviceBlock> brute_force_volume(const geom::ZonedDisk& g, std::uint32_t p, std::uint32_t B,
                                            std::uint32_t zone) {
  const geom::ZonedDisk::Zone& z = g.zones()[zone];
  const std::uint32_t N = z.spec.sectors_per_track, H = z.spec.track_skew_sectors;
  const geom::QuadrangleParams q = geom::compute_quadrangle(N, H, B);
  const std::uint64_t stripes = z.tracks / q.d;
  std::vector<DeviceBlock> map(stripes * p * q.d * q.w);
  for (std::uint64_t s = 0; s < stripes; ++s)
    for (std::uint32_t dev = 0; dev < p; ++dev)
      for (std::uint32_t c = 0; c < q.w; ++c) {
        geom::Lbn block = z.first_lbn + s * q.d * N + std::uint64_t(c) * q.b;
        for (std::uint32_t r = 0; r < q.d; ++r) {
          if (r > 0) {
            const double arrival = g.skew(block) + 360.0 * (q.b + H) / N;
            const geom::Lbn track = z.first_lbn + (s * q.d + r) * N;
            geom::Lbn best = track;
            for (std::uint32_t slot = 0; slot < q.w; ++slot) {
              const geom::Lbn candidate = track + std::uint64_t(slot) * q.b;
              if (sectors_between(arrival, g.skew(candidate), N) < sectors_between(arrival, g.skew(best), N))
                best = candidate;
            }
            block = best;
          }
          map[s * q.d * q.w * p + std::uint64_t(r) * q.w * p + std::uint64_t(dev) * q.w + c] = {dev, block};
        }
      }
  return map;
}

// The volumes the mapping tests sweep: several N, H, B, p and zones.
struct Case {
  std::vector<ZoneShape> zones;
  std::uint32_t surfaces, p, B;
};
std::vector<Case> cases() {
  return {
      {{{6, 21, 3}}, 2, 4, 2},                        // Figure 4's N and H
      {{{6, 21, 3}}, 2, 1, 1},                        // p = 1
      {{{5, 23, 3}, {7, 17, 2}, {4, 30, 5}}, 2, 3, 2},  // three zones, R > 0 in some
      {{{9, 40, 7}, {9, 31, 4}}, 3, 2, 3},
      {{{12, 13, 1}}, 1, 5, 1},                        // one surface: every switch a cylinder switch
      {{{3, 64, 0}}, 4, 2, 5},                         // no skew
  };
}

geom::Lbn track_start(const AtroposVolume& v, geom::Lbn dlbn) {
  return v.zone_first_dlbn() + (dlbn - v.zone_first_dlbn()) / v.stripe_unit_sectors() * v.stripe_unit_sectors();
}

}  // namespace

TEST_CASE("atropos: parameters are Eq. 1-5 of the volume's zone; the stripe unit is one track", "[atropos]") {
  auto atlas = geom::load_geometry("atlas10k3");
  AtroposVolume v(*atlas, 4, 1);
  CHECK(v.params() == atlas->quadrangle(1));
  CHECK(v.stripe_unit_sectors() == 686);  // the exact track, not 64 KiB (§5.3)
  CHECK(v.stripe_unit_blocks() == v.width());
  CHECK(v.width() * v.block_sectors() + v.residual_sectors() == 686);
  CHECK(v.depth() == 5);
  CHECK(v.row_blocks() == 4u * v.width());
  CHECK(v.quadrangle_blocks() == std::uint64_t(v.width()) * v.depth());

  auto g = disk({{5, 23, 3}, {7, 17, 2}, {4, 30, 5}});
  for (std::uint32_t zone = 0; zone < 3; ++zone) {
    AtroposVolume z(*g, 3, 2, zone);
    const auto& spec = g->zones()[zone].spec;
    CHECK(z.params() == geom::compute_quadrangle(spec.sectors_per_track, spec.track_skew_sectors, 2));
    CHECK(z.stripes() == g->zones()[zone].tracks / z.depth());
    CHECK(z.blocks() == z.stripes() * 3 * z.depth() * z.width());
    CHECK(z.locate(0) == DeviceBlock{0, g->zones()[zone].first_lbn});
  }
}

TEST_CASE("atropos: VLBN -> (device, DLBN) equals quadrangles built by brute force", "[atropos]") {
  for (const Case& c : cases()) {
    auto g = disk(c.zones, c.surfaces);
    for (std::uint32_t zone = 0; zone < c.zones.size(); ++zone) {
      AtroposVolume v(*g, c.p, c.B, zone);
      std::vector<DeviceBlock> expected = brute_force_volume(*g, c.p, c.B, zone);
      INFO("N=" << v.params().N << " H=" << v.params().H << " B=" << c.B << " p=" << c.p << " zone=" << zone
                << " b=" << v.block_sectors() << " d=" << v.depth() << " w=" << v.width());
      REQUIRE(v.blocks() == expected.size());
      for (Vlbn vlbn = 0; vlbn < v.blocks(); ++vlbn) {
        INFO("vlbn " << vlbn);
        const DeviceBlock at = v.locate(vlbn);
        REQUIRE(at == expected[vlbn]);
        // The inverse, from every sector of the block.
        for (std::uint32_t s = 0; s < v.block_sectors(); ++s) REQUIRE(v.vlbn_of(at.device, at.dlbn + s) == vlbn);
        REQUIRE(v.locate_sector(vlbn * v.block_sectors() + v.block_sectors() - 1) ==
                DeviceBlock{at.device, at.dlbn + v.block_sectors() - 1});
        REQUIRE(v.vlbn_at(v.coord(vlbn)) == vlbn);
      }
    }
  }
}

TEST_CASE("atropos: every DLBN is used at most once and none in a track's residual", "[atropos]") {
  for (const Case& c : cases()) {
    auto g = disk(c.zones, c.surfaces);
    for (AtroposVolume& v : AtroposVolume::per_zone(*g, c.p, c.B)) {
      INFO("zone " << v.zone() << " p=" << c.p << " B=" << c.B);
      std::map<std::uint32_t, std::set<geom::Lbn>> used;
      for (Vlbn vlbn = 0; vlbn < v.blocks(); ++vlbn) {
        const DeviceBlock at = v.locate(vlbn);
        for (std::uint32_t s = 0; s < v.block_sectors(); ++s) {
          const geom::Lbn dlbn = at.dlbn + s;
          REQUIRE(used[at.device].insert(dlbn).second);
          REQUIRE(dlbn - track_start(v, dlbn) < std::uint64_t(v.width()) * v.block_sectors());
          REQUIRE(g->zone_bounds(dlbn) == g->zone_bounds(v.zone_first_dlbn()));
        }
      }
      // Each device holds exactly the data sectors of its whole quadrangles.
      REQUIRE(used.size() == c.p);
      for (auto& [device, dlbns] : used)
        CHECK(dlbns.size() == v.stripes() * v.depth() * std::uint64_t(v.width()) * v.block_sectors());
    }
  }
}

TEST_CASE("atropos: quadrangle k lies on device k mod p, its d tracks from DLBN_Q", "[atropos]") {
  for (const Case& c : cases()) {
    auto g = disk(c.zones, c.surfaces);
    AtroposVolume v(*g, c.p, c.B);
    std::map<std::uint64_t, std::set<geom::Lbn>> tracks;  // per quadrangle
    for (Vlbn vlbn = 0; vlbn < v.blocks(); ++vlbn) {
      const QuadrangleCoord q = v.coord(vlbn);
      const DeviceBlock at = v.locate(vlbn);
      REQUIRE(at.device == q.quadrangle % c.p);
      REQUIRE(at.dlbn >= v.quadrangle_first_dlbn(q.quadrangle));
      REQUIRE(track_start(v, at.dlbn) == v.quadrangle_first_dlbn(q.quadrangle) + q.row * v.stripe_unit_sectors());
      if (q.row == 0 && q.column == 0) REQUIRE(at.dlbn == v.quadrangle_first_dlbn(q.quadrangle));  // top-left
      tracks[q.quadrangle].insert(track_start(v, at.dlbn));
    }
    CHECK(tracks.size() == v.quadrangles());
    for (auto& [k, starts] : tracks) CHECK(starts.size() == v.depth());
    // Successive quadrangles go round robin over the devices.
    for (std::uint64_t k = 0; k + 1 < v.quadrangles(); ++k)
      CHECK(v.device_of_quadrangle(k + 1) == (v.device_of_quadrangle(k) + 1) % c.p);
  }
}

TEST_CASE("atropos: get_rectangle is one row of each of the p quadrangles of a stripe", "[atropos]") {
  for (const Case& c : cases()) {
    auto g = disk(c.zones, c.surfaces);
    AtroposVolume v(*g, c.p, c.B);
    const std::uint64_t data = std::uint64_t(v.width()) * v.block_sectors();
    for (Vlbn vlbn = 0; vlbn < v.blocks(); ++vlbn) {
      const VlbnRange rect = v.get_rectangle(vlbn);
      REQUIRE(rect.count == std::uint64_t(v.width()) * c.p);
      REQUIRE((rect.first <= vlbn && vlbn < rect.first + rect.count));
      // Per device: w blocks on one track, covering its data sectors.
      std::map<std::uint32_t, std::set<geom::Lbn>> sectors;
      std::set<std::uint64_t> quadrangles;
      for (Vlbn x = rect.first; x < rect.first + rect.count; ++x) {
        REQUIRE(v.coord(x).row == v.coord(vlbn).row);
        quadrangles.insert(v.coord(x).quadrangle);
        const DeviceBlock at = v.locate(x);
        for (std::uint32_t s = 0; s < v.block_sectors(); ++s) sectors[at.device].insert(at.dlbn + s);
      }
      REQUIRE(quadrangles.size() == c.p);
      REQUIRE(sectors.size() == c.p);
      for (auto& [device, dlbns] : sectors) {
        REQUIRE(dlbns.size() == data);
        REQUIRE(*dlbns.begin() == track_start(v, *dlbns.begin()));
        REQUIRE(*dlbns.rbegin() == *dlbns.begin() + data - 1);
      }
      // get_boundaries: the device's w VLBNs of that row, on the track track_first names.
      const VlbnRange unit = v.get_boundaries(vlbn);
      REQUIRE(unit.count == v.width());
      REQUIRE((unit.first <= vlbn && vlbn < unit.first + unit.count));
      const DeviceBlock track = v.track_first(vlbn);
      for (Vlbn x = unit.first; x < unit.first + unit.count; ++x) {
        REQUIRE(v.locate(x).device == track.device);
        REQUIRE(track_start(v, v.locate(x).dlbn) == track.dlbn);
      }
    }
  }
}

TEST_CASE("atropos: a quadrangle column is semi-sequential: one head switch between blocks", "[atropos]") {
  for (const Case& c : cases()) {
    auto g = disk(c.zones, c.surfaces);
    AtroposVolume v(*g, c.p, c.B);
    const std::uint32_t N = v.params().N, H = v.params().H, b = v.block_sectors();
    for (Vlbn vlbn = 0; vlbn < v.blocks(); ++vlbn) {
      const std::vector<Vlbn> column = v.semi_sequential(vlbn);
      REQUIRE(column.size() == v.depth());
      REQUIRE(std::count(column.begin(), column.end(), vlbn) == 1);
      int wraps = 0;
      for (std::uint32_t r = 0; r + 1 < column.size(); ++r) {
        REQUIRE(column[r + 1] == column[r] + v.row_blocks());  // §3.3.3: every (w*p)-th VLBN
        REQUIRE(v.coord(column[r + 1]).quadrangle == v.coord(column[r]).quadrangle);
        // Rotation from the end of one block to the start of the next: H, or
        // H + R where the column wraps from the last slot to the first.
        const double end = g->skew(v.locate(column[r]).dlbn) + 360.0 * b / N;
        const std::uint64_t gap = sectors_between(end, g->skew(v.locate(column[r + 1]).dlbn), N);
        if (gap != H) {
          REQUIRE(gap == H + v.residual_sectors());
          ++wraps;
        }
      }
      // At most one wrap: the column is read in one revolution plus R (Eq. 1).
      REQUIRE(wraps <= 1);
      REQUIRE(v.depth() * b + (v.depth() - 1) * H <= N);
    }
  }
}

TEST_CASE("atropos: §3.2.2's semi-sequential DLBNs 0, 24, 48, 72 on Figure 4's disk", "[atropos]") {
  auto g = disk({{6, 21, 3}});
  AtroposVolume v(*g, 1, 2);
  REQUIRE(v.depth() == 4);
  REQUIRE(v.block_sectors() == 3);  // Eq. 3 with d = 4: (21 + 3) / 4 - 3
  std::vector<geom::Lbn> dlbns;
  for (Vlbn x : v.semi_sequential(0)) dlbns.push_back(v.locate(x).dlbn);
  CHECK(dlbns == std::vector<geom::Lbn>{0, 24, 48, 72});
}

TEST_CASE("atropos: out-of-range input throws GeometryError", "[atropos]") {
  auto g = disk({{6, 23, 3}, {1, 17, 2}}, 1);  // zone 1: one track, fewer than d
  AtroposVolume v(*g, 3, 2);
  CHECK(error_of([&] { v.locate(v.blocks()); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { v.coord(v.blocks()); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { v.get_rectangle(v.blocks()); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { v.get_boundaries(v.blocks()); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { v.semi_sequential(v.blocks()); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { v.locate_sector(v.sectors()); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { v.vlbn_of(3, 0); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { v.vlbn_of(0, 22); }) == ErrorKind::OutOfRange);  // residual: w*b = 22 of 23
  CHECK(error_of([&] { v.vlbn_of(0, v.stripes() * v.depth() * 23); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { v.vlbn_at({v.quadrangles(), 0, 0}); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { v.vlbn_at({0, v.depth(), 0}); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { v.vlbn_at({0, 0, v.width()}); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { v.quadrangle_first_dlbn(v.quadrangles()); }) == ErrorKind::OutOfRange);

  CHECK(error_of([&] { AtroposVolume(*g, 0, 2); }) == ErrorKind::Invalid);
  CHECK(error_of([&] { AtroposVolume(*g, 2, 0); }) == ErrorKind::Invalid);
  CHECK(error_of([&] { AtroposVolume(*g, 2, 24); }) == ErrorKind::Invalid);
  CHECK(error_of([&] { AtroposVolume(*g, 2, 2, 1); }) == ErrorKind::Invalid);
  CHECK(error_of([&] { AtroposVolume(*g, 2, 2, 2); }) == ErrorKind::OutOfRange);
  auto mems = geom::load_geometry("mems-g2");
  CHECK(error_of([&] { AtroposVolume(*mems, 2, 1); }) == ErrorKind::NotSupported);
  // per_zone skips the zone too small for a quadrangle.
  auto zones = AtroposVolume::per_zone(*g, 3, 2);
  REQUIRE(zones.size() == 1);
  CHECK(zones[0].zone() == 0);
  CHECK(error_of([&] { AtroposVolume::per_zone(*g, 3, 0); }) == ErrorKind::Invalid);
  // Zone 1's 17-sector tracks are shorter than the block: skipped, not an error.
  REQUIRE(AtroposVolume::per_zone(*g, 3, 20).size() == 1);
}

TEST_CASE("atropos: round trip on a sample of a full-size volume", "[atropos]") {
  auto atlas = geom::load_geometry("atlas10k3");
  std::mt19937_64 rng(16);
  for (AtroposVolume& v : AtroposVolume::per_zone(*atlas, 4, 8)) {
    std::uniform_int_distribution<Vlbn> pick(0, v.blocks() - 1);
    for (int i = 0; i < 2000; ++i) {
      const Vlbn vlbn = pick(rng);
      const DeviceBlock at = v.locate(vlbn);
      REQUIRE(v.vlbn_of(at.device, at.dlbn) == vlbn);
      REQUIRE(atlas->zone_bounds(at.dlbn).low == v.zone_first_dlbn());
    }
  }
}

// ---- the quadrangle layout ----

namespace {

template <typename F>
void for_each_cell(const std::vector<std::uint64_t>& grid, F f) {
  std::vector<std::uint64_t> c(grid.size(), 0);
  for (;;) {
    f(c);
    std::size_t d = grid.size();
    while (d > 0) {
      --d;
      if (++c[d] < grid[d]) break;
      c[d] = 0;
      if (d == 0) return;
    }
  }
}

// N = 23, H = 3, B = 2: b = 2, d = 5, w = 11, R = 1; p = 3.
std::unique_ptr<geom::ZonedDisk> layout_disk() { return disk({{40, 23, 3}}); }

// Cells of `itemsize` bytes (512: one sector, k = 2 per block; 1024: two, k = 1).
CellGrid grid_of(std::vector<std::uint64_t> shape, std::vector<std::uint32_t> order, std::uint32_t itemsize = 512) {
  return CellGrid(shape, itemsize, std::vector<std::uint64_t>(shape.size(), 1), order);
}

// Places the layout on scattered stripes: stripe 2 first, then from stripe 5 on.
void place_scattered(QuadrangleLayout& l) {
  const StripeRequest need = l.space();
  std::vector<VlbnRange> extents{{2 * need.stripe_blocks, need.stripe_blocks}};
  if (need.stripes > 1) extents.push_back({5 * need.stripe_blocks, (need.stripes - 1) * need.stripe_blocks});
  l.place(extents);
}

bool in_extents(const QuadrangleLayout& l, Vlbn vlbn) {
  for (const VlbnRange& e : l.extents())
    if (e.first <= vlbn && vlbn < e.first + e.count) return true;
  return false;
}

struct Array {
  std::vector<std::uint64_t> shape;
  std::vector<std::uint32_t> order;
  std::uint32_t itemsize = 512;
  std::vector<std::uint64_t> depth_cube = {};
};
std::vector<Array> arrays() {
  return {
      {{12, 150}, {1, 0}},                      // 2-D: rows of 66 cells, d = 5 along dim 0
      {{150, 12}, {0, 1}},                      // the same with dimension 0 primary
      {{7, 40}, {1, 0}, 1024},                  // two-sector cells: one per block
      {{3, 4, 70}, {2, 1, 0}},                  // 3-D: order[1] takes 4 rows, order[2] 1
      {{3, 2, 70}, {2, 1, 0}},                  // order[1] short: order[2] takes 2 of the rest
      {{6, 5, 30}, {2, 1, 0}, 512, {2, 2, 1}},  // explicit 2 x 2 depth
      {{4, 3, 2, 20}, {3, 0, 1, 2}},            // 4-D, permuted order
      {{2, 150}, {1, 0}},                       // 2 rows a cube: 2 cubes stacked per stripe
      {{500}, {0}},                             // 1-D: rows stacked d per stripe
  };
}

}  // namespace

TEST_CASE("quadrangle layout: every cell gets its own sectors inside one VLBN of the extents", "[quadrangle]") {
  auto g = layout_disk();
  AtroposVolume v(*g, 3, 2);
  REQUIRE(v.block_sectors() == 2);
  REQUIRE(v.residual_sectors() == 1);
  for (const Array& a : arrays()) {
    QuadrangleLayout l(v, grid_of(a.shape, a.order, a.itemsize), a.depth_cube);
    INFO("shape " << join(a.shape) << " cube " << join(l.cube()));
    place_scattered(l);
    std::set<std::uint64_t> sectors;
    std::set<std::pair<std::uint32_t, geom::Lbn>> device_sectors;
    for_each_cell(l.grid().grid(), [&](const std::vector<std::uint64_t>& cell) {
      VolumeRun run[2];
      REQUIRE(l.cell_runs(cell, run) == 1);
      REQUIRE(run[0].sectors == l.sectors_per_cell());
      const Vlbn vlbn = run[0].sector / v.block_sectors();
      REQUIRE((run[0].sector + run[0].sectors - 1) / v.block_sectors() == vlbn);  // not across two VLBNs
      REQUIRE(l.cell_vlbn(cell) == vlbn);
      REQUIRE(in_extents(l, vlbn));
      REQUIRE(l.batch_key(cell) == v.coord(vlbn).quadrangle);
      for (std::uint32_t s = 0; s < run[0].sectors; ++s) {
        REQUIRE(sectors.insert(run[0].sector + s).second);
        const DeviceBlock at = v.locate_sector(run[0].sector + s);
        REQUIRE(device_sectors.insert({at.device, at.dlbn}).second);
      }
    });
    CHECK(sectors.size() == l.grid().cells() * l.sectors_per_cell());
    CHECK(l.space_amplification() >= 1.0);
  }
}

TEST_CASE("quadrangle layout: a beam along the primary dimension reads whole tracks of every device",
          "[quadrangle]") {
  auto g = layout_disk();
  AtroposVolume v(*g, 3, 2);
  for (const Array& a : arrays()) {
    QuadrangleLayout l(v, grid_of(a.shape, a.order, a.itemsize), a.depth_cube);
    place_scattered(l);
    const std::uint32_t primary = a.order[0];
    const std::uint64_t L = l.row_cells();
    REQUIRE(L == v.row_blocks() * l.cells_per_block());
    const std::uint64_t extent = l.grid().grid()[primary];
    std::vector<std::uint64_t> others = l.grid().grid();
    others[primary] = 1;
    for_each_cell(others, [&](std::vector<std::uint64_t> cell) {
      for (std::uint64_t piece = 0; piece + L <= extent; piece += L) {
        // A full row's worth of cells: exactly one rectangle, k cells per VLBN,
        // and on every device the data sectors of one track.
        std::map<Vlbn, int> per_vlbn;
        std::map<std::uint32_t, std::set<geom::Lbn>> dlbns;
        for (std::uint64_t i = piece; i < piece + L; ++i) {
          cell[primary] = i;
          VolumeRun run[2];
          l.cell_runs(cell, run);
          ++per_vlbn[run[0].sector / v.block_sectors()];
          for (std::uint32_t s = 0; s < run[0].sectors; ++s) {
            const DeviceBlock at = v.locate_sector(run[0].sector + s);
            dlbns[at.device].insert(at.dlbn);
          }
        }
        const VlbnRange rect = v.get_rectangle(per_vlbn.begin()->first);
        REQUIRE(per_vlbn.size() == rect.count);
        REQUIRE(per_vlbn.begin()->first == rect.first);
        for (auto& [vlbn, n] : per_vlbn) REQUIRE(n == int(l.cells_per_block()));
        REQUIRE(dlbns.size() == v.devices());
        for (auto& [device, set] : dlbns) {
          // k cells of spc sectors fill the block here (2 x 1, or 1 x 2).
          REQUIRE(set.size() == std::uint64_t(v.width()) * v.block_sectors());
          REQUIRE(*set.begin() == track_start(v, *set.begin()));
          REQUIRE(*set.rbegin() - *set.begin() + 1 == set.size());
        }
      }
    });
  }
}

TEST_CASE("quadrangle layout: beams along the other dimensions are quadrangle columns, K cells per batch",
          "[quadrangle]") {
  auto g = layout_disk();
  AtroposVolume v(*g, 3, 2);
  for (const Array& a : arrays()) {
    QuadrangleLayout l(v, grid_of(a.shape, a.order, a.itemsize), a.depth_cube);
    place_scattered(l);
    INFO("shape " << join(a.shape) << " cube " << join(l.cube()));
    for (std::size_t j = 1; j < a.order.size(); ++j) {
      const std::uint32_t dim = a.order[j];
      const std::uint64_t K = l.cube()[dim], extent = l.grid().grid()[dim];
      std::vector<std::uint64_t> others = l.grid().grid();
      others[dim] = 1;
      for_each_cell(others, [&](std::vector<std::uint64_t> cell) {
        std::set<std::uint64_t> quadrangles;
        for (std::uint64_t group = 0; group < extent; group += K) {
          // The group's cells: one quadrangle, one column, distinct rows.
          std::set<std::uint32_t> rows;
          cell[dim] = group;
          const QuadrangleCoord first = v.coord(l.cell_vlbn(cell));
          for (std::uint64_t i = group; i < std::min(group + K, extent); ++i) {
            cell[dim] = i;
            const QuadrangleCoord q = v.coord(l.cell_vlbn(cell));
            REQUIRE(q.quadrangle == first.quadrangle);
            REQUIRE(q.column == first.column);
            REQUIRE(l.batch_key(cell) == q.quadrangle);
            REQUIRE(rows.insert(q.row).second);
          }
          // order[1] is the fastest through a cube's rows: consecutive tracks.
          if (j == 1) REQUIRE(*rows.rbegin() - *rows.begin() + 1 == rows.size());
          quadrangles.insert(first.quadrangle);
        }
        // One batch per K cells (per d cells when the dimension takes the whole
        // depth); stacked cubes may share a quadrangle.
        if (l.cubes_per_stripe() == 1)
          REQUIRE(quadrangles.size() == (extent + K - 1) / K);
        else
          REQUIRE(quadrangles.size() <= (extent + K - 1) / K);
      });
    }
  }
  // 2-D: the second dimension takes the whole depth d = 5.
  QuadrangleLayout two_d(v, grid_of({12, 150}, {1, 0}));
  CHECK(two_d.cube() == std::vector<std::uint64_t>{5, 66});
  // Greedy in priority order: order[1] first, order[2] from what is left.
  CHECK(QuadrangleLayout(v, grid_of({3, 4, 70}, {2, 1, 0})).cube() == std::vector<std::uint64_t>{1, 4, 66});
  CHECK(QuadrangleLayout(v, grid_of({3, 2, 70}, {2, 1, 0})).cube() == std::vector<std::uint64_t>{2, 2, 66});
  // 1-D: one row per cube, d cubes per stripe, VLBNs in sequence.
  QuadrangleLayout one_d(v, grid_of({500}, {0}));
  CHECK(one_d.cubes_per_stripe() == 5);
  one_d.place({{0, v.stripe_blocks() * one_d.space().stripes}});
  for (std::uint64_t i = 0; i < 500; ++i) CHECK(one_d.cell_vlbn(std::vector<std::uint64_t>{i}) == i / 2);
}

TEST_CASE("quadrangle layout: parameters, describe() and errors", "[quadrangle]") {
  auto g = layout_disk();
  AtroposVolume v(*g, 3, 2);
  QuadrangleLayout l(v, grid_of({12, 150}, {1, 0}));
  // 150 cells along the primary: 3 cubes of 66; 12 along dim 0: 3 of 5.
  CHECK(l.cubes() == 9);
  CHECK(l.space().stripes == 9);
  CHECK(l.space().stripe_blocks == v.stripe_blocks());
  const nlohmann::json j = l.describe();
  CHECK(j["layout"] == "quadrangle");
  CHECK(j["devices"] == 3);
  CHECK(j["width"] == 11);
  CHECK(j["depth"] == 5);
  CHECK(j["cells_per_block"] == 2);
  CHECK(j["cube"] == nlohmann::json{5, 66});

  // A cell of 4 sectors does not fit a 2-sector block.
  CHECK_THROWS_AS(QuadrangleLayout(v, grid_of({4, 4}, {1, 0}, 2048)), std::invalid_argument);
  // Bad depth cubes: wrong rank, primary not 1, past the extent, more rows than d.
  CHECK_THROWS_AS(QuadrangleLayout(v, grid_of({12, 150}, {1, 0}), {5}), std::invalid_argument);
  CHECK_THROWS_AS(QuadrangleLayout(v, grid_of({12, 150}, {1, 0}), {5, 2}), std::invalid_argument);
  CHECK_THROWS_AS(QuadrangleLayout(v, grid_of({12, 150}, {1, 0}), {13, 1}), std::invalid_argument);
  CHECK_THROWS_AS(QuadrangleLayout(v, grid_of({6, 5, 30}, {2, 1, 0}), {3, 2, 1}), std::invalid_argument);

  // Cells before place(), and bad extents.
  const std::uint64_t s = v.stripe_blocks();
  CHECK_THROWS_AS(l.cell_vlbn(std::vector<std::uint64_t>{0, 0}), std::invalid_argument);
  CHECK_THROWS_AS(l.place({{0, 8 * s}}), std::invalid_argument);                 // too few
  CHECK_THROWS_AS(l.place({{1, 9 * s}}), std::invalid_argument);                 // not at a stripe boundary
  CHECK_THROWS_AS(l.place({{0, 9 * s - 1}}), std::invalid_argument);             // not whole stripes
  CHECK_THROWS_AS(l.place({{0, 5 * s}, {4 * s, 4 * s}}), std::invalid_argument);  // overlapping
  CHECK_THROWS_AS(l.place({{v.blocks() - 4 * s, 9 * s}}), std::invalid_argument); // past the volume
  l.place({{0, 4 * s}, {v.blocks() - 5 * s, 5 * s}});
  CHECK_NOTHROW(l.cell_vlbn(std::vector<std::uint64_t>{11, 149}));
  CHECK_THROWS_AS(l.cell_vlbn(std::vector<std::uint64_t>{12, 0}), std::invalid_argument);
  CHECK_THROWS_AS(l.cell_vlbn(std::vector<std::uint64_t>{0}), std::invalid_argument);

  // The Atlas 10K III with one-sector cells: b = 26, so 26 cells a block and
  // a row of 26 blocks on each of 4 devices.
  auto atlas = geom::load_geometry("atlas10k3");
  AtroposVolume big(*atlas, 4, 1);
  QuadrangleLayout on_atlas(big, grid_of({1000, 5000}, {1, 0}));
  CHECK(on_atlas.cells_per_block() == 26);
  CHECK(on_atlas.row_cells() == 26u * 4 * 26);
}
