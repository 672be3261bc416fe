#include "fs/paths/zarr_metadata.h"

namespace mmfs::fs {

nlohmann::json zarr_array_metadata(const ArraySchema& schema, std::span<const std::uint64_t> chunk,
                                   const nlohmann::json& attributes, const std::vector<std::string>* names) {
  // mmfs's dtype names are Zarr v3's data type names (int8 ... float64).
  nlohmann::json fill = schema.dtype.kind == 'f' ? nlohmann::json(0.0) : nlohmann::json(0);
  nlohmann::json bytes = {{"name", "bytes"}};
  if (schema.dtype.itemsize > 1) bytes["configuration"] = {{"endian", "little"}};
  return {
      {"zarr_format", 3},
      {"node_type", "array"},
      {"shape", schema.shape},
      {"data_type", schema.dtype.name},
      {"chunk_grid", {{"name", "regular"}, {"configuration", {{"chunk_shape", std::vector(chunk.begin(), chunk.end())}}}}},
      {"chunk_key_encoding", {{"name", "default"}, {"configuration", {{"separator", "/"}}}}},
      {"fill_value", fill},
      {"codecs", nlohmann::json::array({bytes})},
      {"attributes", attributes.is_object() ? attributes : nlohmann::json::object()},
      {"dimension_names", schema.dims.empty() && names ? *names : dim_names(schema)},
  };
}

nlohmann::json zarr_group_metadata(const nlohmann::json& attributes) {
  return {{"zarr_format", 3},
          {"node_type", "group"},
          {"attributes", attributes.is_object() ? attributes : nlohmann::json::object()}};
}

nlohmann::json zarr_attribute_value(std::string_view value) {
  nlohmann::json j = nlohmann::json::parse(value.begin(), value.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) return j;
  // Not JSON: the text (invalid UTF-8 replaced, so the document always dumps).
  return nlohmann::json(std::string(value));
}

}  // namespace mmfs::fs
