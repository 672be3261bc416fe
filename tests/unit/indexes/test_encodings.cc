// indexes/bitmap_index.h: what each encoding stores, how the planner picks
// bitmaps, and that any corruption of the stored object is detected.
#include <catch2/catch.hpp>
#include <xxhash.h>

#include <cstring>
#include <map>
#include <random>

#include "indexes/binning.h"
#include "indexes/bitmap_index.h"

using namespace mmfs::indexes;

namespace {

std::span<const std::byte> as_bytes(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }

struct Index {
  std::vector<std::int32_t> values;
  std::string object;
  IndexHeader header;
};

// Values 0..distinct-1, uniformly at random; exact bins (one per value).
Index make(Encoding enc, std::size_t rows, std::int32_t distinct, std::uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  Index ix;
  ix.values.resize(rows);
  for (auto& v : ix.values) v = std::int32_t(rng() % std::uint64_t(distinct));
  std::vector<std::uint64_t> lower{min_key(ValueType::I32)};
  for (std::int32_t v = 1; v < distinct; ++v) lower.push_back(std::uint64_t(std::int64_t(v)) ^ (1ull << 63));
  IndexBuilder b(Binning(ValueType::I32, lower), enc, rows);
  b.add(0, reinterpret_cast<const std::byte*>(ix.values.data()), rows);
  ix.object = b.finish();
  auto len = IndexHeader::header_bytes(as_bytes(ix.object).first(IndexHeader::kPrefixBytes));
  REQUIRE(len);
  auto h = IndexHeader::decode(as_bytes(ix.object).first(*len));
  REQUIRE(std::holds_alternative<IndexHeader>(h));
  ix.header = std::get<IndexHeader>(h);
  return ix;
}

KeySet between(std::int32_t lo, std::int32_t hi) {
  return interval_keys(ValueType::I32, *parse_number(std::to_string(lo)), *parse_number(std::to_string(hi)));
}

Estimate run(const Index& ix, const AtomPlan& plan) {
  std::map<std::uint32_t, Bitmap> cache;
  return ix.header.evaluate(plan, [&](std::uint32_t id) -> const Bitmap& {
    const auto e = ix.header.directory()[id];
    Bitmap b;
    REQUIRE(ix.header.decode_bitmap(id, as_bytes(ix.object).subspan(e.offset, e.length), &b));
    return cache[id] = std::move(b);
  });
}

std::uint64_t truth(const Index& ix, std::int32_t lo, std::int32_t hi) {
  std::uint64_t n = 0;
  for (auto v : ix.values) n += v >= lo && v <= hi;
  return n;
}

}  // namespace

TEST_CASE("stored bitmaps per encoding", "[indexes][encodings]") {
  for (std::int32_t B : {1, 2, 3, 7, 8, 100}) {
    INFO("B " << B);
    const std::uint32_t slices = B <= 1 ? 0 : std::uint32_t(std::bit_width(std::uint32_t(B - 1)));
    const std::uint32_t m = std::uint32_t(B + 1) / 2;
    CHECK(make(Encoding::E1, 3000, B).header.directory().size() == std::size_t(B));
    CHECK(make(Encoding::BN, 3000, B).header.directory().size() == slices);
    CHECK(make(Encoding::Range, 3000, B).header.directory().size() == std::size_t(B - 1));
    CHECK(make(Encoding::Interval, 3000, B).header.directory().size() == std::size_t(B) - m + 1);
    for (Encoding e : {Encoding::RE, Encoding::IE}) {
      Index ix = make(e, 3000, B);
      const std::uint32_t C = ix.header.coarse_bins();
      if (B < 8) CHECK(C == 0);
      std::size_t coarse = C == 0 ? 0 : e == Encoding::RE ? C - 1 : C - (C + 1) / 2 + 1;
      CHECK(ix.header.directory().size() == std::size_t(B) + coarse);
      CHECK(ix.header.fine_bytes() + ix.header.coarse_bytes() + ix.header.header_length() == ix.object.size());
    }
  }
  // The stored bitmaps are the encoding's: bn slice k holds rows whose value has bit k.
  Index bn = make(Encoding::BN, 2000, 8);
  for (std::uint32_t k = 0; k < 3; ++k) {
    const auto e = bn.header.directory()[k];
    Bitmap s;
    REQUIRE(bn.header.decode_bitmap(k, as_bytes(bn.object).subspan(e.offset, e.length), &s));
    for (std::size_t r = 0; r < bn.values.size(); ++r) CHECK(s.contains(std::uint64_t(r)) == bool((bn.values[r] >> k) & 1));
  }
  // range: R_i = rows with value <= i.
  Index range = make(Encoding::Range, 2000, 5);
  for (std::uint32_t i = 0; i < 4; ++i) {
    const auto e = range.header.directory()[i];
    Bitmap s;
    REQUIRE(range.header.decode_bitmap(i, as_bytes(range.object).subspan(e.offset, e.length), &s));
    CHECK(s.cardinality() == truth(range, 0, std::int32_t(i)));
  }
  // Directory order: bitmaps back to back after the header.
  Index e1 = make(Encoding::E1, 2000, 20);
  std::uint64_t next = e1.header.header_length();
  for (const auto e : e1.header.directory()) {
    CHECK(e.offset == next);
    next += e.length;
  }
  CHECK(next == e1.object.size());
}

TEST_CASE("plans: fewest bytes, coarse level for wide ranges only", "[indexes][encodings]") {
  for (Encoding enc : {Encoding::RE, Encoding::IE}) {
    Index ix = make(enc, 200000, 1000);
    REQUIRE(ix.header.coarse_bins() >= 3);
    AtomPlan wide = ix.header.plan(between(100, 899));
    REQUIRE(wide.sure.size() == 1);
    CHECK(wide.sure[0].coarse);
    CHECK(wide.aligned);
    CHECK(wide.bytes < ix.header.fine_bytes() / 2);  // far less than the 800 fine bitmaps
    CHECK(run(ix, wide).sure.cardinality() == truth(ix, 100, 899));
    CHECK(*wide.count == truth(ix, 100, 899));
    AtomPlan one = ix.header.plan(between(500, 500));
    REQUIRE(one.sure.size() == 1);
    CHECK(!one.sure[0].coarse);
    CHECK(one.bitmaps == std::vector<std::uint32_t>{500});
    AtomPlan few = ix.header.plan(between(500, 503));
    CHECK(few.bitmaps.size() == 4);
  }
  // e1: a range covering most bins is answered by its complement.
  Index e1 = make(Encoding::E1, 20000, 50);
  AtomPlan most = e1.header.plan(between(2, 49));
  REQUIRE(most.sure.size() == 1);
  CHECK(most.sure[0].complement);
  CHECK(most.bitmaps == std::vector<std::uint32_t>{0, 1});
  CHECK(run(e1, most).sure.cardinality() == truth(e1, 2, 49));
  AtomPlan some = e1.header.plan(between(2, 5));
  CHECK(!some.sure[0].complement);
  CHECK(some.bitmaps.size() == 4);
  // range: [f, l] = R_l - R_{f-1}; a prefix is one bitmap.
  Index range = make(Encoding::Range, 20000, 50);
  CHECK(range.header.plan(between(0, 9)).bitmaps == std::vector<std::uint32_t>{9});
  CHECK(range.header.plan(between(10, 19)).bitmaps == std::vector<std::uint32_t>{9, 19});
  CHECK(range.header.plan(between(10, 49)).bitmaps == std::vector<std::uint32_t>{9});
  // interval: any range is at most two bitmaps.
  Index interval = make(Encoding::Interval, 20000, 50);
  for (int lo = 0; lo < 50; lo += 7) {
    for (int hi = lo; hi < 50; hi += 5) {
      AtomPlan p = interval.header.plan(between(lo, hi));
      CHECK(p.bitmaps.size() <= 2);
      CHECK(run(interval, p).sure.cardinality() == truth(interval, lo, hi));
    }
  }
  // Fewest bytes: every plan's bytes are at most the e1 fine bitmaps it would otherwise read.
  Index re = make(Encoding::RE, 50000, 300);
  std::mt19937 rng(3);
  for (int q = 0; q < 200; ++q) {
    int lo = int(rng() % 300), hi = lo + int(rng() % (300 - lo));
    AtomPlan p = re.header.plan(between(lo, hi));
    std::uint64_t fine = 0;
    for (int b = lo; b <= hi; ++b) fine += re.header.directory()[std::size_t(b)].length;
    CHECK(p.bytes <= fine);
    CHECK(run(re, p).sure.cardinality() == truth(re, lo, hi));
  }
}

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

TEST_CASE("a bitmap from words equals the one built row by row", "[indexes][encodings]") {
  std::mt19937_64 rng(7);
  // Chunks of 2^16 rows (1024 words) that are empty, sparse (array
  // containers, up to the 4096-row limit), dense (bitsets), all set (a run
  // after optimization), with a last partial chunk.
  for (std::size_t words_n : {1ul, 1023ul, 1024ul, 1025ul, 6 * 1024ul + 17}) {
    std::vector<std::uint64_t> words(words_n, 0);
    for (std::size_t chunk = 0; chunk * 1024 < words_n; ++chunk) {
      const std::size_t first = chunk * 1024, n = std::min<std::size_t>(1024, words_n - first);
      switch (chunk % 6) {
        case 0: break;  // empty
        case 1:         // exactly 4096 rows: still an array
          for (std::size_t i = 0; i < n && i < 64; ++i) words[first + i] = ~0ull;
          break;
        case 2:  // 4097 rows: the first bitset
          for (std::size_t i = 0; i < n && i < 64; ++i) words[first + i] = ~0ull;
          if (n > 64) words[first + 64] = 1;
          break;
        case 3:
          for (std::size_t i = 0; i < n; ++i) words[first + i] = rng() & rng();
          break;
        case 4:
          for (std::size_t i = 0; i < n; ++i) words[first + i] = ~0ull;
          break;
        default: words[first + n - 1] = 1ull << 63;
      }
    }
    Bitmap expected;
    for (std::size_t w = 0; w < words_n; ++w)
      for (unsigned b = 0; b < 64; ++b)
        if ((words[w] >> b) & 1) expected.add(std::uint64_t(w) * 64 + b);
    expected.runOptimize();
    expected.shrinkToFit();
    const Bitmap got = bitmap_of_words(words);
    CHECK(same_rows(got, expected));
    CHECK(got.cardinality() == expected.cardinality());
    CHECK(serialize(got) == serialize(expected));  // the same containers, so the same stored bytes
    // Not run-optimized: the same rows, and they combine like any bitmap.
    const Bitmap plain = bitmap_of_words(words, 0, false);
    CHECK(same_rows(plain, expected));
    Bitmap both = plain;
    both |= got;
    CHECK(same_rows(both, expected));
    CHECK(same_rows(plain & got, expected));
  }
  CHECK(bitmap_of_words({}).isEmpty());
}

TEST_CASE("a slice of rows as words and back (bitmap_of_words at a row, or_rows_into)", "[indexes][encodings]") {
  std::mt19937_64 rng(17);
  for (int trial = 0; trial < 30; ++trial) {
    // Arrays, bitsets and runs over several 2^16-row chunks, sometimes in the
    // second bucket (rows past 2^32) and sometimes reaching past the slice.
    const std::uint64_t base = (trial % 3 == 2) ? (std::uint64_t(1) << 32) - 3 * 65536 : 0;
    Bitmap b;
    for (int i = 0; i < 2000; ++i) b.add(base + rng() % (6 * 65536));
    for (std::uint64_t r = base + 65536 * (rng() % 5); r % 65536 != 65535; r += 1 + rng() % 2) b.add(r);
    b |= range_bitmap(base + rng() % (3 * 65536), base + 3 * 65536 + rng() % (3 * 65536));
    b.runOptimize();
    const std::uint64_t first = base + 65536 * (rng() % 3);
    const std::size_t n_words = 1 + rng() % (3 * 1024 + 500);  // not always whole containers
    std::vector<std::uint64_t> words(n_words, 0);
    or_rows_into(b, first, words);
    std::uint64_t wrong = 0, seen = 0;
    for (std::uint64_t i = 0; i < 64 * n_words; ++i) {
      const bool bit = (words[i / 64] >> (i % 64)) & 1;
      seen += bit;
      wrong += bit != b.contains(first + i);
    }
    INFO("trial " << trial);
    CHECK(wrong == 0);
    CHECK(seen > 0);
    if (first + 64 * n_words <= (std::uint64_t(1) << 32)) {
      Bitmap expected;
      for (std::uint64_t i = 0; i < 64 * n_words; ++i)
        if (b.contains(first + i)) expected.add(first + i);
      CHECK(same_rows(bitmap_of_words(words, first), expected));
    }
  }
  std::vector<std::uint64_t> one(1, 1);
  CHECK_THROWS_AS(bitmap_of_words(one, 100), std::invalid_argument);
  CHECK_THROWS_AS(bitmap_of_words(one, std::uint64_t(1) << 32), std::invalid_argument);
  CHECK_THROWS_AS(or_rows_into(Bitmap{}, 3, one), std::invalid_argument);
}

TEST_CASE("counting rows in all of some bitmaps and none of others", "[indexes][encodings]") {
  std::mt19937_64 rng(5);
  // Sparse (arrays), dense (bitsets) and run-optimized bitmaps over several
  // 2^16-row chunks, some past 2^32 (a second bucket).
  auto random_bitmap = [&](int kind) {
    Bitmap b;
    const std::uint64_t base = (rng() % 4 == 0) ? (std::uint64_t(1) << 32) - 70000 : 0;
    if (kind == 0) {
      for (int i = 0; i < 2000; ++i) b.add(base + rng() % 400000);
    } else if (kind == 1) {
      for (std::uint64_t r = base; r < base + 400000; ++r)
        if (rng() % 3) b.add(r);
    } else {
      b = range_bitmap(base + rng() % 200000, base + 200000 + rng() % 200000);
      b.runOptimize();
    }
    b.add(std::uint64_t(1) << 32 | (rng() % 1000));
    return b;
  };
  for (int trial = 0; trial < 40; ++trial) {
    const std::size_t n_all = 1 + rng() % 4, n_none = rng() % 3;
    std::vector<Bitmap> all, none;
    for (std::size_t i = 0; i < n_all; ++i) all.push_back(random_bitmap(int(rng() % 3)));
    for (std::size_t i = 0; i < n_none; ++i) none.push_back(random_bitmap(int(rng() % 3)));
    Bitmap expected = all[0];
    for (std::size_t i = 1; i < all.size(); ++i) expected &= all[i];
    for (const Bitmap& b : none) expected -= b;
    std::vector<const Bitmap*> a, z;
    for (const Bitmap& b : all) a.push_back(&b);
    for (const Bitmap& b : none) z.push_back(&b);
    INFO("trial " << trial);
    CHECK(count_all_none(a, z) == expected.cardinality());
  }
  CHECK(count_all_none({}, {}) == 0);
}

TEST_CASE("a serialized bitmap ORed into words equals its decoded rows", "[indexes][encodings]") {
  std::mt19937_64 rng(11);
  const std::uint64_t rows = 5 * 65536 + 300;
  std::vector<std::uint64_t> words((rows + 65535) / 65536 * 1024, 0);
  Bitmap expected;
  for (int trial = 0; trial < 6; ++trial) {
    // Arrays, bitsets and runs (after runOptimize), over several chunks.
    Bitmap b;
    for (int i = 0; i < 3000; ++i) b.add(rng() % rows);
    b |= range_bitmap(rng() % rows / 2, rows / 2 + rng() % (rows / 2));
    for (std::uint64_t r = 65536ull * (trial % 5); r < 65536ull * (trial % 5) + 65536; r += 1 + rng() % 3) b.add(r);
    b.runOptimize();
    const std::string bytes = serialize(b);
    REQUIRE(or_serialized_into(as_bytes(bytes), words));
    expected |= b;
    CHECK(same_rows(bitmap_of_words(words), expected));
  }
  // A row past the words, or malformed bytes: refused.
  Bitmap far;
  far.add(rows + 70000);
  CHECK(!or_serialized_into(as_bytes(serialize(far)), words));
  Bitmap high;
  high.add(std::uint64_t(1) << 33);
  CHECK(!or_serialized_into(as_bytes(serialize(high)), words));
  std::string bad = serialize(expected);
  bad.resize(bad.size() - 3);
  CHECK(!or_serialized_into(as_bytes(bad), words));
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

TEST_CASE("rows widened to 64 bits in order (toUint64Array, one pass and two threads)", "[indexes][encodings]") {
  std::mt19937_64 rng(29);
  // Below and above the two-thread threshold (2^20 rows), in one bucket and
  // across two (rows past 2^32), with arrays, bitsets and runs.
  for (const std::uint64_t rows : {std::uint64_t(1000), std::uint64_t(3) << 20}) {
    for (const bool two_buckets : {false, true}) {
      Bitmap b;
      std::vector<std::uint64_t> expected;
      const std::uint64_t span = two_buckets ? (std::uint64_t(1) << 33) : (std::uint64_t(1) << 26);
      for (std::uint64_t i = 0; i < rows / 2; ++i) expected.push_back(rng() % span);
      const std::uint64_t run_at = (std::uint64_t(1) << 32) - 70000;  // a run over a bucket's end
      for (std::uint64_t i = 0; i < rows / 2; ++i) expected.push_back(run_at + i);
      for (std::uint64_t r : expected) b.add(r);
      b.runOptimize();
      std::sort(expected.begin(), expected.end());
      expected.erase(std::unique(expected.begin(), expected.end()), expected.end());
      REQUIRE(b.cardinality() == expected.size());
      std::vector<std::uint64_t> got(expected.size() + 1, 0xDEADBEEF);
      b.toUint64Array(got.data());
      CHECK(got.back() == 0xDEADBEEF);  // nothing written past the rows
      got.pop_back();
      // A count, not the vectors: Catch2 would print millions of rows.
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < got.size(); ++i) wrong += got[i] != expected[i];
      CHECK(wrong == 0);
    }
  }
}
