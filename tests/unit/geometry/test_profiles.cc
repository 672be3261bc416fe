// Properties every geometry must have, checked through the Geometry interface
// on every built-in profile.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "geometry/load.h"
#include "geometry/service_time.h"

using namespace mmfs::geom;

TEST_CASE("every profile: boundaries partition the LBNs, adjacency steps whole tracks") {
  std::mt19937_64 rng(7);
  for (const auto& name : profile_names()) {
    auto g = load_geometry(name);
    INFO(name);
    Lbn cap = g->capacity_sectors();
    for (int i = 0; i < 2000; ++i) {
      Lbn l = i == 0 ? 0 : i == 1 ? cap - 1 : rng() % cap;
      TrackBounds b = g->track_boundaries(l);
      REQUIRE(b.low <= l);
      REQUIRE(l <= b.high);
      CHECK(g->track_boundaries(b.low) == b);
      CHECK(g->track_boundaries(b.high) == b);
      if (b.high + 1 < cap) CHECK(g->track_boundaries(b.high + 1).low == b.high + 1);
      if (b.low > 0) CHECK(g->track_boundaries(b.low - 1).high == b.low - 1);
      double sk = g->skew(l);
      CHECK(sk >= 0.0);
      CHECK(sk < 360.0);
      std::uint32_t s = 1 + std::uint32_t(rng() % g->depth());
      if (g->track_of(l) + s < g->tracks()) CHECK(g->track_of(g->adjacent(l, s)) == g->track_of(l) + s);
    }
    CHECK_THROWS_AS(g->track_boundaries(cap), GeometryError);
    CHECK_THROWS_AS(g->adjacent(0, g->depth() + 1), GeometryError);
  }
}

TEST_CASE("every profile: scattered reads cost more than sequential ones, except on flash") {
  std::mt19937_64 rng(8);
  for (const auto& name : profile_names()) {
    auto g = load_geometry(name);
    INFO(name);
    auto m = g->make_service_model();
    std::vector<Request> sequential, scattered;
    for (Lbn i = 0; i < 64; ++i) sequential.push_back({1024 + 8 * i, 8});  // aligned: flash cuts requests at its optimal size
    for (int i = 0; i < 64; ++i) scattered.push_back({rng() % (g->capacity_sectors() - 8), 8});
    m->reset();
    double seq = 0;
    for (const Request& r : sequential) seq += m->serve_one(r);
    m->reset();
    double rnd = 0;
    for (const Request& r : scattered) rnd += m->serve_one(r);
    CHECK(seq > 0);
    if (g->kind() == DeviceKind::Flash) CHECK(seq == Approx(rnd).epsilon(0.1));  // no positioning cost
    else CHECK(seq < rnd);
    CHECK(m->clock_ms() >= rnd);
  }
}
