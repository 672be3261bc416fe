// The index builder (indexes/bitmap_index.h: IndexBuilder): what each
// encoding stores, bitmap by bitmap against the values, and the stored
// object's layout; both ways of building (bin by bin and incremental) give
// the same bytes; rows never written are zeros, NaN rows the NaN bin's.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "indexes/binning.h"
#include "indexes/bitmap_index.h"
#include "tests/unit/support/index_test_support.h"

using namespace mmfs::indexes;
using namespace mmfs::indexes::testing;

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

namespace {

const Encoding kEncodings[] = {Encoding::E1, Encoding::BN, Encoding::Range,
                               Encoding::Interval, Encoding::RE, Encoding::IE};

std::uint64_t key32(std::int32_t v) { return std::uint64_t(std::int64_t(v)) ^ (std::uint64_t(1) << 63); }

// [first, first + count) pieces covering [0, rows), in random order.
std::vector<std::pair<std::size_t, std::size_t>> shuffled_pieces(std::mt19937_64& rng, std::size_t rows) {
  std::vector<std::pair<std::size_t, std::size_t>> pieces;
  for (std::size_t at = 0; at < rows;) {
    const std::size_t n = std::min<std::size_t>(rows - at, 1 + rng() % 700);
    pieces.push_back({at, n});
    at += n;
  }
  std::shuffle(pieces.begin(), pieces.end(), rng);
  return pieces;
}

}  // namespace

TEST_CASE("index builder: built bin by bin or incrementally, from pieces in any order, the same object",
          "[indexes][builder]") {
  std::mt19937_64 rng(41);
  for (Encoding enc : kEncodings) {
    for (int trial = 0; trial < 4; ++trial) {
      INFO(encoding_name(enc) << " trial " << trial);
      const std::size_t rows = 2000 + rng() % 3000;
      std::vector<std::int32_t> values(rows);
      for (auto& v : values) v = std::int32_t(rng() % 400) - 100;
      std::vector<std::uint64_t> lower{min_key(ValueType::I32)};
      for (std::int32_t b = -90; b < 300; b += 3 + std::int32_t(rng() % 40)) lower.push_back(key32(b));
      const Binning binning(ValueType::I32, lower);
      IndexBuilder direct(binning, enc, rows), incremental(binning, enc, rows, 0);
      auto pieces = shuffled_pieces(rng, rows);
      if (trial == 3) pieces.pop_back();  // rows never written read as zeros either way
      const auto* bytes = reinterpret_cast<const std::byte*>(values.data());
      for (const auto& [first, n] : pieces) {
        direct.add(first, bytes + first * 4, n);
        incremental.add(first, bytes + first * 4, n);
      }
      CHECK(direct.finish() == incremental.finish());
    }
  }
}

TEST_CASE("index builder: each e1 bitmap holds its bin's rows; unwritten rows are zero's, NaN rows the NaN bin's",
          "[indexes][builder]") {
  std::mt19937_64 rng(43);
  const double choices[] = {-1.5, 0.0, 2.25, 7.0, 1e300, std::numeric_limits<double>::quiet_NaN()};
  const std::size_t rows = 1000;
  std::vector<double> values(rows);
  for (auto& v : values) v = choices[rng() % 6];
  auto key = [](double v) { return value_key(ValueType::F64, reinterpret_cast<const std::byte*>(&v)); };
  // Bins: below 0, [0, 5), at or above 5; then the NaN bin.
  const Binning binning(ValueType::F64, {min_key(ValueType::F64), key(0.0), key(5.0)});
  for (std::uint64_t direct_rows : {IndexBuilder::kDirectRows, std::uint64_t(0)}) {
    INFO("direct rows " << direct_rows);
    IndexBuilder b(binning, Encoding::E1, rows, direct_rows);
    const auto* bytes = reinterpret_cast<const std::byte*>(values.data());
    b.add(0, bytes, 200);  // rows 200..299 never written: zeros
    b.add(300, bytes + 300 * 8, rows - 300);
    const std::string object = b.finish();
    const auto len = IndexHeader::header_bytes(as_bytes(object).first(IndexHeader::kPrefixBytes));
    REQUIRE(len);
    auto decoded = IndexHeader::decode(as_bytes(object).first(*len));
    REQUIRE(std::holds_alternative<IndexHeader>(decoded));
    const IndexHeader& h = std::get<IndexHeader>(decoded);
    CHECK(h.rows() == rows);
    CHECK(h.encoding() == Encoding::E1);
    REQUIRE(h.directory().size() == 4);  // three value bins and NaN's
    std::vector<std::vector<std::uint64_t>> want(4);
    const double inf = std::numeric_limits<double>::infinity();
    std::vector<double> min(4, inf), max(4, -inf);
    for (std::size_t r = 0; r < rows; ++r) {
      const double v = r >= 200 && r < 300 ? 0.0 : values[r];
      const std::size_t bin = std::isnan(v) ? 3 : v < 0 ? 0 : v < 5 ? 1 : 2;
      want[bin].push_back(r);
      if (bin < 3) {
        min[bin] = std::min(min[bin], v);
        max[bin] = std::max(max[bin], v);
      }
    }
    for (std::uint32_t id = 0; id < 4; ++id) {
      INFO("bin " << id);
      const auto e = h.directory()[id];
      Bitmap got;
      REQUIRE(h.decode_bitmap(id, as_bytes(object).subspan(e.offset, e.length), &got));
      CHECK(rows_of(got) == want[id]);
      CHECK(h.stats()[id].rows == want[id].size());
      if (id < 3 && !want[id].empty()) {
        CHECK(h.stats()[id].min_key == key(min[id]));
        CHECK(h.stats()[id].max_key == key(max[id]));
      }
    }
  }
}
