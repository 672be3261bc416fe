// Typed, validated access to geometry JSON fields (geometry/json_fields.h):
// values inside their range are returned, missing optional fields fall back,
// and every refusal is GeometryError(Invalid) naming the field with its path.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <string>

#include "geometry/json_fields.h"
#include "geometry/types.h"
#include "tests/unit/support/geometry_errors.h"

using namespace mmfs::geom;
using nlohmann::json;
using testing::error_of;
using testing::message_of;

TEST_CASE("json fields: unsigned integers in range, required or with a fallback", "[geometry][json_fields]") {
  const json j = {{"cylinders", 1000}, {"zero", 0}, {"big", 18446744073709551615ull}};
  CHECK(jsonf::required_uint(j, "cylinders", "") == 1000);
  CHECK(jsonf::required_uint(j, "cylinders", "", 1000, 1000) == 1000);  // bounds are inclusive
  CHECK(jsonf::required_uint(j, "zero", "") == 0);
  CHECK(jsonf::required_uint(j, "big", "") == UINT64_MAX);
  CHECK(jsonf::optional_uint(j, "cylinders", "", 7) == 1000);
  CHECK(jsonf::optional_uint(j, "surfaces", "", 7) == 7);  // missing: the fallback, unchecked
  CHECK(jsonf::optional_uint(j, "surfaces", "", 0, 1, 4) == 0);
}

TEST_CASE("json fields: integers that are missing, of another type or out of range are refused by name",
          "[geometry][json_fields]") {
  const json j = {{"n", 5}, {"negative", -3}, {"real", 2.5}, {"text", "8"}, {"flag", true}, {"list", {1, 2}}};
  CHECK(message_of([&] { jsonf::required_uint(j, "absent", ""); }) ==
        "geometry field 'absent': required field is missing");
  CHECK(message_of([&] { jsonf::required_uint(j, "absent", "zones[2]"); }) ==
        "geometry field 'zones[2].absent': required field is missing");
  for (const char* key : {"negative", "real", "text", "flag", "list"}) {
    INFO(key);
    CHECK(error_of([&] { jsonf::required_uint(j, key, "disk"); }) == ErrorKind::Invalid);
    CHECK(error_of([&] { jsonf::optional_uint(j, key, "disk", 1); }) == ErrorKind::Invalid);
    const std::string what = message_of([&] { jsonf::required_uint(j, key, "disk"); });
    CHECK(what.find(std::string("'disk.") + key + "'") != std::string::npos);
    CHECK(what.find("expected an integer") != std::string::npos);
  }
  CHECK(message_of([&] { jsonf::required_uint(j, "n", "", 6, 10); }) == "geometry field 'n': 5 is outside [6, 10]");
  CHECK(message_of([&] { jsonf::optional_uint(j, "n", "z", 0, 0, 4); }) == "geometry field 'z.n': 5 is outside [0, 4]");
}

TEST_CASE("json fields: finite numbers in range; integers are numbers too", "[geometry][json_fields]") {
  const json j = {{"rpm", 10000}, {"settle_ms", 0.5}, {"neg", -1.5}, {"text", "1.0"}, {"null", nullptr}};
  CHECK(jsonf::required_double(j, "rpm", "") == 10000.0);
  CHECK(jsonf::required_double(j, "settle_ms", "", 0.5, 0.5) == 0.5);
  CHECK(jsonf::required_double(j, "neg", "", -2.0) == -1.5);
  CHECK(jsonf::optional_double(j, "absent", "", 3.25) == 3.25);
  CHECK(jsonf::optional_double(j, "settle_ms", "", 3.25) == 0.5);
  CHECK(message_of([&] { jsonf::required_double(j, "neg", "flash"); }) ==
        "geometry field 'flash.neg': -1.5 is outside [0, 1e+300]");
  CHECK(message_of([&] { jsonf::required_double(j, "absent", ""); }) ==
        "geometry field 'absent': required field is missing");
  CHECK(message_of([&] { jsonf::required_double(j, "settle_ms", "", 1.0, 2.0); }).find("outside [1, 2]") !=
        std::string::npos);
  for (const char* key : {"text", "null"}) {
    INFO(key);
    CHECK(error_of([&] { jsonf::required_double(j, key, ""); }) == ErrorKind::Invalid);
    CHECK(error_of([&] { jsonf::optional_double(j, key, "", 1.0); }) == ErrorKind::Invalid);
    CHECK(message_of([&] { jsonf::required_double(j, key, ""); }).find("expected a number") != std::string::npos);
  }
  // Infinite values are refused even when the range would hold them.
  const double huge = std::numeric_limits<double>::max();
  const json inf = {{"x", std::numeric_limits<double>::infinity()}};
  CHECK(error_of([&] { jsonf::required_double(inf, "x", "", -huge, huge); }) == ErrorKind::Invalid);
}

TEST_CASE("json fields: unknown keys are refused, naming the first one", "[geometry][json_fields]") {
  const json ok = {{"kind", "disk"}, {"rpm", 10000}};
  CHECK_NOTHROW(jsonf::reject_unknown(ok, "", {"kind", "rpm", "surfaces"}));
  CHECK_NOTHROW(jsonf::reject_unknown(json::object(), "", {}));
  const json typo = {{"kind", "disk"}, {"rmp", 10000}};
  CHECK(error_of([&] { jsonf::reject_unknown(typo, "", {"kind", "rpm"}); }) == ErrorKind::Invalid);
  CHECK(message_of([&] { jsonf::reject_unknown(typo, "zones[0]", {"kind", "rpm"}); }) ==
        "geometry field 'zones[0].rmp': unknown field");
  CHECK(error_of([&] { jsonf::reject_unknown(ok, "", {}); }) == ErrorKind::Invalid);
}
