// The MEMStore geometry (MEMS paper §2-3, Tables 1-3): layout, equivalence
// classes, boundaries, JSON. Its service-time model is in
// test_mems_service.cc.
#include <catch2/catch.hpp>

#include "tests/unit/support/geometry_errors.h"
#include "tests/unit/support/mems_test_support.h"
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "geometry/memstore.h"

using namespace mmfs::geom;

namespace {

using testing::g2;
using testing::toy;

bool contains(const std::vector<Lbn>& sorted, Lbn l) { return std::binary_search(sorted.begin(), sorted.end(), l); }

using testing::error_of;
using testing::message_of;

// A random LBN, one time in four on the first or last cylinder.
Lbn random_lbn(const MemStore& g, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::uint32_t> edge(0, 7), y(0, g.params().Sy - 1), sq(0, g.params().N - 1);
  switch (edge(rng)) {
    case 0: return g.lbn_at(0, y(rng), sq(rng));
    case 1: return g.lbn_at(g.params().Sx - 1, y(rng), sq(rng));
    default: return std::uniform_int_distribution<Lbn>(0, g.capacity_sectors() - 1)(rng);
  }
}

}  // namespace

TEST_CASE("G2 (Table 3): derived parameters") {
  MemStore g(g2());
  CHECK(g.parallelism() == 10);
  CHECK(g.Nx() == 10);
  CHECK(g.Ny() == 10);
  CHECK(g.sectors_per_track() == 270);
  CHECK(g.sectors_per_cylinder() == 2700);
  CHECK(g.capacity_sectors() == 6'750'000);  // §2.2: "6,750,000 total LBNs"
  CHECK(g.tracks() == 2500 * 10);
  CHECK(g.depth() == 10);
  CHECK(g.skew(12345) == 0.0);
  auto info = g.info();
  CHECK(info["kind"] == "mems");
  CHECK(info["equivalence_class_size"] == 100);
  CHECK(info["sectors_per_track"] == 270);
  CHECK(info["depth"] == 10);
  CHECK(info["skew_deg"] == 0);
}

TEST_CASE("G2 equivalence class: 100 LBNs at M=0, 1100 at M=5") {
  MemStore g0(g2(0)), g5(g2(5));
  const Lbn l = g0.lbn_at(1250, 13, 42);  // a middle cylinder
  CHECK(g0.equivalent(l).size() == 100);
  CHECK(g5.equivalent(l).size() == 1100);
  // Clamped at the X edges: 6 cylinders reachable from x = 0 and x = Sx-1.
  CHECK(g5.equivalent(g5.lbn_at(0, 0, 0)).size() == 600);
  CHECK(g5.equivalent(g5.lbn_at(2499, 26, 99)).size() == 600);
  CHECK(g5.info()["equivalence_class_size"] == 1100);
}

TEST_CASE("equivalence classes: membership, same y, sorted, symmetric (property)") {
  std::mt19937_64 rng(0x4d454d53);
  for (std::uint32_t M : {0u, 5u}) {
    MemStore g(g2(M));
    for (int n = 0; n < 2000; ++n) {
      const Lbn a = random_lbn(g, rng);
      const auto pa = g.position(a);
      const auto ea = g.equivalent(a);
      INFO("M=" << M << " a=" << a);
      REQUIRE(contains(ea, a));
      REQUIRE(std::is_sorted(ea.begin(), ea.end()));
      REQUIRE(std::adjacent_find(ea.begin(), ea.end()) == ea.end());
      for (Lbn b : ea) {
        const auto pb = g.position(b);
        REQUIRE(pb.y == pa.y);
        REQUIRE(std::abs(int(pb.x) - int(pa.x)) <= int(M));  // at M = 0: the same x
      }
      // a in E(b) <=> b in E(a): for a member of E(a), for a nearby LBN on the
      // same row (maybe just out of micropositioning reach), and a random one.
      const Lbn member = ea[std::uniform_int_distribution<std::size_t>(0, ea.size() - 1)(rng)];
      std::uniform_int_distribution<int> dx(-int(M) - 2, int(M) + 2);
      const int nx = std::clamp(int(pa.x) + dx(rng), 0, int(g.params().Sx) - 1);
      const Lbn near = g.lbn_at(std::uint32_t(nx), pa.y, std::uniform_int_distribution<std::uint32_t>(0, 99)(rng));
      const Lbn far = std::uniform_int_distribution<Lbn>(0, g.capacity_sectors() - 1)(rng);
      for (Lbn b : {member, near, far}) {
        INFO("b=" << b);
        REQUIRE(contains(ea, b) == contains(g.equivalent(b), a));
      }
      REQUIRE(contains(g.equivalent(near), a) == (std::abs(nx - int(pa.x)) <= int(M)));
      REQUIRE_FALSE(g.conflicting(a, member));
    }
  }
}

TEST_CASE("position and lbn_at are inverse (G2 and the toy device)") {
  std::mt19937_64 rng(7);
  for (const MemsParams& params : {g2(0), toy(0)}) {
    MemStore g(params);
    std::uniform_int_distribution<Lbn> any(0, g.capacity_sectors() - 1);
    for (int n = 0; n < 5000; ++n) {
      const Lbn l = any(rng);
      const auto pos = g.position(l);
      REQUIRE(pos.x < params.Sx);
      REQUIRE(pos.y < params.Sy);
      REQUIRE(pos.square < params.N);
      REQUIRE(g.lbn_at(pos.x, pos.y, pos.square) == l);
    }
    const auto last = g.position(g.capacity_sectors() - 1);
    CHECK(g.lbn_at(last.x, last.y, last.square) == g.capacity_sectors() - 1);
  }
}

TEST_CASE("track reversal follows the global track parity (Ny even on G2)") {
  // The sled only reverses between tracks, also between cylinders: the last
  // LBN of a track and the first of the next lie at the same y. The paper's
  // LBN_{l,i} (parity of floor(i/Nx) + x) would break this when Ny is even.
  MemStore g(g2());
  for (std::uint64_t t = 1; t < 60; ++t) {
    const Lbn first = t * g.sectors_per_track();
    INFO("track " << t);
    CHECK(g.position(first - 1).y == g.position(first).y);
    CHECK(g.position(first).x - g.position(first - 1).x == (t % 10 == 0 ? 1u : 0u));
  }
  // Within a track, p consecutive LBNs share a y in p different squares.
  const Lbn base = 7 * 270 + 3 * 10;
  for (Lbn l = base; l < base + 10; ++l) CHECK(g.position(l).y == g.position(base).y);
}

TEST_CASE("Table 2 toy device reproduces Figure 2's numbering") {
  MemStore g(toy());
  CHECK(g.sectors_per_track() == 9);
  CHECK(g.sectors_per_cylinder() == 27);
  for (std::uint32_t l = 0; l < 3; ++l) {
    const auto pos = g.position(l);
    CHECK(pos.x == 0);
    CHECK(pos.y == 0);
    CHECK(pos.square == l);
  }
  // Numbered downward across the first row of squares...
  CHECK(g.position(3).y == 1);
  CHECK(g.position(8).y == 2);
  CHECK(g.position(8).square == 2);
  // ...then upward in the next row of squares, starting at the bottom.
  CHECK(g.position(9).y == 2);
  CHECK(g.position(9).square == 3);
  CHECK(g.position(17).y == 0);
  // §2.2: "(e.g., 33, 34, and 35), or ... (e.g., 33, 38, and 52)".
  const auto e = g.equivalent(33);
  CHECK(e.size() == 9);
  for (Lbn l : {33, 34, 35, 38, 52}) CHECK(contains(e, l));
  const auto p33 = g.position(33);
  CHECK(g.lbn_at(p33.x, p33.y, p33.square) == 33);
  // M = 1 (§3.2): "the equivalence class for each LBN would have (at most) 27 LBNs".
  CHECK(MemStore(toy(1)).equivalent(33).size() == 27);
}

TEST_CASE("track boundaries partition the LBN space") {
  MemStore g(g2());
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<Lbn> any(0, g.capacity_sectors() - 1);
  for (int n = 0; n < 2000; ++n) {
    const Lbn l = any(rng);
    const TrackBounds b = g.track_boundaries(l);
    REQUIRE(b.low <= l);
    REQUIRE(l <= b.high);
    REQUIRE(b.length() == 270);  // §3.4: LBN_max - LBN_min = S_T (exclusive max)
    REQUIRE(b.low % 270 == 0);
    REQUIRE(g.track_of(l) == b.low / 270);
    if (b.high + 1 < g.capacity_sectors()) REQUIRE(g.track_boundaries(b.high + 1).low == b.high + 1);
    if (b.low > 0) REQUIRE(g.track_boundaries(b.low - 1).high == b.low - 1);
  }
  const Lbn last = g.capacity_sectors() - 1;
  CHECK(g.track_boundaries(last) == TrackBounds{last - 269, last});
  CHECK(g.track_of(last) == g.tracks() - 1);
  CHECK(g.track_boundaries(0) == TrackBounds{0, 269});
}

TEST_CASE("adjacency: the same offset s tracks away") {
  MemStore g(g2());
  CHECK(g.adjacent(5, 1) == 275);
  CHECK(g.adjacent(5, 10) == 2705);
  const Lbn last = g.capacity_sectors() - 1;
  CHECK(g.adjacent(last - 270, 1) == last);
  CHECK(error_of([&] { g.adjacent(last - 269, 1); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { g.adjacent(5, 0); }) == ErrorKind::Invalid);
  CHECK(error_of([&] { g.adjacent(5, 11); }) == ErrorKind::Invalid);
  auto p = g2();
  p.depth = 40;
  CHECK(MemStore(p).adjacent(5, 40) == 5 + 40 * 270);
}

TEST_CASE("out-of-range LBNs throw OutOfRange") {
  MemStore g(g2());
  const Lbn cap = g.capacity_sectors();
  CHECK(error_of([&] { g.position(cap); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { g.equivalent(cap); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { g.track_boundaries(cap); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { g.track_of(cap + 100); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { g.adjacent(cap, 1); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { g.skew(cap); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { g.conflicting(0, cap); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { g.lbn_at(2500, 0, 0); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { g.lbn_at(0, 27, 0); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { g.lbn_at(0, 0, 100); }) == ErrorKind::OutOfRange);
}

TEST_CASE("MEMS JSON: round trip and errors naming the field") {
  MemStore g(g2(5));
  auto back = MemStore::from_json(g.definition());
  CHECK(back->definition() == g.definition());
  CHECK(back->params().M == 5);

  nlohmann::json j = {{"kind", "mems"}, {"p", 10}, {"squares", 100}, {"sectors_per_square_x", 2500},
                      {"sectors_per_square_y", 27}, {"notes", {"a", "b"}}, {"name", "x"}};
  CHECK(MemStore::from_json(j)->capacity_sectors() == 6'750'000);
  auto bad = [&](const char* key, nlohmann::json value) {
    nlohmann::json k = j;
    if (value.is_null()) k.erase(key);
    else k[key] = value;
    return message_of([&] { MemStore::from_json(k); });
  };
  CHECK_THAT(bad("p", -1), Catch::Contains("'p'"));
  CHECK_THAT(bad("p", 0), Catch::Contains("'p'"));
  CHECK_THAT(bad("squares", nullptr), Catch::Contains("'squares'"));
  CHECK_THAT(bad("squares", 95), Catch::Contains("'squares'"));  // not a multiple of p
  CHECK_THAT(bad("sectors_per_square_y", "27"), Catch::Contains("'sectors_per_square_y'"));
  CHECK_THAT(bad("x_full_ms", -0.5), Catch::Contains("'x_full_ms'"));
  CHECK_THAT(bad("bandwidth_mb_s", 0), Catch::Contains("'bandwidth_mb_s'"));
  CHECK_THAT(bad("kind", "disk"), Catch::Contains("'kind'"));
  CHECK_THAT(bad("sqares", 3), Catch::Contains("'sqares'"));
  CHECK(error_of([&] { MemStore::from_json(nlohmann::json{{"p", 1}}); }) == ErrorKind::Invalid);
  auto p = g2();
  p.N = 99;
  CHECK(error_of([&] { MemStore{p}; }) == ErrorKind::Invalid);
}

// ---- service-time model ----
