// The flash geometry and service-time model: tracks as optimal request size,
// nominal adjacency, queue parallelism and bandwidth.
#include <catch2/catch.hpp>

#include "tests/unit/support/geometry_errors.h"
#include <algorithm>
#include <numeric>

#include "geometry/flash.h"
#include "geometry/service_time.h"

using namespace mmfs::geom;

namespace {

FlashParams small() {  // 1000 pages in tracks of 32: the last track has 8
  FlashParams p;
  p.capacity_sectors = 1000;
  p.track_sectors = 32;
  p.depth = 4;
  return p;
}

using testing::error_of;
using testing::message_of;

}  // namespace

TEST_CASE("flash: tracks and boundaries, the last track short") {
  Flash g(small());
  CHECK(g.tracks() == 32);  // ceil(1000 / 32)
  CHECK(g.track_boundaries(0) == TrackBounds{0, 31});
  CHECK(g.track_boundaries(45) == TrackBounds{32, 63});
  CHECK(g.track_boundaries(999) == TrackBounds{992, 999});
  CHECK(g.track_length(995) == 8);
  CHECK(g.track_of(999) == 31);
  Lbn next = 0;  // the tracks partition the LBN space
  for (std::uint64_t t = 0; t < g.tracks(); ++t) {
    const TrackBounds b = g.track_boundaries(next);
    CHECK(b.low == next);
    next = b.high + 1;
  }
  CHECK(next == 1000);
  CHECK(g.skew(17) == 0.0);
  CHECK(g.parallelism() == 32);
  CHECK(error_of([&] { g.track_boundaries(1000); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { g.equivalent(0); }) == ErrorKind::NotSupported);
  CHECK(error_of([&] { g.quadrangle(1); }) == ErrorKind::NotSupported);
}

TEST_CASE("flash: adjacent(l, s) = l + s * track") {
  Flash g(small());
  CHECK(g.depth() == 4);
  CHECK(g.adjacent(5, 1) == 37);
  CHECK(g.adjacent(5, 4) == 133);
  CHECK(g.adjacent(999 - 32, 1) == 999);
  CHECK(error_of([&] { g.adjacent(999 - 31, 1); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { g.adjacent(5, 0); }) == ErrorKind::Invalid);
  CHECK(error_of([&] { g.adjacent(5, 5); }) == ErrorKind::Invalid);
  CHECK(error_of([&] { g.adjacent(1000, 1); }) == ErrorKind::OutOfRange);
}

TEST_CASE("flash: adjacent_n is the hop by hop walk, its errors included") {
  Flash g(small());
  for (Lbn l = 0; l < 1000; l += 7)
    for (std::uint32_t step = 1; step <= 4; ++step)
      for (std::uint64_t count = 0; count <= 40; ++count) {
        CAPTURE(l, step, count);
        Lbn walk = l;
        std::string walk_error;
        try {
          for (std::uint64_t k = 0; k < count; ++k) walk = g.adjacent(walk, step);
        } catch (const GeometryError& e) {
          walk_error = e.what();
        }
        if (walk_error.empty()) {
          CHECK(g.adjacent_n(l, step, count) == walk);
        } else {
          CHECK(error_of([&] { g.adjacent_n(l, step, count); }) == ErrorKind::OutOfRange);
          CHECK(message_of([&] { g.adjacent_n(l, step, count); }) == walk_error);
        }
      }
  CHECK(error_of([&] { g.adjacent_n(1000, 1, 0); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { g.adjacent_n(5, 5, 1); }) == ErrorKind::Invalid);
}

TEST_CASE("flash JSON: round trip, info, errors naming the field") {
  Flash g(small());
  auto back = Flash::from_json(g.definition());
  CHECK(back->definition() == g.definition());
  auto info = g.info();
  CHECK(info["kind"] == "flash");
  CHECK(info["tracks"] == 32);
  CHECK(info["depth"] == 4);
  CHECK(info["skew_deg"] == 0);
  CHECK(info["parallelism"] == 32);

  nlohmann::json j = {{"kind", "flash"}, {"capacity_sectors", 4096}, {"notes", {"x"}}};
  CHECK(Flash::from_json(j)->track_boundaries(40) == TrackBounds{32, 63});  // defaults
  auto bad = [&](const char* key, nlohmann::json value) {
    nlohmann::json k = j;
    if (value.is_null()) k.erase(key);
    else k[key] = value;
    return message_of([&] { Flash::from_json(k); });
  };
  CHECK_THAT(bad("capacity_sectors", nullptr), Catch::Contains("'capacity_sectors'"));
  CHECK_THAT(bad("queues", 0), Catch::Contains("'queues'"));
  CHECK_THAT(bad("latency_ms", -1), Catch::Contains("'latency_ms'"));
  CHECK_THAT(bad("track_sectors", 1.5), Catch::Contains("'track_sectors'"));
  CHECK_THAT(bad("kind", "mems"), Catch::Contains("'kind'"));
  CHECK_THAT(bad("queue", 4), Catch::Contains("'queue'"));
}

TEST_CASE("flash service: queues serve small requests in parallel") {
  FlashParams p;  // 32 queues, 0.08 ms, 2000 MB/s, 4 KiB pages
  Flash g(p);
  auto m = g.make_service_model();
  const double page_on_one_queue = 4096.0 / (2000e6 / 32) * 1e3;
  CHECK(m->serve_one({12345, 1}) == Approx(0.08 + page_on_one_queue));

  std::vector<Request> batch;
  for (Lbn i = 0; i < 32; ++i) batch.push_back({i * 1000, 1});
  std::vector<std::uint32_t> order;
  const double ms = m->serve(batch, &order);
  CHECK(ms == Approx(0.08 + page_on_one_queue));  // one latency, not 32
  CHECK(ms < 2 * 0.08);
  std::sort(order.begin(), order.end());
  std::vector<std::uint32_t> all(32);
  std::iota(all.begin(), all.end(), 0u);
  CHECK(order == all);

  batch.push_back({7, 1});  // a 33rd request waits for a queue
  CHECK(m->serve(batch) == Approx(2 * (0.08 + page_on_one_queue)));
  CHECK(m->clock_ms() == Approx(4 * (0.08 + page_on_one_queue)));
}

TEST_CASE("flash service: a large request approaches the aggregate bandwidth") {
  Flash g(FlashParams{});
  auto m = g.make_service_model();
  const std::uint32_t sectors = 65536;  // 256 MiB
  const double ms = m->serve_one({1'000'000, sectors});
  const double mb_s = sectors * 4096.0 / ms / 1e3;
  CHECK(mb_s <= 2000.0);
  CHECK(mb_s == Approx(2000.0).epsilon(0.10));
  // Never faster than one latency plus the transfer at full bandwidth.
  CHECK(m->serve_one({0, 32}) >= 0.08 + 32 * 4096 / 2e6);
}

TEST_CASE("flash service: a request pays one latency, and its pages go over the queues side by side") {
  FlashParams p;  // 32 queues, 0.08 ms, 2000 MB/s
  p.track_sectors = 8;
  Flash g(p);
  auto m = g.make_service_model();
  const double page_on_one_queue = 4096.0 / (2000e6 / 32) * 1e3;
  // Two pages: the first with the latency, the second on another queue.
  CHECK(m->serve_one({0, 2}) == Approx(0.08 + page_on_one_queue));
  // Where a request lies does not matter: across a track boundary or not.
  CHECK(m->serve_one({7, 2}) == Approx(m->serve_one({0, 2})));
  std::vector<Request> across, within;
  for (Lbn i = 0; i < 32; ++i) {
    across.push_back({i * 64 + 7, 2});
    within.push_back({i * 64, 2});
  }
  CHECK(m->serve(across) == Approx(m->serve(within)));
  // 32 two-page requests on 32 queues: 32 latencies and 64 pages spread evenly.
  CHECK(m->serve(within) == Approx(0.08 + 2 * page_on_one_queue));
  // 64 pages in one request: one latency, then the pages over all 32 queues,
  // i.e. the transfer at the aggregate bandwidth.
  CHECK(m->serve_one({0, 64}) == Approx(0.08 + 64 * 4096 / 2e6));
  // Two such requests: the second's latency passes while the first moves its pages.
  CHECK(m->serve(std::vector<Request>{{0, 64}, {1000, 64}}) == Approx(0.08 + 2 * 64 * 4096 / 2e6));
}

TEST_CASE("flash service: many requests at depth cost latency / queues each, plus their bytes") {
  FlashParams p;
  p.queues = 8;
  p.latency_ms = 0.08;
  p.bandwidth_mb_s = 2000;
  Flash g(p);
  auto m = g.make_service_model();
  std::vector<Request> batch;
  for (Lbn i = 0; i < 800; ++i) batch.push_back({i * 100, 7});  // 800 requests of 28 KiB
  const double bytes_ms = 800 * 7 * 4096 / 2e6;
  CHECK(m->serve(batch) == Approx(800 * 0.08 / 8 + bytes_ms).epsilon(0.01));
  // The order: every request is reported once.
  std::vector<std::uint32_t> order;
  m->serve(batch, &order);
  std::sort(order.begin(), order.end());
  for (std::uint32_t i = 0; i < order.size(); ++i) REQUIRE(order[i] == i);
  CHECK(order.size() == 800);
}

TEST_CASE("flash service: errors, idle, reset") {
  Flash g(small());
  auto m = g.make_service_model();
  m->serve_one({0, 10});
  const double clock = m->clock_ms();
  std::vector<Request> bad = {{0, 1}, {999, 2}};
  CHECK(error_of([&] { m->serve(bad); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { m->place_at(1000); }) == ErrorKind::OutOfRange);
  CHECK(m->clock_ms() == clock);
  m->place_at(999);
  m->idle(1.0);
  CHECK(m->clock_ms() == Approx(clock + 1.0));
  CHECK(m->serve({}) == 0.0);
  m->reset();
  CHECK(m->clock_ms() == 0.0);
}

TEST_CASE("flash service: an idle device pays wake_ms on its first batch only") {
  FlashParams p;
  const double plain = Flash(p).make_service_model()->serve_one({0, 1});
  p.wake_ms = 0.25;
  Flash g(p);
  auto m = g.make_service_model();
  CHECK(m->serve_one({0, 1}) == Approx(plain + 0.25));  // a new model is an idle device
  CHECK(m->serve_one({64, 1}) == Approx(plain));        // busy: no wake
  m->idle(1.0);                                          // a short wait is not sleep
  CHECK(m->serve_one({128, 1}) == Approx(plain));
  m->idle(20.0);
  CHECK(m->serve_one({192, 1}) == Approx(plain + 0.25));
  CHECK(m->serve({}) == 0.0);  // nothing served: still awake
  m->reset();
  CHECK(m->serve({}) == 0.0);
  CHECK(m->serve_one({320, 1}) == Approx(plain + 0.25));  // an empty batch did not wake it

  // In the definition only when set, so older geometries read and print as before.
  CHECK(g.definition()["wake_ms"] == 0.25);
  CHECK_FALSE(Flash(FlashParams{}).definition().contains("wake_ms"));
  auto j = g.definition();
  CHECK(Flash::from_json(j)->params().wake_ms == 0.25);
  j["wake_ms"] = -1;
  CHECK(error_of([&] { Flash::from_json(j); }) == ErrorKind::Invalid);
}
