// StripedGeometry (geometry/striped.h): p members of one geometry as one
// volume, one member track per stripe unit, checked against a brute-force
// table of every VLBN on small zoned-disk, MEMS and flash members.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>

#include "geometry/flash.h"
#include "geometry/load.h"
#include "geometry/memstore.h"
#include "geometry/service_time.h"
#include "geometry/striped.h"
#include "geometry/zoned_disk.h"
#include "tests/unit/support/geometry_errors.h"
#include "tests/unit/support/mems_test_support.h"
#include "tests/unit/support/striped_test_support.h"

using namespace mmfs::geom;
using testing::error_of;
using testing::Kind;
using testing::kind_name;
using testing::make_member;

namespace {

const Kind kKinds[] = {Kind::Disk, Kind::Mems, Kind::Flash};
const std::uint32_t kMembers[] = {1, 2, 3, 5};

// The volume written out by hand: member tracks in order, each repeated on
// members 0..p-1; every VLBN's (member, member LBN) and every volume track.
struct Brute {
  std::vector<StripedGeometry::MemberLbn> of;    // per VLBN
  std::vector<std::vector<Lbn>> inverse;         // [member][member LBN] -> VLBN
  std::vector<TrackBounds> vtrack_bounds;        // per volume track
  std::vector<std::uint64_t> vtrack_of;          // per VLBN
  std::vector<std::uint32_t> vtrack_member;      // per volume track
  std::vector<std::uint64_t> vtrack_mtrack_len;  // per volume track: the member track's length

  Brute(const Geometry& member, std::uint32_t p) {
    const Lbn cap = member.capacity_sectors();
    inverse.assign(p, std::vector<Lbn>(cap));
    for (Lbn low = 0; low < cap;) {
      const TrackBounds b = member.track_boundaries(low);
      for (std::uint32_t k = 0; k < p; ++k) {
        const Lbn v0 = of.size();
        vtrack_bounds.push_back({v0, v0 + b.length() - 1});
        vtrack_member.push_back(k);
        vtrack_mtrack_len.push_back(b.length());
        for (Lbn l = b.low; l <= b.high; ++l) {
          inverse[k][l] = of.size();
          of.push_back({k, l});
          vtrack_of.push_back(vtrack_bounds.size() - 1);
        }
      }
      low = b.high + 1;
    }
  }
  // Per sector of the request, where it lands.
  std::vector<StripedGeometry::MemberLbn> sectors(Request r) const {
    return {of.begin() + std::ptrdiff_t(r.lbn), of.begin() + std::ptrdiff_t(r.lbn + r.sectors)};
  }
};

// The per-member parts of a batch, split by brute force (sector by sector).
std::vector<std::vector<Request>> brute_parts(const Brute& b, std::uint32_t p, const std::vector<Request>& batch) {
  std::vector<std::vector<Request>> parts(p);
  for (const Request& r : batch) {
    std::vector<std::vector<Lbn>> per(p);
    for (const auto& s : b.sectors(r)) per[s.member].push_back(s.lbn);
    for (std::uint32_t k = 0; k < p; ++k)
      if (!per[k].empty()) parts[k].push_back({per[k].front(), std::uint32_t(per[k].size())});
  }
  return parts;
}

std::vector<Request> random_batch(std::mt19937_64& rng, Lbn cap, std::size_t n, std::uint32_t longest) {
  std::vector<Request> batch;
  for (std::size_t i = 0; i < n; ++i) {
    const Lbn lbn = std::uniform_int_distribution<Lbn>(0, cap - 1)(rng);
    const std::uint32_t most = std::uint32_t(std::min<Lbn>(longest, cap - lbn));
    batch.push_back({lbn, std::uniform_int_distribution<std::uint32_t>(1, most)(rng)});
  }
  return batch;
}

}  // namespace

TEST_CASE("striped: every VLBN round-trips; tracks rotate round-robin with the member's lengths", "[striped]") {
  for (Kind kind : kKinds)
    for (std::uint32_t p : kMembers) {
      INFO(kind_name(kind) << " p=" << p);
      StripedGeometry g(make_member(kind), p);
      const Geometry& m = g.member();
      const Brute b(m, p);
      REQUIRE(g.capacity_sectors() == b.of.size());
      CHECK(g.capacity_sectors() == p * m.capacity_sectors());
      CHECK(g.tracks() == b.vtrack_bounds.size());
      CHECK(g.members() == p);
      CHECK(g.kind() == m.kind());
      CHECK(g.sector_size() == m.sector_size());
      for (std::uint64_t t = 0; t < b.vtrack_bounds.size(); ++t) {
        CHECK(b.vtrack_member[t] == t % p);  // round-robin, by construction of the table
        CHECK(g.track_boundaries(b.vtrack_bounds[t].low) == b.vtrack_bounds[t]);
        CHECK(g.track_length(b.vtrack_bounds[t].high) == b.vtrack_mtrack_len[t]);
        CHECK(g.locate(b.vtrack_bounds[t].low).member == t % p);
      }
      // Zones: the volume LBNs whose member LBN lies in one member zone, all of one length.
      std::map<Lbn, TrackBounds> zone;  // member zone low -> volume bounds
      for (Lbn v = 0; v < b.of.size(); ++v) {
        const Lbn zl = m.zone_bounds(b.of[v].lbn).low;
        auto [it, fresh] = zone.try_emplace(zl, TrackBounds{v, v});
        if (!fresh) it->second.high = v;
      }
      for (Lbn v = 0; v < b.of.size(); ++v) {
        INFO("v=" << v);
        const auto& want = b.of[v];
        REQUIRE(g.locate(v) == want);
        CHECK(g.volume_lbn(want) == v);
        CHECK(g.volume_lbn(want.member, want.lbn) == v);
        CHECK(g.track_of(v) == b.vtrack_of[v]);
        CHECK(g.track_boundaries(v) == b.vtrack_bounds[b.vtrack_of[v]]);
        CHECK(g.track_length(v) == m.track_length(want.lbn));
        CHECK(g.skew(v) == m.skew(want.lbn));
        const TrackBounds z = g.zone_bounds(v);
        CHECK(z == zone.at(m.zone_bounds(want.lbn).low));
        CHECK(g.track_length(z.low) == g.track_length(v));
        CHECK(g.track_length(z.high) == g.track_length(v));
      }
      // Every member sector is some VLBN.
      for (std::uint32_t k = 0; k < p; ++k)
        for (Lbn l = 0; l < m.capacity_sectors(); ++l) CHECK(g.locate(b.inverse[k][l]) == StripedGeometry::MemberLbn{k, l});
      std::uint64_t largest = 0;
      for (const auto& [low, z] : zone) largest = std::max(largest, z.length() / g.track_length(z.low));
      CHECK(g.largest_zone_tracks() == p * m.largest_zone_tracks());
      // Flash's default counts its short last track in (Geometry::largest_zone_tracks).
      if (kind != Kind::Flash) CHECK(g.largest_zone_tracks() == largest);
      CHECK(g.depth() == m.depth());
      CHECK(g.adjacency_angle() == m.adjacency_angle());
      CHECK(g.parallelism() == m.parallelism());
      CHECK(g.name() == m.name());
    }
}

TEST_CASE("striped: GETADJACENT stays on the member, step member tracks = step*p volume tracks", "[striped]") {
  for (Kind kind : kKinds)
    for (std::uint32_t p : kMembers) {
      INFO(kind_name(kind) << " p=" << p);
      StripedGeometry g(make_member(kind), p);
      const Geometry& m = g.member();
      const Brute b(m, p);
      std::uint64_t hops = 0;
      for (Lbn v = 0; v < b.of.size(); ++v) {
        const auto here = b.of[v];
        for (std::uint32_t s = 1; s <= g.depth(); ++s) {
          INFO("v=" << v << " step=" << s);
          Lbn madj = 0;
          try {
            madj = m.adjacent(here.lbn, s);
          } catch (const GeometryError& e) {
            CHECK(e.kind() == ErrorKind::OutOfRange);
            CHECK(error_of([&] { g.adjacent(v, s); }) == ErrorKind::OutOfRange);
            continue;
          }
          const Lbn a = g.adjacent(v, s);
          CHECK(a == b.inverse[here.member][madj]);
          CHECK(b.of[a].member == here.member);
          CHECK(b.vtrack_of[a] == b.vtrack_of[v] + std::uint64_t(s) * p);
          ++hops;
          Lbn walk = v;
          for (std::uint64_t c = 0; c <= 3; ++c) {
            try {
              CHECK(g.adjacent_n(v, s, c) == walk);
              walk = g.adjacent(walk, s);
            } catch (const GeometryError& e) {
              CHECK(e.kind() == ErrorKind::OutOfRange);
              break;
            }
          }
        }
        CHECK(error_of([&] { g.adjacent(v, 0); }) == ErrorKind::Invalid);
        CHECK(error_of([&] { g.adjacent(v, g.depth() + 1); }) == ErrorKind::Invalid);
      }
      CHECK(hops > 0);
      CHECK(error_of([&] { g.adjacent(g.capacity_sectors(), 1); }) == ErrorKind::OutOfRange);
    }
}

TEST_CASE("striped: split conserves sectors and maps back to the volume request", "[striped]") {
  for (Kind kind : kKinds)
    for (std::uint32_t p : kMembers) {
      INFO(kind_name(kind) << " p=" << p);
      StripedGeometry g(make_member(kind), p);
      const Brute b(g.member(), p);
      const Lbn cap = g.capacity_sectors();
      std::vector<Request> requests;
      for (Lbn v = 0; v < cap; ++v)
        for (std::uint32_t n : {1u, 2u, 5u, 7u, 13u, 30u, 61u})
          if (n <= cap - v) requests.push_back({v, n});
      requests.push_back({0, std::uint32_t(cap)});
      requests.push_back({1, std::uint32_t(cap - 1)});
      for (const Request& r : requests) {
        INFO("request " << r.lbn << ":" << r.sectors);
        const auto parts = g.split(r);
        REQUIRE(!parts.empty());
        CHECK(parts.size() <= p);
        std::uint64_t total = 0;
        std::vector<Lbn> back;
        std::vector<bool> seen(p, false);
        for (const auto& [k, mr] : parts) {
          REQUIRE(k < p);
          CHECK(!seen[k]);  // at most one run per member
          seen[k] = true;
          total += mr.sectors;
          for (Lbn l = mr.lbn; l < mr.lbn + mr.sectors; ++l) back.push_back(b.inverse[k][l]);
        }
        CHECK(total == r.sectors);
        std::sort(back.begin(), back.end());
        std::vector<Lbn> want(r.sectors);
        std::iota(want.begin(), want.end(), r.lbn);
        CHECK(back == want);  // the pieces are exactly the request's sectors
        // In the order their first sectors appear in the volume request.
        std::vector<std::uint32_t> first_seen;
        for (const auto& s : b.sectors(r))
          if (std::find(first_seen.begin(), first_seen.end(), s.member) == first_seen.end())
            first_seen.push_back(s.member);
        std::vector<std::uint32_t> got;
        for (const auto& [k, mr] : parts) got.push_back(k);
        CHECK(got == first_seen);
      }
      CHECK(g.split({3, 0}).empty());
      CHECK(error_of([&] { g.split({cap, 1}); }) == ErrorKind::OutOfRange);
      CHECK(error_of([&] { g.split({cap - 1, 2}); }) == ErrorKind::OutOfRange);
      CHECK(error_of([&] { g.split({cap, 0}); }) == ErrorKind::OutOfRange);
    }
}

TEST_CASE("striped: a track-group request of c volume tracks is c/p whole tracks on each member", "[striped]") {
  StripedGeometry g(load_geometry("atlas10k3"), 4);
  const std::uint64_t T = g.track_length(0);
  CHECK(T == 686);  // the exact track, not 64 KiB (Atropos §5.3)
  const auto parts = g.split({0, std::uint32_t(8 * T)});
  REQUIRE(parts.size() == 4);
  for (std::uint32_t k = 0; k < 4; ++k) {
    CHECK(parts[k].first == k);
    CHECK(parts[k].second.lbn == 0);
    CHECK(parts[k].second.sectors == 2 * T);
  }
  // Across the first zone boundary the stripe unit follows the member's track length.
  const TrackBounds z0 = g.zone_bounds(0);
  CHECK(z0.length() == 4 * g.member().zone_bounds(0).length());
  CHECK(g.track_length(z0.high + 1) == g.member().track_length(g.member().zone_bounds(0).high + 1));
  std::mt19937_64 rng(16);
  for (int i = 0; i < 2000; ++i) {
    const Lbn v = std::uniform_int_distribution<Lbn>(0, g.capacity_sectors() - 1)(rng);
    const auto at = g.locate(v);
    CHECK(g.volume_lbn(at) == v);
    try {
      const Lbn a = g.adjacent(v, 1 + std::uint32_t(i % 128));
      CHECK(g.locate(a).member == at.member);
      CHECK(g.locate(a).lbn == g.member().adjacent(at.lbn, 1 + std::uint32_t(i % 128)));
    } catch (const GeometryError& e) {
      CHECK(e.kind() == ErrorKind::OutOfRange);
    }
  }
}

TEST_CASE("striped: equivalence classes and conflicts forward to the member", "[striped]") {
  for (std::uint32_t p : kMembers) {
    INFO("p=" << p);
    StripedGeometry g(make_member(Kind::Mems), p);
    const Brute b(g.member(), p);
    for (Lbn v = 0; v < b.of.size(); ++v) {
      const auto here = b.of[v];
      std::vector<Lbn> want;
      for (Lbn l : g.member().equivalent(here.lbn)) want.push_back(b.inverse[here.member][l]);
      std::sort(want.begin(), want.end());
      CHECK(g.equivalent(v) == want);
      CHECK(std::binary_search(want.begin(), want.end(), v));
    }
    for (Lbn a = 0; a < b.of.size(); a += 7)
      for (Lbn c = 0; c < b.of.size(); c += 5) {
        const bool want = b.of[a].member == b.of[c].member && g.member().conflicting(b.of[a].lbn, b.of[c].lbn);
        CHECK(g.conflicting(a, c) == want);
      }
    CHECK(error_of([&] { g.conflicting(0, g.capacity_sectors()); }) == ErrorKind::OutOfRange);
    CHECK(error_of([&] { g.quadrangle(1); }) == ErrorKind::NotSupported);
  }
  StripedGeometry disk(make_member(Kind::Disk), 3);
  CHECK(error_of([&] { disk.equivalent(0); }) == ErrorKind::NotSupported);
  CHECK(disk.quadrangle(2) == disk.member().quadrangle(2));
  CHECK(!disk.conflicting(0, 1));
  StripedGeometry flash(make_member(Kind::Flash), 2);
  CHECK(error_of([&] { flash.equivalent(0); }) == ErrorKind::NotSupported);
  CHECK(error_of([&] { flash.quadrangle(1); }) == ErrorKind::NotSupported);
}

TEST_CASE("striped: a batch takes the max of the members' times for their parts", "[striped]") {
  std::mt19937_64 rng(7);
  for (Kind kind : kKinds)
    for (std::uint32_t p : {2u, 3u, 5u}) {
      INFO(kind_name(kind) << " p=" << p);
      StripedGeometry g(make_member(kind), p);
      const Brute b(g.member(), p);
      auto model = g.make_service_model();
      std::vector<std::unique_ptr<ServiceTimeModel>> hand;
      for (std::uint32_t k = 0; k < p; ++k) hand.push_back(g.member().make_service_model());
      double clock = 0.0;
      bool some_member_idle_differs = false;
      for (int round = 0; round < 30; ++round) {
        INFO("round " << round);
        const auto batch = random_batch(rng, g.capacity_sectors(), 1 + round % 6, 40);
        const auto parts = brute_parts(b, p, batch);
        std::vector<double> t(p, 0.0);
        for (std::uint32_t k = 0; k < p; ++k)
          if (!parts[k].empty()) t[k] = hand[k]->serve(parts[k]);
        const double want = *std::max_element(t.begin(), t.end());
        for (std::uint32_t k = 0; k < p; ++k) {
          if (want > t[k]) hand[k]->idle(want - t[k]);
          if (t[k] != want) some_member_idle_differs = true;
        }
        std::vector<std::uint32_t> order;
        const double got = model->serve(batch, round % 2 ? &order : nullptr);
        CHECK(got == Approx(want).epsilon(1e-12));
        clock += want;
        CHECK(model->clock_ms() == Approx(clock));
        if (round % 2) {
          std::vector<std::uint32_t> sorted = order;
          std::sort(sorted.begin(), sorted.end());
          std::vector<std::uint32_t> all(batch.size());
          std::iota(all.begin(), all.end(), 0u);
          CHECK(sorted == all);
        }
        if (round % 5 == 4) {  // time passes between batches
          model->idle(0.37);
          for (auto& h : hand) h->idle(0.37);
          clock += 0.37;
        }
      }
      CHECK(some_member_idle_differs);
      // A request past the end throws and leaves the model as it was.
      const double before = model->clock_ms();
      CHECK(error_of([&] {
              model->serve(std::vector<Request>{{0, 1}, {g.capacity_sectors() - 1, 2}});
            }) == ErrorKind::OutOfRange);
      CHECK(model->clock_ms() == before);
      CHECK(error_of([&] { model->idle(-1.0); }) == ErrorKind::Invalid);
      CHECK(error_of([&] { model->place_at(g.capacity_sectors()); }) == ErrorKind::OutOfRange);
      // reset: as fresh as a new model.
      model->reset();
      CHECK(model->clock_ms() == 0.0);
      auto fresh = g.make_service_model();
      const auto batch = random_batch(rng, g.capacity_sectors(), 4, 30);
      CHECK(model->serve(batch) == Approx(fresh->serve(batch)).epsilon(1e-12));
      // Requests all on member 0: the volume serves them in the member's order.
      bool reordered = false;
      for (int round = 0; round < 20; ++round) {
        std::vector<Request> batch;
        for (int i = 0; i < 6; ++i) {
          const std::uint64_t t = std::uniform_int_distribution<std::uint64_t>(0, g.tracks() / p - 1)(rng) * p;
          const TrackBounds tb = b.vtrack_bounds[t];
          const Lbn lbn = std::uniform_int_distribution<Lbn>(tb.low, tb.high)(rng);
          batch.push_back({lbn, std::uint32_t(std::min<Lbn>(3, tb.high + 1 - lbn))});
        }
        auto vol = g.make_service_model();
        auto mem = g.member().make_service_model();
        std::vector<std::uint32_t> got, want;
        const double ms = vol->serve(batch, &got);
        CHECK(ms == Approx(mem->serve(brute_parts(b, p, batch)[0], &want)).epsilon(1e-12));
        CHECK(got == want);
        std::vector<std::uint32_t> in_order(batch.size());
        std::iota(in_order.begin(), in_order.end(), 0u);
        if (want != in_order) reordered = true;
      }
      if (kind != Kind::Flash) CHECK(reordered);  // the member's scheduler did reorder some batch
      // Parts on different members overlap: p one-track requests on p members take one member's time.
      auto par = g.make_service_model();
      auto one = g.member().make_service_model();
      std::vector<Request> across;
      for (std::uint32_t k = 0; k < p; ++k) across.push_back({b.vtrack_bounds[k].low, 1});
      CHECK(par->serve(across) == Approx(one->serve_one({0, 1})).epsilon(1e-12));
    }
}

TEST_CASE("striped: p = 1 answers exactly as the member", "[striped]") {
  std::mt19937_64 rng(1);
  for (Kind kind : kKinds) {
    INFO(kind_name(kind));
    StripedGeometry g(make_member(kind), 1);
    const Geometry& m = g.member();
    CHECK(g.capacity_sectors() == m.capacity_sectors());
    CHECK(g.tracks() == m.tracks());
    CHECK(g.largest_zone_tracks() == m.largest_zone_tracks());
    CHECK(g.depth() == m.depth());
    CHECK(g.adjacency_angle() == m.adjacency_angle());
    CHECK(g.parallelism() == m.parallelism());
    for (Lbn v = 0; v < g.capacity_sectors(); ++v) {
      INFO("v=" << v);
      CHECK(g.locate(v) == StripedGeometry::MemberLbn{0, v});
      CHECK(g.volume_lbn(0, v) == v);
      CHECK(g.track_of(v) == m.track_of(v));
      CHECK(g.track_boundaries(v) == m.track_boundaries(v));
      CHECK(g.zone_bounds(v) == m.zone_bounds(v));
      CHECK(g.skew(v) == m.skew(v));
      for (std::uint32_t s = 1; s <= g.depth(); ++s) {
        try {
          const Lbn a = m.adjacent(v, s);
          CHECK(g.adjacent(v, s) == a);
        } catch (const GeometryError&) {
          CHECK(error_of([&] { g.adjacent(v, s); }) == ErrorKind::OutOfRange);
        }
        try {
          const Lbn a2 = m.adjacent_n(v, s, 2);
          CHECK(g.adjacent_n(v, s, 2) == a2);
        } catch (const GeometryError&) {
          CHECK(error_of([&] { g.adjacent_n(v, s, 2); }) == ErrorKind::OutOfRange);
        }
      }
      if (kind == Kind::Mems) CHECK(g.equivalent(v) == m.equivalent(v));
      CHECK(g.conflicting(v, (v * 7) % g.capacity_sectors()) == m.conflicting(v, (v * 7) % g.capacity_sectors()));
      const Request r{v, std::uint32_t(std::min<Lbn>(9, g.capacity_sectors() - v))};
      const auto parts = g.split(r);
      REQUIRE(parts.size() == 1);
      CHECK(parts[0].first == 0);
      CHECK(parts[0].second.lbn == r.lbn);
      CHECK(parts[0].second.sectors == r.sectors);
    }
    if (kind == Kind::Disk) CHECK(g.quadrangle(3) == m.quadrangle(3));
    // The service model: the same times and orders, batch after batch.
    auto a = g.make_service_model(), b = m.make_service_model();
    for (int round = 0; round < 20; ++round) {
      const auto batch = random_batch(rng, g.capacity_sectors(), 1 + round % 5, 25);
      std::vector<std::uint32_t> oa, ob;
      CHECK(a->serve(batch, &oa) == b->serve(batch, &ob));
      CHECK(oa == ob);
      CHECK(a->clock_ms() == b->clock_ms());
      a->idle(0.1);
      b->idle(0.1);
    }
    // A zero-sector request: whatever the member does (the disk refuses it), the volume does.
    const std::vector<Request> zero{{3, 0}, {10, 2}};
    std::vector<std::uint32_t> za, zb;
    double ta = -1, tb = -1;
    ErrorKind ka = ErrorKind::NotSupported, kb = ErrorKind::NotSupported;
    try { ta = a->serve(zero, &za); } catch (const GeometryError& e) { ka = e.kind(); }
    try { tb = b->serve(zero, &zb); } catch (const GeometryError& e) { kb = e.kind(); }
    CHECK(ka == kb);
    CHECK(ta == tb);
    CHECK(za == zb);
    a->place_at(5);
    b->place_at(5);
    CHECK(a->serve_one({40, 3}) == b->serve_one({40, 3}));
    // definition() and info(): the member's, plus the striping keys.
    nlohmann::json def = g.definition();
    CHECK(def["members"] == 1);
    CHECK(def["striping"] == "track");
    def.erase("members");
    def.erase("striping");
    CHECK(def == m.definition());
  }
}

TEST_CASE("striped: definition, from_json and info", "[striped]") {
  for (Kind kind : kKinds)
    for (std::uint32_t p : kMembers) {
      INFO(kind_name(kind) << " p=" << p);
      StripedGeometry g(make_member(kind), p);
      const nlohmann::json def = g.definition();
      CHECK(def["members"] == p);
      CHECK(def["striping"] == "track");
      auto back = StripedGeometry::from_json(def);
      CHECK(back->definition() == def);
      CHECK(back->members() == p);
      CHECK(back->capacity_sectors() == g.capacity_sectors());
      CHECK(back->member().definition() == g.member().definition());
      const nlohmann::json info = g.info();
      CHECK(info["members"] == p);
      CHECK(info["capacity_sectors"] == g.capacity_sectors());
      CHECK(info["capacity_bytes"] == g.capacity_sectors() * g.sector_size());
      CHECK(info["tracks"] == g.tracks());
      CHECK(info["member"]["capacity_sectors"] == g.member().capacity_sectors());
      CHECK(info["member"]["tracks"] == g.member().tracks());
      if (kind == Kind::Disk) {
        const auto& zones = info["zones"];
        REQUIRE(zones.size() == 3);
        for (const auto& z : zones) {
          const Lbn first = z["first_lbn"].get<Lbn>();
          CHECK(g.zone_bounds(first).low == first);
          CHECK(g.zone_bounds(first).length() == z["sectors"].get<Lbn>());
        }
      }
    }
  // A profile plus members, as a volume file would name it.
  auto atlas = StripedGeometry::from_json({{"profile", "atlas10k3"}, {"members", 4}});
  CHECK(atlas->name() == "atlas10k3");
  CHECK(atlas->capacity_sectors() == 4 * load_geometry("atlas10k3")->capacity_sectors());
  CHECK(error_of([] { StripedGeometry::from_json({{"profile", "ssd"}}); }) == ErrorKind::Invalid);
  CHECK(error_of([] { StripedGeometry::from_json({{"profile", "ssd"}, {"members", 0}}); }) == ErrorKind::Invalid);
  CHECK(error_of([] { StripedGeometry::from_json({{"profile", "ssd"}, {"members", -2}}); }) == ErrorKind::Invalid);
  CHECK(error_of([] {
          StripedGeometry::from_json({{"profile", "ssd"}, {"members", 2}, {"striping", "64k"}});
        }) == ErrorKind::Invalid);
  CHECK(error_of([] { StripedGeometry::from_json(nlohmann::json::array()); }) == ErrorKind::Invalid);
}

TEST_CASE("striped: bad members and addresses throw GeometryError", "[striped]") {
  CHECK(error_of([] { StripedGeometry(make_member(Kind::Disk), 0); }) == ErrorKind::Invalid);
  CHECK(error_of([] { StripedGeometry(nullptr, 2); }) == ErrorKind::Invalid);
  CHECK(error_of([] {
          StripedGeometry(std::make_unique<StripedGeometry>(make_member(Kind::Flash), 2), 2);
        }) == ErrorKind::Invalid);
  FlashParams huge;
  huge.sector_size = 512;
  huge.capacity_sectors = std::uint64_t(1) << 50;
  CHECK(StripedGeometry(std::make_unique<Flash>(huge), 8).capacity_sectors() == std::uint64_t(1) << 53);
  // 2^54 sectors of 512 bytes is exactly 2^63 bytes, the most Flash itself accepts; one member more is too many.
  CHECK(StripedGeometry(std::make_unique<Flash>(huge), 16).capacity_sectors() == std::uint64_t(1) << 54);
  CHECK(error_of([&] { StripedGeometry(std::make_unique<Flash>(huge), 17); }) == ErrorKind::Invalid);
  CHECK(error_of([&] { StripedGeometry(std::make_unique<Flash>(huge), UINT32_MAX); }) == ErrorKind::Invalid);

  StripedGeometry g(make_member(Kind::Disk), 3);
  const Lbn cap = g.capacity_sectors();
  CHECK(error_of([&] { g.locate(cap); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { g.track_of(cap); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { g.track_boundaries(cap); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { g.zone_bounds(cap); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { g.skew(cap); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { g.adjacent_n(cap, 1, 0); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { g.volume_lbn(3, 0); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { g.volume_lbn(0, g.member().capacity_sectors()); }) == ErrorKind::OutOfRange);
  CHECK(g.volume_lbn(2, g.member().capacity_sectors() - 1) == cap - 1);
  CHECK(error_of([&] { g.locate(~Lbn(0)); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { g.split({~Lbn(0), 2}); }) == ErrorKind::OutOfRange);
}
