// Atropos' get_rectangle on a volume geometry (layouts/rectangle.h), against
// the rectangle built by hand from the member disks' tracks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "layouts/rectangle.h"
#include "tests/unit/support/geometry_errors.h"
#include "tests/unit/support/quadrangle_test_support.h"

using namespace mmfs;
using namespace mmfs::layouts;
using geom::ErrorKind;
using geom::testing::error_of;
using testing::member_disk;
using testing::member_sector;
using testing::members_of;

namespace {

// Volume LBNs of (member, member LBN), by hand: volume track t is member
// t mod p's track t / p, so member track m starts, on member k, after p times
// the member tracks before m and k copies of track m.
struct ByHand {
  explicit ByHand(const geom::Geometry& g) : p(members_of(g)), disk(member_disk(g)) {
    geom::Lbn at = 0;
    for (std::uint64_t t = 0; t < disk.tracks(); ++t) {
      first.push_back(at);
      at += std::uint64_t(p) * disk.track_length(disk.track_first_lbn(t));
    }
  }
  geom::Lbn volume_lbn(std::uint32_t member, geom::Lbn mlbn) const {
    const std::uint64_t t = disk.track_of(mlbn);
    return first[t] + std::uint64_t(member) * disk.track_length(mlbn) + (mlbn - disk.track_first_lbn(t));
  }
  std::uint32_t p;
  const geom::ZonedDisk& disk;
  std::vector<geom::Lbn> first;  // per member track
};

}  // namespace

TEST_CASE("rectangle: the w*p blocks of the LBN's row, one track of every member", "[rectangle]") {
  for (std::uint32_t p : {0u, 1u, 2u, 4u}) {
    auto g = testing::small_volume(p);
    const geom::ZonedDisk& disk = member_disk(*g);
    const ByHand by_hand(*g);
    for (std::uint32_t block : {1u, 2u, 4u}) {
      INFO("p " << p << " block " << block);
      std::uint64_t answered = 0, refused = 0;
      const geom::Lbn step = p == 4 ? 7 : 1;
      for (geom::Lbn lbn = 0; lbn < g->capacity_sectors(); lbn += step) {
        const testing::MemberSector at = member_sector(*g, lbn);
        const geom::ZonedDisk::Location loc = disk.locate(at.lbn);
        const geom::ZonedDisk::Zone& zone = disk.zones()[loc.zone];
        const geom::QuadrangleParams q =
            geom::compute_quadrangle(zone.spec.sectors_per_track, zone.spec.track_skew_sectors, block);
        const std::uint64_t ztrack = loc.track - zone.first_track;
        const bool residual = loc.sector >= q.w * q.b;
        const bool tail = ztrack >= zone.tracks / q.d * q.d;
        if (residual || tail) {
          CHECK(error_of([&] { get_rectangle(*g, lbn, block); }) == ErrorKind::OutOfRange);
          ++refused;
          continue;
        }
        const Rectangle r = get_rectangle(*g, lbn, block);
        ++answered;
        REQUIRE(r.zone == loc.zone);
        REQUIRE(r.p == std::max(1u, p));
        REQUIRE(r.params == q);
        REQUIRE(r.row == ztrack % q.d);
        REQUIRE(r.stripe == ztrack / q.d);
        REQUIRE(r.vlbns.count == std::uint64_t(q.w) * r.p);
        REQUIRE(r.vlbns.first % r.vlbns.count == 0);
        REQUIRE(r.vlbns.first <= r.vlbn);
        REQUIRE(r.vlbn < r.vlbns.first + r.vlbns.count);
        // By hand: member j's w blocks are slots (c + row) mod w of the same member track.
        const geom::Lbn track_first = disk.track_first_lbn(loc.track);
        REQUIRE(r.blocks.size() == r.vlbns.count);
        for (std::uint32_t j = 0; j < r.p; ++j)
          for (std::uint32_t c = 0; c < q.w; ++c) {
            const geom::Lbn dlbn = track_first + std::uint64_t((c + r.row) % q.w) * q.b;
            REQUIRE(r.blocks[std::size_t(j) * q.w + c] == by_hand.volume_lbn(j, dlbn));
          }
        // The LBN is in one of the blocks.
        bool inside = false;
        for (geom::Lbn b : r.blocks) inside = inside || (b <= lbn && lbn < b + q.b);
        REQUIRE(inside);
        // Runs: p runs of w*b sectors at the starts of p consecutive volume tracks (one when R = 0).
        std::uint64_t sectors = 0;
        for (const Extent& e : r.runs) sectors += e.sectors;
        REQUIRE(sectors == std::uint64_t(q.w) * q.b * r.p);
        REQUIRE(r.runs.size() == (q.R == 0 ? 1 : r.p));
        REQUIRE(g->track_boundaries(r.runs.front().start).low == r.runs.front().start);
        REQUIRE(g->track_of(r.runs.front().start) % r.p == 0);
        REQUIRE(std::is_sorted(r.runs.begin(), r.runs.end(),
                               [](const Extent& a, const Extent& b) { return a.start < b.start; }));
      }
      CHECK(answered > 0);
      if (block > 1) CHECK(refused > 0);  // R > 0 in zone 0 (and tails in zone 1)
    }
  }
}

TEST_CASE("rectangle: rectangle_json and errors", "[rectangle]") {
  auto atlas = testing::atlas_volume(4);
  const nlohmann::json j = rectangle_json(*atlas, 0, 1);
  CHECK(j["p"] == 4);
  CHECK(j["N"] == 686);
  CHECK(j["H"] == 139);
  CHECK(j["b"] == 26);
  CHECK(j["d"] == 5);
  CHECK(j["w"] == 26);
  CHECK(j["R"] == 10);
  CHECK(j["zone"] == 0);
  CHECK(j["row"] == 0);
  CHECK(j["first_vlbn"] == 0);
  CHECK(j["blocks"].size() == 104);
  // Four runs of 676 sectors, one at the start of each of volume tracks 0..3.
  CHECK(j["runs"] == nlohmann::json{{0, 676}, {686, 676}, {2 * 686, 676}, {3 * 686, 676}});
  // Volume track 9 is member 1's track 2: row 2 of stripe 0.
  const nlohmann::json k = rectangle_json(*atlas, 9 * 686 + 5, 1);
  CHECK(k["row"] == 2);
  CHECK(k["runs"][0][0] == 8 * 686);
  CHECK(k["first_vlbn"] == 2 * 104);

  CHECK(error_of([&] { get_rectangle(*atlas, 676, 1); }) == ErrorKind::OutOfRange);  // a residual sector
  CHECK(error_of([&] { get_rectangle(*atlas, atlas->capacity_sectors(), 1); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { get_rectangle(*atlas, 0, 0); }) == ErrorKind::Invalid);
  CHECK(error_of([&] { get_rectangle(*atlas, 0, 700); }) == ErrorKind::Invalid);  // larger than a track
  for (const char* profile : {"mems-g2", "ssd"}) {
    auto other = geom::load_geometry(profile);
    CHECK(error_of([&] { get_rectangle(*other, 0, 1); }) == ErrorKind::NotSupported);
  }
}
