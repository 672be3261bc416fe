#include "tools/h5/attributes.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <variant>

#include "fs/array/array_schema.h"
#include "tools/h5/dimension_scales.h"
#include "tools/h5/dtype_map.h"
#include "tools/h5/hdf5_handle.h"

namespace mmfs::h5 {

using nlohmann::json;

namespace {

constexpr std::size_t kMaxXattrName = 255;  // XATTR_NAME_MAX, "user." included

// ---------------------------------------------------------------- import side

// A float as JSON: the number, or the strings JSON lacks numbers for.
json float_json(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return v;
}

// The elements of a numeric attribute (already converted to little-endian
// `dtype` by HDF5) as JSON values.
std::vector<json> number_values(const fs::Dtype& dtype, const std::vector<std::byte>& raw, std::size_t n) {
  std::vector<json> out;
  out.reserve(n);
  auto load = [&]<class T>(std::size_t i, T) {
    T v;
    std::memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));
    return v;
  };
  for (std::size_t i = 0; i < n; ++i) {
    const std::string& t = dtype.name;
    if (t == "int8") out.emplace_back(load(i, std::int8_t{}));
    else if (t == "uint8") out.emplace_back(load(i, std::uint8_t{}));
    else if (t == "int16") out.emplace_back(load(i, std::int16_t{}));
    else if (t == "uint16") out.emplace_back(load(i, std::uint16_t{}));
    else if (t == "int32") out.emplace_back(load(i, std::int32_t{}));
    else if (t == "uint32") out.emplace_back(load(i, std::uint32_t{}));
    else if (t == "int64") out.emplace_back(load(i, std::int64_t{}));
    else if (t == "uint64") out.emplace_back(load(i, std::uint64_t{}));
    else if (t == "float64") out.push_back(float_json(load(i, double{})));
    else {
      // float32: the shortest decimal that reads back as the same float32
      // (fmt prints exactly that), carried as the double nearest to it, which
      // nlohmann prints with the same digits.
      float f = load(i, float{});
      if (!std::isfinite(f)) out.push_back(float_json(f));
      else out.emplace_back(std::strtod(fmt::format("{}", f).c_str(), nullptr));
    }
  }
  return out;
}

// `flat` (C order) nested as lists of lengths `dims`.
json nest(const std::vector<json>& flat, const std::vector<hsize_t>& dims, std::size_t d, std::size_t& at) {
  json list = json::array();
  for (hsize_t i = 0; i < dims[d]; ++i) {
    if (d + 1 == dims.size()) list.push_back(flat[at++]);
    else list.push_back(nest(flat, dims, d + 1, at));
  }
  return list;
}

// The value of a fixed-length string element without its padding.
std::string strip_padding(std::string s, H5T_str_t pad) {
  if (pad == H5T_STR_NULLTERM) {
    if (auto nul = s.find('\0'); nul != std::string::npos) s.resize(nul);
    return s;
  }
  const char filler = pad == H5T_STR_SPACEPAD ? ' ' : '\0';
  while (!s.empty() && s.back() == filler) s.pop_back();
  return s;
}

std::vector<std::string> read_strings(hid_t attr, hid_t file_type, hid_t space, std::size_t n) {
  std::vector<std::string> out;
  if (n == 0) return out;
  out.reserve(n);
  const H5T_cset_t cset = H5Tget_cset(file_type);
  if (H5Tis_variable_str(file_type) > 0) {
    Datatype mem(H5Tcopy(H5T_C_S1), "H5Tcopy");
    check_ok(H5Tset_size(mem.get(), H5T_VARIABLE), "H5Tset_size");
    check_ok(H5Tset_cset(mem.get(), cset), "H5Tset_cset");
    std::vector<char*> ptrs(n, nullptr);
    check_ok(H5Aread(attr, mem.get(), ptrs.data()), "reading a string attribute");
    for (char* p : ptrs) out.emplace_back(p ? p : "");
    H5Dvlen_reclaim(mem.get(), space, H5P_DEFAULT, ptrs.data());
    return out;
  }
  const std::size_t size = H5Tget_size(file_type);
  Datatype mem(H5Tcopy(file_type), "H5Tcopy");  // same size, padding and cset: no conversion
  std::string raw(n * size, '\0');
  check_ok(H5Aread(attr, mem.get(), raw.data()), "reading a string attribute");
  const H5T_str_t pad = H5Tget_strpad(file_type);
  for (std::size_t i = 0; i < n; ++i) out.push_back(strip_padding(raw.substr(i * size, size), pad));
  return out;
}

struct AttrContext {
  ImportedAttributes* result;
  json* types;
  bool on_scale;  // the object is a dimension scale
};

// One attribute; returns a reason when it is skipped.
std::optional<std::string> import_one(hid_t object, const char* name_c, AttrContext& ctx) {
  const std::string name = name_c;
  if (name.rfind("mmfs.", 0) == 0 || name == "hdf5.types" || name == "hdf5.dims")
    return "the name is reserved for mmfs (user.mmfs.*, user.hdf5.types and user.hdf5.dims)";
  if (name.size() + 5 > kMaxXattrName) return fmt::format("the name is longer than {} bytes", kMaxXattrName - 5);

  Attribute attr(H5Aopen(object, name_c, H5P_DEFAULT), fmt::format("opening attribute '{}'", name));
  Datatype type(H5Aget_type(attr.get()), "H5Aget_type");
  Dataspace space(H5Aget_space(attr.get()), "H5Aget_space");
  const H5S_class_t sclass = H5Sget_simple_extent_type(space.get());
  if (sclass == H5S_NULL) return "it has no value (null dataspace)";
  std::vector<hsize_t> dims(static_cast<std::size_t>(std::max(0, H5Sget_simple_extent_ndims(space.get()))));
  if (!dims.empty()) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  std::size_t n = 1;
  for (auto d : dims) n *= d;
  // A list's JSON is at least 2 bytes per element: larger ones cannot fit.
  if (n > kMaxXattrValue) return fmt::format("its value is over {} KiB", kMaxXattrValue / 1024);

  std::string type_name;
  std::string value;
  const H5T_class_t tclass = H5Tget_class(type.get());
  if (tclass == H5T_STRING) {
    type_name = "string";
    auto strings = read_strings(attr.get(), type.get(), space.get(), n);
    if (dims.empty()) {
      value = std::move(strings.front());
    } else {
      std::vector<json> flat(strings.begin(), strings.end());
      std::size_t at = 0;
      value = nest(flat, dims, 0, at).dump(-1, ' ', false, json::error_handler_t::replace);
    }
  } else if (tclass == H5T_INTEGER || tclass == H5T_FLOAT) {
    auto mapped = dtype_of(type.get());
    if (auto* why = std::get_if<UnsupportedType>(&mapped)) return fmt::format("unsupported type ({})", why->description);
    const fs::Dtype dtype = std::get<fs::Dtype>(mapped);
    type_name = dtype.name;
    std::vector<std::byte> raw(n * dtype.itemsize);
    if (n > 0)  // HDF5 refuses a null buffer even for no elements
      check_ok(H5Aread(attr.get(), hdf5_type_of(dtype), raw.data()), fmt::format("reading attribute '{}'", name));
    auto values = number_values(dtype, raw, n);
    if (dims.empty()) {
      // A scalar's text; a non-finite float is its bare word, not a JSON string.
      value = values.front().is_string() ? values.front().get<std::string>() : values.front().dump();
    } else {
      std::size_t at = 0;
      value = nest(values, dims, 0, at).dump();
    }
  } else {
    auto mapped = dtype_of(type.get());
    return fmt::format("unsupported type ({})", std::get<UnsupportedType>(mapped).description);
  }
  if (value.size() > kMaxXattrValue) return fmt::format("its value is over {} KiB", kMaxXattrValue / 1024);

  ctx.result->xattrs.emplace_back("user." + name, std::move(value));
  (*ctx.types)[name] = json{{"type", type_name}, {"shape", dims}};
  return std::nullopt;
}

struct IterateState {
  AttrContext* ctx;
  std::exception_ptr error;
};

herr_t visit_attribute(hid_t object, const char* name, const H5A_info_t*, void* data) {
  auto* st = static_cast<IterateState*>(data);
  // Dimension-scale and netCDF-4 structure: names in user.mmfs.dims instead.
  if (is_structure_attribute(name, st->ctx->on_scale)) return 0;
  try {
    if (auto skipped = import_one(object, name, *st->ctx))
      st->ctx->result->warnings.push_back(fmt::format("attribute '{}': {}, skipped", name, *skipped));
  } catch (...) {
    // Exceptions must not unwind through the C library.
    st->error = std::current_exception();
    return -1;
  }
  return 0;
}

// ---------------------------------------------------------------- export side

// One attribute value decoded against its recorded type: what to write.
struct Decoded {
  std::vector<hsize_t> dims;
  std::optional<fs::Dtype> dtype;       // numbers; nullopt: strings
  std::vector<std::byte> numbers;       // little-endian elements
  std::vector<std::string> strings;
};

// `text` as a float: JSON number or one of the words for non-finite values.
std::optional<double> float_of(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (!v.is_string()) return std::nullopt;
  const auto& s = v.get_ref<const std::string&>();
  if (s == "NaN" || s == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (s == "Infinity" || s == "inf") return std::numeric_limits<double>::infinity();
  if (s == "-Infinity" || s == "-inf") return -std::numeric_limits<double>::infinity();
  return std::nullopt;
}

template <class T>
bool append_integer(const json& v, std::vector<std::byte>& out) {
  T x{};
  if (v.is_number_unsigned()) {
    auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) return false;
    x = static_cast<T>(u);
  } else if (v.is_number_integer()) {
    auto s = v.get<std::int64_t>();
    if (s < static_cast<std::int64_t>(std::numeric_limits<T>::min())) return false;
    if (s > 0 && static_cast<std::uint64_t>(s) > static_cast<std::uint64_t>(std::numeric_limits<T>::max()))
      return false;
    x = static_cast<T>(s);
  } else {
    return false;
  }
  const auto* p = reinterpret_cast<const std::byte*>(&x);
  out.insert(out.end(), p, p + sizeof(T));
  return true;
}

bool append_number(const fs::Dtype& dtype, const json& v, std::vector<std::byte>& out) {
  const std::string& t = dtype.name;
  if (t == "float32" || t == "float64") {
    auto d = float_of(v);
    if (!d) return false;
    if (t == "float32") {
      float f = static_cast<float>(*d);
      const auto* p = reinterpret_cast<const std::byte*>(&f);
      out.insert(out.end(), p, p + sizeof f);
    } else {
      const auto* p = reinterpret_cast<const std::byte*>(&*d);
      out.insert(out.end(), p, p + sizeof(double));
    }
    return true;
  }
  if (t == "int8") return append_integer<std::int8_t>(v, out);
  if (t == "uint8") return append_integer<std::uint8_t>(v, out);
  if (t == "int16") return append_integer<std::int16_t>(v, out);
  if (t == "uint16") return append_integer<std::uint16_t>(v, out);
  if (t == "int32") return append_integer<std::int32_t>(v, out);
  if (t == "uint32") return append_integer<std::uint32_t>(v, out);
  if (t == "int64") return append_integer<std::int64_t>(v, out);
  if (t == "uint64") return append_integer<std::uint64_t>(v, out);
  return false;
}

// Walks nested lists of lengths `dims` in C order, calling leaf(value) for
// each element; false when the nesting does not match.
template <class Leaf>
bool flatten(const json& v, const std::vector<hsize_t>& dims, std::size_t d, Leaf&& leaf) {
  if (d == dims.size()) return leaf(v);
  if (!v.is_array() || v.size() != dims[d]) return false;
  for (const auto& e : v)
    if (!flatten(e, dims, d + 1, leaf)) return false;
  return true;
}

// Decodes `value` as `type` ({"type": ..., "shape": [...]}); nullopt when it
// does not match.
std::optional<Decoded> decode(const std::string& value, const json& type) {
  if (!type.is_object() || !type.contains("type") || !type.contains("shape")) return std::nullopt;
  if (!type["type"].is_string() || !type["shape"].is_array()) return std::nullopt;
  Decoded out;
  for (const auto& d : type["shape"]) {
    if (!d.is_number_unsigned()) return std::nullopt;
    out.dims.push_back(d.get<hsize_t>());
  }
  const std::string tname = type["type"].get<std::string>();
  if (tname == "string") {
    if (out.dims.empty()) {
      out.strings.push_back(value);
      return out;
    }
    json parsed = json::parse(value, nullptr, false);
    if (parsed.is_discarded()) return std::nullopt;
    bool ok = flatten(parsed, out.dims, 0, [&](const json& e) {
      if (!e.is_string()) return false;
      out.strings.push_back(e.get<std::string>());
      return true;
    });
    if (!ok) return std::nullopt;
    return out;
  }
  auto dtype = fs::parse_dtype(tname);
  if (!dtype || dtype->name != tname) return std::nullopt;
  out.dtype = dtype;
  json parsed = json::parse(value, nullptr, false);
  if (parsed.is_discarded()) {
    // A scalar non-finite float is stored as its bare word.
    if (!out.dims.empty()) return std::nullopt;
    parsed = value;
  }
  if (!flatten(parsed, out.dims, 0, [&](const json& e) { return append_number(*dtype, e, out.numbers); }))
    return std::nullopt;
  return out;
}

Dataspace space_for(const std::vector<hsize_t>& dims) {
  if (dims.empty()) return Dataspace(H5Screate(H5S_SCALAR), "H5Screate");
  return Dataspace(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), "H5Screate_simple");
}

void write_strings(hid_t object, const std::string& name, const std::vector<hsize_t>& dims,
                   const std::vector<std::string>& strings) {
  // A scalar CLASS is written as HDF5's own conventions write it (H5DS, H5IM,
  // H5TB): a fixed-length NUL-terminated string. HDF5 1.10.8's
  // H5DSattach_scale reads a dataset's CLASS into a buffer of the
  // attribute's storage size and compares it as text: a variable-length
  // CLASS gives it the bytes of a pointer, so attaching a scale failed
  // whenever that pointer's lowest byte was zero (and leaked the string).
  if (name == "CLASS" && dims.empty() && strings.size() == 1) {
    Datatype fixed(H5Tcopy(H5T_C_S1), "H5Tcopy");
    check_ok(H5Tset_size(fixed.get(), strings[0].size() + 1), "H5Tset_size");
    check_ok(H5Tset_strpad(fixed.get(), H5T_STR_NULLTERM), "H5Tset_strpad");
    check_ok(H5Tset_cset(fixed.get(), H5T_CSET_UTF8), "H5Tset_cset");
    Dataspace scalar = space_for(dims);
    Attribute attr(H5Acreate2(object, name.c_str(), fixed.get(), scalar.get(), H5P_DEFAULT, H5P_DEFAULT),
                   fmt::format("creating attribute '{}'", name));
    check_ok(H5Awrite(attr.get(), fixed.get(), strings[0].c_str()), fmt::format("writing attribute '{}'", name));
    return;
  }
  Datatype type(H5Tcopy(H5T_C_S1), "H5Tcopy");
  check_ok(H5Tset_size(type.get(), H5T_VARIABLE), "H5Tset_size");
  check_ok(H5Tset_cset(type.get(), H5T_CSET_UTF8), "H5Tset_cset");
  Dataspace space = space_for(dims);
  Attribute attr(H5Acreate2(object, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
                 fmt::format("creating attribute '{}'", name));
  std::vector<const char*> ptrs;
  ptrs.reserve(strings.size());
  for (const auto& s : strings) ptrs.push_back(s.c_str());
  if (!ptrs.empty())
    check_ok(H5Awrite(attr.get(), type.get(), ptrs.data()), fmt::format("writing attribute '{}'", name));
}

void write_numbers(hid_t object, const std::string& name, const Decoded& d) {
  const hid_t type = hdf5_type_of(*d.dtype);
  Dataspace space = space_for(d.dims);
  Attribute attr(H5Acreate2(object, name.c_str(), type, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                 fmt::format("creating attribute '{}'", name));
  if (!d.numbers.empty())  // HDF5 refuses a null buffer even for no elements
    check_ok(H5Awrite(attr.get(), type, d.numbers.data()), fmt::format("writing attribute '{}'", name));
}

}  // namespace

ImportedAttributes attributes_to_xattrs(hid_t object) {
  ImportedAttributes result;
  json types = json::object();
  const bool on_scale = H5Iget_type(object) == H5I_DATASET && is_dimension_scale(object);
  AttrContext ctx{&result, &types, on_scale};
  IterateState st{&ctx, nullptr};
  hsize_t idx = 0;
  herr_t status = H5Aiterate2(object, H5_INDEX_NAME, H5_ITER_INC, &idx, visit_attribute, &st);
  if (st.error) std::rethrow_exception(st.error);
  check_ok(status, "listing attributes");
  if (!types.empty()) {
    std::string text = types.dump(-1, ' ', false, json::error_handler_t::replace);
    if (text.size() > kMaxXattrValue)
      result.warnings.push_back(fmt::format("{} would be over {} KiB: not written, export will see strings",
                                            kTypesXattr, kMaxXattrValue / 1024));
    else
      result.xattrs.emplace_back(std::string(kTypesXattr), std::move(text));
  }
  return result;
}

std::vector<std::string> xattrs_to_attributes(hid_t object, const Xattrs& xattrs) {
  std::vector<std::string> warnings;
  json types = json::object();
  for (const auto& [name, value] : xattrs) {
    if (name != kTypesXattr) continue;
    types = json::parse(value, nullptr, false);
    if (!types.is_object()) {
      warnings.push_back(fmt::format("{} is not a JSON object: every attribute is written as a string", kTypesXattr));
      types = json::object();
    }
  }
  for (const auto& [name, value] : xattrs) {
    if (name.rfind("user.", 0) != 0 || name.rfind("user.mmfs.", 0) == 0 || name == kTypesXattr ||
        name == fs::kHdf5DimsXattr)
      continue;
    const std::string attr = name.substr(5);
    std::optional<Decoded> decoded;
    if (auto it = types.find(attr); it != types.end()) {
      decoded = decode(value, *it);
      if (!decoded)
        warnings.push_back(fmt::format("attribute '{}': its value does not match its recorded type {}, written as a string",
                                       attr, it->dump()));
    }
    if (!decoded) decoded = Decoded{{}, std::nullopt, {}, {value}};
    for (const auto& s : decoded->strings)
      if (s.find('\0') != std::string::npos) {
        warnings.push_back(fmt::format("attribute '{}': a string holds a NUL byte and ends there in HDF5", attr));
        break;
      }
    // A group exported into an existing file may have the attribute already: the new value replaces it.
    if (H5Aexists(object, attr.c_str()) > 0)
      check_ok(H5Adelete(object, attr.c_str()), fmt::format("replacing attribute '{}'", attr));
    if (decoded->dtype) write_numbers(object, attr, *decoded);
    else write_strings(object, attr, decoded->dims, decoded->strings);
  }
  return warnings;
}

}  // namespace mmfs::h5
