// indexes/bitmap_index.h IndexDelta: a stored index plus the rows written
// since answers the current data exactly as its estimates claim.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "indexes/binning.h"
#include "indexes/bitmap_index.h"

using namespace mmfs::indexes;

namespace {

std::span<const std::byte> as_bytes(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }
const std::byte* raw(const std::vector<double>& v, std::size_t at = 0) {
  return reinterpret_cast<const std::byte*>(v.data() + at);
}

double random_value(std::mt19937_64& rng) {
  switch (rng() % 10) {
    case 0: return NAN;
    case 1: return -0.0;
    default: return double(std::int64_t(rng() % 2000) - 1000) / 8;
  }
}

}  // namespace

TEST_CASE("delta: base index plus rewrites equals brute force", "[indexes][delta]") {
  std::mt19937_64 rng(42);
  for (const char* spec : {"exact", "7", "precision:2"}) {
    for (Encoding enc : {Encoding::E1, Encoding::BN, Encoding::Range, Encoding::IE}) {
      INFO(spec << " " << encoding_name(enc));
      std::vector<double> data(3000);
      for (double& v : data) v = random_value(rng);
      BinningBuilder bb(ValueType::F64, std::get<BinSpec>(parse_bin_spec(spec)), data.size());
      bb.add(raw(data), data.size());
      Binning binning = std::get<Binning>(bb.finish());
      IndexBuilder ib(binning, enc, data.size());
      ib.add(0, raw(data), data.size());
      std::string object = ib.finish();
      auto hdr = IndexHeader::decode(as_bytes(object).first(*IndexHeader::header_bytes(as_bytes(object))));
      const IndexHeader& h = std::get<IndexHeader>(hdr);

      IndexDelta delta(binning);
      CHECK(delta.empty());
      for (int round = 0; round < 12; ++round) {
        // Rewrite a random row range with values possibly outside the old bins' keys.
        std::size_t first = rng() % data.size(), n = 1 + rng() % std::min<std::size_t>(300, data.size() - first);
        for (std::size_t i = first; i < first + n; ++i) data[i] = rng() % 3 ? random_value(rng) : random_value(rng) * 7;
        delta.set(binning, first, raw(data, first), n);
        // The delta survives its own encoding.
        auto again = IndexDelta::decode(binning, as_bytes(delta.encode()));
        REQUIRE(again);
        CHECK(again->encode() == delta.encode());
        CHECK(delta.bytes() == delta.encode().size());
        const IndexDelta& d = round % 2 ? *again : delta;
        for (int q = 0; q < 15; ++q) {
          Number c = *parse_number(std::to_string(std::int64_t(rng() % 600) - 300) + (rng() % 2 ? ".5" : ""));
          KeySet keys = compare_keys(ValueType::F64, CompareOp(rng() % 6), c);
          if (rng() % 4 == 0) keys = complement(ValueType::F64, keys);
          AtomPlan plan = h.plan(keys);
          std::map<std::uint32_t, Bitmap> cache;
          Estimate base = h.evaluate(plan, [&](std::uint32_t id) -> const Bitmap& {
            const auto e = h.directory()[id];
            Bitmap b;
            REQUIRE(h.decode_bitmap(id, as_bytes(object).subspan(e.offset, e.length), &b));
            return cache[id] = std::move(b);
          });
          Estimate est = d.apply(binning, keys, base);
          Bitmap truth;
          for (std::size_t i = 0; i < data.size(); ++i) {
            if (contains(keys, ValueType::F64, raw(data, i))) truth.add(std::uint64_t(i));
          }
          CHECK(is_subset(est.sure, truth));
          CHECK(is_subset(truth, est.sure | est.maybe));
          CHECK((est.sure & est.maybe).isEmpty());
          // Checking the candidates against the data gives the answer.
          Bitmap answer = est.sure;
          // (CRoaring 0.2.66's 64-bit iterator is unreliable: copy the rows out.)
          std::vector<std::uint64_t> maybe(est.maybe.cardinality());
          est.maybe.toUint64Array(maybe.data());
          for (std::uint64_t r : maybe) {
            if (contains(keys, ValueType::F64, raw(data, r))) answer.add(r);
          }
          CHECK(same_rows(answer, truth));
        }
      }
      CHECK(!delta.empty());
      CHECK(delta.rows() == delta.stale().cardinality());
    }
  }
}

TEST_CASE("delta: a row rewritten twice keeps only its latest bin", "[indexes][delta]") {
  Binning b(ValueType::F64, {min_key(ValueType::F64)});
  std::vector<double> one{NAN}, two{5.0};
  IndexDelta d(b);
  d.set(b, 7, raw(one), 1);
  d.set(b, 7, raw(two), 1);
  KeySet nan_only{{}, true};
  Estimate e = d.apply(b, nan_only, Estimate{});
  CHECK(e.sure.isEmpty());
  CHECK(e.maybe.isEmpty());
  KeySet five = compare_keys(ValueType::F64, CompareOp::Eq, *parse_number("5"));
  e = d.apply(b, five, Estimate{});
  CHECK(e.sure.contains(std::uint64_t(7)));
  CHECK(d.rows() == 1);
}

TEST_CASE("delta: garbage and corruption decode to nullopt", "[indexes][delta]") {
  Binning b(ValueType::I32, {min_key(ValueType::I32), (1ull << 63) + 10});
  std::vector<std::int32_t> v{1, 20, 3};
  IndexDelta d(b);
  d.set(b, 100, reinterpret_cast<const std::byte*>(v.data()), v.size());
  std::string good = d.encode();
  REQUIRE(IndexDelta::decode(b, as_bytes(good)));
  // Another binning (bin count) is refused.
  Binning other(ValueType::I32, {min_key(ValueType::I32)});
  CHECK(!IndexDelta::decode(other, as_bytes(good)));
  for (std::size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = char(bad[i] ^ 0x04);
    CHECK(!IndexDelta::decode(b, as_bytes(bad)));
  }
  for (std::size_t n = 0; n < good.size(); ++n) CHECK(!IndexDelta::decode(b, as_bytes(good.substr(0, n))));
  std::mt19937_64 rng(1);
  for (int i = 0; i < 2000; ++i) {
    std::string junk(std::size_t(rng() % 200), '\0');
    for (char& c : junk) c = char(rng());
    if (i % 2 && junk.size() >= 8) std::memcpy(junk.data(), good.data(), 8);
    CHECK(!IndexDelta::decode(b, as_bytes(junk)));
  }
}
