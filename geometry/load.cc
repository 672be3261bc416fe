#include "geometry/load.h"

#include <fmt/format.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string_view>

#include "geometry/flash.h"
#include "geometry/memstore.h"
#include "geometry/striped.h"
#include "geometry/zoned_disk.h"

namespace mmfs::geom {
namespace embedded {
extern const std::pair<std::string_view, std::string_view> kProfiles[];
extern const unsigned kProfileCount;
}  // namespace embedded

namespace {

[[noreturn]] void invalid(const std::string& msg) { throw GeometryError(ErrorKind::Invalid, msg); }

const std::map<std::string, nlohmann::json>& profiles() {
  static const std::map<std::string, nlohmann::json> table = [] {
    std::map<std::string, nlohmann::json> t;
    for (unsigned i = 0; i < embedded::kProfileCount; ++i)
      t.emplace(std::string(embedded::kProfiles[i].first), nlohmann::json::parse(embedded::kProfiles[i].second));
    return t;
  }();
  return table;
}

}  // namespace

std::vector<std::string> profile_names() {
  std::vector<std::string> names;
  for (const auto& [name, j] : profiles()) names.push_back(name);
  return names;
}

const nlohmann::json& profile_json(const std::string& name) {
  auto it = profiles().find(name);
  if (it == profiles().end()) {
    std::string known;
    for (const auto& n : profile_names()) known += (known.empty() ? "" : ", ") + n;
    invalid(fmt::format("unknown geometry profile '{}' (built-in profiles: {}; or give a .json file)", name, known));
  }
  return it->second;
}

std::unique_ptr<Geometry> load_geometry(const nlohmann::json& definition) {
  if (!definition.is_object()) invalid("geometry: expected a JSON object");
  nlohmann::json merged = definition;
  std::string name = "custom";
  if (auto it = definition.find("profile"); it != definition.end()) {
    if (!it->is_string()) invalid("geometry field 'profile': expected a profile name");
    name = it->get<std::string>();
    // A profile plus overrides: the file's fields replace the profile's (RFC 7386).
    merged = profile_json(name);
    nlohmann::json overrides = definition;
    overrides.erase("profile");
    merged.merge_patch(overrides);
  }
  if (auto it = merged.find("name"); it != merged.end()) {
    if (!it->is_string()) invalid("geometry field 'name': expected a string");
    name = it->get<std::string>();
  }
  if (merged.contains("members")) {  // a volume of several devices, striped track by track
    auto striped = StripedGeometry::from_json(merged);
    striped->set_name(name);
    return striped;
  }
  auto kind_it = merged.find("kind");
  if (kind_it == merged.end() || !kind_it->is_string())
    invalid("geometry field 'kind': required, one of \"disk\", \"mems\", \"flash\"");
  std::string kind = kind_it->get<std::string>();
  std::unique_ptr<Geometry> g;
  if (kind == "disk") g = ZonedDisk::from_json(merged);
  else if (kind == "mems") g = MemStore::from_json(merged);
  else if (kind == "flash") g = Flash::from_json(merged);
  else invalid(fmt::format("geometry field 'kind': '{}' is not one of \"disk\", \"mems\", \"flash\"", kind));
  g->set_name(name);
  return g;
}

std::unique_ptr<Geometry> load_geometry(const std::string& profile_or_path) {
  bool looks_like_file = profile_or_path.find('/') != std::string::npos ||
                         profile_or_path.ends_with(".json");
  if (!looks_like_file) {
    auto g = load_geometry(profile_json(profile_or_path) );
    g->set_name(profile_or_path);
    return g;
  }
  std::ifstream in(profile_or_path);
  if (!in) invalid(fmt::format("cannot read geometry file '{}'", profile_or_path));
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::parse_error& e) {
    invalid(fmt::format("geometry file '{}' is not valid JSON: {}", profile_or_path, e.what()));
  }
  try {
    return load_geometry(j);
  } catch (const GeometryError& e) {
    throw GeometryError(e.kind(), fmt::format("{}: {}", profile_or_path, e.what()));
  }
}

}  // namespace mmfs::geom
