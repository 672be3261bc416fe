// user.mmfs.copies (fs/array/copy_spec.h): the text accepted and refused,
// its canonical form, the copies' schemas, slots kept across changes, and
// the persistent form through the schema record.
#include <catch2/catch.hpp>

#include <cerrno>

#include "fs/array/array_schema.h"
#include "fs/array/copy_spec.h"

using namespace mmfs::fs;

namespace {

ArraySchema shaped(const char* shape = "40,50,30") {
  ArraySchema s;
  REQUIRE(!set_schema_attr(s, "shape", shape));
  REQUIRE(!set_schema_attr(s, "layout", "multimap"));
  return s;
}

}  // namespace

TEST_CASE("copies: accepted text and its canonical form", "[copy_spec]") {
  ArraySchema s = shaped();
  CHECK(schema_attr_text(s, "copies") == "none");
  REQUIRE(!set_schema_attr(s, "copies", "naive:order=2,1,0;hilbert:cell=08,8,4\n"));
  REQUIRE(s.copies.size() == 2);
  CHECK(s.copies[0].layout == "naive");
  CHECK(s.copies[0].order == std::vector<std::uint32_t>{2, 1, 0});
  CHECK(s.copies[1].cell == std::vector<std::uint64_t>{8, 8, 4});
  CHECK(schema_attr_text(s, "copies") == "naive:order=2,1,0;hilbert:cell=8,8,4");
  // Every key, in the grammar's order whatever the order typed; compress keeps its ':'.
  REQUIRE(!set_schema_attr(s, "copies", "mloc:compress=zstd:3:chunk=8,8,8:priority=S-V-M"));
  CHECK(schema_attr_text(s, "copies") == "mloc:priority=S-V-M:chunk=8,8,8:compress=zstd:3");
  REQUIRE(!set_schema_attr(s, "copies", "multimap:basic_cube=2,2,2:cell=4,4,4:order=0,1,2"));
  CHECK(schema_attr_text(s, "copies") == "multimap:order=0,1,2:cell=4,4,4:basic_cube=2,2,2");
  REQUIRE(!set_schema_attr(s, "copies", "none"));
  CHECK(s.copies.empty());
  REQUIRE(!set_schema_attr(s, "copies", "zorder"));
  REQUIRE(!reset_schema_attr(s, "copies"));
  CHECK(s.copies.empty());
}

TEST_CASE("copies: malformed text is refused and changes nothing", "[copy_spec]") {
  ArraySchema s = shaped();
  REQUIRE(!set_schema_attr(s, "copies", "naive"));
  const ArraySchema before = s;
  for (const char* bad : {"", ";", "naive;", "zigzag", "naive:", "naive:cell", "naive:size=3", "naive:cell=1,1",
                          "naive:cell=41,1,1", "naive:cell=1,1,1:cell=2,2,2", "naive:order=0,0,1",
                          "naive:priority=X", "naive:compress=lz4", "naive;naive;naive;naive;naive;naive;naive;naive;naive"}) {
    INFO("'" << bad << "'");
    const SchemaResult r = set_schema_attr(s, "copies", bad);
    CHECK(r.error == EINVAL);
    CHECK(r.message.starts_with("user.mmfs.copies"));
    CHECK(s == before);
  }
}

TEST_CASE("copies: the shape set later must fit every copy", "[copy_spec]") {
  ArraySchema s;
  REQUIRE(!set_schema_attr(s, "copies", "naive:cell=16,16,16"));  // before the shape: checked then
  CHECK(set_schema_attr(s, "shape", "8,8,8").error == EINVAL);
  CHECK(set_schema_attr(s, "shape", "8,8").error == EINVAL);
  CHECK(!set_schema_attr(s, "shape", "16,32,64"));
}

TEST_CASE("copies: each copy's schema is the array's with the copy's placement", "[copy_spec]") {
  ArraySchema s = shaped();
  REQUIRE(!set_schema_attr(s, "index", "bn"));
  REQUIRE(!set_schema_attr(s, "dims", "t,y,x"));
  s.checksum_block = 4096;
  REQUIRE(!set_schema_attr(s, "copies", "naive:order=2,1,0;hilbert:cell=8,8,4"));
  const ArraySchema c = copy_schema(s, 1);
  CHECK(c.shape == s.shape);
  CHECK(c.dtype == s.dtype);
  CHECK(c.dims == s.dims);
  CHECK(c.checksum_block == 4096);
  CHECK(c.layout == "hilbert");
  CHECK(c.cell == std::vector<std::uint64_t>{8, 8, 4});
  CHECK(c.order.empty());
  CHECK(c.index == "none");
  CHECK(c.copies.empty());
  CHECK(copy_schema(s, 0).order == std::vector<std::uint32_t>{2, 1, 0});
}

TEST_CASE("copies: slots stay with their copy and new copies never reuse a dropped one's", "[copy_spec]") {
  ArraySchema s = shaped();
  REQUIRE(!set_schema_attr(s, "copies", "naive;hilbert;zorder"));
  assign_copy_slots({}, &s.copies);
  CHECK(s.copies[0].slot == 1);
  CHECK(s.copies[1].slot == 2);
  CHECK(s.copies[2].slot == 3);
  ArraySchema next = s;
  REQUIRE(!set_schema_attr(next, "copies", "zorder;multimap;naive"));
  assign_copy_slots(s.copies, &next.copies);
  CHECK(next.copies[0].slot == 3);  // kept
  CHECK(next.copies[2].slot == 1);  // kept
  CHECK(next.copies[1].slot == 4);  // new: not 2, which hilbert frees in the same commit
  // Two equal copies each keep one slot.
  ArraySchema twice = s;
  REQUIRE(!set_schema_attr(twice, "copies", "naive;naive"));
  assign_copy_slots(s.copies, &twice.copies);
  CHECK(twice.copies[0].slot == 1);
  CHECK(twice.copies[1].slot == 4);
}

TEST_CASE("copies: the schema record keeps them, slots included, and refuses damaged ones", "[copy_spec]") {
  ArraySchema s = shaped();
  REQUIRE(!set_schema_attr(s, "copies", "naive:order=2,1,0;mloc:compress=zstd:5"));
  assign_copy_slots({}, &s.copies);
  const auto back = decode_schema(encode_schema(s));
  REQUIRE(back);
  CHECK(*back == s);
  // A record without copies reads as none (records written before copies existed).
  ArraySchema plain = shaped();
  CHECK(encode_schema(plain).find("copies") == std::string::npos);
  auto j = encode_copies(s.copies);
  j[1]["slot"] = 1;  // two copies in one slot
  CHECK(!decode_copies(j));
  j = encode_copies(s.copies);
  j[0]["slot"] = 256;
  CHECK(!decode_copies(j));
  j = encode_copies(s.copies);
  j[0].erase("cell");
  CHECK(!decode_copies(j));
  j = encode_copies(s.copies);
  j[0]["cell"] = "8,8,8";
  CHECK(!decode_copies(j));
}
