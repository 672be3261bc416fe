// [fuzz] geometry/load: mutants of the bundled geometry files (a geometry
// file is user input to mkfs.mmfs and mmfs-geom; the superblock stores one)
// through load_geometry. Half the mutants are text mutants of the JSON, half
// are structural: numbers replaced by boundary values, fields deleted or
// added, zones duplicated, so that they get past the JSON parser and the
// field checks. The loader may only throw GeometryError (with a message);
// a geometry it returns must be consistent: its capacity in bytes within 63
// bits, its first and last tracks where its capacity says, its definition
// loading back to the same definition.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "geometry/load.h"
#include "tests/unit/support/fuzz_support.h"

using namespace mmfs::geom;
using namespace mmfs::testing::fuzz;
using nlohmann::json;

namespace {

std::vector<json> profiles() {
  std::vector<json> out;
  for (const auto& name : profile_names()) out.push_back(profile_json(name));
  out.push_back({{"profile", "atlas10k3"}, {"surfaces", 4}, {"max_depth", 0}, {"conservatism_deg", 0}});
  out.push_back({{"profile", "ssd"}, {"members", 4}, {"striping", "track"}});
  out.push_back({{"kind", "disk"}, {"rpm", 7200}, {"settle_ms", 1.0}, {"settle_cylinders", 10}, {"cylinders", 5000},
                 {"sectors_per_track", 500}, {"surfaces", 2}});
  return out;
}

json boundary(Rng& rng) {
  static const std::vector<json> values = {0, 1, 2, -1, 255, 65536, 1 << 24, (1 << 24) + 1, 4294967295u,
                                           4294967296ull, 9007199254740993ull, 1ull << 62, 1ull << 63, ~0ull,
                                           1e300, 1e-300, 0.5, -0.5, 1e6, "x", nullptr, true, json::array(),
                                           json::object(), "track", "atlas10k3", "disk", "mems", "flash"};
  return values[rng() % values.size()];
}

// One structural mutation of a geometry definition.
void mutate_structure(json& j, Rng& rng) {
  const json flat = j.flatten();
  std::vector<std::string> leaves;
  for (const auto& item : flat.items()) leaves.push_back(item.key());
  const std::size_t kind = rng() % 7;
  if (kind <= 2 && !leaves.empty()) {  // a leaf becomes a boundary value
    j[json::json_pointer(leaves[rng() % leaves.size()])] = boundary(rng);
  } else if (kind == 6) {  // sizes that multiply into the capacity become large in-range values
    static const std::vector<std::string> sizes = {"cylinders", "sectors_per_track", "surfaces", "sector_size",
                                                   "capacity_sectors", "squares", "p", "sectors_per_square_x",
                                                   "sectors_per_square_y", "members"};
    std::vector<std::string> picked;
    for (const auto& leaf : leaves)
      if (!leaf.empty() && std::find(sizes.begin(), sizes.end(), json::json_pointer(leaf).back()) != sizes.end())
        picked.push_back(leaf);
    static const std::uint64_t large[] = {1024, 1u << 20, 1u << 24, 4294967295u, 1ull << 62};
    for (std::size_t k = 0; k < 3 && !picked.empty(); ++k)
      j[json::json_pointer(picked[rng() % picked.size()])] = large[rng() % 5];
  } else if (kind == 3 && !leaves.empty()) {  // a field goes
    const json::json_pointer p(leaves[rng() % leaves.size()]);
    if (p.empty()) return;  // the root itself is the leaf
    json& parent = j[p.parent_pointer()];
    if (parent.is_object()) parent.erase(p.back());
  } else if (kind == 4 && j.contains("zones") && j["zones"].is_array() && !j["zones"].empty()) {
    for (std::size_t k = 1 + rng() % 3; k-- > 0;) j["zones"].push_back(j["zones"][rng() % j["zones"].size()]);
  } else if (j.is_object()) {  // a field appears (known ones mostly)
    static const char* keys[] = {"members", "profile", "cylinders", "sectors_per_track", "surfaces", "p", "squares",
                                 "capacity_sectors", "sector_size", "depth", "max_depth", "kind", "bogus"};
    j[keys[rng() % (sizeof keys / sizeof *keys)]] = boundary(rng);
  }
}

// What a loaded geometry promises.
bool consistent(const Geometry& g, std::string* why) {
  const Lbn cap = g.capacity_sectors();
  const unsigned __int128 bytes = (unsigned __int128)cap * g.sector_size();
  if (cap == 0 || g.sector_size() == 0 || bytes > (unsigned __int128)(1) << 63) {
    *why = "capacity " + std::to_string(cap) + " sectors of " + std::to_string(g.sector_size()) + " bytes";
    return false;
  }
  const TrackBounds first = g.track_boundaries(0), last = g.track_boundaries(cap - 1);
  if (first.low != 0 || last.high != cap - 1 || g.track_of(cap - 1) + 1 != g.tracks() || g.tracks() == 0) {
    *why = "tracks do not end at the capacity";
    return false;
  }
  const double skew = g.skew(cap - 1);
  if (!(skew >= 0 && skew < 360)) {
    *why = "skew outside [0, 360)";
    return false;
  }
  if (g.depth() >= 1) {
    try {
      if (g.adjacent(0, 1) >= cap) {
        *why = "an adjacent block past the capacity";
        return false;
      }
    } catch (const GeometryError&) {  // OutOfRange on a one-track device: documented
    }
  }
  const json def = g.definition();
  if (load_geometry(def)->definition() != def) {
    *why = "the definition does not load back to itself";
    return false;
  }
  return true;
}

}  // namespace

TEST_CASE("fuzz: load_geometry regressions", "[fuzz][geometry]") {
  // A disk of more than 2^63 bytes (2^32 cylinders of 2^24-sector tracks)
  // and one whose zone's sectors wrapped past 2^64 (and 1024 surfaces):
  // both loaded, with a capacity that is not the sum of their zones.
  for (int surfaces : {1, 1024}) {
    const json big = {{"kind", "disk"},        {"rpm", 7200},          {"settle_ms", 1.0},
                      {"settle_cylinders", 10}, {"cylinders", 4294967295u}, {"sectors_per_track", 1 << 24},
                      {"surfaces", surfaces}};
    CHECK_THROWS_AS(load_geometry(big), GeometryError);
  }
  json fits = {{"kind", "disk"}, {"rpm", 7200}, {"settle_ms", 1.0}, {"settle_cylinders", 10},
               {"cylinders", 1 << 20}, {"sectors_per_track", 1 << 24}, {"surfaces", 1}};
  CHECK(load_geometry(fits)->capacity_sectors() == 1ull << 44);  // 2^53 bytes: fine
}

TEST_CASE("fuzz: load_geometry on mutated geometry files", "[fuzz][geometry]") {
  const std::vector<json> defs = profiles();
  std::vector<std::string> texts;
  for (const auto& d : defs) texts.push_back(d.dump(2));
  Mutator mutator(seed_of("load_geometry"), texts, {"\"zones\":", "\"members\":", "{", "}", "[", "]", "1e400"});
  Tally tally("load_geometry");
  for (std::size_t i = 0, n = iterations(6000); i < n; ++i) {
    std::string text;
    if (i % 2) {
      text = mutator.next();
    } else {
      json j = defs[mutator.below(defs.size())];
      for (std::size_t k = 1 + mutator.below(4); k-- > 0;) mutate_structure(j, mutator.rng());
      text = j.dump();
    }
    tally.run(text, [&] {
      const json j = json::parse(text, nullptr, false);
      if (j.is_discarded()) return;  // not JSON: the loader never sees it
      std::unique_ptr<Geometry> g;
      try {
        g = load_geometry(j);
      } catch (const GeometryError& e) {
        tally.failed();
        tally.check(std::string(e.what()).size() > 0, "a GeometryError without a message", text);
        return;
      }
      tally.parsed();
      std::string why;
      try {
        const bool ok = consistent(*g, &why);
        tally.check(ok, "an inconsistent geometry: " + why, text);
      } catch (const GeometryError& e) {
        tally.check(false, std::string("a loaded geometry throws on its own LBNs: ") + e.what(), text);
      }
    });
  }
  tally.finish();
}
