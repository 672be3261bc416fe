#include "geometry/json_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "geometry/types.h"

namespace mmfs::geom::jsonf {
namespace {

std::string field(const std::string& where, const std::string& key) {
  return where.empty() ? key : where + "." + key;
}

[[noreturn]] void bad(const std::string& where, const std::string& key, const std::string& why) {
  throw GeometryError(ErrorKind::Invalid, fmt::format("geometry field '{}': {}", field(where, key), why));
}

std::uint64_t as_uint(const nlohmann::json& v, const std::string& key, const std::string& where,
                      std::uint64_t min, std::uint64_t max) {
  if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<std::int64_t>() < 0))
    bad(where, key, fmt::format("expected an integer in [{}, {}], got {}", min, max, v.dump()));
  auto x = v.get<std::uint64_t>();
  if (x < min || x > max) bad(where, key, fmt::format("{} is outside [{}, {}]", x, min, max));
  return x;
}

double as_double(const nlohmann::json& v, const std::string& key, const std::string& where, double min,
                 double max) {
  if (!v.is_number()) bad(where, key, fmt::format("expected a number in [{}, {}], got {}", min, max, v.dump()));
  double x = v.get<double>();
  if (!std::isfinite(x) || x < min || x > max) bad(where, key, fmt::format("{} is outside [{}, {}]", x, min, max));
  return x;
}

}  // namespace

std::uint64_t required_uint(const nlohmann::json& j, const std::string& key, const std::string& where,
                            std::uint64_t min, std::uint64_t max) {
  auto it = j.find(key);
  if (it == j.end()) bad(where, key, "required field is missing");
  return as_uint(*it, key, where, min, max);
}

std::uint64_t optional_uint(const nlohmann::json& j, const std::string& key, const std::string& where,
                            std::uint64_t fallback, std::uint64_t min, std::uint64_t max) {
  auto it = j.find(key);
  return it == j.end() ? fallback : as_uint(*it, key, where, min, max);
}

double required_double(const nlohmann::json& j, const std::string& key, const std::string& where, double min,
                       double max) {
  auto it = j.find(key);
  if (it == j.end()) bad(where, key, "required field is missing");
  return as_double(*it, key, where, min, max);
}

double optional_double(const nlohmann::json& j, const std::string& key, const std::string& where,
                       double fallback, double min, double max) {
  auto it = j.find(key);
  return it == j.end() ? fallback : as_double(*it, key, where, min, max);
}

void reject_unknown(const nlohmann::json& j, const std::string& where,
                    std::initializer_list<const char*> allowed) {
  for (const auto& item : j.items()) {
    const std::string& key = item.key();  // a plain name: lambdas may not capture structured bindings in clang 14
    bool known = std::any_of(allowed.begin(), allowed.end(), [&](const char* a) { return key == a; });
    if (!known) bad(where, key, "unknown field");
  }
}

}  // namespace mmfs::geom::jsonf
