// The disk service-time model against the papers' measured figures.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "geometry/disk_service.h"
#include "geometry/load.h"

using namespace mmfs::geom;

namespace {

std::unique_ptr<ZonedDisk> disk(const std::string& profile, nlohmann::json overrides = nlohmann::json::object()) {
  overrides["profile"] = profile;
  auto g = load_geometry(overrides);
  return std::unique_ptr<ZonedDisk>(dynamic_cast<ZonedDisk*>(g.release()));
}

// Puts the head on a random cylinder of zone 0 at a random rotational angle.
void random_start(DiskServiceModel& m, const ZonedDisk& g, std::mt19937_64& rng) {
  const auto& z = g.zones().front();
  m.place_at(z.first_lbn + rng() % z.sectors);
  m.idle(std::uniform_real_distribution<double>(0, g.revolution_ms())(rng));
}

}  // namespace

TEST_CASE("MultiMap Fig. 6: adjacent blocks cost the settle time, others half a revolution more") {
  // Table 1's 0° setting: W is exactly the settle angle.
  auto g = disk("atlas10k3", {{"conservatism_deg", 0}, {"max_depth", 0}});
  DiskServiceModel m(*g);
  std::mt19937_64 rng(6);
  double adjacent = 0, normal = 0;
  const int n = 4000;
  for (int i = 0; i < n; ++i) {
    Lbn l = rng() % (g->capacity_sectors() - 200000);
    std::uint32_t s = 1 + std::uint32_t(rng() % g->depth());
    Lbn a = g->adjacent(l, s);
    m.place_at(l);  // the head has just reached l
    adjacent += m.serve_one({a, 1});
    // The same track distance, any block of the target track.
    TrackBounds b = g->track_boundaries(a);
    m.place_at(l);
    normal += m.serve_one({b.low + rng() % b.length(), 1});
  }
  adjacent /= n;
  normal /= n;
  double sector_ms = g->revolution_ms() / 686;
  CHECK(adjacent == Approx(1.10).margin(2 * sector_ms));                 // ≈ settle time
  CHECK(normal == Approx(1.10 + g->revolution_ms() / 2).epsilon(0.05));  // ≈ settle + half a revolution
  CHECK(normal / adjacent > 3.4);                                        // the ~4x gap of Fig. 6
  CHECK(normal / adjacent < 4.5);
}

TEST_CASE("Atropos §5.2.2: random 8 KB reads, contiguous vs quadrangles of depth 2 and 4") {
  auto g = disk("atlas10k3");
  DiskServiceModel m(*g);
  std::mt19937_64 rng(522);
  const auto& z = g->zones().front();
  const std::uint32_t N = z.spec.sectors_per_track;
  auto average = [&](std::uint32_t d) {
    double total = 0;
    const int n = 3000;
    for (int i = 0; i < n; ++i) {
      random_start(m, *g, rng);
      // A random quadrangle start in zone 0, d tracks of 16/d sectors each,
      // placed semi-sequentially (every w-th VLBN, Atropos §3.2.2).
      std::uint32_t b = 16 / d;
      std::uint64_t track = z.first_track + rng() % (z.tracks - d);
      std::uint32_t sector = std::uint32_t(rng() % N);
      std::vector<Request> batch;
      for (std::uint32_t k = 0; k < d; ++k) {
        Lbn first = g->track_first_lbn(track + k);
        std::uint32_t off = (sector + k * b) % N;
        if (off + b > N) off = 0;  // keep each block on its track
        batch.push_back({first + off, b});
      }
      total += m.serve(batch);
    }
    return total / n;
  };
  double contiguous = average(1), d2 = average(2), d4 = average(4);
  INFO("contiguous " << contiguous << " ms, d=2 " << d2 << " ms, d=4 " << d4 << " ms");
  CHECK(contiguous == Approx(5.93).epsilon(0.15));
  CHECK(d2 == Approx(5.93 * 1.16).epsilon(0.15));
  CHECK(d4 == Approx(5.93 * 1.38).epsilon(0.15));
  CHECK(contiguous < d2);
  CHECK(d2 < d4);
}

TEST_CASE("zero-latency firmware reads a whole track in one revolution wherever it lands") {
  auto g = disk("atlas10k3");
  DiskServiceModel m(*g);
  TrackBounds t = g->track_boundaries(686 * 50);
  for (double lag : {0.0, 0.7, 2.9, 4.4, 5.99}) {
    m.place_at(t.low);  // on the track, at its first sector
    m.idle(lag);
    CHECK(m.serve_one({t.low, std::uint32_t(t.length())}) == Approx(g->revolution_ms()).margin(g->revolution_ms() / 686 + 1e-9));
  }
  // Without zero latency the same read waits for sector 0 first.
  auto nzl = disk("atlas10k3", {{"zero_latency", false}});
  DiskServiceModel m2(*nzl);
  m2.place_at(t.low);
  m2.idle(3.0);
  CHECK(m2.serve_one({t.low, std::uint32_t(t.length())}) == Approx(3.0 + g->revolution_ms()).margin(0.01));
}

TEST_CASE("sequential streaming loses only the head and cylinder switches (Atropos Eq. 6)") {
  auto g = disk("atlas10k3");
  DiskServiceModel m(*g);
  m.place_at(0);
  const std::uint32_t tracks = 64;  // 8 cylinders of 8 surfaces
  double ms = m.serve_one({0, 686 * tracks});
  // Zero-latency firmware starts each track wherever the head lands, so a
  // switch costs its own time, not the skew: 56 head switches, 7 one-cylinder seeks.
  double expected = tracks * g->revolution_ms() + 56 * g->params().head_switch_ms + 7 * g->params().seek.settle_ms;
  CHECK(ms == Approx(expected).epsilon(0.01));
  // Eq. 6's 1 - H/N with H the switch time in sectors.
  double efficiency = tracks * g->revolution_ms() / ms;
  CHECK(efficiency > 0.8);
  CHECK(efficiency < 0.9);
}

TEST_CASE("SPTF: the firmware serves the nearest request of a batch first") {
  auto g = disk("atlas10k3");
  DiskServiceModel m(*g);
  m.place_at(686 * 10);
  // Same track as the head, just ahead; and a block half a revolution away on a far cylinder.
  std::vector<Request> batch = {{686 * 8 * 5000 + 300, 1}, {686 * 10 + 5, 1}};
  std::vector<std::uint32_t> order;
  m.serve(batch, &order);
  CHECK(order == std::vector<std::uint32_t>{1, 0});
  // A queue depth of 1 serves in submission order.
  auto fifo = disk("atlas10k3", {{"queue_depth", 1}});
  DiskServiceModel f(*fifo);
  f.place_at(686 * 10);
  f.serve(batch, &order);
  CHECK(order == std::vector<std::uint32_t>{0, 1});
}

TEST_CASE("service model: out-of-range requests throw and leave the state alone") {
  auto g = disk("atlas10k3");
  DiskServiceModel m(*g);
  m.place_at(12345);
  double clock = m.clock_ms();
  auto cyl = m.cylinder();
  std::vector<Request> batch = {{0, 1}, {g->capacity_sectors() - 1, 2}};
  try {
    m.serve(batch);
    FAIL("a request past the end must throw");
  } catch (const GeometryError& e) {
    CHECK(e.kind() == ErrorKind::OutOfRange);
  }
  CHECK(m.clock_ms() == clock);
  CHECK(m.cylinder() == cyl);
  CHECK_THROWS_AS(m.serve_one({0, 0}), GeometryError);
}
