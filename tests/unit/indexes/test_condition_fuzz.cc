// [fuzz] indexes/condition and indexes/values: mutants of valid query
// conditions and comparison constants (they arrive as path components any
// user can type). A refused text must say where and why; an accepted one
// must round-trip through its canonical text, keep the parser's limits, and
// turn into key sets that are sorted, disjoint, inside the dtype's keys and
// exact against integer elements.
#include <catch2/catch.hpp>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <variant>
#include <vector>

#include "indexes/condition.h"
#include "indexes/values.h"
#include "tests/unit/support/fuzz_support.h"

using namespace mmfs::indexes;
using namespace mmfs::testing::fuzz;

namespace {

const std::vector<std::string> kConditions = {
    ">3", "x>3", "x >= -2.5e3", "  temp_2<=.5  ", "==7", "!=7", "x!=nan", "<-inf", "<inf", "a in [1,2]",
    "in[1,2]", " in [ -inf , 2e5 ] ", "x>3 & ( !  y<2 | in[1,2])", ">3&<5|==7", "!(>3&<5)", "((((>3))))",
    "a-b.c>1", "+x>1", "p>0|q>0&r>0", "x>18446744073709551615", "y<=-9223372036854775808", "z==1e-5",
    "!!=7", "(a>1|b<2)&!(c in[0,9])", "inf>3", "t in [-128,127]", ">=255&<=65536", "!=-0", "<1e308",
};

const std::vector<std::string> kConditionTokens = {
    "in", "in[", "in [", " in ", "==", "!=", "<=", ">=", "<", ">", "&", "|", "!", "(", ")", "&(", "|!", "!(",
    "x", "temp", "inf", "nan", "-inf", "e5", "E-3", "1e", "2.5", "-.5", "[1,2]", "[", "]",
};

const std::vector<ValueType> kTypes = {ValueType::I8,  ValueType::U8,  ValueType::I16, ValueType::U16,
                                       ValueType::I32, ValueType::U32, ValueType::I64, ValueType::U64,
                                       ValueType::F32, ValueType::F64};

// The most nodes, and the most Not nodes, on a path from the root. The parser
// counts a level per '!' and '(' (at most kMaxDepth); a level holds at most
// an Or and an And node besides, so the tree is at most 3 * kMaxDepth + 3 deep.
std::size_t depth_of(const Condition& c) {
  std::size_t d = 0;
  for (const auto& k : c.children) d = std::max(d, depth_of(k));
  return d + 1;
}
std::size_t nots_of(const Condition& c) {
  std::size_t d = 0;
  for (const auto& k : c.children) d = std::max(d, nots_of(k));
  return d + (c.kind == Condition::Kind::Not ? 1 : 0);
}

bool shape_ok(const Condition& c) {
  switch (c.kind) {
    case Condition::Kind::Atom: return c.children.empty();
    case Condition::Kind::Not: return c.children.size() == 1 && shape_ok(c.children[0]);
    default:
      if (c.children.size() < 2) return false;
      for (const auto& k : c.children)
        if (!shape_ok(k)) return false;
      return true;
  }
}

// A KeySet as compare_keys promises it: closed ranges, ascending, disjoint,
// inside the dtype's keys; NaN only for floats.
bool keyset_ok(ValueType t, const KeySet& s) {
  for (std::size_t i = 0; i < s.ranges.size(); ++i) {
    const auto [lo, hi] = s.ranges[i];
    if (lo > hi || lo < min_key(t) || hi > max_key(t)) return false;
    if (i > 0 && s.ranges[i - 1].second >= lo) return false;
  }
  return !s.nan || is_float(t);
}

// Integer elements against an integer constant, compared exactly.
template <class T>
bool integer_oracle(ValueType t, const Atom& a, const KeySet& keys) {
  const __int128 c = *a.value.integer;
  const __int128 lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
  for (__int128 e : {lo, hi, c - 1, c, c + 1, __int128(0)}) {
    if (e < lo || e > hi) continue;
    const T v = T(e);
    bool want = false;
    switch (a.op) {
      case CompareOp::Eq: want = e == c; break;
      case CompareOp::Ne: want = e != c; break;
      case CompareOp::Lt: want = e < c; break;
      case CompareOp::Le: want = e <= c; break;
      case CompareOp::Gt: want = e > c; break;
      case CompareOp::Ge: want = e >= c; break;
    }
    if (contains(keys, t, reinterpret_cast<const std::byte*>(&v)) != want) return false;
  }
  return true;
}

// The key set of an atom obeys its invariants, and its meaning where it can
// be checked cheaply: integers exactly, NaN elements only under '!='.
bool atom_keys_ok(const Atom& a, ValueType t) {
  const KeySet keys = a.interval ? interval_keys(t, a.low, a.high) : compare_keys(t, a.op, a.value);
  if (!keyset_ok(t, keys)) return false;
  if (t == ValueType::F64) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    if (contains(keys, t, reinterpret_cast<const std::byte*>(&nan)) != (!a.interval && a.op == CompareOp::Ne))
      return false;
  }
  if (a.interval || !a.value.integer) return true;
  switch (t) {
    case ValueType::I8: return integer_oracle<std::int8_t>(t, a, keys);
    case ValueType::U16: return integer_oracle<std::uint16_t>(t, a, keys);
    case ValueType::I64: return integer_oracle<std::int64_t>(t, a, keys);
    case ValueType::U64: return integer_oracle<std::uint64_t>(t, a, keys);
    default: return true;
  }
}

}  // namespace

TEST_CASE("fuzz: parse_condition on mutated conditions", "[fuzz][index][condition]") {
  Mutator mutator(seed_of("parse_condition"), kConditions, kConditionTokens);
  Tally tally("parse_condition");
  const std::size_t n = iterations(30000);
  for (std::size_t i = 0; i < n; ++i) {
    const std::string text = mutator.next();
    tally.run(text, [&] {
      auto r = parse_condition(text);
      if (auto* e = std::get_if<ConditionError>(&r)) {
        tally.failed();
        tally.check(!e->message.empty(), "an error without a message", text);
        tally.check(e->position <= std::max(text.size(), kMaxLength), "an error position past the text", text);
        return;
      }
      tally.parsed();
      const Condition& c = std::get<Condition>(r);
      tally.check(text.size() <= kMaxLength, "a text longer than kMaxLength accepted", text);
      tally.check(shape_ok(c), "a malformed tree (Not without one child, And/Or with fewer than two)", text);
      tally.check(nots_of(c) <= kMaxDepth && depth_of(c) <= 3 * kMaxDepth + 3, "nesting deeper than kMaxDepth accepted",
                  text);
      std::size_t atoms = 0;
      for_each_atom(c, [&](const Atom& a) {
        ++atoms;
        tally.check(a.position < text.size(), "an atom's position past the text", text);
        tally.check(a.name != "in", "an atom named 'in'", text);
        tally.check(atom_keys_ok(a, kTypes[i % kTypes.size()]), "an atom's key set breaks its invariants", text);
      });
      tally.check(atoms <= kMaxAtoms, "more than kMaxAtoms atoms accepted", text);
      // The canonical text parses back to the same tree, and is a fixed point.
      const std::string canonical = to_text(c);
      auto again = parse_condition(canonical);
      if (!tally.check(std::holds_alternative<Condition>(again), "its canonical text is refused: " + canonical, text))
        return;
      tally.check(same_tree(c, std::get<Condition>(again)), "its canonical text parses differently: " + canonical,
                  text);
      tally.check(to_text(std::get<Condition>(again)) == canonical, "to_text is not a fixed point", text);
    });
  }
  tally.finish();
}

TEST_CASE("fuzz: parse_number on mutated constants", "[fuzz][index][values]") {
  const std::vector<std::string> corpus = {"0",      "-12",   "3.25e-7", ".5",     "+inf",  "nan",   "-0",
                                           "1e400",  "1e-400", "4e-324", "255",    "-128",  "1.5E+3",
                                           "18446744073709551616", "123456789012345678901234567890.25"};
  Mutator mutator(seed_of("parse_number"), corpus, {"e", "E", "e-", "e+", ".", "+", "-", "inf", "nan"}, 4096);
  Tally tally("indexes::parse_number");
  for (std::size_t i = 0, n = iterations(30000); i < n; ++i) {
    const std::string text = mutator.next();
    tally.run(text, [&] {
      auto num = parse_number(text);
      if (!num) {
        tally.failed();
        return;
      }
      tally.parsed();
      tally.check(num->text == text, "the text is not kept as written", text);
      std::string lower = text;
      for (char& ch : lower) ch = char(std::tolower(static_cast<unsigned char>(ch)));
      const bool nan_text = lower == "nan";
      if (std::isnan(num->value)) {
        tally.check(nan_text && !num->integer, "NaN from a text that is not nan", text);
        return;
      }
      // The value is the correctly rounded double strtod gives (the text has
      // no NUL: parse_number refused it otherwise).
      tally.check(std::memchr(text.data(), 0, text.size()) == nullptr, "a NUL byte accepted", text);
      const double want = std::strtod(text.c_str(), nullptr);
      tally.check(num->value == want && std::signbit(num->value) == std::signbit(want), "value differs from strtod",
                  text);
      if (num->integer) {
        tally.check(text.find_first_of(".eE") == std::string::npos, "an integer from a non-integer literal", text);
        tally.check(double(*num->integer) == num->value, "the exact integer disagrees with the value", text);
      }
      // Parsing is a function of the text.
      auto again = parse_number(num->text);
      tally.check(again && again->value == num->value && again->integer == num->integer, "not reproducible", text);
    });
  }
  tally.finish();
}

TEST_CASE("fuzz: parse_condition regressions", "[fuzz][index][condition]") {
  // Limits hold however the text is built: deep nesting, many atoms, long text.
  CHECK(std::holds_alternative<ConditionError>(parse_condition(std::string(100, '(') + ">3" + std::string(100, ')'))));
  CHECK(std::holds_alternative<ConditionError>(parse_condition(std::string(100, '!') + ">3")));
  // The bound itself: kMaxDepth levels of '(' and '!' parse, one more does not
  // (a fuzz mutant of 63 '!' inside '(' under an '&' is 66 nodes deep, and fine).
  CHECK(std::holds_alternative<Condition>(parse_condition(std::string(kMaxDepth, '!') + ">3")));
  CHECK(std::holds_alternative<ConditionError>(parse_condition(std::string(kMaxDepth + 1, '!') + ">3")));
  CHECK(std::holds_alternative<Condition>(parse_condition("x>3&(" + std::string(kMaxDepth - 1, '!') + "y<2|in[1,2])")));
  CHECK(std::holds_alternative<ConditionError>(parse_condition("x>3&(" + std::string(kMaxDepth, '!') + "y<2)")));
  CHECK(std::holds_alternative<ConditionError>(parse_condition(std::string(5000, '(') + ">3")));
  std::string many = ">1";
  for (int i = 0; i < 300; ++i) many += "&>1";
  CHECK(std::holds_alternative<ConditionError>(parse_condition(many)));
  CHECK(std::holds_alternative<ConditionError>(parse_condition(std::string(4097, ' ') + ">3")));
  // A NUL byte inside a number makes it malformed.
  CHECK(std::holds_alternative<ConditionError>(parse_condition(std::string(">3\0", 3))));
  CHECK(!parse_number(std::string("1\0", 2)));
}
