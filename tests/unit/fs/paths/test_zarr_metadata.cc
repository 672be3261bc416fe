// The zarr.json documents of the Zarr v3 view (fs/paths/zarr_metadata.h):
// every field a stock reader needs, by dtype, with names and attributes.
#include <catch2/catch.hpp>

#include "fs/paths/zarr_metadata.h"

using namespace mmfs::fs;

namespace {

ArraySchema schema_of(std::vector<std::uint64_t> shape, const char* dtype) {
  ArraySchema s;
  s.shape = std::move(shape);
  s.dtype = *parse_dtype(dtype);
  return s;
}

}  // namespace

TEST_CASE("zarr metadata: an array's document", "[zarr]") {
  ArraySchema s = schema_of({10, 20}, "float32");
  const nlohmann::json j = zarr_array_metadata(s, std::vector<std::uint64_t>{4, 8}, {{"units", "K"}});
  CHECK(j["zarr_format"] == 3);
  CHECK(j["node_type"] == "array");
  CHECK(j["shape"] == nlohmann::json({10, 20}));
  CHECK(j["data_type"] == "float32");
  CHECK(j["chunk_grid"] == nlohmann::json({{"name", "regular"}, {"configuration", {{"chunk_shape", {4, 8}}}}}));
  CHECK(j["chunk_key_encoding"] ==
        nlohmann::json({{"name", "default"}, {"configuration", {{"separator", "/"}}}}));
  CHECK(j["codecs"] == nlohmann::json::array({{{"name", "bytes"}, {"configuration", {{"endian", "little"}}}}}));
  CHECK(j["fill_value"].is_number_float());
  CHECK(j["dimension_names"] == nlohmann::json({"dim_0", "dim_1"}));
  CHECK(j["attributes"] == nlohmann::json({{"units", "K"}}));

  // Names that are not identifiers (user.hdf5.dims) stand in for the defaults, never for user.mmfs.dims.
  const std::vector<std::string> odd{"time (UTC)", "lat-deg"};
  CHECK(zarr_array_metadata(s, std::vector<std::uint64_t>{4, 8}, nullptr, &odd)["dimension_names"] ==
        nlohmann::json({"time (UTC)", "lat-deg"}));
  s.dims = {"y", "x"};
  CHECK(zarr_array_metadata(s, std::vector<std::uint64_t>{4, 8}, nullptr)["dimension_names"] ==
        nlohmann::json({"y", "x"}));
  CHECK(zarr_array_metadata(s, std::vector<std::uint64_t>{4, 8}, nullptr, &odd)["dimension_names"] ==
        nlohmann::json({"y", "x"}));
  CHECK(zarr_array_metadata(s, std::vector<std::uint64_t>{4, 8}, nullptr)["attributes"] ==
        nlohmann::json::object());

  // Integers fill with 0; a single byte has no byte order.
  const nlohmann::json u8 = zarr_array_metadata(schema_of({5}, "uint8"), std::vector<std::uint64_t>{5}, {});
  CHECK(u8["fill_value"].is_number_integer());
  CHECK(u8["codecs"] == nlohmann::json::array({{{"name", "bytes"}}}));
  for (const char* t : {"int8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float64"})
    CHECK(zarr_array_metadata(schema_of({5}, t), std::vector<std::uint64_t>{5}, {})["data_type"] == t);
}

TEST_CASE("zarr metadata: a group's document and attribute values", "[zarr]") {
  CHECK(zarr_group_metadata({}) ==
        nlohmann::json({{"zarr_format", 3}, {"node_type", "group"}, {"attributes", nlohmann::json::object()}}));
  CHECK(zarr_attribute_value("\"K\"") == "K");
  CHECK(zarr_attribute_value("[1, 2]") == nlohmann::json({1, 2}));
  CHECK(zarr_attribute_value("0.5") == 0.5);
  CHECK(zarr_attribute_value("not json") == "not json");
  CHECK(zarr_attribute_value("") == "");
}
