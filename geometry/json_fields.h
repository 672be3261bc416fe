// Typed, validated field access for geometry JSON, so every error names the
// offending field ("zones[2].sectors_per_track: expected a positive integer").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace mmfs::geom::jsonf {

// Each throws GeometryError(Invalid) naming `where` + `key` when the field is
// missing (for required_*), of the wrong type, or out of range.
std::uint64_t required_uint(const nlohmann::json& j, const std::string& key, const std::string& where,
                            std::uint64_t min = 0, std::uint64_t max = UINT64_MAX);
std::uint64_t optional_uint(const nlohmann::json& j, const std::string& key, const std::string& where,
                            std::uint64_t fallback, std::uint64_t min = 0, std::uint64_t max = UINT64_MAX);
double required_double(const nlohmann::json& j, const std::string& key, const std::string& where,
                       double min = 0.0, double max = 1e300);
double optional_double(const nlohmann::json& j, const std::string& key, const std::string& where,
                       double fallback, double min = 0.0, double max = 1e300);
// Rejects keys not in `allowed` (a misspelt field must not be silently ignored).
void reject_unknown(const nlohmann::json& j, const std::string& where,
                    std::initializer_list<const char*> allowed);

}  // namespace mmfs::geom::jsonf
