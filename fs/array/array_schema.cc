#include "fs/array/array_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <exception>
#include <limits>
#include <nlohmann/json.hpp>
#include <type_traits>
#include <variant>

#include "fs/array/copy_spec.h"
#include "indexes/binning.h"

namespace mmfs::fs {

namespace {

using std::string_view;

constexpr std::size_t kMaxRank = 16;

struct DtypeEntry {
  string_view name, alias;
  std::uint32_t itemsize;
  char kind;
};
constexpr std::array<DtypeEntry, 10> kDtypes{{
    {"int8", "i1", 1, 'i'},
    {"uint8", "u1", 1, 'u'},
    {"int16", "i2", 2, 'i'},
    {"uint16", "u2", 2, 'u'},
    {"int32", "i4", 4, 'i'},
    {"uint32", "u4", 4, 'u'},
    {"int64", "i8", 8, 'i'},
    {"uint64", "u8", 8, 'u'},
    {"float32", "f4", 4, 'f'},
    {"float64", "f8", 8, 'f'},
}};

constexpr std::array<string_view, 7> kLayouts{"naive",    "zorder",  "hilbert", "multimap",
                                              "quadrangle", "capsule", "mloc"};
constexpr std::array<string_view, 7> kIndexes{"none", "e1", "bn", "range", "interval", "re", "ie"};

// Position in schema_attr_names(); the switch statements below rely on it.
enum class Field { shape, dtype, layout, order, cell, basic_cube, priority, chunk, compress, index, bins, dims, copies };

std::optional<Field> field_of(string_view name) {
  const auto& names = schema_attr_names();
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return Field(i);
  return std::nullopt;
}

string_view name_of(Field f) { return schema_attr_names()[std::size_t(f)]; }

std::string attr(Field f) { return fmt::format("{}{}", kSchemaPrefix, name_of(f)); }

// User text goes into one-line error messages: keep it printable and short.
std::string shown(string_view v) {
  constexpr std::size_t kShown = 200;
  std::string out = "'";
  for (std::size_t i = 0; i < v.size() && i < kShown; ++i) {
    auto c = static_cast<unsigned char>(v[i]);
    if (c == '\\')
      out += "\\\\";
    else if (c >= 0x20 && c < 0x7f)
      out += char(c);
    else
      out += fmt::format("\\x{:02x}", c);
  }
  if (v.size() > kShown) out += "...";
  out += "'";
  return out;
}

template <typename T>
std::string join(const std::vector<T>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(v[i]);
  }
  return out;
}

SchemaResult fail(int error, std::string message) { return SchemaResult{error, std::move(message)}; }

bool all_digits(string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

enum class NumStatus { ok, malformed, too_large };

// Plain decimal only: from_chars alone would let neither '+' nor spaces
// through, but checking the digits first keeps that independent of it.
NumStatus parse_u64(string_view s, std::uint64_t& out) {
  if (!all_digits(s)) return NumStatus::malformed;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec == std::errc::result_out_of_range) return NumStatus::too_large;
  if (ec != std::errc() || ptr != s.data() + s.size()) return NumStatus::malformed;
  return NumStatus::ok;
}

NumStatus parse_u64_list(string_view text, std::vector<std::uint64_t>& out) {
  out.clear();
  NumStatus status = NumStatus::ok;
  for (;;) {
    auto comma = text.find(',');
    std::uint64_t v = 0;
    auto s = parse_u64(text.substr(0, comma), v);
    if (s == NumStatus::malformed) return s;  // malformed wins over too_large
    if (s == NumStatus::too_large) status = s;
    out.push_back(v);
    if (comma == string_view::npos) return status;
    text.remove_prefix(comma + 1);
  }
}

std::optional<std::string> canonical_layout(string_view v) {
  if (!is_layout_name(v)) return std::nullopt;
  return std::string(v);
}

std::optional<std::string> canonical_priority(string_view v) {
  if (v.size() != 5 || v[1] != '-' || v[3] != '-') return std::nullopt;
  std::string letters{v[0], v[2], v[4]};
  std::sort(letters.begin(), letters.end());
  if (letters != "MSV") return std::nullopt;
  return std::string(v);
}

std::optional<std::string> canonical_compress(string_view v) {
  if (v == "none" || v == "zstd") return std::string(v);
  constexpr string_view kZstd = "zstd:";
  if (v.substr(0, kZstd.size()) != kZstd) return std::nullopt;
  std::uint64_t level = 0;
  if (parse_u64(v.substr(kZstd.size()), level) != NumStatus::ok || level < 1 || level > 22)
    return std::nullopt;
  return fmt::format("zstd:{}", level);
}

std::optional<std::string> canonical_index(string_view v) {
  if (std::find(kIndexes.begin(), kIndexes.end(), v) == kIndexes.end()) return std::nullopt;
  return std::string(v);
}

bool valid_edges(string_view list) {
  double previous = -std::numeric_limits<double>::infinity();
  for (;;) {
    auto comma = list.find(',');
    auto item = list.substr(0, comma);
    double x = 0;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), x);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size()) return false;
    if (!std::isfinite(x) || !(x > previous)) return false;
    previous = x;
    if (comma == string_view::npos) return true;
    list.remove_prefix(comma + 1);
  }
}

// Edges keep the user's spelling: reprinting doubles could change them.
std::optional<std::string> canonical_bins(string_view v) {
  if (v == "exact") return std::string(v);
  std::uint64_t n = 0;
  if (all_digits(v)) {
    if (parse_u64(v, n) != NumStatus::ok || n < 1) return std::nullopt;
    return std::to_string(n);
  }
  constexpr string_view kPrecision = "precision:", kEdges = "edges:";
  if (v.substr(0, kPrecision.size()) == kPrecision) {
    if (parse_u64(v.substr(kPrecision.size()), n) != NumStatus::ok || n < 1 || n > 17)
      return std::nullopt;
    return fmt::format("precision:{}", n);
  }
  if (v.substr(0, kEdges.size()) == kEdges && valid_edges(v.substr(kEdges.size())))
    return std::string(v);
  return std::nullopt;
}

constexpr string_view kDimsAccepted = "one positive integer per dimension, separated by commas";

string_view what_of(Field f) {
  switch (f) {
    case Field::shape: return "a shape";
    case Field::dtype: return "a dtype";
    case Field::layout: return "a layout";
    case Field::order: return "a dimension order";
    case Field::cell: return "a cell shape";
    case Field::basic_cube: return "a basic cube";
    case Field::priority: return "a priority";
    case Field::chunk: return "a chunk shape";
    case Field::compress: return "a compression";
    case Field::index: return "an index";
    case Field::bins: return "a binning";
    case Field::dims: return "a list of dimension names";
    case Field::copies: return "a list of copies";
  }
  return "";
}

std::string accepted_of(Field f, std::size_t rank) {
  switch (f) {
    case Field::shape:
      return "1 to 16 positive integers separated by commas (e.g. 1024,1024,256)";
    case Field::dtype:
      return "int8 uint8 int16 uint16 int32 uint32 int64 uint64 float32 float64, or numpy's "
             "i1 u1 i2 u2 i4 u4 i8 u8 f4 f8 optionally prefixed by '<' or '=' (little-endian only)";
    case Field::layout:
      return "naive zorder hilbert multimap quadrangle capsule mloc";
    case Field::order:
      if (rank) return fmt::format("a permutation of 0..{} separated by commas, most favoured first", rank - 1);
      return "a permutation of 0..n-1 separated by commas, most favoured first (e.g. 2,0,1)";
    case Field::cell:
      return fmt::format("{}, in elements (e.g. 8,8,4)", kDimsAccepted);
    case Field::basic_cube:
      return fmt::format("{}, in cells (e.g. 4,2,2)", kDimsAccepted);
    case Field::chunk:
      return fmt::format("{}, in elements (e.g. 64,64,64)", kDimsAccepted);
    case Field::priority:
      return "a permutation of V, M and S joined by '-' (e.g. V-M-S, S-V-M)";
    case Field::compress:
      return "none, zstd or zstd:LEVEL with LEVEL 1 to 22";
    case Field::index:
      return "none e1 bn range interval re ie";
    case Field::bins:
      return fmt::format("exact, N (1 to {} equal-frequency bins), precision:D (D 1 to 17 significant digits) or "
                         "edges:a,b,... (strictly ascending finite numbers)",
                         indexes::kMaxExactBins);
    case Field::dims:
      return "one name per dimension separated by commas, each a letter or '_' then letters, digits or '_' "
             "(at most 64 characters), no two alike (e.g. time,lat,lon)";
    case Field::copies:
      return "none, or LAYOUT[:KEY=VALUE...] separated by ';' (KEY: order cell basic_cube priority chunk "
             "compress), e.g. naive:order=2,1,0;hilbert:cell=16,16,4";
  }
  return "";
}

SchemaResult malformed(Field f, string_view value, std::size_t rank = 0) {
  std::string hint;
  if (value.empty() && f != Field::shape && f != Field::dtype)
    hint = " (remove the attribute to get the default)";
  return fail(EINVAL, fmt::format("{}: {} is not {}: {}{}", attr(f), shown(value), what_of(f),
                                  accepted_of(f, rank), hint));
}

bool is_dims_field(Field f) {
  return f == Field::shape || f == Field::order || f == Field::cell || f == Field::basic_cube ||
         f == Field::chunk;
}

// Field-local rules of a rank-bearing field (non-empty value).
bool dims_ok(Field f, const std::vector<std::uint64_t>& v) {
  if (v.empty() || v.size() > kMaxRank) return false;
  if (f == Field::order) {
    std::vector<bool> seen(v.size(), false);
    for (auto d : v) {
      if (d >= v.size() || seen[d]) return false;
      seen[d] = true;
    }
    return true;
  }
  return std::all_of(v.begin(), v.end(), [](std::uint64_t x) { return x >= 1; });
}

std::vector<std::uint64_t> dims_of(const ArraySchema& s, Field f) {
  switch (f) {
    case Field::shape: return s.shape;
    case Field::order: return {s.order.begin(), s.order.end()};
    case Field::cell: return s.cell;
    case Field::basic_cube: return s.basic_cube;
    case Field::chunk: return s.chunk;
    default: return {};
  }
}

// A dimension name: an identifier, as xarray, netCDF and Zarr readers take it.
bool is_dim_name(string_view n) {
  auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (n.empty() || n.size() > 64 || !letter(n.front())) return false;
  return std::all_of(n.begin(), n.end(), [&](char c) { return letter(c) || (c >= '0' && c <= '9'); });
}

bool dim_names_ok(const std::vector<std::string>& names) {
  if (names.empty() || names.size() > kMaxRank) return false;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (!is_dim_name(names[i])) return false;
    for (std::size_t j = 0; j < i; ++j)
      if (names[j] == names[i]) return false;
  }
  return true;
}

std::vector<std::string> split_names(string_view text) {
  std::vector<std::string> out;
  for (;;) {
    auto comma = text.find(',');
    out.emplace_back(text.substr(0, comma));
    if (comma == string_view::npos) return out;
    text.remove_prefix(comma + 1);
  }
}

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

std::string dtype_names() {
  std::string out;
  for (const auto& e : kDtypes) out += fmt::format("{}{}", out.empty() ? "" : " ", e.name);
  return out;
}

// Parses `value` into field `f` of `s`, checking only the value itself.
SchemaResult parse_field(ArraySchema& s, Field f, string_view value) {
  if (is_dims_field(f)) {
    std::vector<std::uint64_t> v;
    auto status = parse_u64_list(value, v);
    if (status == NumStatus::too_large && f == Field::shape)
      return fail(EFBIG, fmt::format("{}: {} is too large: the array's size in bytes must fit in 64 bits",
                                     attr(f), shown(value)));
    if (status != NumStatus::ok || !dims_ok(f, v)) return malformed(f, value, s.shape.size());
    switch (f) {
      case Field::shape: s.shape = std::move(v); break;
      case Field::order: s.order.assign(v.begin(), v.end()); break;
      case Field::cell: s.cell = std::move(v); break;
      case Field::basic_cube: s.basic_cube = std::move(v); break;
      default: s.chunk = std::move(v); break;
    }
    return {};
  }
  if (f == Field::dims) {
    std::vector<std::string> names = split_names(value);
    if (!dim_names_ok(names)) return malformed(f, value, s.shape.size());
    s.dims = std::move(names);
    return {};
  }
  if (f == Field::copies) {
    std::vector<CopySpec> copies;
    if (auto r = parse_copies(s, value, &copies)) return r;
    s.copies = std::move(copies);
    return {};
  }
  if (f == Field::dtype) {
    auto d = parse_dtype(value);
    if (!d) return malformed(f, value);
    s.dtype = std::move(*d);
    return {};
  }
  auto set = [&](std::optional<std::string> canonical, std::string& target) {
    if (!canonical) return malformed(f, value);
    target = std::move(*canonical);
    return SchemaResult{};
  };
  switch (f) {
    case Field::layout: return set(canonical_layout(value), s.layout);
    case Field::priority: return set(canonical_priority(value), s.priority);
    case Field::compress: return set(canonical_compress(value), s.compress);
    case Field::index: return set(canonical_index(value), s.index);
    default: return set(canonical_bins(value), s.bins);
  }
}

// The rules between fields. `focus` is the field just changed: messages name
// it first, since that is what the user typed.
SchemaResult check_cross(const ArraySchema& s, std::optional<Field> focus) {
  constexpr std::array<Field, 5> kDims{Field::shape, Field::order, Field::cell, Field::basic_cube,
                                       Field::chunk};
  std::optional<Field> ref;
  if (focus && is_dims_field(*focus) && !dims_of(s, *focus).empty()) ref = focus;
  for (auto f : kDims)
    if (!ref && !dims_of(s, f).empty()) ref = f;
  if (ref) {
    auto rv = dims_of(s, *ref);
    for (auto f : kDims) {
      auto v = dims_of(s, f);
      if (f == *ref || v.empty() || v.size() == rv.size()) continue;
      // shape cannot be removed; the others can be, to make room for the new rank.
      std::string hint = f == Field::shape ? "" : fmt::format(" (change or remove {} first)", attr(f));
      return fail(EINVAL, fmt::format("{}: '{}' has {} dimension{} but {} '{}' has {}{}", attr(*ref), join(rv),
                                      rv.size(), rv.size() == 1 ? "" : "s", attr(f), join(v), v.size(), hint));
    }
  }

  if (ref && !s.dims.empty()) {
    auto rv = dims_of(s, *ref);
    if (rv.size() != s.dims.size()) {
      if (focus == Field::dims)
        return fail(EINVAL, fmt::format("{}: '{}' names {} dimension{} but {} '{}' has {}", attr(Field::dims),
                                        join_names(s.dims), s.dims.size(), s.dims.size() == 1 ? "" : "s",
                                        attr(*ref), join(rv), rv.size()));
      return fail(EINVAL, fmt::format("{}: '{}' has {} dimension{} but {} '{}' names {} (change or remove {} "
                                      "first)",
                                      attr(*ref), join(rv), rv.size(), rv.size() == 1 ? "" : "s",
                                      attr(Field::dims), join_names(s.dims), s.dims.size(), attr(Field::dims)));
    }
  }

  if (s.shape.empty()) return check_copies(s);
  for (auto f : {Field::cell, Field::chunk}) {
    auto v = dims_of(s, f);
    for (std::size_t d = 0; d < v.size(); ++d) {
      if (v[d] <= s.shape[d]) continue;
      if (focus == Field::shape)
        return fail(EINVAL, fmt::format("{}: '{}' is smaller than {} '{}' in dimension {} ({} < {})",
                                        attr(Field::shape), join(s.shape), attr(f), join(v), d, s.shape[d],
                                        v[d]));
      return fail(EINVAL, fmt::format("{}: '{}' exceeds {} '{}' in dimension {} ({} > {}): each item must be "
                                      "at most the shape's",
                                      attr(f), join(v), attr(Field::shape), join(s.shape), d, v[d], s.shape[d]));
    }
  }

  std::uint64_t bytes = s.dtype.itemsize;
  bool overflow = false;
  for (auto n : s.shape) overflow = overflow || __builtin_mul_overflow(bytes, n, &bytes);
  if (overflow) {
    if (focus == Field::dtype)
      return fail(EFBIG, fmt::format("{}: '{}' makes {} '{}' more than 2^64 bytes: the array's size in bytes "
                                     "must fit in 64 bits",
                                     attr(Field::dtype),
                                     s.dtype.name, attr(Field::shape), join(s.shape)));
    return fail(EFBIG, fmt::format("{}: '{}' of {} is more than 2^64 bytes: the array's size in bytes must fit "
                                   "in 64 bits",
                                   attr(Field::shape), join(s.shape), s.dtype.name));
  }
  return check_copies(s);
}

SchemaResult unknown_name(string_view name) {
  std::string known;
  for (const auto& n : schema_attr_names()) known += fmt::format("{}{}", known.empty() ? "" : " ", n);
  return fail(EINVAL, fmt::format("{} is not a schema attribute: known are {}",
                                  shown(fmt::format("{}{}", kSchemaPrefix, name)), known));
}

// Reads one JSON field into `s` (canonicalized); false if it has the wrong type.
bool decode_field(ArraySchema& s, Field f, const nlohmann::json& v) {
  if (f == Field::copies) {
    auto copies = decode_copies(v);
    if (!copies) return false;
    s.copies = std::move(*copies);
    return true;
  }
  if (f == Field::dims) {
    if (!v.is_array()) return false;
    std::vector<std::string> names;
    for (const auto& x : v) {
      if (!x.is_string()) return false;
      names.push_back(x.get<std::string>());
    }
    if (!dim_names_ok(names)) return false;
    s.dims = std::move(names);
    return true;
  }
  if (is_dims_field(f)) {
    if (!v.is_array()) return false;
    std::vector<std::uint64_t> dims;
    for (const auto& x : v) {
      if (!x.is_number_unsigned()) return false;
      dims.push_back(x.get<std::uint64_t>());
    }
    if (f == Field::order) {
      if (std::any_of(dims.begin(), dims.end(),
                      [](std::uint64_t d) { return d > std::numeric_limits<std::uint32_t>::max(); }))
        return false;
      s.order.assign(dims.begin(), dims.end());
      return true;
    }
    switch (f) {
      case Field::shape: s.shape = std::move(dims); break;
      case Field::cell: s.cell = std::move(dims); break;
      case Field::basic_cube: s.basic_cube = std::move(dims); break;
      default: s.chunk = std::move(dims); break;
    }
    return true;
  }
  if (!v.is_string()) return false;
  const auto& text = v.get_ref<const std::string&>();
  if (f == Field::bins && text.empty()) {
    s.bins.clear();
    return true;
  }
  return !parse_field(s, f, text);
}

}  // namespace

std::optional<Dtype> parse_dtype(string_view text) {
  for (const auto& e : kDtypes)
    if (text == e.name) return Dtype{std::string(e.name), e.itemsize, e.kind};
  char prefix = text.empty() ? 0 : text.front();
  if (prefix == '<' || prefix == '=' || prefix == '|') text.remove_prefix(1);
  for (const auto& e : kDtypes) {
    if (text != e.alias) continue;
    if (prefix == '|' && e.itemsize != 1) return std::nullopt;  // numpy: '|' means "no byte order"
    return Dtype{std::string(e.name), e.itemsize, e.kind};
  }
  return std::nullopt;
}

const std::vector<std::string>& schema_attr_names() {
  static const std::vector<std::string> names{"shape",    "dtype",      "layout", "order",
                                              "cell",     "basic_cube", "priority", "chunk",
                                              "compress", "index",      "bins",   "dims",
                                              "copies"};
  return names;
}

bool is_schema_attr(string_view name) { return field_of(name).has_value(); }

bool is_layout_name(string_view name) {
  return std::find(kLayouts.begin(), kLayouts.end(), name) != kLayouts.end();
}

SchemaResult set_schema_attr(ArraySchema& schema, string_view name, string_view value) {
  auto f = field_of(name);
  if (!f) return unknown_name(name);
  if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
  ArraySchema candidate = schema;
  if (auto r = parse_field(candidate, *f, value)) return r;
  // The index builder reads bins again: take only what it takes (N beyond
  // kMaxExactBins, "edges:1." were accepted here and failed every build).
  if (*f == Field::bins && std::holds_alternative<std::string>(indexes::parse_bin_spec(candidate.bins)))
    return malformed(*f, value);
  if (auto r = check_cross(candidate, f)) return r;
  if (*f == Field::layout) {
    candidate.layout_set = true;
    candidate.layout_rule.clear();
  }
  schema = std::move(candidate);
  return {};
}

SchemaResult reset_schema_attr(ArraySchema& schema, string_view name) {
  auto f = field_of(name);
  if (!f) return unknown_name(name);
  if (*f == Field::shape)
    return fail(EINVAL, fmt::format("{}: cannot be removed from an array file: remove the file instead",
                                     attr(Field::shape)));
  ArraySchema candidate = schema;
  const ArraySchema defaults;
  switch (*f) {
    case Field::dtype: candidate.dtype = defaults.dtype; break;
    case Field::layout:
      candidate.layout = defaults.layout;
      candidate.layout_set = false;
      break;
    case Field::order: candidate.order.clear(); break;
    case Field::cell: candidate.cell.clear(); break;
    case Field::basic_cube: candidate.basic_cube.clear(); break;
    case Field::priority: candidate.priority = defaults.priority; break;
    case Field::chunk: candidate.chunk.clear(); break;
    case Field::compress: candidate.compress = defaults.compress; break;
    case Field::index: candidate.index = defaults.index; break;
    case Field::bins: candidate.bins.clear(); break;
    case Field::dims: candidate.dims.clear(); break;
    case Field::copies: candidate.copies.clear(); break;
    case Field::shape: break;
  }
  if (auto r = check_cross(candidate, f)) return r;
  if (*f == Field::layout) candidate.layout_rule.clear();
  schema = std::move(candidate);
  return {};
}

SchemaResult validate_schema(const ArraySchema& s) {
  for (auto f : {Field::shape, Field::order, Field::cell, Field::basic_cube, Field::chunk}) {
    auto v = dims_of(s, f);
    if (!v.empty() && !dims_ok(f, v)) return malformed(f, join(v), s.shape.size());
  }
  auto d = parse_dtype(s.dtype.name);
  if (!d || *d != s.dtype)
    return fail(EINVAL, fmt::format("{}: {} ({} bytes, kind {}) is not {}: {}", attr(Field::dtype),
                                    shown(s.dtype.name), s.dtype.itemsize, shown({&s.dtype.kind, 1}),
                                    what_of(Field::dtype), dtype_names()));
  if (!canonical_layout(s.layout)) return malformed(Field::layout, s.layout);
  if (!canonical_priority(s.priority)) return malformed(Field::priority, s.priority);
  if (!canonical_compress(s.compress)) return malformed(Field::compress, s.compress);
  if (!canonical_index(s.index)) return malformed(Field::index, s.index);
  if (!s.bins.empty() && !canonical_bins(s.bins)) return malformed(Field::bins, s.bins);
  if (!s.dims.empty() && !dim_names_ok(s.dims)) return malformed(Field::dims, join_names(s.dims));
  if (const auto& t = s.table_part) {
    if (s.layout != "capsule" || s.shape.size() != 1 || t->table == 0 || t->cells_per_capsule == 0 ||
        std::uint64_t(t->first_block) + t->cells_per_capsule > t->capsule_blocks)
      return fail(EINVAL, "the table part of a schema needs layout capsule, one dimension, and its blocks inside "
                          "the capsule");
  }
  return check_cross(s, std::nullopt);
}

std::vector<std::string> dim_names(const ArraySchema& s) {
  if (!s.dims.empty()) return s.dims;
  std::vector<std::string> names;
  for (std::size_t d = 0; d < s.shape.size(); ++d) names.push_back("dim_" + std::to_string(d));
  return names;
}

std::optional<std::vector<std::string>> decode_hdf5_dims(std::string_view json, std::size_t rank) {
  const nlohmann::json j = nlohmann::json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_array() || j.size() != rank || rank == 0) return std::nullopt;
  std::vector<std::string> names;
  for (const auto& v : j) {
    // Not empty, and no '/' (nor NUL): an HDF5 name, not a path (mmfs-export makes scales of them).
    if (!v.is_string() || v.get_ref<const std::string&>().empty() ||
        v.get_ref<const std::string&>().find_first_of(std::string_view("/\0", 2)) != std::string::npos)
      return std::nullopt;
    names.push_back(v.get<std::string>());
  }
  for (std::size_t i = 0; i < names.size(); ++i)
    for (std::size_t k = 0; k < i; ++k)
      if (names[k] == names[i]) return std::nullopt;
  return names;
}

std::uint64_t array_bytes(const ArraySchema& s) {
  if (s.shape.empty()) return 0;
  std::uint64_t bytes = s.dtype.itemsize;
  for (auto n : s.shape) bytes *= n;
  return bytes;
}

std::string schema_attr_text(const ArraySchema& s, string_view name) {
  auto f = field_of(name);
  if (!f) return "";
  switch (*f) {
    case Field::shape: return join(s.shape);
    case Field::dtype: return s.dtype.name;
    case Field::layout: return s.layout;
    case Field::order: {
      if (!s.order.empty() || s.shape.empty()) return join(s.order);
      std::vector<std::size_t> order;
      for (std::size_t d = s.shape.size(); d-- > 0;) order.push_back(d);
      return join(order);
    }
    case Field::cell: return join(s.cell);
    case Field::basic_cube: return join(s.basic_cube);
    case Field::priority: return s.priority;
    case Field::chunk: return join(s.chunk);
    case Field::compress: return s.compress;
    case Field::index: return s.index;
    case Field::bins:
      if (!s.bins.empty()) return s.bins;
      return s.dtype.kind == 'f' ? "100" : "exact";
    case Field::dims: return join_names(dim_names(s));
    case Field::copies: return copies_text(s.copies);
  }
  return "";
}

std::string encode_schema(const ArraySchema& s) {
  nlohmann::json j = {
      {"shape", s.shape},       {"dtype", s.dtype.name},   {"layout", s.layout},
      {"order", s.order},       {"cell", s.cell},          {"basic_cube", s.basic_cube},
      {"priority", s.priority}, {"chunk", s.chunk},        {"compress", s.compress},
      {"index", s.index},       {"bins", s.bins},
  };
  if (const auto& t = s.table_part)
    j["table_part"] = {{"table", t->table},
                       {"capsule_blocks", t->capsule_blocks},
                       {"first_block", t->first_block},
                       {"cells_per_capsule", t->cells_per_capsule}};
  if (s.checksum_block != 0) j["checksum_block"] = s.checksum_block;
  if (!s.members.empty()) j["members"] = s.members;
  // Only when set: a record without it reads as before, in older releases too.
  if (!s.dims.empty()) j["dims"] = s.dims;
  if (!s.copies.empty()) j["copies"] = encode_copies(s.copies);
  if (s.layout_set) j["layout_set"] = true;
  if (!s.layout_rule.empty()) j["layout_rule"] = s.layout_rule;
  // replace: a hand-built schema with stray bytes must not make encoding throw.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<ArraySchema> decode_schema(string_view text) {
  try {
    auto j = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return std::nullopt;
    ArraySchema s;
    for (const auto& item : j.items()) {
      if (item.key() == "table_part") {
        const auto& v = item.value();
        if (!v.is_object() || v.size() != 4) return std::nullopt;
        auto number = [&](const char* key, std::uint64_t limit, auto* out) {
          auto it = v.find(key);
          if (it == v.end() || !it->is_number_unsigned() || it->template get<std::uint64_t>() > limit) return false;
          *out = static_cast<std::remove_pointer_t<decltype(out)>>(it->template get<std::uint64_t>());
          return true;
        };
        TablePart t;
        if (!number("table", UINT64_MAX, &t.table) || !number("capsule_blocks", UINT32_MAX, &t.capsule_blocks) ||
            !number("first_block", UINT32_MAX, &t.first_block) ||
            !number("cells_per_capsule", UINT32_MAX, &t.cells_per_capsule))
          return std::nullopt;
        s.table_part = t;
        continue;
      }
      if (item.key() == "checksum_block") {
        const auto& v = item.value();
        if (!v.is_number_unsigned() || v.get<std::uint64_t>() == 0 || v.get<std::uint64_t>() > (1u << 30) ||
            v.get<std::uint64_t>() % 512 != 0)
          return std::nullopt;
        s.checksum_block = v.get<std::uint32_t>();
        continue;
      }
      if (item.key() == "members") {
        if (!decode_members(item.value(), &s.members)) return std::nullopt;
        continue;
      }
      if (item.key() == "layout_set") {
        if (!item.value().is_boolean()) return std::nullopt;
        s.layout_set = item.value().get<bool>();
        continue;
      }
      if (item.key() == "layout_rule") {
        if (!item.value().is_string() || item.value().get_ref<const std::string&>().size() > kMaxLayoutRule)
          return std::nullopt;
        s.layout_rule = item.value().get<std::string>();
        continue;
      }
      auto f = field_of(item.key());
      if (!f || !decode_field(s, *f, item.value())) return std::nullopt;
    }
    if (validate_schema(s)) return std::nullopt;
    return s;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace mmfs::fs
