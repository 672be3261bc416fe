// tools/h5/dtype_map and attributes: HDF5 types <-> mmfs dtypes, and
// attribute <-> xattr round trips through an in-memory HDF5 file.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "tools/h5/attributes.h"
#include "tools/h5/dtype_map.h"
#include "tools/h5/hdf5_handle.h"

using namespace mmfs::h5;
using nlohmann::json;

namespace {

// An HDF5 file that lives in memory only (core driver, no backing store).
File memory_file() {
  silence_hdf5_errors();
  Plist fapl(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate");
  check_ok(H5Pset_fapl_core(fapl.get(), 1 << 16, 0), "H5Pset_fapl_core");
  // The newest format stores attributes over 64 KiB (dense storage).
  check_ok(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_LATEST, H5F_LIBVER_LATEST), "H5Pset_libver_bounds");
  static int counter = 0;
  std::string name = "mmfs-unit-test-" + std::to_string(++counter) + ".h5";
  return File(H5Fcreate(name.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), "H5Fcreate");
}

Group make_group(const File& f, const char* name) {
  return Group(H5Gcreate2(f.get(), name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "H5Gcreate2");
}

template <class T>
void put(hid_t object, const char* name, hid_t type, const std::vector<hsize_t>& dims, const std::vector<T>& values) {
  Dataspace space(dims.empty() ? H5Screate(H5S_SCALAR)
                               : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                  "space");
  Attribute a(H5Acreate2(object, name, type, space.get(), H5P_DEFAULT, H5P_DEFAULT), "H5Acreate2");
  // The values are in host order: the memory type is the native one.
  Datatype mem(H5Tget_native_type(type, H5T_DIR_DEFAULT), "H5Tget_native_type");
  if (!values.empty()) check_ok(H5Awrite(a.get(), mem.get(), values.data()), "H5Awrite");
}

void put_fixed_string(hid_t object, const char* name, const std::string& bytes, std::size_t size, H5T_str_t pad,
                      const std::vector<hsize_t>& dims = {}) {
  Datatype t(H5Tcopy(H5T_C_S1), "H5Tcopy");
  check_ok(H5Tset_size(t.get(), size), "H5Tset_size");
  check_ok(H5Tset_strpad(t.get(), pad), "H5Tset_strpad");
  Dataspace space(dims.empty() ? H5Screate(H5S_SCALAR)
                               : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                  "space");
  Attribute a(H5Acreate2(object, name, t.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), "H5Acreate2");
  check_ok(H5Awrite(a.get(), t.get(), bytes.data()), "H5Awrite");
}

void put_vlen_string(hid_t object, const char* name, const std::string& value) {
  Datatype t(H5Tcopy(H5T_C_S1), "H5Tcopy");
  check_ok(H5Tset_size(t.get(), H5T_VARIABLE), "H5Tset_size");
  Dataspace space(H5Screate(H5S_SCALAR), "space");
  Attribute a(H5Acreate2(object, name, t.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), "H5Acreate2");
  const char* p = value.c_str();
  check_ok(H5Awrite(a.get(), t.get(), &p), "H5Awrite");
}

std::map<std::string, std::string> as_map(const Xattrs& x) { return {x.begin(), x.end()}; }

std::string type_name_of(hid_t object, const char* attr) {
  Attribute a(H5Aopen(object, attr, H5P_DEFAULT), "H5Aopen");
  Datatype t(H5Aget_type(a.get()), "H5Aget_type");
  if (H5Tget_class(t.get()) == H5T_STRING) return H5Tis_variable_str(t.get()) > 0 ? "vlen-string" : "string";
  auto d = dtype_of(t.get());
  return std::holds_alternative<mmfs::fs::Dtype>(d) ? std::get<mmfs::fs::Dtype>(d).name : "?";
}

std::vector<hsize_t> dims_of(hid_t object, const char* attr) {
  Attribute a(H5Aopen(object, attr, H5P_DEFAULT), "H5Aopen");
  Dataspace s(H5Aget_space(a.get()), "H5Aget_space");
  std::vector<hsize_t> d(static_cast<std::size_t>(H5Sget_simple_extent_ndims(s.get())));
  H5Sget_simple_extent_dims(s.get(), d.data(), nullptr);
  return d;
}

template <class T>
std::vector<T> values_of(hid_t object, const char* attr, hid_t mem_type, std::size_t n) {
  Attribute a(H5Aopen(object, attr, H5P_DEFAULT), "H5Aopen");
  std::vector<T> out(n);
  check_ok(H5Aread(a.get(), mem_type, out.data()), "H5Aread");
  return out;
}

std::vector<std::string> strings_of(hid_t object, const char* attr, std::size_t n) {
  Attribute a(H5Aopen(object, attr, H5P_DEFAULT), "H5Aopen");
  Datatype t(H5Tcopy(H5T_C_S1), "H5Tcopy");
  H5Tset_size(t.get(), H5T_VARIABLE);
  H5Tset_cset(t.get(), H5T_CSET_UTF8);
  std::vector<char*> p(n);
  check_ok(H5Aread(a.get(), t.get(), p.data()), "H5Aread");
  std::vector<std::string> out(p.begin(), p.end());
  Dataspace s(H5Aget_space(a.get()), "space");
  H5Dvlen_reclaim(t.get(), s.get(), H5P_DEFAULT, p.data());
  return out;
}

}  // namespace

TEST_CASE("dtype map: integers and IEEE floats of either byte order", "[h5]") {
  struct Case {
    hid_t type;
    const char* name;
  };
  const Case cases[] = {
      {H5T_STD_I8LE, "int8"},     {H5T_STD_U8BE, "uint8"},    {H5T_STD_I16BE, "int16"},
      {H5T_STD_U16LE, "uint16"},  {H5T_STD_I32BE, "int32"},   {H5T_STD_U32LE, "uint32"},
      {H5T_STD_I64LE, "int64"},   {H5T_STD_U64BE, "uint64"},  {H5T_IEEE_F32BE, "float32"},
      {H5T_IEEE_F64LE, "float64"}, {H5T_NATIVE_INT, "int32"}, {H5T_NATIVE_DOUBLE, "float64"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto d = dtype_of(c.type);
    REQUIRE(std::holds_alternative<mmfs::fs::Dtype>(d));
    const auto& dt = std::get<mmfs::fs::Dtype>(d);
    CHECK(dt == *mmfs::fs::parse_dtype(c.name));
    // And back: the little-endian file type of the same class and size.
    const hid_t back = hdf5_type_of(dt);
    CHECK(H5Tget_size(back) == dt.itemsize);
    CHECK(H5Tget_order(back) == H5T_ORDER_LE);
    CHECK(H5Tget_class(back) == (dt.kind == 'f' ? H5T_FLOAT : H5T_INTEGER));
  }
  CHECK_THROWS_AS(hdf5_type_of(mmfs::fs::Dtype{"complex64", 8, 'c'}), std::invalid_argument);
}

TEST_CASE("dtype map: every other class is refused, naming the type", "[h5]") {
  auto refused = [](hid_t type) {
    auto d = dtype_of(type);
    REQUIRE(std::holds_alternative<UnsupportedType>(d));
    return std::get<UnsupportedType>(d).description;
  };
  Datatype compound(H5Tcreate(H5T_COMPOUND, 8), "compound");
  H5Tinsert(compound.get(), "a", 0, H5T_NATIVE_DOUBLE);
  CHECK(refused(compound.get()) == "compound");
  CHECK(unsupported_type_message(UnsupportedType{"compound"}) ==
        "unsupported HDF5 type (compound); mmfs arrays hold int8 … uint64, float32, float64");

  Datatype str(H5Tcopy(H5T_C_S1), "string");
  CHECK(refused(str.get()) == "string");
  Datatype vstr(H5Tcopy(H5T_C_S1), "string");
  H5Tset_size(vstr.get(), H5T_VARIABLE);
  CHECK(refused(vstr.get()) == "variable-length string");

  // h5py's bool: an int8 enum {FALSE, TRUE}.
  Datatype boolean(H5Tenum_create(H5T_NATIVE_INT8), "enum");
  std::int8_t f = 0, t = 1;
  H5Tenum_insert(boolean.get(), "FALSE", &f);
  H5Tenum_insert(boolean.get(), "TRUE", &t);
  CHECK(refused(boolean.get()) == "enum (h5py bool)");
  Datatype colours(H5Tenum_create(H5T_NATIVE_INT), "enum");
  int red = 0;
  H5Tenum_insert(colours.get(), "RED", &red);
  CHECK(refused(colours.get()) == "enum");

  hsize_t three = 3;
  Datatype array(H5Tarray_create2(H5T_NATIVE_FLOAT, 1, &three), "array");
  CHECK(refused(array.get()) == "array");
  Datatype vlen(H5Tvlen_create(H5T_NATIVE_INT), "vlen");
  CHECK(refused(vlen.get()) == "variable-length");
  CHECK(refused(H5T_STD_REF_OBJ) == "reference");
  Datatype opaque(H5Tcreate(H5T_OPAQUE, 4), "opaque");
  CHECK(refused(opaque.get()) == "opaque");
  CHECK(refused(H5T_STD_B8LE) == "bitfield");

  // float16 (h5py's layout) and long double.
  Datatype half(H5Tcopy(H5T_IEEE_F32LE), "half");
  H5Tset_fields(half.get(), 15, 10, 5, 0, 10);
  H5Tset_precision(half.get(), 16);
  H5Tset_size(half.get(), 2);
  H5Tset_ebias(half.get(), 15);
  CHECK(refused(half.get()) == "float16");
  CHECK(refused(H5T_NATIVE_LDOUBLE).rfind("long double", 0) == 0);

  // A 4-byte float that is not IEEE binary32 cannot be copied bit for bit.
  Datatype odd(H5Tcopy(H5T_IEEE_F32LE), "odd");
  H5Tset_fields(odd.get(), 31, 20, 11, 0, 20);
  CHECK(refused(odd.get()) == "non-IEEE float of 4 bytes");

  Datatype wide(H5Tcopy(H5T_STD_I64LE), "wide");
  H5Tset_precision(wide.get(), 64);
  H5Tset_size(wide.get(), 16);
  CHECK(refused(wide.get()) == "integer of 16 bytes");
}

TEST_CASE("attributes: HDF5 -> xattrs encoding", "[h5]") {
  File f = memory_file();
  Group g = make_group(f, "/g");
  put<double>(g.get(), "scale", H5T_IEEE_F64LE, {}, {2.5});
  put<std::int32_t>(g.get(), "offset", H5T_STD_I32BE, {}, {-3});
  put<float>(g.get(), "tenth", H5T_IEEE_F32LE, {}, {0.1f});
  put<double>(g.get(), "origin", H5T_IEEE_F64LE, {3}, {1.5, -2.0, 3e300});
  put<std::uint16_t>(g.get(), "grid", H5T_STD_U16LE, {2, 3}, {1, 2, 3, 4, 5, 6});
  put<std::uint64_t>(g.get(), "big", H5T_STD_U64LE, {}, {18446744073709551615ull});
  put<double>(g.get(), "odd", H5T_IEEE_F64LE, {3},
              {std::nan(""), std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()});
  put<double>(g.get(), "missing", H5T_IEEE_F64LE, {}, {std::nan("")});
  put_vlen_string(g.get(), "units", "kelvin");
  put_fixed_string(g.get(), "padded", std::string("abc\0\0\0", 6), 6, H5T_STR_NULLPAD);
  put_fixed_string(g.get(), "spaced", "ab    ", 6, H5T_STR_SPACEPAD);
  put_fixed_string(g.get(), "terminated", std::string("xy\0zz", 5), 5, H5T_STR_NULLTERM);
  put_fixed_string(g.get(), "names", std::string("a\0\0bc\0", 6), 3, H5T_STR_NULLPAD, {2});
  put<std::int32_t>(g.get(), "mmfs.layout", H5T_STD_I32LE, {}, {1});
  put<std::int32_t>(g.get(), "hdf5.types", H5T_STD_I32LE, {}, {1});
  Datatype compound(H5Tcreate(H5T_COMPOUND, 8), "compound");
  H5Tinsert(compound.get(), "a", 0, H5T_NATIVE_DOUBLE);
  put<double>(g.get(), "record", compound.get(), {}, {1.0});
  std::vector<std::uint8_t> huge(70000, 7);
  put<std::uint8_t>(g.get(), "huge", H5T_STD_U8LE, {huge.size()}, huge);

  ImportedAttributes got = attributes_to_xattrs(g.get());
  auto x = as_map(got.xattrs);
  CHECK(x["user.scale"] == "2.5");
  CHECK(x["user.offset"] == "-3");
  CHECK(x["user.tenth"] == "0.1");
  CHECK(x["user.origin"] == "[1.5,-2.0,3e+300]");
  CHECK(x["user.grid"] == "[[1,2,3],[4,5,6]]");
  CHECK(x["user.big"] == "18446744073709551615");
  CHECK(x["user.odd"] == R"(["NaN","Infinity","-Infinity"])");
  CHECK(x["user.missing"] == "NaN");
  CHECK(x["user.units"] == "kelvin");
  CHECK(x["user.padded"] == "abc");
  CHECK(x["user.spaced"] == "ab");
  CHECK(x["user.terminated"] == "xy");
  CHECK(x["user.names"] == R"(["a","bc"])");
  CHECK(x.count("user.mmfs.layout") == 0);
  CHECK(x.count("user.record") == 0);
  CHECK(x.count("user.huge") == 0);
  // Skipped ones are warned about, one line each.
  CHECK(got.warnings.size() == 4);

  json types = json::parse(x.at(std::string(kTypesXattr)));
  CHECK(types["units"] == json{{"type", "string"}, {"shape", json::array()}});
  CHECK(types["origin"] == json{{"type", "float64"}, {"shape", {3}}});
  CHECK(types["grid"] == json{{"type", "uint16"}, {"shape", {2, 3}}});
  CHECK(types["offset"]["type"] == "int32");
  CHECK(types["tenth"]["type"] == "float32");
  CHECK(types["names"] == json{{"type", "string"}, {"shape", {2}}});
  CHECK(types.size() == 13);
  // user.hdf5.types comes last, after the values it describes.
  CHECK(got.xattrs.back().first == kTypesXattr);
}

TEST_CASE("attributes: round trip HDF5 -> xattrs -> HDF5", "[h5]") {
  File f = memory_file();
  Group src = make_group(f, "/src");
  put<double>(src.get(), "scale", H5T_IEEE_F64BE, {}, {2.5});
  put<std::int8_t>(src.get(), "tiny", H5T_STD_I8LE, {}, {-128});
  put<std::uint32_t>(src.get(), "counts", H5T_STD_U32LE, {2, 2}, {1, 2, 3, 4294967295u});
  put<float>(src.get(), "fs", H5T_IEEE_F32LE, {3}, {0.1f, 1e-40f, 3.4028235e38f});
  put<double>(src.get(), "odd", H5T_IEEE_F64LE, {2}, {std::nan(""), -std::numeric_limits<double>::infinity()});
  put<double>(src.get(), "nan", H5T_IEEE_F64LE, {}, {std::nan("")});
  put<std::int64_t>(src.get(), "empty", H5T_STD_I64LE, {0}, {});
  put_vlen_string(src.get(), "units", "degrees \"C\"\n");
  put_fixed_string(src.get(), "names", std::string("a\0\0bc\0", 6), 3, H5T_STR_NULLPAD, {2});

  ImportedAttributes imported = attributes_to_xattrs(src.get());
  REQUIRE(imported.warnings.empty());
  Group dst = make_group(f, "/dst");
  // As export sees them: the array file's xattrs, schema ones included.
  Xattrs xattrs = imported.xattrs;
  xattrs.emplace_back("user.mmfs.shape", "10,10");
  xattrs.emplace_back("user.note", "set by hand");
  auto warnings = xattrs_to_attributes(dst.get(), xattrs);
  CHECK(warnings.empty());

  CHECK(H5Aexists(dst.get(), "mmfs.shape") == 0);
  CHECK(H5Aexists(dst.get(), "hdf5.types") == 0);
  CHECK(type_name_of(dst.get(), "scale") == "float64");
  CHECK(values_of<double>(dst.get(), "scale", H5T_NATIVE_DOUBLE, 1)[0] == 2.5);
  CHECK(dims_of(dst.get(), "scale").empty());
  CHECK(type_name_of(dst.get(), "tiny") == "int8");
  CHECK(values_of<std::int8_t>(dst.get(), "tiny", H5T_NATIVE_INT8, 1)[0] == -128);
  CHECK(type_name_of(dst.get(), "counts") == "uint32");
  CHECK(dims_of(dst.get(), "counts") == std::vector<hsize_t>{2, 2});
  CHECK(values_of<std::uint32_t>(dst.get(), "counts", H5T_NATIVE_UINT32, 4) ==
        std::vector<std::uint32_t>{1, 2, 3, 4294967295u});
  CHECK(type_name_of(dst.get(), "fs") == "float32");
  // float32 values come back bit for bit (denormals and the maximum included).
  auto fs = values_of<float>(dst.get(), "fs", H5T_NATIVE_FLOAT, 3);
  CHECK(fs == std::vector<float>{0.1f, 1e-40f, 3.4028235e38f});
  auto odd = values_of<double>(dst.get(), "odd", H5T_NATIVE_DOUBLE, 2);
  CHECK(std::isnan(odd[0]));
  CHECK(odd[1] == -std::numeric_limits<double>::infinity());
  CHECK(std::isnan(values_of<double>(dst.get(), "nan", H5T_NATIVE_DOUBLE, 1)[0]));
  CHECK(dims_of(dst.get(), "empty") == std::vector<hsize_t>{0});
  CHECK(type_name_of(dst.get(), "units") == "vlen-string");
  CHECK(strings_of(dst.get(), "units", 1)[0] == "degrees \"C\"\n");
  CHECK(dims_of(dst.get(), "names") == std::vector<hsize_t>{2});
  CHECK(strings_of(dst.get(), "names", 2) == std::vector<std::string>{"a", "bc"});
  // An xattr user.hdf5.types does not list: a string.
  CHECK(type_name_of(dst.get(), "note") == "vlen-string");
  CHECK(strings_of(dst.get(), "note", 1)[0] == "set by hand");

  // And once more: the same xattrs again.
  CHECK(as_map(attributes_to_xattrs(dst.get()).xattrs).at("user.counts") == "[[1,2],[3,4294967295]]");
}

TEST_CASE("attributes: export of values that do not match their recorded type", "[h5]") {
  File f = memory_file();
  Group dst = make_group(f, "/dst");
  json types = {{"n", {{"type", "int8"}, {"shape", json::array()}}},
                {"v", {{"type", "float64"}, {"shape", {3}}}},
                {"w", {{"type", "uint16"}, {"shape", {2}}}},
                {"s", {{"type", "strange"}, {"shape", json::array()}}}};
  Xattrs xattrs = {{"user.n", "300"},          // out of int8's range
                   {"user.v", "[1,2]"},        // wrong length
                   {"user.w", "[1,-1]"},       // negative for unsigned
                   {"user.s", "x"},            // unknown type
                   {std::string(kTypesXattr), types.dump()}};
  auto warnings = xattrs_to_attributes(dst.get(), xattrs);
  CHECK(warnings.size() == 4);
  for (const char* name : {"n", "v", "w", "s"}) {
    CAPTURE(name);
    CHECK(type_name_of(dst.get(), name) == "vlen-string");
  }
  CHECK(strings_of(dst.get(), "v", 1)[0] == "[1,2]");

  // A malformed user.hdf5.types: everything is a string, with one warning.
  Group other = make_group(f, "/other");
  auto w2 = xattrs_to_attributes(other.get(), {{"user.a", "1"}, {std::string(kTypesXattr), "{nope"}});
  CHECK(w2.size() == 1);
  CHECK(type_name_of(other.get(), "a") == "vlen-string");
}

TEST_CASE("hdf5 errors become readable exceptions", "[h5]") {
  silence_hdf5_errors();
  try {
    File bad(H5Fopen("/nonexistent/dir/file.h5", H5F_ACC_RDONLY, H5P_DEFAULT), "opening file.h5");
    FAIL("no exception");
  } catch (const H5Error& e) {
    std::string what = e.what();
    CHECK(what.rfind("opening file.h5: ", 0) == 0);
    CHECK(what.find("unable to open file") != std::string::npos);
  }
  CHECK(hdf5_error_text().empty());  // the stack was cleared
}
