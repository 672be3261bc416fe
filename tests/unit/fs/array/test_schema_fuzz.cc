// [fuzz] fs/array/array_schema: mutants of user.mmfs.* values through
// set_schema_attr (what the daemon's setxattr handler calls) and
// reset_schema_attr, of stored schema records through decode_schema, of
// dtype texts through parse_dtype and of user.hdf5.dims through
// decode_hdf5_dims. A refused value leaves the schema as it was and says
// why in one printable line; an accepted one gives a schema that validates,
// survives its persistent form, reads back the same from the text getfattr
// shows, and whose bins the index builder takes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cerrno>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "fs/array/array_schema.h"
#include "indexes/binning.h"
#include "tests/unit/support/fuzz_support.h"

using namespace mmfs::fs;
using namespace mmfs::testing::fuzz;

namespace {

const std::vector<std::string> kNames = {"shape", "dtype", "layout",   "order", "cell", "basic_cube", "priority",
                                         "chunk", "compress", "index", "bins",  "dims", "copies"};

const std::vector<std::string> kValues = {
    "1024,1024,256", "100,200,30", "7", "18446744073709551615", "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1", "float64",
    "int8", "uint16", "<f8", "|u1", "=i4", "f4", "naive", "zorder", "hilbert", "multimap", "quadrangle", "capsule",
    "mloc", "2,0,1", "0", "3,2,1,0", "8,8,4", "5", "10,20,3", "4,2,2", "V-M-S", "S-V-M", "64,64,64", "16,16",
    "none", "zstd", "zstd:22", "zstd:1", "e1", "bn", "range", "interval", "re", "ie", "exact", "100",
    "precision:3", "edges:-1,0,2.5", "edges:-5e3,7", "time,lat,lon", "x", "a,b,c,d",
    "naive:order=2,1,0;hilbert:cell=16,16,4", "mloc:compress=zstd:3:priority=S-V-M", "zorder:chunk=8",
    "naive\n"};

const std::map<std::string, std::vector<std::string>> kOwn = {
    {"shape", {"100,200,30", "1000", "64,64", "10,10,10,10", "7"}},
    {"dtype", {"float64", "int8", "uint16", "<f8", "|u1", "=i4"}},
    {"layout", {"naive", "zorder", "hilbert", "multimap", "quadrangle", "capsule", "mloc"}},
    {"order", {"2,0,1", "0", "3,2,1,0", "1,0"}},
    {"cell", {"8,8,4", "5", "10,20,3", "16,16", "5,5,5,5"}},
    {"basic_cube", {"4,2,2", "1", "2,2", "1,1,1,1"}},
    {"priority", {"V-M-S", "S-V-M", "M-S-V"}},
    {"chunk", {"64,64,64", "16,16", "100", "2,2,2,2"}},
    {"compress", {"none", "zstd", "zstd:22", "zstd:1"}},
    {"index", {"none", "e1", "bn", "range", "interval", "re", "ie"}},
    {"bins", {"exact", "100", "precision:3", "edges:-1,0,2.5", "edges:-5e3,7", "1048576"}},
    {"dims", {"time,lat,lon", "x", "a,b", "a,b,c,d"}},
    {"copies", {"none", "naive", "naive:order=2,1,0;hilbert:cell=16,16,4", "mloc:compress=zstd:3:priority=S-V-M",
                "zorder:chunk=8"}}};

ArraySchema built(std::initializer_list<std::pair<const char*, const char*>> attrs) {
  ArraySchema s;
  for (const auto& [name, value] : attrs) {
    auto r = set_schema_attr(s, name, value);
    INFO(name << " = " << value << ": " << r.message);
    REQUIRE_FALSE(r);
  }
  return s;
}

std::vector<ArraySchema> bases() {
  return {ArraySchema{},
          built({{"shape", "100,200,30"}}),
          built({{"shape", "1000"}, {"dtype", "int16"}, {"layout", "naive"}, {"index", "e1"}, {"bins", "exact"}}),
          built({{"shape", "64,64"}, {"dtype", "uint8"}, {"layout", "mloc"}, {"priority", "S-V-M"},
                 {"chunk", "16,16"}, {"compress", "zstd:3"}, {"copies", "naive;hilbert:cell=8,8"}}),
          built({{"shape", "10,10,10,10"}, {"dims", "a,b,c,d"}, {"order", "3,2,1,0"}, {"cell", "5,5,5,5"}})};
}

// One printable line (the daemon logs it in .mmfs/errors).
bool one_line(const std::string& m) {
  if (m.empty()) return false;
  for (char c : m)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  return true;
}

// What set_schema_attr's result promises, for `name` = `value` on `before`.
void check_set(Tally& tally, const ArraySchema& before, const ArraySchema& after, const SchemaResult& r,
               const std::string& name, const std::string& input) {
  if (r) {
    tally.failed();
    tally.check(after == before, "a refused value changed the schema", input);
    tally.check(r.error == EINVAL || r.error == EFBIG, "an errno other than EINVAL/EFBIG", input);
    tally.check(one_line(r.message), "the message is not one printable line: " + shown(r.message), input);
    return;
  }
  tally.parsed();
  tally.check(!validate_schema(after), "an accepted value gives a schema that does not validate", input);
  auto back = decode_schema(encode_schema(after));
  tally.check(back && *back == after, "the schema does not survive its persistent form", input);
  // The text getfattr shows reads back to the same schema.
  ArraySchema again = before;
  const std::string text = schema_attr_text(after, name);
  auto r2 = set_schema_attr(again, name, text);
  tally.check(!r2 && again == after, "getfattr's text '" + text + "' reads back differently", input);
  if (name == "bins")  // what the schema takes, the index builder must take too
    tally.check(std::holds_alternative<mmfs::indexes::BinSpec>(mmfs::indexes::parse_bin_spec(after.bins)),
                "bins '" + after.bins + "' accepted here, refused by parse_bin_spec", input);
  std::uint64_t bytes = after.dtype.itemsize;
  bool overflow = false;
  for (auto n : after.shape) overflow = __builtin_mul_overflow(bytes, n, &bytes) || overflow;
  tally.check(!overflow, "an array of more than 2^64 bytes", input);
}

}  // namespace

TEST_CASE("fuzz: set_schema_attr on mutated attribute values", "[fuzz][array_schema]") {
  const std::vector<ArraySchema> schemas = bases();
  Mutator values(seed_of("set_schema_attr"), kValues);
  Mutator names(seed_of("schema names"), kNames, {"user.mmfs.", "_", "\n"});
  Tally tally("set_schema_attr");
  for (std::size_t i = 0, n = iterations(15000); i < n; ++i) {
    const ArraySchema& before = schemas[i % schemas.size()];
    const std::string name = values.below(10) ? kNames[values.below(kNames.size())] : names.next();
    // Mostly a value of the attribute's own kind, mutated; else any value.
    const auto own = kOwn.find(name);
    const std::string value = own != kOwn.end() && values.below(3)
                                  ? values.mutate(own->second[values.below(own->second.size())])
                                  : values.next();
    const std::string input = name + " = " + value;
    tally.run(input, [&] {
      ArraySchema s = before;
      auto r = set_schema_attr(s, name, value);
      check_set(tally, before, s, r, name, input);
      // Removing any attribute afterwards: refused unchanged, or a valid schema.
      const ArraySchema set = s;
      const std::string removed = kNames[values.below(kNames.size())];
      auto rr = reset_schema_attr(s, removed);
      if (rr)
        tally.check(s == set && one_line(rr.message), "a refused removal changed the schema", input + "; rm " + removed);
      else
        tally.check(!validate_schema(s), "a removal gives a schema that does not validate", input + "; rm " + removed);
    });
  }
  tally.finish();
}

TEST_CASE("fuzz: decode_schema on mutated records", "[fuzz][array_schema]") {
  std::vector<std::string> corpus;
  for (ArraySchema s : bases()) {
    corpus.push_back(encode_schema(s));
    s.checksum_block = 4096;
    s.members = {0, 2};
    s.layout_rule = "the model chose multimap";
    if (!s.copies.empty()) {
      s.copies[0].slot = 1;
      s.copies[0].members = {1, 3};
    }
    corpus.push_back(encode_schema(s));
  }
  corpus.push_back(encode_schema(built({{"shape", "4096"}, {"layout", "capsule"}})));
  Mutator mutator(seed_of("decode_schema"), corpus,
                  {"null", "true", "false", "[]", "{}", "[0,0]", "\"\"", "-1", "1e3", "0.5", "\"shape\":",
                   "\"copies\":[", "\"members\":[", "\"table_part\":{\"table\":1,\"capsule_blocks\":4,\"first_block\":0,"
                   "\"cells_per_capsule\":2},", "\"checksum_block\":512,", "\"dims\":[\"a\"],", "\\u0000", "\\ud800"});
  Tally tally("decode_schema");
  const std::vector<std::string> keys = {"shape", "dtype", "layout", "order", "cell", "basic_cube", "priority",
                                         "chunk", "compress", "index", "bins", "dims", "copies", "members",
                                         "checksum_block", "table_part", "layout_set", "layout_rule"};
  for (std::size_t i = 0, n = iterations(10000); i < n; ++i) {
    const std::string text = i % 2 ? mutator.next() : mutate_json(mutator.pick(), mutator.rng(), keys);
    tally.run(text, [&] {
      auto s = decode_schema(text);
      if (!s) {
        tally.failed();
        return;
      }
      tally.parsed();
      tally.check(!validate_schema(*s), "a decoded schema does not validate", text);
      auto back = decode_schema(encode_schema(*s));
      tally.check(back && *back == *s, "a decoded schema does not survive re-encoding", text);
      std::vector<std::uint8_t> slots;
      for (const CopySpec& c : s->copies) {
        tally.check(c.slot == 0 || std::find(slots.begin(), slots.end(), c.slot) == slots.end(), "a slot twice", text);
        slots.push_back(c.slot);
      }
    });
  }
  tally.finish();
}

TEST_CASE("fuzz: parse_dtype and decode_hdf5_dims on mutated texts", "[fuzz][array_schema]") {
  Mutator dtypes(seed_of("parse_dtype"), {"float64", "int8", "uint32", "<f8", "|u1", "=i2", "f4", "u8"},
                 {"<", ">", "=", "|", "int", "float", "i", "u", "f"});
  Tally tally("parse_dtype");
  for (std::size_t i = 0, n = iterations(4000); i < n; ++i) {
    const std::string text = dtypes.next();
    tally.run(text, [&] {
      auto d = parse_dtype(text);
      if (!d) {
        tally.failed();
        return;
      }
      tally.parsed();
      tally.check(parse_dtype(d->name) == d, "the canonical name reads back differently", text);
      tally.check(d->itemsize == 1 || d->itemsize == 2 || d->itemsize == 4 || d->itemsize == 8, "odd itemsize", text);
      tally.check(text.front() != '>', "a big-endian dtype accepted", text);
    });
  }
  tally.finish();

  Mutator dims(seed_of("decode_hdf5_dims"), {"[\"time\",\"lat\",\"lon\"]", "[\"a b\", \"\\u00e9\", \"x.y\"]"},
               {"\"/\"", "\"\"", "\"a\"", "null", "\\u0000"});
  Tally dims_tally("decode_hdf5_dims");
  for (std::size_t i = 0, n = iterations(3000); i < n; ++i) {
    const std::string text = i % 2 ? dims.next() : mutate_json(dims.pick(), dims.rng());
    dims_tally.run(text, [&] {
      auto names = decode_hdf5_dims(text, 3);
      if (!names) {
        dims_tally.failed();
        return;
      }
      dims_tally.parsed();
      bool ok = names->size() == 3;
      for (std::size_t k = 0; k < names->size(); ++k) {
        const std::string& a = (*names)[k];
        ok = ok && !a.empty() && a.find('/') == std::string::npos && a.find('\0') == std::string::npos;
        for (std::size_t j = 0; j < k; ++j) ok = ok && (*names)[j] != a;
      }
      dims_tally.check(ok, "names empty, with '/' or NUL, or alike", text);
    });
  }
  dims_tally.finish();
}

TEST_CASE("fuzz: set_schema_attr regressions", "[fuzz][array_schema]") {
  // Bins the schema took and every index build then refused (parse_bin_spec):
  // more equal-frequency bins than kMaxExactBins, edges spelled "1.".
  for (const char* bins : {"4294967296", "1048577", "edges:1.,2", "edges:0,1.e5"}) {
    ArraySchema s = built({{"shape", "100"}});
    const ArraySchema before = s;
    auto r = set_schema_attr(s, "bins", bins);
    INFO(bins << ": " << r.message);
    CHECK(r.error == EINVAL);
    CHECK(s == before);
  }
  ArraySchema s = built({{"shape", "100"}});
  CHECK_FALSE(set_schema_attr(s, "bins", "1048576"));
  CHECK_FALSE(set_schema_attr(s, "bins", "0001048576"));
  CHECK(s.bins == "1048576");
}
