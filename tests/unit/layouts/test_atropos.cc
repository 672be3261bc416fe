// The Atropos volume mapping (Atropos §3.1-§3.3) against quadrangles built
// by brute force from the disk model's sector angles. The quadrangle layout
// of arrays on it is in test_quadrangle.cc.
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
#include "tests/unit/support/quadrangle_test_support.h"

using namespace mmfs;
using namespace mmfs::layouts;
using geom::ErrorKind;
using geom::testing::error_of;
using testing::track_start;

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
