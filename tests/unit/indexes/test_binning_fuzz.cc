// [fuzz] indexes/binning: mutants of user.mmfs.bins texts through
// parse_bin_spec. A refused text needs a reason; an accepted one is within
// the spec's limits, reads back the same from its re-spelling, and the bins
// built from it (over a few elements of every dtype) partition the dtype's
// keys: ascending edges from min_key, every edge in its own bin.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "indexes/binning.h"
#include "indexes/values.h"
#include "tests/unit/support/fuzz_support.h"

using namespace mmfs::indexes;
using namespace mmfs::testing::fuzz;

namespace {

const std::vector<ValueType> kTypes = {ValueType::I8,  ValueType::U8,  ValueType::I16, ValueType::U16,
                                       ValueType::I32, ValueType::U32, ValueType::I64, ValueType::U64,
                                       ValueType::F32, ValueType::F64};

std::string spelling(const BinSpec& s) {
  switch (s.kind) {
    case BinSpec::Kind::Exact: return "exact";
    case BinSpec::Kind::EqualFrequency: return std::to_string(s.count);
    case BinSpec::Kind::Precision: return "precision:" + std::to_string(s.digits);
    case BinSpec::Kind::Edges: {
      std::string out = "edges:";
      for (std::size_t i = 0; i < s.edges.size(); ++i) out += (i ? "," : "") + s.edges[i].text;
      return out;
    }
  }
  return "";
}

bool same_spec(const BinSpec& a, const BinSpec& b) {
  if (a.kind != b.kind || a.count != b.count || a.digits != b.digits || a.edges.size() != b.edges.size()) return false;
  for (std::size_t i = 0; i < a.edges.size(); ++i)
    if (a.edges[i].text != b.edges[i].text) return false;
  return true;
}

// The Binning invariants of binning.h: lower non-empty, ascending, unique,
// lower[0] == min_key; each bin's range holds its own edges.
bool binning_ok(const Binning& b, ValueType t) {
  const auto& lower = b.lower();
  if (lower.empty() || lower[0] != min_key(t) || lower.back() > max_key(t)) return false;
  for (std::size_t i = 1; i < lower.size(); ++i)
    if (lower[i] <= lower[i - 1]) return false;
  const std::uint32_t bins = b.value_bins();
  for (std::uint32_t i = 0; i < bins; i = (i < 32 || i + 32 >= bins) ? i + 1 : bins - 32) {
    const auto [lo, hi] = b.key_range(i);
    if (lo > hi || b.bin_of_key(lo) != i || b.bin_of_key(hi) != i) return false;
  }
  return true;
}

// A few elements of type t: small integers and boundary bytes.
std::vector<std::byte> elements(ValueType t, Rng& rng) {
  std::vector<std::byte> out(std::size_t(itemsize(t)) * 48);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = std::byte(i % 7 == 0 ? 0xff : rng() % 4);
  return out;
}

}  // namespace

TEST_CASE("fuzz: parse_bin_spec on mutated bins", "[fuzz][index][binning]") {
  const std::vector<std::string> corpus = {"exact",        "100",        "1",          "1048576",   "precision:3",
                                           "precision:17", "edges:0",    "edges:-1,0,2.5,1e3",
                                           "edges:-inf,0", "edges:1,2,3,4,5,6,7,8,9,10", "edges:.5,+7,18446744073709551616"};
  Mutator mutator(seed_of("parse_bin_spec"), corpus, {"exact", "precision:", "edges:", ",-", "e9", "inf", "nan"});
  Tally tally("parse_bin_spec");
  for (std::size_t i = 0, n = iterations(12000); i < n; ++i) {
    const std::string text = mutator.next();
    tally.run(text, [&] {
      auto r = parse_bin_spec(text);
      if (auto* why = std::get_if<std::string>(&r)) {
        tally.failed();
        tally.check(!why->empty(), "a refusal without a reason", text);
        return;
      }
      tally.parsed();
      const BinSpec& spec = std::get<BinSpec>(r);
      switch (spec.kind) {
        case BinSpec::Kind::Exact: tally.check(text == "exact", "exact from another text", text); break;
        case BinSpec::Kind::EqualFrequency:
          tally.check(spec.count >= 1 && spec.count <= kMaxExactBins, "N out of 1..kMaxExactBins", text);
          break;
        case BinSpec::Kind::Precision:
          tally.check(spec.digits >= 1 && spec.digits <= 17, "precision digits out of 1..17", text);
          break;
        case BinSpec::Kind::Edges: {
          bool ok = !spec.edges.empty() && spec.edges.size() <= kMaxExactBins;
          for (std::size_t k = 0; k < spec.edges.size(); ++k) {
            ok = ok && !std::isnan(spec.edges[k].value);
            if (k > 0) ok = ok && spec.edges[k - 1].value <= spec.edges[k].value;
          }
          tally.check(ok, "edges empty, NaN or descending", text);
          break;
        }
      }
      auto again = parse_bin_spec(spelling(spec));
      tally.check(std::holds_alternative<BinSpec>(again) && same_spec(std::get<BinSpec>(again), spec),
                  "its spelling reads back differently: " + spelling(spec), text);
      // The bins it builds partition every dtype's keys.
      const ValueType t = kTypes[i % kTypes.size()];
      if (spec.kind == BinSpec::Kind::EqualFrequency && spec.count > 4096) return;  // keep each mutant cheap
      const std::vector<std::byte> data = elements(t, mutator.rng());
      BinningBuilder builder(t, spec, data.size() / itemsize(t));
      builder.add(data.data(), data.size() / itemsize(t));
      auto built = builder.finish();
      if (auto* why = std::get_if<std::string>(&built)) {
        tally.check(!why->empty(), "a build refused without a reason", text);
        return;
      }
      tally.check(binning_ok(std::get<Binning>(built), t),
                  std::string("bins of ") + std::string(type_name(t)) + " break the Binning invariants", text);
    });
  }
  tally.finish();
}
