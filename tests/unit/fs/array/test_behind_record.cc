// The record of copy cells behind the primary (fs/array/behind_record.h):
// what it encodes decodes to the same cells, empty bitmaps are left out, and
// every malformed record is refused rather than read as fewer cells.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "fs/array/behind_record.h"
#include "util/coding.h"

using namespace mmfs::fs;

TEST_CASE("behind record: round trip, empty bitmaps left out", "[copies][behind_record]") {
  std::map<std::uint8_t, Roaring> in;
  in[1].addRange(0, 100000);
  in[3].add(7);
  in[3].add(1u << 31);
  in[9];  // empty: not recorded
  const std::string record = encode_behind(in);
  std::map<std::uint8_t, Roaring> out;
  REQUIRE(decode_behind(record, &out));
  REQUIRE(out.size() == 2);
  CHECK(out[1] == in[1]);
  CHECK(out[3] == in[3]);
  CHECK(encode_behind({}) == "");
  CHECK(encode_behind({{4, Roaring()}}) == "");
  REQUIRE(decode_behind("", &out));
  CHECK(out.empty());
}

TEST_CASE("behind record: malformed records are refused", "[copies][behind_record]") {
  std::map<std::uint8_t, Roaring> in;
  in[2].addRange(10, 20);
  const std::string good = encode_behind(in);
  std::map<std::uint8_t, Roaring> out;
  REQUIRE(decode_behind(good, &out));

  CHECK_FALSE(decode_behind(good.substr(0, 4), &out));                // a short entry header
  CHECK_FALSE(decode_behind(good.substr(0, good.size() - 1), &out));  // a cut bitmap
  std::string slot0 = good;
  slot0[0] = 0;
  CHECK_FALSE(decode_behind(slot0, &out));  // slot 0 is the primary's, never a copy's
  CHECK_FALSE(decode_behind(good + good, &out));  // the same slot twice
  std::string longer = good;
  mmfs::util::put_le32(longer.data() + 1, std::uint32_t(good.size()));  // a length past the end
  CHECK_FALSE(decode_behind(longer, &out));
  std::string garbage = good;
  for (std::size_t i = 5; i < garbage.size(); ++i) garbage[i] = char(0xff);
  CHECK_FALSE(decode_behind(garbage, &out));
}

TEST_CASE("lost cells record: round trip; malformed records are refused", "[copies][behind_record]") {
  Roaring in;
  in.addRange(40, 4000);
  in.add(1u << 30);
  const std::string record = encode_lost(in);
  Roaring out;
  out.add(3);
  REQUIRE(decode_lost(record, &out));
  CHECK(out == in);
  CHECK(encode_lost(Roaring()) == "");
  REQUIRE(decode_lost("", &out));
  CHECK(out.isEmpty());

  CHECK_FALSE(decode_lost(record.substr(0, record.size() - 1), &out));  // cut
  CHECK_FALSE(decode_lost(record + "x", &out));                         // trailing bytes
  CHECK_FALSE(decode_lost(std::string(9, char(0xff)), &out));           // garbage
}
