// Building a Geometry from a built-in profile name or a JSON definition
// (docs/reference.md §7; the format is documented in docs/geometry-format.md).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "geometry/geometry.h"

namespace mmfs::geom {

// Names of the built-in profiles: atlas10k3, cheetah36es, mems-g2, ssd.
std::vector<std::string> profile_names();
// The JSON text of a built-in profile; throws Invalid for an unknown name.
const nlohmann::json& profile_json(const std::string& name);

// From a JSON definition. A definition may name a built-in "profile" and
// override any of its fields. Throws GeometryError(Invalid) naming the field.
std::unique_ptr<Geometry> load_geometry(const nlohmann::json& definition);
// From a profile name or a path to a .json file.
std::unique_ptr<Geometry> load_geometry(const std::string& profile_or_path);
inline std::unique_ptr<Geometry> load_geometry(const char* profile_or_path) {
  return load_geometry(std::string(profile_or_path));
}

}  // namespace mmfs::geom
