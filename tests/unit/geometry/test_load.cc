// Profiles and geometry files (docs/reference.md §7).
#include <catch2/catch.hpp>

#include "geometry/load.h"
#include "geometry/zoned_disk.h"

using namespace mmfs::geom;

TEST_CASE("every built-in profile loads and reports the docs/reference.md §6 fields") {
  auto names = profile_names();
  CHECK(names == std::vector<std::string>{"atlas10k3", "cheetah36es", "mems-g2", "ssd"});
  for (const auto& name : names) {
    auto g = load_geometry(name);
    INFO(name);
    CHECK(g->name() == name);
    auto info = g->info();
    for (const char* key : {"kind", "sector_size", "capacity_sectors", "tracks", "depth", "skew_deg"})
      CHECK(info.contains(key));
    CHECK(info["capacity_sectors"].get<Lbn>() == g->capacity_sectors());
    CHECK(g->depth() >= 1);
    // The definition round-trips through the loader.
    CHECK(load_geometry(g->definition())->definition() == g->definition());
  }
  CHECK(load_geometry("atlas10k3")->kind() == DeviceKind::Disk);
  CHECK(load_geometry("mems-g2")->kind() == DeviceKind::Mems);
  CHECK(load_geometry("ssd")->kind() == DeviceKind::Flash);
}

TEST_CASE("a geometry file may name a profile and override fields") {
  auto g = load_geometry(nlohmann::json{{"profile", "atlas10k3"}, {"surfaces", 4}, {"max_depth", 0},
                                        {"conservatism_deg", 0}});
  CHECK(g->name() == "atlas10k3");
  CHECK(g->depth() == 4 * 17);
  CHECK(g->capacity_sectors() == load_geometry("atlas10k3")->capacity_sectors() / 2);
}

TEST_CASE("loader errors say what is wrong") {
  CHECK_THROWS_WITH(load_geometry("atlas10k4"), Catch::Contains("atlas10k4") && Catch::Contains("atlas10k3"));
  CHECK_THROWS_WITH(load_geometry("/nonexistent/geometry.json"), Catch::Contains("cannot read"));
  CHECK_THROWS_WITH(load_geometry(nlohmann::json{{"kind", "tape"}}), Catch::Contains("kind"));
  CHECK_THROWS_WITH(load_geometry(nlohmann::json{{"sector_size", 512}}), Catch::Contains("kind"));
  CHECK_THROWS_WITH(load_geometry(nlohmann::json{{"profile", 3}}), Catch::Contains("profile"));
  CHECK_THROWS_WITH(load_geometry(nlohmann::json{{"profile", "atlas10k3"}, {"rpm", "fast"}}),
                    Catch::Contains("rpm"));
}
