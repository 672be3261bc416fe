// Control directory resolution (fs/paths/control_path.h, docs/reference.md §6): listings, the
// static files' texts against the geometry calls mmfs-geom prints, errnos.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <vector>

#include "fs/paths/control_path.h"
#include "geometry/load.h"
#include "tests/unit/support/path_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;

using mmfs::fs::testing::split_path;

namespace {

ControlNode resolve(const geom::Geometry& g, const std::string& path) {
  INFO("path .mmfs/" << path);
  auto r = resolve_control(split_path(path), g);
  if (auto* e = std::get_if<PathError>(&r)) FAIL("unexpected error " << e->error << ": " << e->message);
  return std::get<ControlNode>(r);
}

PathError failure(const geom::Geometry& g, const std::string& path) {
  INFO("path .mmfs/" << path);
  auto r = resolve_control(split_path(path), g);
  if (std::holds_alternative<ControlNode>(r)) FAIL("resolved, but an error was expected");
  return std::get<PathError>(r);
}

int errno_of(const geom::Geometry& g, const std::string& path) { return failure(g, path).error; }

std::vector<std::string> L(std::initializer_list<const char*> names) {
  return std::vector<std::string>(names.begin(), names.end());
}

// docs/reference.md §7's uniform toy disk with the settle angle zero: adjacent(L, s) = L + 8s.
std::unique_ptr<geom::Geometry> toy() {
  return geom::load_geometry(nlohmann::json{{"kind", "disk"},         {"sector_size", 512},
                                            {"cylinders", 1000},      {"surfaces", 1},
                                            {"sectors_per_track", 8}, {"rpm", 10000},
                                            {"track_skew_sectors", 0}, {"settle_ms", 0.0},
                                            {"settle_cylinders", 4},  {"conservatism_deg", 0}});
}

}  // namespace

TEST_CASE("/.mmfs lists its files; geometry, stats and errors are files", "[control_path]") {
  auto g = geom::load_geometry("atlas10k3");
  auto top = resolve(*g, "");
  CHECK(top.kind == ControlKind::Dir);
  CHECK(top.listing ==
        L({"geometry", "stats", "errors", "audit", "scrub", "boundaries", "adjacent", "equivalent", "rectangle"}));

  auto geo = resolve(*g, "geometry");
  CHECK(geo.kind == ControlKind::Geometry);
  // The geometry's info, plus the volume's devices, stripe unit and Atropos parameters.
  const auto shown = nlohmann::json::parse(geo.content);
  const nlohmann::json info = g->info();
  for (auto it = info.begin(); it != info.end(); ++it) CHECK(shown.at(it.key()) == it.value());
  CHECK(shown.at("p") == 1);
  CHECK(shown.at("atropos").at("w") == g->quadrangle(1).w);
  CHECK(geo.content.front() == '{');
  CHECK_THAT(geo.content, Catch::Contains("\"capacity_sectors\": " + std::to_string(g->capacity_sectors())));
  CHECK(resolve(*g, "stats").kind == ControlKind::Stats);
  CHECK(resolve(*g, "stats").content.empty());
  CHECK(resolve(*g, "errors").kind == ControlKind::Errors);
  CHECK(resolve(*g, "errors").content.empty());
  CHECK(resolve(*g, "audit").kind == ControlKind::Audit);

  CHECK(errno_of(*g, "geometry/x") == ENOTDIR);
  CHECK(errno_of(*g, "stats/x") == ENOTDIR);
  CHECK(errno_of(*g, "errors/x/y") == ENOTDIR);
  CHECK(errno_of(*g, "foo") == ENOENT);
  CHECK(errno_of(*g, "Geometry") == ENOENT);
  CHECK_THAT(failure(*g, "foo").message, Catch::Contains("foo") && Catch::Contains("boundaries"));
}

TEST_CASE("boundaries/LBN on atlas10k3: LOW HIGH of LBN's track", "[control_path]") {
  auto g = geom::load_geometry("atlas10k3");
  auto d = resolve(*g, "boundaries");
  CHECK(d.kind == ControlKind::Dir);
  CHECK(d.listing.empty());

  // The outer zone's tracks hold 686 sectors (Atropos: N = 686).
  CHECK(resolve(*g, "boundaries/0").content == "0 685\n");
  CHECK(resolve(*g, "boundaries/685").content == "0 685\n");
  CHECK(resolve(*g, "boundaries/686").content == "686 1371\n");
  const geom::Lbn cap = g->capacity_sectors();
  for (geom::Lbn l : {geom::Lbn(0), geom::Lbn(1000), geom::Lbn(123456), cap / 2, cap - 1}) {
    auto n = resolve(*g, "boundaries/" + std::to_string(l));
    CHECK(n.kind == ControlKind::Boundaries);
    const auto b = g->track_boundaries(l);
    CHECK(n.content == fmt::format("{} {}\n", b.low, b.high));
  }
  CHECK(resolve(*g, "boundaries/0000686").content == "686 1371\n");

  CHECK(errno_of(*g, "boundaries/" + std::to_string(cap)) == ERANGE);
  CHECK(errno_of(*g, "boundaries/99999999999999999999") == ERANGE);
  for (const char* bad : {"x", "-1", "+1", " 1", "1 ", "", "1x", "0x10"}) {
    INFO("LBN '" << bad << "'");
    CHECK(errno_of(*g, std::string("boundaries/") + bad) == EINVAL);
  }
  CHECK(errno_of(*g, "boundaries/0/x") == ENOTDIR);
  auto e = failure(*g, "boundaries/" + std::to_string(cap));
  CHECK_THAT(e.message, Catch::Contains(std::to_string(cap - 1)) && Catch::Contains("boundaries"));
}

TEST_CASE("adjacent/LBN/STEP on atlas10k3: GETADJACENT, steps 1..D", "[control_path]") {
  auto g = geom::load_geometry("atlas10k3");
  REQUIRE(g->depth() == 128);
  auto d = resolve(*g, "adjacent");
  CHECK(d.kind == ControlKind::Dir);
  CHECK(d.listing.empty());
  auto steps = resolve(*g, "adjacent/0");
  CHECK(steps.kind == ControlKind::Dir);
  REQUIRE(steps.listing.size() == 128);
  CHECK(steps.listing.front() == "1");
  CHECK(steps.listing[1] == "2");
  CHECK(steps.listing.back() == "128");

  for (geom::Lbn l : {geom::Lbn(0), geom::Lbn(5), geom::Lbn(686), geom::Lbn(100000)})
    for (std::uint32_t s : {1u, 2u, 64u, 128u}) {
      auto n = resolve(*g, fmt::format("adjacent/{}/{}", l, s));
      CHECK(n.kind == ControlKind::Adjacent);
      CHECK(n.content == fmt::format("{}\n", g->adjacent(l, s)));
    }
  // Adjacent blocks are on another track.
  CHECK(resolve(*g, "adjacent/0/1").content != "0\n");

  const geom::Lbn cap = g->capacity_sectors();
  CHECK(errno_of(*g, "adjacent/0/0") == ERANGE);
  CHECK(errno_of(*g, "adjacent/0/129") == ERANGE);
  CHECK(errno_of(*g, "adjacent/0/4294967297") == ERANGE);  // would wrap in 32 bits
  CHECK(errno_of(*g, "adjacent/0/99999999999999999999") == ERANGE);
  CHECK(errno_of(*g, "adjacent/0/x") == EINVAL);
  CHECK(errno_of(*g, "adjacent/0/-1") == EINVAL);
  CHECK(errno_of(*g, "adjacent/0/") == EINVAL);
  CHECK(errno_of(*g, "adjacent/x") == EINVAL);
  CHECK(errno_of(*g, "adjacent/x/1") == EINVAL);
  CHECK(errno_of(*g, "adjacent/" + std::to_string(cap)) == ERANGE);
  CHECK(errno_of(*g, "adjacent/" + std::to_string(cap) + "/1") == ERANGE);
  // The last track has no track after it.
  CHECK(errno_of(*g, "adjacent/" + std::to_string(cap - 1) + "/1") == ERANGE);
  CHECK(errno_of(*g, "adjacent/0/1/x") == ENOTDIR);
  CHECK_THAT(failure(*g, "adjacent/0/129").message, Catch::Contains("1..128"));
}

TEST_CASE("the docs/reference.md §7 toy disk: adjacent(L, s) = L + 8s, tracks of 8", "[control_path]") {
  auto g = toy();
  REQUIRE(g->depth() == 4);
  CHECK(resolve(*g, "adjacent/0").listing == L({"1", "2", "3", "4"}));
  CHECK(resolve(*g, "adjacent/0/1").content == "8\n");
  CHECK(resolve(*g, "adjacent/0/4").content == "32\n");
  CHECK(resolve(*g, "adjacent/32/4").content == "64\n");
  for (geom::Lbn l = 0; l < 50; l += 7)
    for (std::uint32_t s = 1; s <= 4; ++s)
      CHECK(resolve(*g, fmt::format("adjacent/{}/{}", l, s)).content == fmt::format("{}\n", l + 8 * s));
  CHECK(errno_of(*g, "adjacent/0/5") == ERANGE);
  CHECK(resolve(*g, "boundaries/9").content == "8 15\n");
  CHECK(resolve(*g, "boundaries/7999").content == "7992 7999\n");
  CHECK(errno_of(*g, "boundaries/8000") == ERANGE);
  CHECK(resolve(*g, "adjacent/7990/1").content == "7998\n");
  CHECK(errno_of(*g, "adjacent/7995/1") == ERANGE);  // the last track
  CHECK(errno_of(*g, "adjacent/7990/2") == ERANGE);
  CHECK(errno_of(*g, "equivalent/0") == ENOTSUP);
}

TEST_CASE("a device with depth 0 has no adjacent blocks", "[control_path]") {
  auto g = geom::load_geometry(nlohmann::json{{"kind", "disk"}, {"cylinders", 1}, {"sectors_per_track", 64},
                                              {"rpm", 10000}, {"settle_ms", 1.0}, {"settle_cylinders", 1}});
  REQUIRE(g->depth() == 0);
  auto steps = resolve(*g, "adjacent/0");
  CHECK(steps.kind == ControlKind::Dir);
  CHECK(steps.listing.empty());
  CHECK(errno_of(*g, "adjacent/0/1") == ERANGE);
  CHECK(errno_of(*g, "adjacent/0/0") == ERANGE);
  CHECK_THAT(failure(*g, "adjacent/0/1").message, Catch::Contains("D = 0"));
}

TEST_CASE("equivalent/LBN: MEMS equivalence classes, ENOTSUP on disks", "[control_path]") {
  auto mems = geom::load_geometry("mems-g2");
  auto d = resolve(*mems, "equivalent");
  CHECK(d.kind == ControlKind::Dir);
  CHECK(d.listing.empty());
  const geom::Lbn cap = mems->capacity_sectors();
  for (geom::Lbn l : {geom::Lbn(0), geom::Lbn(1), geom::Lbn(12345), cap - 1}) {
    auto n = resolve(*mems, "equivalent/" + std::to_string(l));
    CHECK(n.kind == ControlKind::Equivalent);
    std::string expected;
    for (geom::Lbn e : mems->equivalent(l)) expected += std::to_string(e) + "\n";
    CHECK(n.content == expected);
    CHECK_THAT(n.content, Catch::Contains(std::to_string(l) + "\n"));
    CHECK(std::count(n.content.begin(), n.content.end(), '\n') > 1);
  }
  CHECK(resolve(*mems, "equivalent/0").content.rfind("0\n", 0) == 0);  // ascending, 0 first
  CHECK(errno_of(*mems, "equivalent/" + std::to_string(cap)) == ERANGE);
  CHECK(errno_of(*mems, "equivalent/x") == EINVAL);
  CHECK(errno_of(*mems, "equivalent/0/x") == ENOTDIR);
  // MEMS adjacency and boundaries resolve too.
  CHECK(resolve(*mems, "adjacent/0/1").content == fmt::format("{}\n", mems->adjacent(0, 1)));
  const auto b = mems->track_boundaries(0);
  CHECK(resolve(*mems, "boundaries/0").content == fmt::format("{} {}\n", b.low, b.high));

  auto disk = geom::load_geometry("atlas10k3");
  CHECK(resolve(*disk, "equivalent").kind == ControlKind::Dir);
  CHECK(errno_of(*disk, "equivalent/0") == ENOTSUP);
  CHECK_THAT(failure(*disk, "equivalent/0").message, Catch::Contains("MEMS"));
  CHECK(errno_of(*disk, "equivalent/x") == EINVAL);
  auto ssd = geom::load_geometry("ssd");
  CHECK(errno_of(*ssd, "equivalent/0") == ENOTSUP);
}
