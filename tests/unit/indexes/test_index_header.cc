// The stored header of an index (indexes/index_header.cc): any corruption of
// the header or of a bitmap is detected and garbage never crashes the
// decoders; packed columns, and version 1 headers still decode.
#include <catch2/catch.hpp>
#include <xxhash.h>

#include <cstring>
#include <random>
#include <string>
#include <variant>

#include "indexes/bitmap.h"
#include "indexes/bitmap_index.h"
#include "tests/unit/support/index_test_support.h"

using namespace mmfs::indexes;
using namespace mmfs::indexes::testing;

TEST_CASE("corruption of the stored object is detected", "[indexes][encodings][corruption]") {
  for (Encoding enc : {Encoding::E1, Encoding::BN, Encoding::IE}) {
    Index ix = make(enc, 3000, 40);
    const std::size_t hlen = ix.header.header_length();
    std::mt19937 rng(11);
    // Every byte of the header, flipped: decode fails (or the prefix is refused).
    for (std::size_t i = 0; i < hlen; ++i) {
      std::string bad = ix.object.substr(0, hlen);
      bad[i] = char(bad[i] ^ (1 << (rng() % 8)));
      auto len = IndexHeader::header_bytes(as_bytes(bad).first(IndexHeader::kPrefixBytes));
      if (!len || *len != hlen) continue;  // refused from the prefix alone
      INFO("header byte " << i);
      CHECK(std::holds_alternative<std::string>(IndexHeader::decode(as_bytes(bad))));
    }
    // Every byte of every bitmap (sampled in large ones), flipped.
    for (std::uint32_t id = 0; id < ix.header.directory().size(); ++id) {
      const auto e = ix.header.directory()[id];
      for (std::size_t i = 0; i < e.length; i += 1 + e.length / 64) {
        std::string bad = ix.object.substr(e.offset, e.length);
        bad[i] = char(bad[i] ^ 0x10);
        Bitmap out;
        CHECK(!ix.header.decode_bitmap(id, as_bytes(bad), &out));
      }
      Bitmap out;
      CHECK(!ix.header.decode_bitmap(id, as_bytes(ix.object).subspan(e.offset, e.length - 1), &out));
    }
  }
  // Garbage never crashes the decoders.
  std::mt19937_64 rng(12);
  Index ix = make(Encoding::E1, 100, 5);
  for (int i = 0; i < 3000; ++i) {
    std::string junk(std::size_t(rng() % 400), '\0');
    for (char& c : junk) c = char(rng());
    if (i % 2) std::memcpy(junk.data(), ix.object.data(), std::min<std::size_t>(junk.size(), 60));
    auto bytes = as_bytes(junk);
    if (junk.size() >= IndexHeader::kPrefixBytes) IndexHeader::header_bytes(bytes.first(IndexHeader::kPrefixBytes));
    (void)IndexHeader::decode(bytes);
    Bitmap b;
    (void)deserialize(bytes, &b);
    (void)ix.header.decode_bitmap(0, bytes, &b);
  }
  // Bitmap serialization round-trips, including rows past 2^32; malformed containers are refused.
  Bitmap big = range_bitmap(5, 70000) | range_bitmap((1ull << 32) - 3, (1ull << 32) + 5);
  big.add(std::uint64_t(1) << 40);
  Bitmap back;
  REQUIRE(deserialize(as_bytes(serialize(big)), &back));
  CHECK(same_rows(back, big));
  CHECK(big.cardinality() == 69995 + 8 + 1);
  Bitmap small;
  for (std::uint64_t r : {1, 5, 9}) small.add(r);
  std::string s = serialize(small);
  std::string unsorted = s;
  std::swap(unsorted[s.size() - 2], unsorted[s.size() - 6]);  // array values out of order
  CHECK(!deserialize(as_bytes(unsorted), &back));
  // The query mask is the 32-bit portable format for arrays below 2^32 rows.
  std::string mask = portable_mask(small, 10);
  Roaring r = Roaring::readSafe(mask.data(), mask.size());
  CHECK(r.cardinality() == 3);
  CHECK(r.contains(9));
  std::string empty = portable_mask(Bitmap(), 10);
  CHECK(Roaring::readSafe(empty.data(), empty.size()).isEmpty());
}

TEST_CASE("index headers: packed columns, and version 1 still decodes", "[indexes][encodings]") {
  for (Encoding enc : {Encoding::E1, Encoding::BN, Encoding::RE}) {
    Index ix = make(enc, 20000, 2000);
    const IndexHeader& h = ix.header;
    // 2000 exact bins: the packed header is a fraction of its raw columns.
    const std::size_t bins = h.stats().size(), entries = h.directory().size();
    INFO(encoding_name(enc) << " header " << h.header_length());
    CHECK(h.header_length() * 3 < 8 * bins + 24 * bins + 24 * entries);
    if (h.coarse_bins() > 0) continue;  // the v1 rewrite below has no coarse groups to copy

    // The same index in the version 1 layout: raw sections, no packed frame.
    std::string v1 = ix.object.substr(0, IndexHeader::kPrefixBytes);
    auto put = [&](auto v) { v1.append(reinterpret_cast<const char*>(&v), sizeof v); };
    for (std::uint64_t k : h.binning().lower()) put(k);
    for (const BinStats& s : h.stats()) {
      put(s.rows);
      put(s.min_key);
      put(s.max_key);
    }
    const std::uint64_t v1_length = v1.size() + 24 * entries + 8;
    const std::uint64_t shift = v1_length - h.header_length();
    for (const auto& e : h.directory()) {
      put(e.offset + shift);
      put(e.length);
      put(e.checksum);
    }
    const std::uint32_t version = 1;
    const std::uint64_t object = h.object_bytes() + shift, packed = 0;
    std::memcpy(v1.data() + 8, &version, 4);
    std::memcpy(v1.data() + 24, &v1_length, 8);
    std::memcpy(v1.data() + 32, &object, 8);
    std::memcpy(v1.data() + 56, &packed, 8);
    put(std::uint64_t(XXH3_64bits(v1.data(), v1.size())));
    REQUIRE(v1.size() == v1_length);
    v1 += ix.object.substr(h.header_length());

    REQUIRE(IndexHeader::header_bytes(as_bytes(v1).first(IndexHeader::kPrefixBytes)) == v1_length);
    auto d = IndexHeader::decode(as_bytes(v1).first(v1_length));
    REQUIRE(std::holds_alternative<IndexHeader>(d));
    const IndexHeader& old = std::get<IndexHeader>(d);
    CHECK(old.binning().lower() == h.binning().lower());
    CHECK(old.stats() == h.stats());
    REQUIRE(old.directory().size() == entries);
    for (std::uint32_t id = 0; id < entries; ++id) {
      const auto e = old.directory()[id];
      Bitmap a, b;
      REQUIRE(old.decode_bitmap(id, as_bytes(v1).subspan(e.offset, e.length), &a));
      REQUIRE(h.decode_bitmap(id, as_bytes(ix.object).subspan(h.directory()[id].offset, e.length), &b));
      CHECK(same_rows(a, b));
    }
  }
}
