// The MEMStore service-time model (geometry/mems_service.h, MEMS paper §2-3,
// Table 1): streaming, sequential and random requests, equivalence classes
// transferring together, micropositioning, errors, the clock and overheads.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "geometry/memstore.h"
#include "geometry/mems_service.h"
#include "tests/unit/support/geometry_errors.h"
#include "tests/unit/support/mems_test_support.h"

using namespace mmfs::geom;

namespace {

using testing::g2;

bool contains(const std::vector<Lbn>& sorted, Lbn l) { return std::binary_search(sorted.begin(), sorted.end(), l); }

using testing::error_of;

}  // namespace

TEST_CASE("MEMS service: streaming a track runs at ~38 MB/s (Table 1)") {
  MemStore g(g2());
  MemsServiceModel m(g);
  const double row = m.row_time_ms();
  CHECK(row == Approx(10 * 512 / 38e6 * 1e3));
  for (Lbn track : {Lbn(0), Lbn(1), Lbn(12345)}) {  // both sled directions
    const Lbn first = track * 270;
    m.place_at(first);
    const double ms = m.serve_one({first, 270});
    CHECK(ms == Approx(27 * row));  // n/p row times, no positioning
    CHECK(270 * 512 / ms / 1e3 == Approx(38.0).epsilon(0.10));
  }
  // Many cylinders in one request: only turnarounds and one-column X moves added.
  m.reset();
  const double ms = m.serve_one({0, 20 * 2700});
  const double mb_s = 20 * 2700 * 512 / ms / 1e3;
  CHECK(mb_s == Approx(38.0).epsilon(0.10));
  CHECK(mb_s < 38.0);
  CHECK(m.clock_ms() == Approx(ms));
}

TEST_CASE("MEMS service: a sequential request costs n/p row times plus one positioning") {
  MemStore g(g2());
  MemsServiceModel m(g);
  const double row = m.row_time_ms();
  const Lbn start = 3'000'000 + 40;  // 10 rows in the middle of a track
  m.place_at(start);
  CHECK(m.serve_one({start, 100}) == Approx(10 * row));
  // From elsewhere: one positioning, to whichever end of the run is nearer.
  for (Lbn from : {Lbn(1'000'000), Lbn(3'000'000 + 200), Lbn(6'000'000)}) {
    m.place_at(from);
    const double to_first = m.positioning_ms(start), to_last = m.positioning_ms(start + 99);
    CHECK(std::min(to_first, to_last) > 0.0);
    const double ms = m.serve_one({start, 100});
    CHECK(ms >= 10 * row + std::min(to_first, to_last) - 1e-9);
    CHECK(ms <= 10 * row + std::min(to_first, to_last) + 0.2);  // entering in the run's direction
  }
  // Unaligned: 26 sectors from the middle of a row touch 4 rows.
  m.place_at(start + 5);
  CHECK(m.serve_one({start + 5, 26}) == Approx(4 * row));
}

TEST_CASE("MEMS service: random single-sector positioning averages ~0.56 ms (Table 1)") {
  MemStore g(g2());
  MemsServiceModel m(g);
  std::mt19937_64 rng(2024);
  std::uniform_int_distribution<Lbn> any(0, g.capacity_sectors() - 1);
  const int n = 20000;
  double sum = 0.0;
  for (int i = 0; i < n; ++i) {
    m.place_at(any(rng));
    sum += m.serve_one({any(rng), 1}) - m.row_time_ms();
  }
  CHECK(sum / n == Approx(0.56).epsilon(0.10));
}

TEST_CASE("MEMS service: p LBNs of one equivalence class transfer together") {
  MemStore g(g2());
  MemsServiceModel m(g);
  const Lbn l = g.lbn_at(1000, 5, 0);
  // One LBN from each of the 10 tracks (rows of squares) of the class: not
  // sequential, but all at the same (x, y).
  std::vector<Request> same;
  for (std::uint32_t k = 0; k < 10; ++k) same.push_back({g.lbn_at(1000, 5, k * 10 + k), 1});
  for (const Request& r : same) REQUIRE(contains(g.equivalent(l), r.lbn));

  m.place_at(4'000'000);
  const double one = m.positioning_ms(l) + m.row_time_ms();
  std::vector<std::uint32_t> order;
  const double batch = m.serve(same, &order);
  CHECK(batch == Approx(one));
  std::vector<std::uint32_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::uint32_t> all(10);
  std::iota(all.begin(), all.end(), 0u);
  CHECK(sorted == all);

  // The same number of LBNs from 10 different classes (different y).
  std::vector<Request> spread;
  for (std::uint32_t k = 0; k < 10; ++k) spread.push_back({g.lbn_at(1000, k * 2, k * 11), 1});
  m.place_at(4'000'000);
  const double slow = m.serve(spread);
  CHECK(slow >= 10 * m.row_time_ms());
  CHECK(slow > 2 * batch);

  // More than p from one class needs ceil(count/p) passes over the row.
  std::vector<Request> twenty;
  for (std::uint32_t i = 0; i < 20; ++i) twenty.push_back({g.lbn_at(1000, 5, i * 5), 1});
  m.place_at(g.lbn_at(1000, 5, 0));
  const double two = m.serve(twenty);
  CHECK(two >= 2 * m.row_time_ms());
  CHECK(two < 2 * m.row_time_ms() + 0.1);  // one turnaround
}

TEST_CASE("MEMS service: micropositioning merges nearby columns") {
  MemStore g(g2(5));
  MemsServiceModel m(g);
  std::vector<Request> batch;
  for (std::uint32_t i = 0; i < 10; ++i) batch.push_back({g.lbn_at(1000 + (i % 3) * 4, 9, i * 10), 1});  // x in 1000..1008
  m.place_at(g.lbn_at(1004, 9, 0));
  CHECK(m.serve(batch) == Approx(m.row_time_ms()));
  MemStore g0(g2(0));
  MemsServiceModel m0(g0);
  m0.place_at(g0.lbn_at(1004, 9, 0));
  CHECK(m0.serve(batch) > 3 * m0.row_time_ms());
}

TEST_CASE("MEMS service: errors leave the state unchanged; clock, idle, reset") {
  MemStore g(g2());
  MemsServiceModel m(g);
  m.serve_one({123456, 8});
  const double clock = m.clock_ms();
  const double next = m.positioning_ms(5'000'000);
  std::vector<Request> bad = {{10, 1}, {g.capacity_sectors() - 1, 2}};
  CHECK(error_of([&] { m.serve(bad); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { m.serve_one({g.capacity_sectors(), 1}); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { m.place_at(g.capacity_sectors()); }) == ErrorKind::OutOfRange);
  CHECK(m.clock_ms() == clock);
  CHECK(m.positioning_ms(5'000'000) == next);
  m.idle(2.5);
  CHECK(m.clock_ms() == Approx(clock + 2.5));
  CHECK(error_of([&] { m.idle(-1); }) == ErrorKind::Invalid);
  CHECK(m.serve({}) == 0.0);
  m.reset();
  CHECK(m.clock_ms() == 0.0);
  CHECK(m.positioning_ms(0) == 0.0);
  auto via_geometry = g.make_service_model();
  CHECK(via_geometry->serve_one({0, 270}) == Approx(27 * m.row_time_ms()));
}

TEST_CASE("MEMS: overhead_ms is charged once per non-empty batch", "[mems]") {
  MemsParams p = g2();
  MemStore plain(p);
  p.overhead_ms = 0.5;
  MemStore with(p);
  auto a = plain.make_service_model(), b = with.make_service_model();
  std::vector<Request> batch{{1000, 8}, {500000, 3}, {2000000, 1}};
  CHECK(b->serve(batch) == Approx(a->serve(batch) + 0.5));
  CHECK(b->serve(std::span<const Request>()) == 0.0);
  CHECK(b->clock_ms() == Approx(a->clock_ms() + 0.5));
  CHECK(with.definition()["overhead_ms"] == 0.5);
  CHECK(MemStore::from_json(with.definition())->params().overhead_ms == 0.5);
}
