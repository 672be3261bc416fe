// Free bandwidth on a MEMStore (MEMS paper §5.1, Table 4): the background scan
// that fills the foreground's unused row-pass slots (geometry/free_bandwidth).
// Brute-force checks on small geometries, the model-time invariance against
// MemsServiceModel, and the paper's 2 / 12 free LBNs per 4 KB request.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "geometry/free_bandwidth.h"
#include "geometry/mems_service.h"
#include "geometry/memstore.h"
#include "tests/unit/support/geometry_errors.h"
#include "tests/unit/support/mems_test_support.h"

using namespace mmfs::geom;

namespace {

using testing::g2;
using testing::mems;
using testing::toy;

// A random batch of 1-3 requests of 1..2p+3 sectors; one start in four near a
// track or cylinder boundary, so that crossings are common.
std::vector<Request> random_batch(const MemStore& g, std::mt19937_64& rng) {
  const std::uint64_t cap = g.capacity_sectors();
  std::uniform_int_distribution<int> count(1, 3), kind(0, 3);
  std::uniform_int_distribution<std::uint32_t> size(1, std::min<std::uint64_t>(2 * g.params().p + 3, cap));
  std::vector<Request> batch;
  for (int i = count(rng); i > 0; --i) {
    const std::uint32_t n = size(rng);
    std::uint64_t start = std::uniform_int_distribution<std::uint64_t>(0, cap - n)(rng);
    if (kind(rng) == 0) {
      const std::uint64_t unit = kind(rng) < 2 ? g.sectors_per_track() : g.sectors_per_cylinder();
      const std::uint64_t boundary = (start / unit + 1) * unit;
      const std::uint64_t back = std::uniform_int_distribution<std::uint64_t>(1, n)(rng);
      if (boundary >= back && boundary - back + n <= cap) start = boundary - back;
    }
    batch.push_back({start, n});
  }
  return batch;
}

std::vector<Request> with_background(std::vector<Request> batch, const std::vector<Lbn>& background) {
  for (Lbn l : background) batch.push_back({l, 1});
  return batch;
}

// Runs random batches until the scan is complete and checks every batch by
// brute force against a shadow set of touched LBNs.
void check_scan_until_complete(const MemsParams& params, std::uint64_t seed, int model_every) {
  const MemStore g(params);
  FreeBandwidthScan scan(g);
  const std::uint64_t cap = g.capacity_sectors();
  const std::uint32_t p = params.p, M = params.M;
  std::vector<char> shadow(cap, 0);
  std::uint64_t shadow_count = 0, granted = 0;
  std::mt19937_64 rng(seed);
  const bool small = cap <= 1000;  // use MemStore::equivalent() literally
  int batches = 0;
  for (; !scan.complete() && batches < 200000; ++batches) {
    const std::vector<Request> fg = random_batch(g, rng);
    std::vector<Lbn> bg;
    const std::size_t picked = scan.pick(fg, &bg);
    REQUIRE(picked == bg.size());
    granted += picked;

    std::set<Lbn> fg_lbns;
    std::uint64_t fg_sectors = 0;
    for (const Request& r : fg)
      for (std::uint32_t i = 0; i < r.sectors; ++i) fg_lbns.insert(r.lbn + i), ++fg_sectors;

    // The passes: the foreground sectors add up, ceil(k/p) passes each, at
    // most p sectors per pass counting the foreground's own.
    const auto& passes = scan.last_passes();
    std::uint64_t pass_fg = 0;
    std::uint32_t bg_seen = 0;
    for (const FreePass& ps : passes) {
      pass_fg += ps.foreground;
      CHECK(ps.passes == (ps.foreground + p - 1) / p);
      REQUIRE(ps.bg_begin == bg_seen);
      REQUIRE(ps.bg_end >= ps.bg_begin);
      bg_seen = ps.bg_end;
      CHECK(ps.foreground + (ps.bg_end - ps.bg_begin) <= ps.passes * p);
      CHECK(ps.lo <= ps.x);
      CHECK(ps.x <= ps.hi);
      CHECK(ps.hi - ps.lo <= 2 * M);
      // Squares of the group (foreground and background) at most `passes` each:
      // a tip reads one column at a time.
      std::map<std::uint32_t, std::uint32_t> per_square;
      for (Lbn l : fg_lbns) {
        const auto pos = g.position(l);
        if (pos.y == ps.y && pos.x >= ps.fg_lo && pos.x <= ps.fg_hi) ++per_square[pos.square];
      }
      for (std::uint32_t i = ps.bg_begin; i < ps.bg_end; ++i) {
        const Lbn l = bg[i];
        const auto pos = g.position(l);
        // In the class of the pass's sled position: same row, within M columns.
        CHECK(pos.y == ps.y);
        CHECK(pos.x >= ps.lo);
        CHECK(pos.x <= ps.hi);
        if (small) {
          const std::vector<Lbn> cls = g.equivalent(g.lbn_at(ps.x, ps.y, 0));
          CHECK(std::binary_search(cls.begin(), cls.end(), l));
        }
        CHECK(++per_square[pos.square] <= ps.passes);
      }
    }
    CHECK(pass_fg == fg_sectors);
    CHECK(bg_seen == bg.size());

    // Every background LBN: never touched before, not in the batch, unique, and
    // in the equivalence class of one of the batch's foreground LBNs.
    std::set<Lbn> seen;
    for (Lbn l : bg) {
      REQUIRE(l < cap);
      CHECK(shadow[l] == 0);
      CHECK(fg_lbns.count(l) == 0);
      CHECK(seen.insert(l).second);
      bool in_class = false;
      const auto pl = g.position(l);
      for (Lbn f : fg_lbns) {
        if (small) {
          const std::vector<Lbn> cls = g.equivalent(f);
          in_class = std::binary_search(cls.begin(), cls.end(), l);
        } else {
          const auto pf = g.position(f);
          in_class = pf.y == pl.y && (pf.x > pl.x ? pf.x - pl.x : pl.x - pf.x) <= M;
        }
        if (in_class) break;
      }
      CHECK(in_class);
    }
    for (const std::set<Lbn>* s : {&fg_lbns, &seen})
      for (Lbn l : *s) {
        if (shadow[l] == 0) ++shadow_count;
        shadow[l] = 1;
      }
    REQUIRE(scan.touched_count() == shadow_count);
    REQUIRE(scan.granted() == granted);

    // The background rides along: the batch's modeled time does not change,
    // from a fresh model and from a random sled position.
    if (batches % model_every == 0) {
      const std::vector<Request> both = with_background(fg, bg);
      MemsServiceModel alone(g), with(g);
      CHECK(with.serve(both) == Approx(alone.serve(fg)).margin(1e-9));
      const Lbn at = std::uniform_int_distribution<Lbn>(0, cap - 1)(rng);
      alone.place_at(at);
      with.place_at(at);
      CHECK(with.serve(both) == Approx(alone.serve(fg)).margin(1e-9));
    }
  }
  REQUIRE(scan.complete());
  CHECK(scan.touched_count() == cap);
  CHECK(scan.foreground_touched() + scan.granted() == cap);
  CHECK(shadow_count == cap);
  for (Lbn l = 0; l < cap; l += (small ? 1 : 7)) CHECK(scan.touched(l));
  for (std::uint32_t x = 0; x < params.Sx; ++x)
    for (std::uint32_t y = 0; y < params.Sy; ++y) CHECK(scan.untouched_at(x, y) == 0);
}

}  // namespace

TEST_CASE("free bandwidth: brute-force invariants until the device is scanned (toy device, Table 2)",
          "[free_bandwidth]") {
  for (std::uint64_t seed : {1, 2, 3}) {
    check_scan_until_complete(toy(0), seed, 1);
    check_scan_until_complete(toy(1), seed, 1);
  }
}

TEST_CASE("free bandwidth: brute-force invariants on small G2-like devices (p = 10, 20; M = 0, 2, 5)",
          "[free_bandwidth]") {
  check_scan_until_complete(mems(10, 100, 12, 27, 0), 7, 5);
  check_scan_until_complete(mems(10, 100, 12, 27, 2), 8, 5);
  check_scan_until_complete(mems(20, 100, 15, 27, 5), 9, 5);
  check_scan_until_complete(mems(4, 12, 9, 5, 3), 10, 1);  // N = 12 squares, odd Ny = 3
}

TEST_CASE("free bandwidth: model time unchanged for 4 KB requests on G2 with and without micropositioning",
          "[free_bandwidth]") {
  for (std::uint32_t M : {0u, 5u}) {
    for (std::uint32_t p : {10u, 20u}) {
      const MemStore g(g2(M, p));
      FreeBandwidthScan scan(g);
      std::mt19937_64 rng(M * 100 + p);
      std::uniform_int_distribution<Lbn> start(0, g.capacity_sectors() - 8);
      // Scan most of the device first, so that the picks spread over columns.
      for (int i = 0; i < 300000; ++i) scan.pick_one({start(rng), 8});
      INFO("touched " << scan.touched_count() << " of " << scan.capacity());
      CHECK(scan.touched_count() > scan.capacity() / 2);
      for (int i = 0; i < 300; ++i) {
        const std::vector<Request> fg = {{start(rng), 8}};
        std::vector<Lbn> bg;
        scan.pick(fg, &bg);
        MemsServiceModel alone(g), with(g);
        INFO("p=" << p << " M=" << M << " request " << fg[0].lbn);
        CHECK(with.serve(with_background(fg, bg)) == Approx(alone.serve(fg)).margin(1e-9));
      }
    }
  }
}

TEST_CASE("free bandwidth: an empty G2 gives 2 free LBNs to an aligned 4 KB request and 12 to an unaligned one",
          "[free_bandwidth]") {
  const MemStore g(g2());
  FreeBandwidthScan scan(g);
  const std::uint64_t st = g.sectors_per_track(), sc = g.sectors_per_cylinder();
  auto free_of = [&](Lbn start) {
    scan.reset();
    return scan.pick_one({start, 8});
  };
  const Lbn cyl = 5 * sc;
  CHECK(free_of(cyl + 30) == 2);        // one row of p = 10: 8 + 2
  CHECK(scan.last_passes().size() == 1);
  CHECK(free_of(cyl + 32) == 2);
  CHECK(free_of(cyl + 35) == 12);       // two rows: 20 slots - 8
  CHECK(scan.last_passes().size() == 2);
  // The exact geometry: a request crossing into the next track of the same
  // cylinder stays on the same (x, y) (the sled reverses), so it is one pass.
  CHECK(free_of(cyl + st - 5) == 2);
  // Across a cylinder boundary it is two columns, two passes at M = 0.
  CHECK(free_of(cyl + sc - 5) == 12);

  // Every start in one cylinder: 3 of 10 offsets aligned (2 free), 7 unaligned
  // (12), except the unaligned starts in the last row of a track that stay in
  // the cylinder (9 of 270 rows: 2 free).
  std::uint64_t aligned = 0, aligned_free = 0, unaligned = 0, unaligned_free = 0, total = 0;
  for (Lbn s = cyl; s < cyl + sc; ++s) {
    const std::size_t f = free_of(s);
    total += f;
    if (s % g.Nx() <= g.Nx() - 8) {
      ++aligned;
      aligned_free += f;
    } else {
      ++unaligned;
      unaligned_free += f;
    }
  }
  CHECK(aligned == 810);
  CHECK(double(aligned_free) / double(aligned) == Approx(2.0));
  CHECK(double(unaligned_free) / double(unaligned) == Approx((1820.0 * 12 + 63 * 2 + 7 * 12) / 1890.0));
  CHECK(double(unaligned_free) / double(unaligned) == Approx(12.0).epsilon(0.04));
  CHECK(double(total) / double(sc) == Approx(23670.0 / 2700.0));

  // p = 20: 8 of 20 slots in one row (12 free), or two rows (32 free).
  const MemStore g20(g2(0, 20));
  FreeBandwidthScan scan20(g20);
  CHECK(scan20.pick_one({5 * sc + 40, 8}) == 12);
  scan20.reset();
  CHECK(scan20.pick_one({5 * sc + 55, 8}) == 32);
}

TEST_CASE("free bandwidth: micropositioning widens the class to 2M+1 columns, one column per square",
          "[free_bandwidth]") {
  const MemStore g(toy(1));
  // Touch all of row y = 1 of column 1 (9 sectors: 3 passes, no free slot).
  FreeBandwidthScan scan(g);
  std::vector<Request> column;
  for (std::uint32_t s = 0; s < 9; ++s) column.push_back({g.lbn_at(1, 1, s), 1});
  CHECK(scan.pick(column) == 0);
  CHECK(scan.untouched_at(1, 1) == 0);
  // One more sector there: one pass with 2 free slots, from columns 0 and 2,
  // and never square 0 (its tip is reading column 1).
  std::vector<Lbn> bg;
  CHECK(scan.pick_one({g.lbn_at(1, 1, 0), 1}, &bg) == 2);
  std::set<std::uint32_t> squares;
  for (Lbn l : bg) {
    const auto pos = g.position(l);
    CHECK(pos.y == 1);
    CHECK(pos.x != 1);
    CHECK(pos.square != 0);
    squares.insert(pos.square);
  }
  CHECK(squares.size() == 2);

  // Without the rule the nearest column's first squares are taken: square 0 too.
  FreeBandwidthScan loose(g, false);
  loose.pick(column);
  bg.clear();
  CHECK(loose.pick_one({g.lbn_at(1, 1, 0), 1}, &bg) == 2);
  CHECK(std::any_of(bg.begin(), bg.end(), [&](Lbn l) { return g.position(l).square == 0; }));

  // G2 at M = 5: a 4 KB request's class is 1100 LBNs over 11 columns; once
  // its own column is used up, the picks come from the neighbours within 5.
  const MemStore g5(g2(5));
  FreeBandwidthScan s5(g5);
  const Lbn l = g5.lbn_at(1000, 7, 23);
  std::vector<Request> own;
  for (std::uint32_t s = 0; s < 100; ++s) own.push_back({g5.lbn_at(1000, 7, s), 1});
  s5.pick(own);
  bg.clear();
  CHECK(s5.pick_one({l, 1}, &bg) == 9);
  for (Lbn b : bg) {
    const auto pos = g5.position(b);
    CHECK(pos.y == 7);
    CHECK(pos.x >= 995);
    CHECK(pos.x <= 1005);
    CHECK(pos.x != 1000);
    CHECK(pos.square != 23);
  }
  const std::vector<Lbn> cls = g5.equivalent(l);
  CHECK(cls.size() == 1100);
  for (Lbn b : bg) CHECK(std::binary_search(cls.begin(), cls.end(), b));
}

TEST_CASE("free bandwidth: picks keep the model's sled column and grouping (M = 5)", "[free_bandwidth]") {
  const MemStore g(g2(5));
  // Touches row y of column z whole: 100 sectors, 10 passes, no free slot.
  auto touch = [&](FreeBandwidthScan& scan, std::uint32_t z, std::uint32_t y) {
    std::vector<Request> row;
    for (std::uint32_t s = 0; s < 100; ++s) row.push_back({g.lbn_at(z, y, s), 1});
    REQUIRE(scan.pick(row) == 0);
  };
  auto same_time = [&](const std::vector<Request>& fg, const std::vector<Lbn>& bg) {
    MemsServiceModel alone(g), with(g);
    CHECK(with.serve(with_background(fg, bg)) == Approx(alone.serve(fg)).margin(1e-9));
  };
  SECTION("the first request reaches the group: the sled stays on its column") {
    FreeBandwidthScan scan(g);
    for (std::uint32_t z = 1000; z <= 1004; ++z) touch(scan, z, 7);
    const std::vector<Request> fg = {{g.lbn_at(1000, 7, 0), 1}, {g.lbn_at(1004, 7, 1), 1}};
    std::vector<Lbn> bg;
    CHECK(scan.pick(fg, &bg) == 8);
    REQUIRE(scan.last_passes().size() == 1);
    CHECK(scan.last_passes()[0].x == 1000);
    for (Lbn b : bg) CHECK(g.position(b).x == 999);  // nearest untouched column within M of 1000
    same_time(fg, bg);
  }
  SECTION("the first request does not reach the group: only columns inside its span") {
    FreeBandwidthScan scan(g);
    for (std::uint32_t z = 995; z <= 1013; ++z)
      if (z != 999) touch(scan, z, 7);
    const std::vector<Request> fg = {{g.lbn_at(1000, 7, 0), 1}, {g.lbn_at(1008, 7, 1), 1}};
    std::vector<Lbn> bg;
    CHECK(scan.pick(fg, &bg) == 0);  // column 999 would move the model's sled off 1004
    CHECK(scan.last_passes()[0].x == 1004);
    same_time(fg, bg);
  }
  SECTION("two groups in one row: no pick in the previous group's window") {
    FreeBandwidthScan scan(g);
    for (std::uint32_t z = 1011; z <= 1016; ++z) touch(scan, z, 7);
    const std::vector<Request> fg = {{g.lbn_at(1000, 7, 0), 1}, {g.lbn_at(1011, 7, 1), 1}};
    std::vector<Lbn> bg;
    scan.pick(fg, &bg);
    REQUIRE(scan.last_passes().size() == 2);
    const FreePass& second = scan.last_passes()[1];
    CHECK(second.lo == 1011);
    CHECK(second.bg_end == second.bg_begin);
    same_time(fg, bg);
  }
}

TEST_CASE("free bandwidth: errors leave the scan unchanged", "[free_bandwidth]") {
  const MemStore g(toy());
  FreeBandwidthScan scan(g);
  scan.pick_one({0, 3});
  const std::uint64_t t = scan.touched_count();
  std::vector<Request> bad = {{10, 2}, {80, 2}};
  CHECK(testing::error_of([&] { scan.pick(bad); }) == ErrorKind::OutOfRange);
  CHECK(scan.touched_count() == t);
  CHECK_FALSE(scan.touched(10));
  CHECK(testing::error_of([&] { (void)scan.touched(81); }) == ErrorKind::OutOfRange);
  CHECK(scan.pick({}) == 0);
  scan.reset();
  CHECK(scan.touched_count() == 0);
  CHECK_FALSE(scan.touched(0));
}

TEST_CASE("free bandwidth simulation: terminates with every LBN touched; deterministic per seed",
          "[free_bandwidth]") {
  for (std::uint32_t M : {0u, 1u}) {
    const FreeScanResult r = simulate_free_scan(toy(M), 11);
    CHECK(r.capacity == 81);
    CHECK(r.requests_mark > 0);
    CHECK(r.requests_mark <= r.requests_full);
    CHECK(r.granted_mark <= r.granted_full);
    CHECK(r.foreground_touched + r.granted_full == 81);
    REQUIRE(r.curve.size() == 100);
    CHECK(std::is_sorted(r.curve.begin(), r.curve.end()));
    CHECK(r.curve.back() == r.requests_full);
  }
  const MemsParams small = mems(10, 100, 40, 27, 0);
  const FreeScanResult a = simulate_free_scan(small, 5), b = simulate_free_scan(small, 5);
  CHECK(a.requests_full == b.requests_full);
  CHECK(a.requests_mark == b.requests_mark);
  CHECK(a.granted_full == b.granted_full);
  // Over the first 95 % every request gets some free LBNs, at most the
  // empty-device average of 8.77 (it falls as the classes run dry).
  CHECK(a.free_per_request_mark() > 2.0);
  CHECK(a.free_per_request_mark() < 23670.0 / 2700.0);
  // More parallelism and micropositioning scan faster.
  const FreeScanResult p20 = simulate_free_scan(mems(20, 100, 40, 27, 0), 5);
  const FreeScanResult m5 = simulate_free_scan(mems(10, 100, 40, 27, 5), 5);
  CHECK(p20.requests_mark < a.requests_mark);
  CHECK(m5.requests_full < a.requests_full);
  // 4 KB-aligned starts (multiples of 8): more aligned requests on p = 10
  // (2 of 5 instead of 3 of 10), so fewer free LBNs per request.
  FreeScanOptions aligned;
  aligned.align = 8;
  const FreeScanResult a8 = simulate_free_scan(small, 5, aligned);
  CHECK(a8.free_per_request_mark() < a.free_per_request_mark());
  CHECK(a8.requests_mark > a.requests_mark);
  for (auto bad : {&FreeScanOptions::request_sectors, &FreeScanOptions::align, &FreeScanOptions::curve_points}) {
    FreeScanOptions o;
    o.*bad = 0;
    CHECK(testing::error_of([&] { simulate_free_scan(toy(), 1, o); }) == ErrorKind::Invalid);
  }
}
