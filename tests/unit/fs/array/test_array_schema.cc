// The user.mmfs.* schema attributes: parsing, cross-field rules, display
// text and the persistent form.
#include <catch2/catch.hpp>
#include <cerrno>
#include <random>
#include <string>
#include <vector>

#include "fs/array/array_schema.h"

using namespace mmfs::fs;

namespace {

// Sets an attribute that must be accepted.
void set_ok(ArraySchema& s, std::string_view name, std::string_view value) {
  auto r = set_schema_attr(s, name, value);
  INFO(name << " = '" << value << "': " << r.message);
  REQUIRE_FALSE(r);
}

// Sets an attribute that must be refused with `error`, leaving the schema as it was.
void set_fails(ArraySchema& s, std::string_view name, std::string_view value, int error = EINVAL) {
  const ArraySchema before = s;
  auto r = set_schema_attr(s, name, value);
  INFO(name << " = '" << value << "'");
  CHECK(r.error == error);
  CHECK(bool(r));
  CHECK_FALSE(r.message.empty());
  CHECK(r.message.find('\n') == std::string::npos);
  CHECK(s == before);
}

ArraySchema with_shape(std::string_view shape) {
  ArraySchema s;
  set_ok(s, "shape", shape);
  return s;
}

}  // namespace

TEST_CASE("parse_dtype: canonical names and numpy aliases", "[array_schema]") {
  struct Expect {
    const char* name;
    const char* alias;
    std::uint32_t itemsize;
    char kind;
  };
  const Expect all[] = {{"int8", "i1", 1, 'i'},    {"uint8", "u1", 1, 'u'},   {"int16", "i2", 2, 'i'},
                        {"uint16", "u2", 2, 'u'},  {"int32", "i4", 4, 'i'},   {"uint32", "u4", 4, 'u'},
                        {"int64", "i8", 8, 'i'},   {"uint64", "u8", 8, 'u'},  {"float32", "f4", 4, 'f'},
                        {"float64", "f8", 8, 'f'}};
  for (const auto& e : all) {
    const Dtype want{e.name, e.itemsize, e.kind};
    INFO(e.name);
    CHECK(parse_dtype(e.name) == want);
    CHECK(parse_dtype(e.alias) == want);
    CHECK(parse_dtype(std::string("<") + e.alias) == want);
    CHECK(parse_dtype(std::string("=") + e.alias) == want);
    CHECK_FALSE(parse_dtype(std::string(">") + e.alias));
    CHECK_FALSE(parse_dtype(std::string(">") + e.name));
    // '|' (no byte order) only makes sense for 1-byte types.
    CHECK(parse_dtype(std::string("|") + e.alias).has_value() == (e.itemsize == 1));
  }
}

TEST_CASE("parse_dtype: refused spellings", "[array_schema]") {
  for (const char* bad : {">f8", "float16", "complex128", "", "f2", "c16", "<", "=", "|", "F8", "Float64",
                          "f8 ", " f8", "<<f8", "<=f8", "float64\n", "i16", "bool", "object"}) {
    INFO("'" << bad << "'");
    CHECK_FALSE(parse_dtype(bad));
  }
}

TEST_CASE("schema attribute and layout names", "[array_schema]") {
  const std::vector<std::string> names{"shape", "dtype",    "layout", "order", "cell", "basic_cube",
                                       "priority", "chunk", "compress", "index", "bins",  "dims",
                                       "copies"};
  CHECK(schema_attr_names() == names);
  for (const auto& n : names) CHECK(is_schema_attr(n));
  for (const char* n : {"", "Shape", "user.mmfs.shape", "shape ", "foo", "basic-cube"}) CHECK_FALSE(is_schema_attr(n));
  CHECK(kSchemaPrefix == "user.mmfs.");

  for (const char* l : {"naive", "zorder", "hilbert", "multimap", "quadrangle", "capsule", "mloc"})
    CHECK(is_layout_name(l));
  for (const char* l : {"", "MultiMap", "z-order", "hdf5", "multimap "}) CHECK_FALSE(is_layout_name(l));
}

TEST_CASE("defaults", "[array_schema]") {
  ArraySchema s;
  CHECK(s.shape.empty());
  CHECK(s.dtype == Dtype{"float64", 8, 'f'});
  CHECK_FALSE(validate_schema(s));
  CHECK(array_bytes(s) == 0);
  CHECK(schema_attr_text(s, "shape") == "");
  CHECK(schema_attr_text(s, "dtype") == "float64");
  CHECK(schema_attr_text(s, "layout") == "multimap");
  CHECK(schema_attr_text(s, "order") == "");  // no shape: no rank to default from
  CHECK(schema_attr_text(s, "priority") == "V-M-S");
  CHECK(schema_attr_text(s, "compress") == "none");
  CHECK(schema_attr_text(s, "index") == "none");
  CHECK(schema_attr_text(s, "bins") == "100");
  CHECK(schema_attr_text(s, "nonsense") == "");
}

TEST_CASE("shape parsing", "[array_schema]") {
  ArraySchema s;
  set_ok(s, "shape", "1024,1024,256");
  CHECK(s.shape == std::vector<std::uint64_t>{1024, 1024, 256});
  CHECK(array_bytes(s) == 1024ull * 1024 * 256 * 8);
  CHECK(schema_attr_text(s, "shape") == "1024,1024,256");

  set_ok(s, "shape", "7\n");  // echo/setfattr users add a newline
  CHECK(s.shape == std::vector<std::uint64_t>{7});
  set_ok(s, "shape", "007,1");  // plain decimal; shown without the zeros
  CHECK(schema_attr_text(s, "shape") == "7,1");

  std::string sixteen = "1";
  for (int i = 1; i < 16; ++i) sixteen += ",2";
  set_ok(s, "shape", sixteen);
  CHECK(s.shape.size() == 16);
  CHECK(array_bytes(s) == (1ull << 15) * 8);

  SECTION("malformed shapes are EINVAL and change nothing") {
    for (const char* bad : {"", "\n", "0", "3,0,4", "-1", "3,-1", " 3", "3 ", "3, 4", "3,4,", ",3", "3,,4",
                            "+3", "0x10", "3x", "3.0", "1e3", "3\n\n", "3\r\n", "\n3", "3;4", "a", "3,0,x",
                            "\xff"}) {
      set_fails(s, "shape", bad);
    }
    set_fails(s, "shape", sixteen + ",1");  // 17 dims
  }

  SECTION("the message names the attribute, the value and what is accepted") {
    auto r = set_schema_attr(s, "shape", "3,0,x");
    CHECK(r.error == EINVAL);
    CHECK(r.message ==
          "user.mmfs.shape: '3,0,x' is not a shape: 1 to 16 positive integers separated by commas "
          "(e.g. 1024,1024,256)");
    // Control bytes do not break the one-line message.
    r = set_schema_attr(s, "shape", std::string("1\n2\0", 4));
    CHECK(r.error == EINVAL);
    CHECK(r.message.find('\n') == std::string::npos);
    CHECK(r.message.find(std::string("\0", 1)) == std::string::npos);
  }

  SECTION("sizes beyond 64 bits are EFBIG") {
    set_fails(s, "shape", "99999999999999999999999", EFBIG);  // one number beyond 64 bits
    set_fails(s, "shape", "18446744073709551616", EFBIG);     // 2^64
    set_fails(s, "shape", "2,18446744073709551616", EFBIG);
    set_fails(s, "shape", "18446744073709551615", EFBIG);     // fits, but * 8 bytes does not
    set_fails(s, "shape", "4294967296,4294967296", EFBIG);    // product 2^64
    set_fails(s, "shape", "2305843009213693952", EFBIG);      // 2^61 float64s = 2^64 bytes
    set_ok(s, "shape", "2305843009213693951");                // the largest that fits
    CHECK(array_bytes(s) == 2305843009213693951ull * 8);
    // Malformed wins over too large: it is not a number at all.
    set_fails(s, "shape", "99999999999999999999999,x", EINVAL);
  }
}

TEST_CASE("dtype changes the byte size", "[array_schema]") {
  ArraySchema s;
  set_ok(s, "dtype", "u1");
  CHECK(s.dtype == Dtype{"uint8", 1, 'u'});
  set_ok(s, "shape", "18446744073709551615");
  CHECK(array_bytes(s) == 18446744073709551615ull);
  set_fails(s, "dtype", "int16", EFBIG);
  CHECK(s.dtype.name == "uint8");
  // Removing dtype would make it float64: too big as well.
  const ArraySchema before = s;
  auto r = reset_schema_attr(s, "dtype");
  CHECK(r.error == EFBIG);
  CHECK(s == before);

  ArraySchema t = with_shape("10,10");
  set_ok(t, "dtype", "<i4\n");
  CHECK(t.dtype == Dtype{"int32", 4, 'i'});
  CHECK(array_bytes(t) == 400);
  CHECK(schema_attr_text(t, "dtype") == "int32");
  for (const char* bad : {">f8", "float16", "complex128", "", " f8"}) set_fails(t, "dtype", bad);
  auto msg = set_schema_attr(t, "dtype", ">f8").message;
  CHECK(msg.rfind("user.mmfs.dtype: '>f8' is not a dtype:", 0) == 0);
}

TEST_CASE("order", "[array_schema]") {
  ArraySchema s = with_shape("4,5,6");
  CHECK(schema_attr_text(s, "order") == "2,1,0");
  for (const char* good : {"0,1,2", "2,0,1", "1,2,0", "2,1,0", "0,2,1", "1,0,2"}) set_ok(s, "order", good);
  set_ok(s, "order", "2,0,1");
  CHECK(s.order == std::vector<std::uint32_t>{2, 0, 1});
  CHECK(schema_attr_text(s, "order") == "2,0,1");
  for (const char* bad : {"0,1", "0,1,1", "1,2,3", "0,1,2,3", "", "0,1,-2", "0,1,2,", "0, 1,2", "2,1,0,",
                          "4294967296,0,1", "18446744073709551616,0,1", "0,1,x"}) {
    set_fails(s, "order", bad);
  }
  CHECK(s.order == std::vector<std::uint32_t>{2, 0, 1});
  CHECK_FALSE(reset_schema_attr(s, "order"));
  CHECK(s.order.empty());
  CHECK(schema_attr_text(s, "order") == "2,1,0");

  ArraySchema one = with_shape("9");
  CHECK(schema_attr_text(one, "order") == "0");
  set_fails(one, "order", "1");
  set_ok(one, "order", "0");

  // Before a shape: a permutation of its own length.
  ArraySchema t;
  set_ok(t, "order", "1,0");
  set_fails(t, "order", "1,2");
  std::string seventeen = "16";
  for (int d = 15; d >= 0; --d) seventeen += "," + std::to_string(d);
  set_fails(t, "order", seventeen);
}

TEST_CASE("rank conflicts, whichever is set first", "[array_schema]") {
  for (const char* field : {"order", "cell", "basic_cube", "chunk"}) {
    INFO(field);
    const char* two = std::string_view(field) == "order" ? "1,0" : "1,1";
    const char* three = std::string_view(field) == "order" ? "2,1,0" : "1,1,1";

    ArraySchema a = with_shape("8,8");  // shape first
    set_fails(a, field, three);
    auto first = set_schema_attr(a, field, three);
    CHECK(first.message.rfind(std::string("user.mmfs.") + field + ": '", 0) == 0);
    CHECK(first.message.find("user.mmfs.shape '8,8'") != std::string::npos);
    set_ok(a, field, two);

    ArraySchema b;  // the field first
    set_ok(b, field, two);
    set_fails(b, "shape", "8,8,8");
    auto r = set_schema_attr(b, "shape", "8,8,8");
    CHECK(r.message.rfind("user.mmfs.shape:", 0) == 0);  // names what the user just set
    CHECK(r.message.find(std::string("user.mmfs.") + field) != std::string::npos);
    set_ok(b, "shape", "8,8");
    set_fails(b, "shape", "8");
  }
  // Two dimensioned fields conflict even before there is a shape: no shape could satisfy both.
  ArraySchema c;
  set_ok(c, "order", "1,0");
  set_fails(c, "cell", "1,1,1");
  set_ok(c, "cell", "2,2");
  set_fails(c, "chunk", "4");
  set_fails(c, "basic_cube", "1,1,1");
}

TEST_CASE("cell, chunk and basic_cube", "[array_schema]") {
  ArraySchema s = with_shape("8,16");
  CHECK(schema_attr_text(s, "cell") == "");
  CHECK(schema_attr_text(s, "chunk") == "");
  CHECK(schema_attr_text(s, "basic_cube") == "");

  set_ok(s, "cell", "8,16");  // equal to the shape is fine
  set_ok(s, "cell", "4,2");
  CHECK(s.cell == std::vector<std::uint64_t>{4, 2});
  CHECK(schema_attr_text(s, "cell") == "4,2");
  set_fails(s, "cell", "9,1");
  set_fails(s, "cell", "1,17");
  set_fails(s, "cell", "0,1");
  set_fails(s, "cell", "");
  auto r = set_schema_attr(s, "cell", "9,1");
  CHECK(r.message.rfind("user.mmfs.cell:", 0) == 0);
  CHECK(r.message.find("dimension 0") != std::string::npos);

  set_ok(s, "chunk", "8,8");
  set_fails(s, "chunk", "8,32");
  set_fails(s, "chunk", "8,0");

  // basic_cube counts cells, not elements: not bounded by the shape.
  set_ok(s, "basic_cube", "100,100");
  set_fails(s, "basic_cube", "1,0");

  // Shrinking the shape below the cell is refused, naming the shape.
  set_fails(s, "shape", "2,16");
  r = set_schema_attr(s, "shape", "2,16");
  CHECK(r.message.rfind("user.mmfs.shape:", 0) == 0);
  set_fails(s, "shape", "8,4");  // below chunk[1] = 8 (cell[1] = 2 fits)
  set_ok(s, "shape", "8,8");

  // Set before the shape: only checked against it once it comes.
  ArraySchema t;
  set_ok(t, "cell", "64,64");
  set_fails(t, "shape", "32,128");
  set_ok(t, "shape", "64,128");
}

TEST_CASE("layout, priority, index", "[array_schema]") {
  ArraySchema s;
  for (const char* l : {"naive", "zorder", "hilbert", "quadrangle", "capsule", "mloc", "multimap"}) {
    set_ok(s, "layout", l);
    CHECK(s.layout == l);
  }
  set_ok(s, "layout", "hilbert\n");
  CHECK(schema_attr_text(s, "layout") == "hilbert");
  for (const char* bad : {"", "Hilbert", "hilbert ", "z-order", "hdf5"}) set_fails(s, "layout", bad);

  for (const char* p : {"V-M-S", "V-S-M", "M-V-S", "M-S-V", "S-V-M", "S-M-V"}) {
    set_ok(s, "priority", p);
    CHECK(schema_attr_text(s, "priority") == p);
  }
  for (const char* bad : {"", "V-M", "V-M-M", "v-m-s", "VMS", "V,M,S", "V-M-S-", "V--M-S", "V-M-X", "-V-M-S"})
    set_fails(s, "priority", bad);

  for (const char* i : {"none", "e1", "bn", "range", "interval", "re", "ie"}) {
    set_ok(s, "index", i);
    CHECK(s.index == i);
  }
  for (const char* bad : {"", "E1", "bitmap", "range "}) set_fails(s, "index", bad);
}

TEST_CASE("compress", "[array_schema]") {
  ArraySchema s;
  set_ok(s, "compress", "zstd");
  CHECK(s.compress == "zstd");
  set_ok(s, "compress", "zstd:1");
  CHECK(s.compress == "zstd:1");
  set_ok(s, "compress", "zstd:22\n");
  CHECK(s.compress == "zstd:22");
  set_ok(s, "compress", "zstd:07");  // stored canonically
  CHECK(s.compress == "zstd:7");
  CHECK(schema_attr_text(s, "compress") == "zstd:7");
  for (const char* bad : {"zstd:0", "zstd:23", "zstd:", "zstd:-1", "zstd:+3", "ZSTD", "zstd:3:4", "lz4", "",
                          "zstd 3", "zstd:99999999999999999999999", "zstd:0x3", "none:1", "zstd3"}) {
    set_fails(s, "compress", bad);
  }
  set_ok(s, "compress", "none");
  CHECK(s.compress == "none");
}

TEST_CASE("bins", "[array_schema]") {
  ArraySchema s = with_shape("100");
  CHECK(schema_attr_text(s, "bins") == "100");  // float default
  set_ok(s, "dtype", "int16");
  CHECK(schema_attr_text(s, "bins") == "exact");  // integer default
  set_ok(s, "dtype", "uint8");
  CHECK(schema_attr_text(s, "bins") == "exact");

  struct Good {
    const char* in;
    const char* stored;
  };
  for (auto [in, stored] : {Good{"exact", "exact"}, Good{"1", "1"}, Good{"100", "100"}, Good{"0100", "100"},
                            Good{"precision:1", "precision:1"}, Good{"precision:17", "precision:17"},
                            Good{"precision:05", "precision:5"}, Good{"edges:1", "edges:1"},
                            Good{"edges:-1.5,0,2e3", "edges:-1.5,0,2e3"}, Good{"edges:-3,-2.5", "edges:-3,-2.5"},
                            Good{"42\n", "42"}}) {
    set_ok(s, "bins", in);
    CHECK(s.bins == stored);
    CHECK(schema_attr_text(s, "bins") == stored);
  }
  for (const char* bad : {"", "0", "-1", "+5", "exact ", "EXACT", "1.5", "precision:0", "precision:18",
                          "precision:", "precision:x", "precision:-1", "edges:", "edges:1,1", "edges:2,1",
                          "edges:1,,2", "edges:1,", "edges:,1", "edges:nan", "edges:inf", "edges:1,inf",
                          "edges:-inf,1", "edges:1e999", "edges: 1", "edges:+1", "edges:1a", "edges:0,-0",
                          "edges 1,2", "18446744073709551616", "range"}) {
    set_fails(s, "bins", bad);
  }

  // exact binning of a float array is allowed (few distinct values).
  ArraySchema f = with_shape("10");
  set_ok(f, "bins", "exact");
  CHECK(schema_attr_text(f, "bins") == "exact");
  CHECK_FALSE(reset_schema_attr(f, "bins"));
  CHECK(f.bins.empty());
  CHECK(schema_attr_text(f, "bins") == "100");
}

TEST_CASE("unknown names", "[array_schema]") {
  ArraySchema s = with_shape("3,3");
  for (const char* bad : {"foo", "", "Shape", "user.mmfs.shape", "shape\n"}) {
    set_fails(s, bad, "3,3");
    const ArraySchema before = s;
    auto r = reset_schema_attr(s, bad);
    CHECK(r.error == EINVAL);
    CHECK(s == before);
  }
  auto r = set_schema_attr(s, "foo", "1");
  CHECK(r.message.find("user.mmfs.foo") != std::string::npos);
  CHECK(r.message.find("shape dtype layout order cell basic_cube priority chunk compress index bins") !=
        std::string::npos);
}

TEST_CASE("reset returns each attribute to its default", "[array_schema]") {
  ArraySchema s = with_shape("8,8,8");
  set_ok(s, "dtype", "i2");
  set_ok(s, "layout", "zorder");
  set_ok(s, "order", "0,1,2");
  set_ok(s, "cell", "2,2,2");
  set_ok(s, "basic_cube", "2,1,1");
  set_ok(s, "priority", "S-M-V");
  set_ok(s, "chunk", "4,4,4");
  set_ok(s, "compress", "zstd:5");
  set_ok(s, "index", "bn");
  set_ok(s, "bins", "precision:3");

  for (const auto& name : schema_attr_names()) {
    if (name == "shape") continue;
    INFO(name);
    CHECK_FALSE(reset_schema_attr(s, name));
  }
  ArraySchema want;
  want.shape = {8, 8, 8};
  CHECK(s == want);
  CHECK_FALSE(reset_schema_attr(s, "order"));  // resetting a default is fine
  CHECK(s == want);

  auto r = reset_schema_attr(s, "shape");
  CHECK(r.error == EINVAL);
  CHECK(r.message.find("remove the file instead") != std::string::npos);
  CHECK(s == want);
}

TEST_CASE("validate_schema checks hand-built schemas", "[array_schema]") {
  ArraySchema good = with_shape("4,4");
  REQUIRE_FALSE(validate_schema(good));

  auto bad = [&](auto mutate, int error = EINVAL) {
    ArraySchema s = good;
    mutate(s);
    auto r = validate_schema(s);
    CHECK(r.error == error);
    CHECK_FALSE(r.message.empty());
  };
  bad([](ArraySchema& s) { s.shape = {4, 0}; });
  bad([](ArraySchema& s) { s.shape = std::vector<std::uint64_t>(17, 1); });
  bad([](ArraySchema& s) { s.shape = {1ull << 62, 2}; }, EFBIG);
  bad([](ArraySchema& s) { s.dtype = Dtype{"float64", 4, 'f'}; });
  bad([](ArraySchema& s) { s.dtype = Dtype{"float16", 2, 'f'}; });
  bad([](ArraySchema& s) { s.dtype = Dtype{"f8", 8, 'f'}; });  // aliases are input only
  bad([](ArraySchema& s) { s.layout = "foo"; });
  bad([](ArraySchema& s) { s.order = {0, 0}; });
  bad([](ArraySchema& s) { s.order = {0, 1, 2}; });
  bad([](ArraySchema& s) { s.cell = {5, 1}; });
  bad([](ArraySchema& s) { s.cell = {1, 1, 1}; });
  bad([](ArraySchema& s) { s.basic_cube = {0, 1}; });
  bad([](ArraySchema& s) { s.chunk = {4, 5}; });
  bad([](ArraySchema& s) { s.priority = "V-V-S"; });
  bad([](ArraySchema& s) { s.compress = "zstd:0"; });
  bad([](ArraySchema& s) { s.index = "bitmap"; });
  bad([](ArraySchema& s) { s.bins = "edges:3,2"; });
  bad([](ArraySchema& s) {
    s.shape.clear();
    s.order = {1, 0};
    s.cell = {1};
  });
}

namespace {
ArraySchema full_schema() {
  ArraySchema s = with_shape("64,32,16");
  set_ok(s, "dtype", "uint16");
  set_ok(s, "layout", "mloc");
  set_ok(s, "order", "1,2,0");
  set_ok(s, "cell", "4,4,2");
  set_ok(s, "basic_cube", "3,2,1");
  set_ok(s, "priority", "M-S-V");
  set_ok(s, "chunk", "16,16,16");
  set_ok(s, "compress", "zstd:9");
  set_ok(s, "index", "interval");
  set_ok(s, "bins", "edges:-1.25,0,1e3");
  return s;
}
}  // namespace

TEST_CASE("encode/decode round trip", "[array_schema]") {
  for (const ArraySchema& s : {ArraySchema{}, with_shape("1"), full_schema()}) {
    auto text = encode_schema(s);
    auto back = decode_schema(text);
    REQUIRE(back);
    CHECK(*back == s);
    CHECK(encode_schema(*back) == text);
  }
  // The largest shape round-trips exactly (no double conversion).
  ArraySchema big;
  set_ok(big, "dtype", "int8");
  set_ok(big, "shape", "18446744073709551615");
  auto back = decode_schema(encode_schema(big));
  REQUIRE(back);
  CHECK(back->shape == big.shape);
}

TEST_CASE("decode refuses malformed or invalid input", "[array_schema]") {
  CHECK(decode_schema("{}") == ArraySchema{});  // missing keys: defaults
  auto partial = decode_schema(R"({"shape":[2,3],"dtype":"int32","compress":"zstd:07","bins":"0100"})");
  REQUIRE(partial);
  CHECK(partial->shape == std::vector<std::uint64_t>{2, 3});
  CHECK(partial->dtype == Dtype{"int32", 4, 'i'});
  CHECK(partial->compress == "zstd:7");  // canonicalized like set_schema_attr
  CHECK(partial->bins == "100");

  for (const char* bad : {
           "", "null", "[]", "42", "\"shape\"", "{", R"({"shape":[2,3]} x)",
           R"({"shape":[2,3],"colour":"red"})",  // unknown key
           R"({"shape":"2,3"})", R"({"shape":[2,-3]})", R"({"shape":[2,3.0]})", R"({"shape":[2,0]})",
           R"({"shape":[18446744073709551616]})", R"({"shape":[4294967296,4294967296]})",
           R"({"shape":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]})", R"({"dtype":"float16"})", R"({"dtype":8})",
           R"({"dtype":">f8"})", R"({"layout":"btree"})", R"({"layout":null})", R"({"order":[0,0]})",
           R"({"shape":[2,3],"order":[0]})", R"({"order":[4294967296,0]})", R"({"order":"1,0"})",
           R"({"shape":[2,3],"cell":[3,3]})", R"({"shape":[2,3],"chunk":[2,3,1]})", R"({"basic_cube":[0]})",
           R"({"priority":"V-M"})", R"({"compress":"zstd:23"})", R"({"compress":"zstd:0"})",
           R"({"index":"e2"})", R"({"bins":"edges:1,1"})", R"({"bins":0})", R"({"shape":[2],"bins":"x"})",
           "{\"layout\":\"naive\xff\"}",
       }) {
    INFO(bad);
    CHECK_FALSE(decode_schema(bad));
  }
}

TEST_CASE("decode never throws on garbage", "[array_schema]") {
  std::mt19937_64 rng(20240607);
  const std::string valid = encode_schema(full_schema());
  const std::string alphabet = "{}[]\",:0123456789-+.eEnulltrfas \\x\xff\x00";
  int accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string text;
    switch (iter % 4) {
      case 0: {  // random bytes
        text.resize(rng() % 64);
        for (auto& c : text) c = char(rng());
        break;
      }
      case 1: {  // random JSON-ish characters
        text.resize(rng() % 96);
        for (auto& c : text) c = alphabet[rng() % alphabet.size()];
        break;
      }
      case 2: {  // a valid encoding with a few bytes changed
        text = valid;
        for (int k = 1 + int(rng() % 3); k > 0; --k) text[rng() % text.size()] = alphabet[rng() % alphabet.size()];
        break;
      }
      default:  // a valid encoding cut short or with a byte removed
        text = valid;
        if (rng() % 2)
          text.resize(rng() % text.size());
        else
          text.erase(rng() % text.size(), 1);
        break;
    }
    std::optional<ArraySchema> out;
    REQUIRE_NOTHROW(out = decode_schema(text));
    if (out) {
      ++accepted;
      // Whatever is accepted is a valid schema that encodes to a stable form.
      INFO(text);
      REQUIRE_FALSE(validate_schema(*out));
      auto again = decode_schema(encode_schema(*out));
      REQUIRE(again);
      CHECK(*again == *out);
    }
  }
  // Some mutations (a digit changed) stay valid: the accepting path was exercised too.
  CHECK(accepted > 0);
}

TEST_CASE("dims: one name per dimension, checked against the rank whichever is set first", "[array_schema]") {
  ArraySchema s;
  CHECK(schema_attr_text(s, "dims") == "");  // no shape: no names
  set_ok(s, "dims", "time,lat,lon");  // before the shape: remembered
  CHECK(s.dims == std::vector<std::string>{"time", "lat", "lon"});
  set_fails(s, "shape", "4,5");  // two dimensions against three names
  set_ok(s, "shape", "4,5,6");
  CHECK(schema_attr_text(s, "dims") == "time,lat,lon");
  CHECK(dim_names(s) == std::vector<std::string>{"time", "lat", "lon"});
  set_fails(s, "dims", "time,lat");
  set_ok(s, "dims", "t,_y2,LONGITUDE\n");  // a trailing newline (echo) is ignored
  CHECK(schema_attr_text(s, "dims") == "t,_y2,LONGITUDE");
  for (const char* bad : {"", "a,b", "a,b,c,d", "a,,c", "a,b,a", "1a,b,c", "a b,c,d", "a,b-c,d", "a,b,c,",
                          ",a,b", "a,b,\xc3\xa9", "a,b,c\n\n"})
    set_fails(s, "dims", bad);
  set_fails(s, "dims", std::string(65, 'x') + ",b,c");
  set_ok(s, "dims", std::string(64, 'x') + ",b,c");

  // Removed: the defaults, dim_0, dim_1, ...
  REQUIRE_FALSE(reset_schema_attr(s, "dims"));
  CHECK(s.dims.empty());
  CHECK(schema_attr_text(s, "dims") == "dim_0,dim_1,dim_2");
  CHECK(dim_names(s) == std::vector<std::string>{"dim_0", "dim_1", "dim_2"});

  // A rank-bearing attribute set after the names must agree with them too.
  ArraySchema t;
  set_ok(t, "dims", "x,y");
  set_fails(t, "cell", "2,2,2");
  set_ok(t, "cell", "2,2");
}

TEST_CASE("dims: stored only when set, round trip, refused when malformed in a record", "[array_schema]") {
  ArraySchema s = with_shape("3,4");
  CHECK(encode_schema(s).find("dims") == std::string::npos);  // records of arrays without names are unchanged
  set_ok(s, "dims", "row,col");
  const std::string text = encode_schema(s);
  auto back = decode_schema(text);
  REQUIRE(back);
  CHECK(back->dims == s.dims);
  CHECK(*back == s);
  for (const char* bad : {R"({"shape":[3,4],"dims":["a"]})", R"({"shape":[3,4],"dims":"a,b"})",
                          R"({"shape":[3,4],"dims":["a","a"]})", R"({"shape":[3,4],"dims":["a",1]})",
                          R"({"shape":[3,4],"dims":["a","2b"]})", R"({"shape":[3,4],"dims":[]})"}) {
    INFO(bad);
    CHECK_FALSE(decode_schema(bad));
  }
}

TEST_CASE("user.hdf5.dims: a JSON list of distinct, non-empty names, one per dimension", "[array_schema]") {
  CHECK(decode_hdf5_dims(R"j(["time (UTC)", "lat-deg"])j", 2) == std::vector<std::string>{"time (UTC)", "lat-deg"});
  CHECK(decode_hdf5_dims(R"j(["x"])j", 1) == std::vector<std::string>{"x"});
  CHECK_FALSE(decode_hdf5_dims(R"j(["a", "b"])j", 3));    // not one per dimension
  CHECK_FALSE(decode_hdf5_dims(R"j(["a", "a"])j", 2));    // two alike
  CHECK_FALSE(decode_hdf5_dims(R"j(["a", ""])j", 2));     // empty
  CHECK_FALSE(decode_hdf5_dims(R"j(["a", 1])j", 2));      // not a string
  CHECK_FALSE(decode_hdf5_dims(R"j(["a", "g/b"])j", 2));  // a path, not a name
  CHECK_FALSE(decode_hdf5_dims(R"j(["a", "b\u0000"])j", 2));
  CHECK_FALSE(decode_hdf5_dims(R"j({"a": 1})j", 1));      // not a list
  CHECK_FALSE(decode_hdf5_dims("a,b", 2));              // not JSON
  CHECK_FALSE(decode_hdf5_dims("[]", 0));
}
