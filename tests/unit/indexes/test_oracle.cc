// The bitmap index against brute force (in the spirit of CRoaring's
// roaring_checked.hh): for every binning x every encoding x every dtype, on
// data with duplicates, -0.0, NaN, infinities and the dtype's extremes, an
// index built in pieces out of order, stored, decoded and queried with many
// random key sets must bound the truth exactly as its plan claims.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <random>

#include "indexes/binning.h"
#include "indexes/bitmap_index.h"

using namespace mmfs::indexes;

namespace {

constexpr ValueType kTypes[] = {ValueType::I8,  ValueType::U8,  ValueType::I16, ValueType::U16, ValueType::I32,
                                ValueType::U32, ValueType::I64, ValueType::U64, ValueType::F32, ValueType::F64};

struct Data {
  ValueType type;
  std::vector<std::byte> bytes;
  std::size_t rows() const { return bytes.size() / itemsize(type); }
  const std::byte* at(std::size_t i) const { return bytes.data() + i * itemsize(type); }
};

template <class T>
void append(Data* d, T v) {
  std::byte b[sizeof(T)];
  std::memcpy(b, &v, sizeof v);
  d->bytes.insert(d->bytes.end(), b, b + sizeof b);
}

// A random value of the dtype drawn from a pool of "interesting" ones plus
// a few random ones, so that values repeat.
template <class T>
std::vector<T> pool(std::mt19937_64& rng, std::size_t distinct) {
  using L = std::numeric_limits<T>;
  std::vector<T> p{L::lowest(), L::max(), T(0), T(1)};
  if constexpr (std::is_floating_point_v<T>) {
    for (T v : {T(-0.0), L::infinity(), -L::infinity(), L::quiet_NaN(), T(0.1), T(-2.5), T(100), T(99.5),
                L::denorm_min()}) {
      p.push_back(v);
    }
  } else if constexpr (std::is_signed_v<T>) {
    for (T v : {T(-1), T(L::lowest() + 1), T(L::max() - 1), T(2), T(3)}) p.push_back(v);
  } else {
    for (T v : {T(2), T(3), T(L::max() - 1), T(L::max() / 2 + 1)}) p.push_back(v);
  }
  while (p.size() < distinct) {
    if constexpr (std::is_floating_point_v<T>) {
      p.push_back(T(std::ldexp(double(std::int64_t(rng() % 2000) - 1000), int(rng() % 12) - 6)));
    } else {
      p.push_back(rng() % 3 ? T(std::int64_t(rng() % 200) - 50) : T(rng()));
    }
  }
  return p;
}

template <class T>
Data make_data(ValueType t, std::mt19937_64& rng, int shape) {
  Data d{t, {}};
  std::vector<T> p = pool<T>(rng, shape == 0 ? 40 : 300);
  std::size_t n = 0;
  switch (shape) {
    case 0: n = 1500; break;    // many duplicates
    case 1: n = 2500; break;    // wider spread
    case 2: n = 1; break;       // one element
    case 3: n = 400; break;     // one distinct value
  }
  T single = p[rng() % p.size()];
  for (std::size_t i = 0; i < n; ++i) append(&d, shape == 3 ? single : p[rng() % p.size()]);
  return d;
}

Data make(ValueType t, std::mt19937_64& rng, int shape) {
  switch (t) {
    case ValueType::I8: return make_data<std::int8_t>(t, rng, shape);
    case ValueType::U8: return make_data<std::uint8_t>(t, rng, shape);
    case ValueType::I16: return make_data<std::int16_t>(t, rng, shape);
    case ValueType::U16: return make_data<std::uint16_t>(t, rng, shape);
    case ValueType::I32: return make_data<std::int32_t>(t, rng, shape);
    case ValueType::U32: return make_data<std::uint32_t>(t, rng, shape);
    case ValueType::I64: return make_data<std::int64_t>(t, rng, shape);
    case ValueType::U64: return make_data<std::uint64_t>(t, rng, shape);
    case ValueType::F32: return make_data<float>(t, rng, shape);
    case ValueType::F64: return make_data<double>(t, rng, shape);
  }
  return {};
}

// The text of an element, exactly (for floats: enough digits for the double).
std::string text_of(const Data& d, std::size_t i) {
  char buf[64];
  const std::byte* e = d.at(i);
  switch (d.type) {
    case ValueType::F32: {
      float f;
      std::memcpy(&f, e, 4);
      std::snprintf(buf, sizeof buf, "%.9g", double(f));  // round-trips the float, not its double
      return buf;
    }
    case ValueType::F64: {
      double v;
      std::memcpy(&v, e, 8);
      std::snprintf(buf, sizeof buf, "%.17g", v);
      return buf;
    }
    case ValueType::I64: {
      std::int64_t v;
      std::memcpy(&v, e, 8);
      return std::to_string(v);
    }
    case ValueType::U64: {
      std::uint64_t v;
      std::memcpy(&v, e, 8);
      return std::to_string(v);
    }
    default: {
      double v = key_value(d.type, value_key(d.type, e));
      std::snprintf(buf, sizeof buf, "%.0f", v);
      return buf;
    }
  }
}

Number random_constant(const Data& d, std::mt19937_64& rng) {
  static const char* specials[] = {"0",    "-0.0", "2.5",  "-2.5", "nan", "inf", "-inf", "1e300", "-1e300", "0.1",
                                   "99.5", "100",  "1e-300", "127", "128", "-129", "255", "65535",
                                   "9223372036854775807", "9223372036854775808", "-9223372036854775809",
                                   "18446744073709551615", "4294967295", "2147483648", "3.4028234663852886e38"};
  std::string text;
  switch (rng() % 4) {
    case 0: text = specials[rng() % std::size(specials)]; break;
    case 1: text = std::to_string(std::int64_t(rng() % 400) - 100) + (rng() % 2 ? ".5" : ""); break;
    default: text = text_of(d, rng() % d.rows());
  }
  auto n = parse_number(text);
  REQUIRE(n);
  return *n;
}

KeySet random_keys(const Data& d, std::mt19937_64& rng) {
  KeySet k;
  if (rng() % 3 == 0) {
    Number a = random_constant(d, rng), b = random_constant(d, rng);
    if (rng() % 2 && a.value > b.value) std::swap(a, b);
    k = interval_keys(d.type, a, b);
  } else {
    k = compare_keys(d.type, CompareOp(rng() % 6), random_constant(d, rng));
  }
  if (rng() % 4 == 0) k = complement(d.type, k);
  return k;
}

std::vector<std::string> bin_specs() { return {"exact", "1", "7", "100", "precision:2", "edges:-2.5,0,0.1,3,100,1e10"}; }

struct Built {
  std::string object;
  IndexHeader header;
};

Built build(const Data& d, const Binning& binning, Encoding enc, std::mt19937_64& rng) {
  // Pieces in a random order.
  std::vector<std::pair<std::size_t, std::size_t>> pieces;
  for (std::size_t at = 0; at < d.rows();) {
    std::size_t n = std::min<std::size_t>(d.rows() - at, 1 + rng() % 700);
    pieces.push_back({at, n});
    at += n;
  }
  std::shuffle(pieces.begin(), pieces.end(), rng);
  // The direct builder (rows sorted by bin at the end) and the incremental
  // one (a growing bitmap per bin) store the same bytes, also when pieces
  // are missing (their rows read as zero).
  auto object = [&](std::uint64_t direct_rows, std::size_t skip) {
    IndexBuilder builder(binning, enc, d.rows(), direct_rows);
    for (std::size_t i = 0; i < pieces.size(); ++i)
      if (i != skip) builder.add(pieces[i].first, d.at(pieces[i].first), pieces[i].second);
    return builder.finish();
  };
  const std::size_t skip = rng() % (pieces.size() + 1);
  CHECK(object(0, skip) == object(IndexBuilder::kDirectRows, skip));
  Built b;
  b.object = object(rng() % 2 ? 0 : IndexBuilder::kDirectRows, pieces.size());
  auto bytes = std::as_bytes(std::span(b.object.data(), b.object.size()));
  auto len = IndexHeader::header_bytes(bytes.first(IndexHeader::kPrefixBytes));
  REQUIRE(len);
  auto h = IndexHeader::decode(bytes.first(*len));
  REQUIRE(std::holds_alternative<IndexHeader>(h));
  b.header = std::get<IndexHeader>(h);
  return b;
}

void check_atom(const Data& d, const Built& b, const KeySet& keys) {
  const IndexHeader& h = b.header;
  AtomPlan plan = h.plan(keys);
  REQUIRE(std::is_sorted(plan.bitmaps.begin(), plan.bitmaps.end()));
  std::uint64_t bytes = 0;
  for (std::uint32_t id : plan.bitmaps) bytes += h.directory()[id].length;
  CHECK(bytes == plan.bytes);
  std::map<std::uint32_t, Bitmap> cache;
  auto fetch = [&](std::uint32_t id) -> const Bitmap& {
    REQUIRE(std::binary_search(plan.bitmaps.begin(), plan.bitmaps.end(), id));  // only what the plan named
    auto it = cache.find(id);
    if (it != cache.end()) return it->second;
    const auto& e = h.directory()[id];
    Bitmap out;
    REQUIRE(h.decode_bitmap(id, std::as_bytes(std::span(b.object.data() + e.offset, e.length)), &out));
    return cache[id] = std::move(out);
  };
  Estimate est = h.evaluate(plan, fetch);

  Bitmap truth, cut;
  for (std::size_t i = 0; i < d.rows(); ++i) {
    if (contains(keys, d.type, d.at(i))) truth.add(std::uint64_t(i));
    std::uint32_t bin = h.binning().bin_of(d.at(i));
    if (std::binary_search(plan.maybe_bins.begin(), plan.maybe_bins.end(), bin)) cut.add(std::uint64_t(i));
  }
  CHECK(is_subset(est.sure, truth));
  CHECK(is_subset(truth, est.sure | est.maybe));
  CHECK((est.sure & est.maybe).isEmpty());
  CHECK(is_subset(est.maybe, cut));
  if (plan.aligned) CHECK(same_rows(est.sure, truth));
  if (plan.count) CHECK(*plan.count == truth.cardinality());
}

}  // namespace

TEST_CASE("index oracle: every binning x encoding x dtype against brute force", "[indexes][oracle]") {
  std::mt19937_64 rng(20240611);
  std::size_t indexes = 0, atoms = 0, aligned = 0;
  for (ValueType t : kTypes) {
    for (int shape = 0; shape < 4; ++shape) {
      Data d = make(t, rng, shape);
      for (const std::string& spec_text : bin_specs()) {
        auto spec = parse_bin_spec(spec_text);
        REQUIRE(std::holds_alternative<BinSpec>(spec));
        BinningBuilder bb(t, std::get<BinSpec>(spec), d.rows());
        for (std::size_t at = 0; at < d.rows(); at += 500) bb.add(d.at(at), std::min<std::size_t>(500, d.rows() - at));
        auto binning = bb.finish();
        REQUIRE(std::holds_alternative<Binning>(binning));
        for (Encoding enc : {Encoding::E1, Encoding::BN, Encoding::Range, Encoding::Interval, Encoding::RE,
                             Encoding::IE}) {
          INFO(type_name(t) << " shape " << shape << " bins " << spec_text << " " << encoding_name(enc));
          Built b = build(d, std::get<Binning>(binning), enc, rng);
          ++indexes;
          for (int q = 0; q < 25; ++q) {
            KeySet keys = random_keys(d, rng);
            INFO("query " << q << " ranges " << keys.ranges.size() << " nan " << keys.nan);
            check_atom(d, b, keys);
            ++atoms;
          }
          // The full and the empty set are always aligned.
          KeySet none, all = complement(t, none);
          AtomPlan p = b.header.plan(all);
          CHECK(p.aligned);
          CHECK(p.count == d.rows());
          CHECK(b.header.plan(none).aligned);
          CHECK(b.header.plan(none).count == 0u);
          aligned += p.aligned;
        }
      }
    }
  }
  CHECK(indexes == 10 * 4 * 6 * 6);
  CHECK(atoms == indexes * 25);
}

TEST_CASE("index oracle: precision:D bins align every D-digit constant", "[indexes][oracle]") {
  std::mt19937_64 rng(5);
  for (ValueType t : {ValueType::F64, ValueType::F32, ValueType::I32}) {
    Data d = make(t, rng, 1);
    BinningBuilder bb(t, std::get<BinSpec>(parse_bin_spec("precision:2")), d.rows());
    bb.add(d.bytes.data(), d.rows());
    Binning binning = std::get<Binning>(bb.finish());
    Built b = build(d, binning, Encoding::E1, rng);
    for (int q = 0; q < 300; ++q) {
      // A two-significant-digit constant: m * 10^e, |m| < 100.
      std::string text = std::to_string(std::int64_t(rng() % 199) - 99) + "e" + std::to_string(int(rng() % 8) - 4);
      Number c = *parse_number(text);
      INFO(type_name(t) << " " << text);
      for (CompareOp op : {CompareOp::Lt, CompareOp::Le, CompareOp::Gt, CompareOp::Ge, CompareOp::Eq}) {
        KeySet keys = compare_keys(t, op, c);
        CHECK(b.header.plan(keys).aligned);
        check_atom(d, b, keys);
      }
    }
  }
}
