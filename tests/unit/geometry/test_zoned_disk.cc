// The zoned-disk geometry: MultiMap §3-4.2 and Table 1; property tests over
// both disk profiles.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "geometry/load.h"
#include "geometry/zoned_disk.h"

using namespace mmfs::geom;

namespace {

// docs/reference.md §7's uniform toy geometry with the settle angle set to zero.
nlohmann::json toy_json() {
  return {{"kind", "disk"},       {"sector_size", 512},       {"cylinders", 1000},
          {"surfaces", 1},        {"sectors_per_track", 8},   {"rpm", 10000},
          {"track_skew_sectors", 0}, {"settle_ms", 0.0},      {"settle_cylinders", 4},
          {"conservatism_deg", 0}};
}

std::unique_ptr<ZonedDisk> disk(const std::string& profile, nlohmann::json overrides = nlohmann::json::object()) {
  overrides["profile"] = profile;
  auto g = load_geometry(overrides);
  return std::unique_ptr<ZonedDisk>(dynamic_cast<ZonedDisk*>(g.release()));
}

double angle_diff(double a, double b) {  // (a - b) mod 360, in [0, 360)
  double d = std::fmod(a - b, 360.0);
  return d < 0 ? d + 360.0 : d;
}

}  // namespace

TEST_CASE("MultiMap §4.2 toy geometry: T=8, D=4, adjacent(L, s) = L + 8s") {
  auto g = ZonedDisk::from_json(toy_json());
  REQUIRE(g->depth() == 4);
  CHECK(g->adjacent(0, 1) == 8);   // the first adjacent block of LBN 0
  CHECK(g->adjacent(0, 4) == 32);  // the 4th (§4.2.2: "LBN 32 is the 4th α-neighbor of LBN 0")
  CHECK(g->adjacent(32, 4) == 64);
  for (Lbn l = 0; l < 200; ++l)
    for (std::uint32_t s = 1; s <= 4; ++s) CHECK(g->adjacent(l, s) == l + 8 * s);
  CHECK(g->track_boundaries(9) == TrackBounds{8, 15});
  CHECK(g->capacity_sectors() == 8000);
}

TEST_CASE("Atlas 10K III: depth against conservatism reproduces MultiMap Table 1 within 10 %") {
  struct Row { double conservatism; double D; };
  for (Row row : {Row{0, 136}, Row{10, 180}, Row{20, 380}}) {
    auto g = disk("atlas10k3", {{"conservatism_deg", row.conservatism}, {"max_depth", 0}});
    INFO("conservatism " << row.conservatism << " D=" << g->depth());
    CHECK(std::fabs(g->depth() - row.D) <= 0.10 * row.D);
  }
  // The MultiMap experiments' D = 128 at 30° is the built-in profile's setting.
  auto g = disk("atlas10k3");
  CHECK(g->depth() == 128);
  CHECK(g->params().conservatism_deg == 30);
  CHECK(g->quadrangle(1).N == 686);
  CHECK(g->quadrangle(1).H == 139);
}

TEST_CASE("Cheetah 36ES: 26,302 cylinders, 736..574 sectors per track, C = 12") {
  auto g = disk("cheetah36es", {{"conservatism_deg", 0}, {"max_depth", 0}});
  CHECK(g->cylinders() == 26302);
  CHECK(g->zones().front().spec.sectors_per_track == 736);
  CHECK(g->zones().back().spec.sectors_per_track == 574);
  CHECK(g->depth() == 12 * 4);
  CHECK(disk("cheetah36es")->depth() == 128);
}

TEST_CASE("disk properties over every disk profile") {
  std::mt19937_64 rng(42);
  for (const char* name : {"atlas10k3", "cheetah36es"}) {
    auto g = disk(name);
    INFO(name);
    Lbn cap = g->capacity_sectors();
    // Probe LBNs: random ones and both sides of every zone and track boundary near them.
    std::vector<Lbn> probes = {0, 1, cap - 1, cap - 2};
    for (const auto& z : g->zones()) {
      probes.push_back(z.first_lbn);
      if (z.first_lbn) probes.push_back(z.first_lbn - 1);
    }
    for (int i = 0; i < 3000; ++i) probes.push_back(rng() % cap);

    for (Lbn l : probes) {
      // Track boundaries partition the LBN space.
      TrackBounds b = g->track_boundaries(l);
      REQUIRE(b.low <= l);
      REQUIRE(l <= b.high);
      CHECK(g->track_boundaries(b.low) == b);
      CHECK(g->track_boundaries(b.high) == b);
      if (b.low > 0) CHECK(g->track_boundaries(b.low - 1).high == b.low - 1);
      if (b.high + 1 < cap) CHECK(g->track_boundaries(b.high + 1).low == b.high + 1);
      CHECK(g->track_of(b.low) == g->track_of(b.high));
      CHECK(g->track_length(l) == b.length());

      // Skew advances one sector per LBN on a track, and by the track or
      // cylinder skew from one track's first sector to the next one's.
      double T = double(b.length());
      if (l < b.high) CHECK(angle_diff(g->skew(l + 1), g->skew(l)) == Approx(360.0 / T).margin(1e-6));
      if (b.high + 1 < cap) {
        auto from = g->locate(b.low);
        auto to = g->locate(b.high + 1);
        if (from.zone == to.zone) {
          const ZoneSpec& z = g->zones()[from.zone].spec;
          double expected = (to.cylinder != from.cylinder ? z.cylinder_skew_sectors : z.track_skew_sectors) * 360.0 / T;
          CHECK(angle_diff(g->skew(b.high + 1), g->skew(b.low)) == Approx(expected).margin(1e-6));
        }
      }

      // adjacent(l, s) lies exactly s tracks away, at the first sector at or
      // after skew(l) + W.
      std::uint32_t s = 1 + std::uint32_t(rng() % g->depth());
      if (g->track_of(l) + s >= g->tracks()) continue;
      Lbn a = g->adjacent(l, s);
      CHECK(g->track_of(a) == g->track_of(l) + s);
      double Ta = double(g->track_length(a));
      double late = angle_diff(g->skew(a), g->skew(l) + g->adjacency_angle());
      if (late > 360.0 - 1e-6) late = 0;
      INFO("l=" << l << " s=" << s << " a=" << a << " late=" << late);
      CHECK(late < 360.0 / Ta + 1e-6);
    }
  }
}

TEST_CASE("zone boundaries: adjacency crosses zones by track number") {
  auto g = disk("atlas10k3");
  const auto& z1 = g->zones()[1];
  Lbn last_track_of_z0 = z1.first_lbn - 686;
  for (std::uint32_t s = 1; s <= g->depth(); ++s) {
    Lbn a = g->adjacent(last_track_of_z0 + 100, s);
    CHECK(g->track_of(a) == g->track_of(last_track_of_z0) + s);
  }
}

TEST_CASE("zoned disk: bad input is refused with a clear error") {
  auto g = disk("atlas10k3");
  Lbn cap = g->capacity_sectors();
  CHECK_THROWS_WITH(g->track_boundaries(cap), Catch::Contains("beyond the capacity"));
  CHECK_THROWS_WITH(g->adjacent(0, 0), Catch::Contains("step 0"));
  CHECK_THROWS_WITH(g->adjacent(0, 129), Catch::Contains("1..128"));
  try {
    g->adjacent(cap - 1, 1);
    FAIL("adjacent past the last track must throw");
  } catch (const GeometryError& e) {
    CHECK(e.kind() == ErrorKind::OutOfRange);
  }
  CHECK_THROWS_AS(g->equivalent(0), GeometryError);

  auto bad = [](nlohmann::json j, const char* field) {
    INFO(j.dump());
    CHECK_THROWS_WITH(ZonedDisk::from_json(j), Catch::Contains(field));
  };
  auto j = toy_json();
  j["sectors_per_track"] = -8;
  bad(j, "sectors_per_track");
  j = toy_json();
  j.erase("rpm");
  bad(j, "rpm");
  j = toy_json();
  j["settle_cylinders"] = 0;
  bad(j, "settle_cylinders");
  j = toy_json();
  j["surfacez"] = 2;
  bad(j, "surfacez");
  j = toy_json();
  j["track_skew_sectors"] = 8;
  bad(j, "skew");
  j = toy_json();
  j["zones"] = nlohmann::json::array({{{"cylinders", 10}}});
  j.erase("cylinders");
  j.erase("sectors_per_track");
  bad(j, "zones[0].sectors_per_track");
  j = toy_json();
  j["zero_latency"] = "yes";
  bad(j, "zero_latency");
}

TEST_CASE("zoned disk: definition() rebuilds an identical geometry") {
  for (const char* name : {"atlas10k3", "cheetah36es"}) {
    auto g = disk(name);
    auto again = load_geometry(g->definition());
    CHECK(again->definition() == g->definition());
    CHECK(again->depth() == g->depth());
    CHECK(again->capacity_sectors() == g->capacity_sectors());
    auto info = g->info();
    for (const char* key : {"sector_size", "capacity_sectors", "tracks", "depth", "skew_deg", "zones"})
      CHECK(info.contains(key));
  }
}

TEST_CASE("adjacent_n equals repeated adjacent") {
  std::mt19937_64 rng(11);
  for (const char* name : {"atlas10k3", "cheetah36es"}) {
    auto g = disk(name);
    for (int i = 0; i < 3000; ++i) {
      Lbn l = rng() % (g->capacity_sectors() / 2);
      std::uint32_t step = 1 + std::uint32_t(rng() % g->depth());
      std::uint64_t count = rng() % 300;
      Lbn expected = l;
      for (std::uint64_t k = 0; k < count; ++k) expected = g->adjacent(expected, step);
      INFO(name << " l=" << l << " step=" << step << " count=" << count);
      REQUIRE(g->adjacent_n(l, step, count) == expected);
    }
  }
  auto toy = ZonedDisk::from_json(toy_json());
  CHECK(toy->adjacent_n(0, 4, 2) == 64);
}

TEST_CASE("zone_bounds: the zone table and the generic bisection agree") {
  std::mt19937_64 rng(12);
  for (const char* name : {"atlas10k3", "cheetah36es"}) {
    auto g = disk(name);
    for (std::size_t i = 0; i < g->zones().size(); ++i) {
      const auto& z = g->zones()[i];
      for (Lbn l : {z.first_lbn, z.first_lbn + z.sectors - 1, z.first_lbn + rng() % z.sectors}) {
        TrackBounds exact = g->zone_bounds(l);
        CHECK(exact == TrackBounds{z.first_lbn, z.first_lbn + z.sectors - 1});
        CHECK(g->Geometry::zone_bounds(l) == exact);
      }
    }
    CHECK_THROWS_AS(g->zone_bounds(g->capacity_sectors()), GeometryError);
  }
  // Flash: one zone of equal tracks.
  auto ssd = load_geometry("ssd");
  CHECK(ssd->zone_bounds(12345) == TrackBounds{0, ssd->capacity_sectors() - 1});
}
