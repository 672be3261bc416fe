// [fuzz] indexes/index_header and bitmap_index: mutants of stored index
// headers through IndexHeader::decode (an index on the volume is untrusted
// bytes), and of user.mmfs.index texts through parse_encoding. Most header
// mutants are re-sealed (checksum recomputed) and many are mutated inside
// their packed columns (unpacked, mutated, packed again), so that they reach
// the checks behind the checksum and the zstd frame. An accepted header must
// obey what decode promises: bins that partition the keys, statistics inside
// their bins, bins holding every row exactly once, coarse groups ascending,
// a directory of bitmaps back to back up to the object's end, and plans that
// name only bitmaps it has.
#include <catch2/catch.hpp>
#include <xxhash.h>
#include <zstd.h>

#include <cstring>
#include <limits>
#include <string>
#include <variant>
#include <vector>

#include "indexes/bitmap_index.h"
#include "tests/unit/support/fuzz_support.h"
#include "tests/unit/support/index_test_support.h"

using namespace mmfs::indexes;
using namespace mmfs::indexes::testing;
using namespace mmfs::testing::fuzz;

namespace {

constexpr std::size_t kPrefix = IndexHeader::kPrefixBytes;

std::uint64_t get64(const std::string& s, std::size_t at) {
  std::uint64_t v;
  std::memcpy(&v, s.data() + at, 8);
  return v;
}
void put64(std::string& s, std::size_t at, std::uint64_t v) { std::memcpy(s.data() + at, &v, 8); }

// The last 8 bytes: XXH3 of the rest (what the header's checksum covers).
void reseal(std::string& h) {
  if (h.size() < 8) return;
  put64(h, h.size() - 8, XXH3_64bits(h.data(), h.size() - 8));
}

// A float64 index (NaN bin) beside make()'s int32 ones.
std::string float_header() {
  auto key = [](double d) { return value_key(ValueType::F64, reinterpret_cast<const std::byte*>(&d)); };
  Binning binning(ValueType::F64, {min_key(ValueType::F64), key(0.0), key(1.0), key(100.0)});
  std::vector<double> values;
  for (int i = 0; i < 500; ++i) values.push_back(i % 13 == 0 ? std::numeric_limits<double>::quiet_NaN() : i * 0.37 - 20);
  IndexBuilder b(binning, Encoding::Range, values.size());
  b.add(0, reinterpret_cast<const std::byte*>(values.data()), values.size());
  const std::string object = b.finish();
  auto len = IndexHeader::header_bytes(as_bytes(object).first(kPrefix));
  REQUIRE(len);
  return object.substr(0, *len);
}

std::vector<std::string> headers() {
  std::vector<std::string> out;
  auto add = [&](Encoding e, std::size_t rows, std::int32_t distinct) {
    const Index ix = make(e, rows, distinct);
    out.push_back(ix.object.substr(0, ix.header.header_length()));
  };
  add(Encoding::E1, 300, 12);
  add(Encoding::BN, 300, 12);
  add(Encoding::Range, 200, 9);
  add(Encoding::Interval, 200, 9);
  add(Encoding::RE, 4000, 300);
  add(Encoding::IE, 4000, 300);
  add(Encoding::E1, 50, 1);
  out.push_back(float_header());
  return out;
}

// The packed columns of a version 2 header, unpacked.
std::string columns_of(const std::string& h) {
  const std::uint64_t packed = get64(h, 56);
  const unsigned long long raw = ZSTD_getFrameContentSize(h.data() + kPrefix, packed);
  std::string out(raw, '\0');
  REQUIRE(ZSTD_decompress(out.data(), out.size(), h.data() + kPrefix, packed) == raw);
  return out;
}

// A header of `prefix` (its lengths fixed up) around `columns`, packed and sealed.
std::string repack(std::string prefix, const std::string& columns, std::uint64_t body) {
  std::string packed(ZSTD_compressBound(columns.size()), '\0');
  packed.resize(ZSTD_compress(packed.data(), packed.size(), columns.data(), columns.size(), 1));
  const std::uint64_t length = kPrefix + packed.size() + 8;
  put64(prefix, 24, length);
  put64(prefix, 32, length + body);
  put64(prefix, 56, packed.size());
  std::string h = prefix + packed + std::string(8, '\0');
  reseal(h);
  return h;
}

// The seven columns of a header (lower-edge deltas, bin rows, smallest and
// largest key offsets, coarse groups, bitmap lengths, bitmap checksums), as
// values: parsed from the unpacked bytes, written back all 8 bytes wide.
using Columns = std::vector<std::vector<std::uint64_t>>;
Columns parse_columns(const std::string& prefix, const std::string& raw) {
  std::uint32_t value_bins, coarse, entries;
  std::memcpy(&value_bins, prefix.data() + 40, 4);
  std::memcpy(&coarse, prefix.data() + 44, 4);
  std::memcpy(&entries, prefix.data() + 48, 4);
  const std::size_t bins = value_bins + (is_float(ValueType(prefix[12])) ? 1 : 0);
  Columns out;
  std::size_t at = 0;
  for (std::size_t n : {std::size_t(value_bins), bins, std::size_t(value_bins), std::size_t(value_bins),
                        std::size_t(coarse), std::size_t(entries), std::size_t(entries)}) {
    const unsigned width = std::uint8_t(raw[at++]);
    std::vector<std::uint64_t> column(n, 0);
    for (auto& v : column) {
      std::memcpy(&v, raw.data() + at, width);
      at += width;
    }
    out.push_back(std::move(column));
  }
  return out;
}
std::string write_columns(const Columns& columns) {
  std::string out;
  for (const auto& column : columns) {
    out.push_back(char(8));
    for (std::uint64_t v : column) out.append(reinterpret_cast<const char*>(&v), 8);
  }
  return out;
}

// A KeySet of the header's dtype: a constant compared every way.
KeySet keys_for(ValueType t, CompareOp op, const char* constant) { return compare_keys(t, op, *parse_number(constant)); }

}  // namespace

TEST_CASE("fuzz: IndexHeader::decode on mutated headers", "[fuzz][index][header]") {
  const std::vector<std::string> corpus = headers();
  std::vector<std::string> columns;
  for (const auto& h : corpus) columns.push_back(columns_of(h));
  Mutator mutator(seed_of("IndexHeader::decode"), corpus);
  Mutator column_mutator(seed_of("IndexHeader columns"), columns);
  Tally tally("IndexHeader::decode");
  for (std::size_t i = 0, n = iterations(8000); i < n; ++i) {
    std::string h;
    const std::size_t mode = mutator.below(10);
    if (mode < 2) {
      h = mutator.next();  // as mutated: the checksum catches nearly all
    } else if (mode < 5) {
      h = mutator.next();
      reseal(h);
    } else {
      const std::size_t k = mutator.below(corpus.size());
      std::string prefix = corpus[k].substr(0, kPrefix);
      if (mode == 9) prefix = mutator.mutate(prefix).substr(0, kPrefix);
      prefix.resize(kPrefix, '\0');
      const std::uint64_t body = get64(corpus[k], 32) - get64(corpus[k], 24);
      if (mode == 6 || mode == 7) {  // the columns' values: boundary values planted, or the rows scaled
        Columns c = parse_columns(prefix, columns[k]);
        if (mode == 7 && mutator.below(2)) {  // every row count times 2^k: the sums still agree, modulo 2^64
          const unsigned shift = 1 + unsigned(mutator.below(63));
          for (auto& rows : c[1]) rows <<= shift;
          put64(prefix, 16, get64(prefix, 16) << shift);
        } else {
          for (std::size_t times = 1 + mutator.below(3); times-- > 0;) {
            auto& column = c[mutator.below(c.size())];
            if (column.empty()) continue;
            const auto values = interesting_values();
            std::uint64_t& v = column[mutator.below(column.size())];
            v = mutator.below(2) ? values[mutator.below(values.size())] : v + (mutator.below(2) ? 1 : ~0ull);
          }
          if (mode == 7) put64(prefix, 16, get64(prefix, 16) + (mutator.below(2) ? 1 : ~0ull));  // rows, by one
        }
        h = repack(prefix, write_columns(c), body);
      } else {
        h = repack(prefix, mode == 8 ? columns[k] : column_mutator.mutate(columns[k]), body);
      }
    }
    tally.run(h, [&] {
      if (h.size() >= kPrefix) (void)IndexHeader::header_bytes(bytes_of(h).first(kPrefix));
      auto r = IndexHeader::decode(bytes_of(h));
      if (auto* why = std::get_if<std::string>(&r)) {
        tally.failed();
        tally.check(!why->empty(), "a refusal without a reason", h);
        return;
      }
      tally.parsed();
      const IndexHeader& x = std::get<IndexHeader>(r);
      tally.check(IndexHeader::header_bytes(bytes_of(h).first(kPrefix)) == h.size(), "header_bytes disagrees", h);
      const Binning& binning = x.binning();
      const ValueType t = x.type();
      const auto& lower = binning.lower();
      bool edges = !lower.empty() && lower[0] == min_key(t) && lower.back() <= max_key(t);
      for (std::size_t b = 1; b < lower.size(); ++b) edges = edges && lower[b] > lower[b - 1];
      tally.check(edges, "bin edges do not partition the keys", h);
      // Every row in exactly one bin: the bins' rows sum to rows(), without wrapping.
      unsigned __int128 total = 0;
      bool inside = x.stats().size() == binning.bins();
      for (std::size_t b = 0; b < x.stats().size(); ++b) {
        const BinStats s = x.stats()[b];
        total += s.rows;
        if (b < binning.value_bins() && s.rows > 0) {
          const auto [lo, hi] = binning.key_range(std::uint32_t(b));
          inside = inside && s.min_key <= s.max_key && s.min_key >= lo && s.max_key <= hi;
        }
      }
      tally.check(total == x.rows(), "the bins' rows do not add up to the rows", h);
      tally.check(inside, "bin statistics outside their bins", h);
      tally.check(x.coarse_bins() == 0 || x.coarse_bins() >= 2, "a single coarse bin", h);
      // The directory: bitmaps of at least 8 bytes, back to back to the end.
      std::uint64_t at = x.header_length();
      bool directory = x.header_length() == h.size();
      for (std::uint32_t id = 0; id < x.directory().size(); ++id) {
        const auto e = x.directory()[id];
        directory = directory && e.offset == at && e.length >= 8;
        at += e.length;
      }
      tally.check(directory && at == x.object_bytes(), "the directory does not tile the object", h);
      // Plans name bitmaps the directory has, ascending; evaluating one over
      // empty bitmaps (rows bounded: an evaluation may build a range of them) returns.
      static const Bitmap empty;
      for (CompareOp op : {CompareOp::Lt, CompareOp::Eq, CompareOp::Ne, CompareOp::Ge}) {
        const AtomPlan plan = x.plan(keys_for(t, op, i % 2 ? "5" : "-0.5"));
        bool ids = true;
        for (std::size_t k = 0; k < plan.bitmaps.size(); ++k)
          ids = ids && plan.bitmaps[k] < x.directory().size() && (k == 0 || plan.bitmaps[k] > plan.bitmaps[k - 1]);
        tally.check(ids, "a plan names bitmaps the directory lacks", h);
        if (ids && x.rows() <= (1u << 24)) (void)x.evaluate(plan, [&](std::uint32_t) -> const Bitmap& { return empty; });
      }
    });
  }
  tally.finish();
}

TEST_CASE("fuzz: IndexHeader::decode regressions", "[fuzz][index][header]") {
  // Bins whose rows add up to rows() only modulo 2^64: three bins of 2^63
  // rows each in an index of 2^63 rows. Each bin alone is within rows().
  const Index ix = make(Encoding::E1, 300, 3);
  const std::string h = ix.object.substr(0, ix.header.header_length());
  std::string prefix = h.substr(0, kPrefix);
  Columns c = parse_columns(prefix, columns_of(h));
  REQUIRE(c[1].size() == 3);
  c[1] = {1ull << 63, 1ull << 63, 1ull << 63};
  put64(prefix, 16, 1ull << 63);
  const std::string wrapped = repack(prefix, write_columns(c), get64(h, 32) - get64(h, 24));
  auto r = IndexHeader::decode(bytes_of(wrapped));
  CHECK(std::holds_alternative<std::string>(r));
  // The same edit with the true rows decodes: the edit itself is sound.
  c[1] = parse_columns(prefix, columns_of(h))[1];
  put64(prefix, 16, ix.header.rows());
  const std::string honest = repack(prefix, write_columns(c), get64(h, 32) - get64(h, 24));
  CHECK(std::holds_alternative<IndexHeader>(IndexHeader::decode(bytes_of(honest))));
}

TEST_CASE("fuzz: IndexDelta::decode on mutated, re-sealed deltas", "[fuzz][index][header]") {
  const Index ix = make(Encoding::E1, 3000, 40);
  const Binning& binning = ix.header.binning();
  std::vector<std::string> corpus;
  for (std::size_t rows : {1, 17, 300}) {
    IndexDelta d(binning);
    std::vector<std::int32_t> values(rows);
    for (std::size_t k = 0; k < rows; ++k) values[k] = std::int32_t(k * 7 % 40);
    d.set(binning, 100 + rows, reinterpret_cast<const std::byte*>(values.data()), rows);
    corpus.push_back(d.encode());
  }
  Mutator mutator(seed_of("IndexDelta::decode"), corpus);
  Tally tally("IndexDelta::decode");
  for (std::size_t i = 0, n = iterations(6000); i < n; ++i) {
    std::string bytes = mutator.next();
    if (i % 4) reseal(bytes);
    tally.run(bytes, [&] {
      auto d = IndexDelta::decode(binning, bytes_of(bytes));
      if (!d) {
        tally.failed();
        return;
      }
      tally.parsed();
      tally.check(d->rows() == d->stale().cardinality(), "rows() is not the stale rows", bytes);
      const std::string again = d->encode();
      tally.check(d->bytes() == again.size() && IndexDelta::decode(binning, bytes_of(again)).has_value(),
                  "its re-encoding does not decode, or bytes() is not its size", bytes);
      (void)d->apply(binning, between(3, 20), Estimate{});
    });
  }
  tally.finish();
}

TEST_CASE("fuzz: parse_encoding on mutated names", "[fuzz][index][header]") {
  Mutator mutator(seed_of("parse_encoding"), {"e1", "bn", "range", "interval", "re", "ie"});
  Tally tally("parse_encoding");
  for (std::size_t i = 0, n = iterations(3000); i < n; ++i) {
    const std::string text = mutator.next();
    tally.run(text, [&] {
      auto e = parse_encoding(text);
      if (!e) {
        tally.failed();
        return;
      }
      tally.parsed();
      tally.check(encoding_name(*e) == text, "a name that is not the encoding's own", text);
    });
  }
  tally.finish();
}
