// indexes/condition, evaluate and scan: the condition grammar (accepted and
// refused texts with their positions, precedence, limits), the canonical
// text's round trip, the three-set combination against brute force, and
// the index-less scan against contains() for every dtype.
#include <catch2/catch.hpp>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "indexes/condition.h"
#include "indexes/disjunctions.h"
#include "indexes/evaluate.h"
#include "indexes/scan.h"

using namespace mmfs::indexes;
using Kind = Condition::Kind;

namespace {

Condition parsed(std::string_view text) {
  auto r = parse_condition(text);
  if (auto* e = std::get_if<ConditionError>(&r)) FAIL("'" << text << "' refused: " << e->message);
  return std::get<Condition>(r);
}

ConditionError refused(std::string_view text) {
  auto r = parse_condition(text);
  if (std::holds_alternative<Condition>(r))
    FAIL("'" << text << "' accepted as " << to_text(std::get<Condition>(r)));
  return std::get<ConditionError>(r);
}

Number number(std::string_view text) {
  auto n = parse_number(text);
  REQUIRE(n);
  return *n;
}

Condition atom(std::string name, CompareOp op, std::string_view value) {
  Condition c;
  c.atom.name = std::move(name);
  c.atom.op = op;
  c.atom.value = number(value);
  return c;
}

Condition interval(std::string name, std::string_view low, std::string_view high) {
  Condition c;
  c.atom.name = std::move(name);
  c.atom.interval = true;
  c.atom.low = number(low);
  c.atom.high = number(high);
  return c;
}

Condition node(Kind kind, std::vector<Condition> children) {
  Condition c;
  c.kind = kind;
  c.children = std::move(children);
  return c;
}

}  // namespace

TEST_CASE("conditions: atoms with and without a name", "[index][condition]") {
  CHECK(same_tree(parsed(">3"), atom("", CompareOp::Gt, "3")));
  CHECK(same_tree(parsed("x>3"), atom("x", CompareOp::Gt, "3")));
  CHECK(same_tree(parsed("x >= -2.5e3"), atom("x", CompareOp::Ge, "-2.5e3")));
  CHECK(same_tree(parsed("  temp_2<=.5  "), atom("temp_2", CompareOp::Le, ".5")));
  CHECK(same_tree(parsed("==7"), atom("", CompareOp::Eq, "7")));
  CHECK(same_tree(parsed("!=7"), atom("", CompareOp::Ne, "7")));
  CHECK(same_tree(parsed("x!=nan"), atom("x", CompareOp::Ne, "nan")));
  CHECK(same_tree(parsed("<-inf"), atom("", CompareOp::Lt, "-inf")));
  CHECK(same_tree(parsed("<inf"), atom("", CompareOp::Lt, "inf")));
  CHECK(same_tree(parsed("a in [1,2]"), interval("a", "1", "2")));
  CHECK(same_tree(parsed("in[1,2]"), interval("", "1", "2")));
  CHECK(same_tree(parsed(" in [ -inf , 2e5 ] "), interval("", "-inf", "2e5")));
  CHECK(same_tree(parsed("index in[0,9]"), interval("index", "0", "9")));
  // "inf" and "nan" are names where a name can stand; a signed "inf" is not.
  CHECK(same_tree(parsed("inf>3"), atom("inf", CompareOp::Gt, "3")));
  CHECK(same_tree(parsed("nan<3"), atom("nan", CompareOp::Lt, "3")));
  CHECK(same_tree(parsed("a-b.c>1"), atom("a-b.c", CompareOp::Gt, "1")));
  CHECK(same_tree(parsed("+x>1"), atom("+x", CompareOp::Gt, "1")));
  CHECK(parsed("x>3").atom.name == "x");
  CHECK(parsed(">3").atom.name.empty());
  CHECK(parsed(">3").atom.value.value == 3.0);
}

TEST_CASE("conditions: atoms' positions", "[index][condition]") {
  Condition c = parsed("x>3 & ( !  y<2 | in[1,2])");
  std::vector<std::size_t> at;
  for_each_atom(c, [&](const Atom& a) { at.push_back(a.position); });
  CHECK(at == std::vector<std::size_t>{0, 11, 17});
}

TEST_CASE("conditions: precedence — ! binds tightest, then &, then |", "[index][condition]") {
  Condition a = atom("", CompareOp::Gt, "3"), b = atom("", CompareOp::Lt, "5"), c = atom("", CompareOp::Eq, "7");
  CHECK(same_tree(parsed(">3&<5|==7"), node(Kind::Or, {node(Kind::And, {a, b}), c})));
  CHECK(same_tree(parsed("==7|>3&<5"), node(Kind::Or, {c, node(Kind::And, {a, b})})));
  CHECK(same_tree(parsed(">3&(<5|==7)"), node(Kind::And, {a, node(Kind::Or, {b, c})})));
  CHECK(same_tree(parsed("!>3&<5"), node(Kind::And, {node(Kind::Not, {a}), b})));
  CHECK(same_tree(parsed("!(>3&<5)"), node(Kind::Not, {node(Kind::And, {a, b})})));
  CHECK(same_tree(parsed("!!(>3)"), node(Kind::Not, {node(Kind::Not, {a})})));
  CHECK(same_tree(parsed("(>3)"), a));
  CHECK(same_tree(parsed("((((>3))))"), a));
  CHECK(same_tree(parsed(">3&<5&==7"), node(Kind::And, {a, b, c})));
  CHECK(same_tree(parsed(">3|<5|==7"), node(Kind::Or, {a, b, c})));
  // Parentheses keep their level: (a&b)&c is two Ands.
  CHECK(same_tree(parsed("(>3&<5)&==7"), node(Kind::And, {node(Kind::And, {a, b}), c})));
  // "!==" is '!' before "=="; "!=" alone is the operator.
  CHECK(same_tree(parsed("!==7"), node(Kind::Not, {c})));
  CHECK(same_tree(parsed("!!=7"), node(Kind::Not, {atom("", CompareOp::Ne, "7")})));
  // Truth tables agree with the grammar's precedence.
  Condition t = parsed("p>0|q>0&r>0");
  for (int bits = 0; bits < 8; ++bits) {
    auto truth = [&](const Atom& at) { return bool(bits & (1 << (at.name[0] - 'p'))); };
    bool p = bits & 1, q = bits & 2, r = bits & 4;
    CHECK(evaluate_row(t, truth) == (p || (q && r)));
    CHECK(evaluate_row(parsed("!p>0&q>0"), truth) == (!p && q));
    CHECK(evaluate_row(parsed("!(p>0|q>0)|r>0"), truth) == (!(p || q) || r));
  }
}

TEST_CASE("conditions: refused texts say where and why", "[index][condition]") {
  struct Case {
    std::string text;
    std::size_t position;
    std::string message;  // a part of it
  };
  std::vector<Case> cases = {
      {"", 0, "empty condition"},
      {"   ", 3, "empty condition"},
      {"x>=", 3, "expected a number after '>=' at 3"},
      {"x >= ", 5, "expected a number after '>=' at 5"},
      {"x>=&y<1", 3, "expected a number after '>='"},
      {">3)", 2, "unbalanced ')' at 2"},
      {"(>3", 3, "missing ')' for the '(' at 0"},
      {"()", 1, "expected a condition after '(', found ')'"},
      {"x=<3", 1, "unknown operator '=<' at 1"},
      {"x=3", 1, "unknown operator '='"},
      {"x=>3", 1, "unknown operator '=>'"},
      {"x<>3", 1, "unknown operator '<>'"},
      {"x>>3", 1, "unknown operator '>>'"},
      {"x!>3", 1, "unknown operator '!>'"},
      {">3x", 1, "malformed number '3x' at 1"},
      {">1e", 1, "malformed number '1e'"},
      {">3 y", 3, "unexpected 'y'"},
      {">3 4", 3, "unexpected '4'"},
      {">3&", 3, "expected a condition after '&' at 3"},
      {">3|", 3, "expected a condition after '|'"},
      {"&>3", 0, "expected a condition, found '&'"},
      {"!", 1, "expected a condition after '!'"},
      {"x", 1, "expected an operator or 'in' after 'x'"},
      {"x y>3", 2, "expected an operator or 'in' after 'x', found 'y'"},
      {"3>x", 0, "unexpected number '3'"},
      {"-inf>3", 0, "unexpected number '-inf'"},
      {".5<x", 0, "unexpected number"},
      {"x in 1,2", 5, "expected '[' after 'in'"},
      {"in>3", 2, "expected '[' after 'in'"},
      {"in[1 2]", 5, "expected ',' after '1'"},
      {"in[1,2", 6, "expected ']' after '2'"},
      {"in[,2]", 3, "expected a number after '['"},
      {"in[1,]", 5, "expected a number after ','"},
      {"in[1,2]]", 7, "unexpected ']'"},
      {"x in in[1,2]", 5, "expected '[' after 'in'"},
      {"x>3 & (y<1", 10, "missing ')' for the '(' at 6"},
      {"x>3 ] ", 4, "unexpected ']'"},
  };
  for (const auto& c : cases) {
    INFO("text: '" << c.text << "'");
    ConditionError e = refused(c.text);
    CHECK(e.position == c.position);
    CHECK_THAT(e.message, Catch::Contains(c.message));
    CHECK(e.message.find('\n') == std::string::npos);
  }
}

TEST_CASE("conditions: error messages stay one short printable line", "[index][condition]") {
  ConditionError e = refused(">" + std::string(1000, 'a'));
  CHECK(e.message == "malformed number 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'... at 1");
  e = refused(std::string("x>3\x01\n"));
  CHECK(e.message == "malformed number '3\\x01' at 2");
  e = refused(std::string("x>3 \0", 5));
  CHECK(e.message == "unexpected '\\x00', expected '&', '|' or the end at 4");
}

TEST_CASE("conditions: nesting, atom count and length are bounded", "[index][condition]") {
  auto nested = [](std::size_t depth) { return std::string(depth, '(') + ">3" + std::string(depth, ')'); };
  CHECK(parsed(nested(kMaxDepth)).kind == Kind::Atom);
  ConditionError e = refused(nested(kMaxDepth + 1));
  CHECK(e.position == kMaxDepth);
  CHECK_THAT(e.message, Catch::Contains("nesting deeper than 64"));
  // Negations count as nesting too.
  CHECK(parsed(std::string(kMaxDepth, '!') + ">3").kind == Kind::Not);
  CHECK_THAT(refused(std::string(kMaxDepth + 1, '!') + ">3").message, Catch::Contains("nesting deeper"));
  CHECK_THAT(refused(std::string(4000, '(')).message, Catch::Contains("nesting deeper than 64"));
  CHECK_THAT(refused(std::string(100000, '(')).message, Catch::Contains("longer than 4096"));
  CHECK_THAT(refused(std::string(100000, '!')).message, Catch::Contains("longer than 4096"));

  std::string many = ">1";
  for (std::size_t i = 1; i < kMaxAtoms; ++i) many += "&>1";
  CHECK(parsed(many).children.size() == kMaxAtoms);
  CHECK_THAT(refused(many + "|>2").message, Catch::Contains("more than 256 atoms"));
  CHECK(refused(many + "|>2").position == many.size() + 1);

  std::string longest = "x>" + std::string(kMaxLength - 2, '1');
  CHECK(parsed(longest).atom.value.text.size() == kMaxLength - 2);
  CHECK(refused(longest + "1").position == kMaxLength);
}

TEST_CASE("conditions: names in order of first appearance", "[index][condition]") {
  CHECK(names(parsed("b>1&a<2|b==3|>4&!(c in[1,2]|a>0)")) == std::vector<std::string>{"b", "a", "", "c"});
  CHECK(names(parsed(">1")) == std::vector<std::string>{""});
}

namespace {

// Random trees whose atoms carry their index in `position` (an id for the
// brute-force tests). Depth stays well inside the parser's bound.
struct TreeMaker {
  std::mt19937_64 rng;
  std::size_t atoms = 0;
  std::vector<std::string> names{"", "", "x", "temp_2", "a.b", "in2", "inf", "nan", "Z-9", "+y", "in_", "ä"};
  std::vector<std::string> numbers{"3", "-2.5", "1e10", "inf", "-inf", "nan", "+7", ".5", "1E-3", "0", "-0.0",
                                   "18446744073709551615", "-9223372036854775808", "+.25e+2", "INF"};

  std::size_t pick(std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng); }

  Condition leaf() {
    const std::string& name = names[pick(names.size())];
    Condition c = pick(4) == 0 ? interval(name, numbers[pick(numbers.size())], numbers[pick(numbers.size())])
                               : atom(name, CompareOp(pick(6)), numbers[pick(numbers.size())]);
    c.atom.position = atoms++;
    return c;
  }

  Condition tree(int depth) {
    if (depth == 0 || pick(3) == 0) return leaf();
    switch (pick(3)) {
      case 0: return node(Kind::Not, {tree(depth - 1)});
      case 1: {
        std::vector<Condition> children;
        for (std::size_t i = 0, n = 2 + pick(3); i < n; ++i) children.push_back(tree(depth - 1));
        return node(Kind::And, std::move(children));
      }
      default: {
        std::vector<Condition> children;
        for (std::size_t i = 0, n = 2 + pick(3); i < n; ++i) children.push_back(tree(depth - 1));
        return node(Kind::Or, std::move(children));
      }
    }
  }
};

}  // namespace

TEST_CASE("conditions: to_text round trips on random trees", "[index][condition]") {
  TreeMaker maker{std::mt19937_64(7)};
  for (int i = 0; i < 3000; ++i) {
    Condition c = maker.tree(6);
    std::string text = to_text(c);
    INFO(text);
    Condition back = parsed(text);
    REQUIRE(same_tree(back, c));
    CHECK(to_text(back) == text);
    bool blank_only_before_in = text.find(' ') == std::string::npos || text.find(" in[") != std::string::npos;
    CHECK(blank_only_before_in);
  }
  // Blanks and redundant parentheses disappear; numbers stay as written.
  CHECK(to_text(parsed(" ( x > 1E3 ) & ( (y<2) | !(z in [ 1 , 2 ]) )")) == "x>1E3&(y<2|!z in[1,2])");
  CHECK(to_text(parsed("(a>1&b>1)&c>1")) == "(a>1&b>1)&c>1");
  CHECK(to_text(parsed("a>1&b>1|c>1")) == "a>1&b>1|c>1");
  CHECK(to_text(parsed("(a>1|b>1)|c>1")) == "(a>1|b>1)|c>1");
  CHECK(to_text(parsed("!(==3)")) == "!==3");
  CHECK(to_text(parsed("!(!=3)")) == "!!=3");
  // Trees differing anywhere are told apart.
  CHECK_FALSE(same_tree(parsed("x>1"), parsed("x>1.0")));
  CHECK_FALSE(same_tree(parsed("x>1"), parsed("x>=1")));
  CHECK_FALSE(same_tree(parsed("x>1"), parsed("y>1")));
  CHECK_FALSE(same_tree(parsed("x>1&y>1"), parsed("x>1|y>1")));
  CHECK_FALSE(same_tree(parsed("in[1,2]"), parsed("in[1,3]")));
}

namespace {

using Rows = std::vector<bool>;

// Roaring64Map::operator== of CRoaring 0.2.66 misreads maps holding empty
// buckets (it can loop or read past the end), and set operations leave
// such buckets: compare through the symmetric difference instead.

Bitmap to_bitmap(const Rows& r) {
  Bitmap b;
  for (std::size_t i = 0; i < r.size(); ++i)
    if (r[i]) b.add(std::uint64_t(i));
  return b;
}

// The condition's truth on every row, from each atom's truth.
Rows truth_of(const Condition& c, const std::vector<Rows>& atom_truth, std::size_t rows) {
  Rows out(rows);
  for (std::size_t i = 0; i < rows; ++i)
    out[i] = evaluate_row(c, [&](const Atom& a) { return bool(atom_truth[a.position][i]); });
  return out;
}

// A second evaluation written as set algebra on whole columns.
Rows columns(const Condition& c, const std::vector<Rows>& atom_truth, std::size_t rows) {
  if (c.kind == Kind::Atom) return atom_truth[c.atom.position];
  Rows out(rows, c.kind == Kind::And);
  if (c.kind == Kind::Not) {
    Rows child = columns(c.children[0], atom_truth, rows);
    for (std::size_t i = 0; i < rows; ++i) out[i] = !child[i];
    return out;
  }
  for (const Condition& child : c.children) {
    Rows r = columns(child, atom_truth, rows);
    for (std::size_t i = 0; i < rows; ++i) out[i] = c.kind == Kind::And ? (out[i] && r[i]) : (out[i] || r[i]);
  }
  return out;
}

}  // namespace

TEST_CASE("evaluate_row agrees with a column-wise evaluation", "[index][evaluate]") {
  TreeMaker maker{std::mt19937_64(11)};
  std::mt19937_64 rng(12);
  for (int t = 0; t < 300; ++t) {
    maker.atoms = 0;
    Condition c = maker.tree(5);
    const std::size_t rows = 64;
    std::vector<Rows> truth(maker.atoms, Rows(rows));
    for (auto& r : truth)
      for (std::size_t i = 0; i < rows; ++i) r[i] = rng() & 1;
    INFO(to_text(c));
    REQUIRE(truth_of(c, truth, rows) == columns(c, truth, rows));
  }
}

TEST_CASE("combine: sure rows match, rows outside sure|maybe do not (brute force)", "[index][evaluate]") {
  TreeMaker maker{std::mt19937_64(21)};
  std::mt19937_64 rng(22);
  int exact_checked = 0, counts = 0;
  for (int t = 0; t < 400; ++t) {
    maker.atoms = 0;
    Condition c = maker.tree(5);
    const std::size_t rows = 1 + rng() % 300;
    // Per atom: its truth, a random part of it as sure, the rest of it plus
    // random false rows as maybe. Some trees get exact atoms (maybe empty).
    bool exact = t % 4 == 0;
    std::vector<Rows> truth(maker.atoms, Rows(rows));
    std::vector<Estimate> estimate(maker.atoms);
    for (std::size_t a = 0; a < maker.atoms; ++a) {
      Rows sure(rows), maybe(rows);
      unsigned density = unsigned(rng() % 5);  // skew some atoms to all/none
      for (std::size_t i = 0; i < rows; ++i) {
        bool v = density == 0 ? false : density == 4 ? true : (rng() % 4) < density;
        truth[a][i] = v;
        bool s = v && (exact || rng() % 2);
        sure[i] = s;
        maybe[i] = !s && (v || (!exact && rng() % 3 == 0));
      }
      // Some atoms lend their sure rows (as an index's cache does).
      if (rng() % 2) {
        estimate[a] = {Bitmap(), to_bitmap(maybe), std::make_shared<const Bitmap>(to_bitmap(sure))};
      } else {
        estimate[a] = {to_bitmap(sure), to_bitmap(maybe), nullptr};
      }
    }
    std::size_t calls = 0;
    Estimate e = combine(c, rows, [&](const Atom& a) {
      ++calls;
      return estimate[a.position];
    });
    CHECK(calls == maker.atoms);
    Bitmap answer = to_bitmap(truth_of(c, truth, rows));
    INFO(to_text(c) << " rows " << rows);
    REQUIRE((e.sure & e.maybe).isEmpty());
    REQUIRE((e.sure - answer).isEmpty());                // sure rows match
    REQUIRE((answer - (e.sure | e.maybe)).isEmpty());    // the rest do not
    REQUIRE(((e.sure | e.maybe) - range_bitmap(0, rows)).isEmpty());
    if (exact) {
      REQUIRE(same_rows(e.sure, answer));
      REQUIRE(e.maybe.isEmpty());
      ++exact_checked;
    }
    // For a count: the number of matching rows when every row is decided,
    // else the same estimate.
    auto counted = combine_for_count(c, rows, [&](const Atom& a) { return estimate[a.position]; });
    if (auto* n = std::get_if<std::uint64_t>(&counted)) {
      REQUIRE(*n == answer.cardinality());
      ++counts;
    } else {
      REQUIRE(same_rows(std::get<Estimate>(counted).sure, e.sure));
      REQUIRE(same_rows(std::get<Estimate>(counted).maybe, e.maybe));
    }
  }
  CHECK(exact_checked == 100);
  CHECK(counts > 10);
}

TEST_CASE("combine: the documented formulas", "[index][evaluate]") {
  // Rows 0..9; atom a: sure {0,1}, maybe {2,3}; atom b: sure {1,2}, maybe {4}.
  auto set = [](std::initializer_list<std::uint64_t> v) {
    Bitmap b;
    for (auto x : v) b.add(x);
    return b;
  };
  std::vector<Estimate> est{{set({0, 1}), set({2, 3}), nullptr}, {set({1, 2}), set({4}), nullptr}};
  auto run = [&](std::string_view text) {
    return combine(parsed(text), 10, [&](const Atom& a) { return est[a.name == "b"]; });
  };
  Estimate n = run("!a>0");
  CHECK(same_rows(n.sure, set({4, 5, 6, 7, 8, 9})));
  CHECK(same_rows(n.maybe, set({2, 3})));
  Estimate x = run("a>0&b>0");
  CHECK(same_rows(x.sure, set({1})));
  CHECK(same_rows(x.maybe, set({2})));  // (0123) & (124) - 1
  Estimate o = run("a>0|b>0");
  CHECK(same_rows(o.sure, set({0, 1, 2})));
  CHECK(same_rows(o.maybe, set({3, 4})));
}

namespace {

template <typename T>
std::vector<T> special_values() {
  using L = std::numeric_limits<T>;
  std::vector<T> v{T(0), T(1), L::lowest(), L::max(), L::min(), T(L::max() - 1), T(L::lowest() + 1)};
  if constexpr (std::is_floating_point_v<T>) {
    v.insert(v.end(), {T(-0.0), L::infinity(), -L::infinity(), L::quiet_NaN(), -L::quiet_NaN(), L::denorm_min(),
                       -L::denorm_min(), T(0.1), T(-2.5), std::nextafter(T(1), T(2))});
    T nan_payload = std::bit_cast<T>(std::bit_cast<std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>(
                                         L::quiet_NaN()) |
                                     1);
    v.push_back(nan_payload);
  } else if constexpr (std::is_signed_v<T>) {
    v.push_back(T(-1));
  }
  return v;
}

template <typename T>
std::vector<T> random_elements(std::mt19937_64& rng, std::size_t n) {
  std::vector<T> specials = special_values<T>();
  std::vector<T> out(n);
  for (auto& x : out) {
    std::uint64_t r = rng();
    if (r % 4 == 0) {
      x = specials[(r >> 8) % specials.size()];
    } else if constexpr (std::is_floating_point_v<T>) {
      x = T(std::int64_t(r >> 40) % 200 - 100) / T(4);  // repeats, so ranges' ends hit elements
    } else {
      x = T(std::int64_t(r >> 40) % 200 - 100);
    }
  }
  return out;
}

template <typename T>
std::uint64_t key(ValueType t, T x) {
  return value_key(t, reinterpret_cast<const std::byte*>(&x));
}

// Disjoint ascending key ranges whose ends are keys of elements, their
// neighbours, or the type's extremes.
template <typename T>
KeySet random_keys(std::mt19937_64& rng, ValueType t, const std::vector<T>& elements) {
  std::vector<std::uint64_t> points;
  std::size_t n = 2 * (rng() % 4);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t k;
    T x = elements[rng() % elements.size()];
    switch (rng() % 5) {
      case 0: k = min_key(t); break;
      case 1: k = max_key(t); break;
      default: k = is_nan(t, reinterpret_cast<const std::byte*>(&x)) ? min_key(t) : key(t, x);
    }
    if (rng() % 3 == 0 && k > min_key(t)) --k;
    if (rng() % 3 == 0 && k < max_key(t)) ++k;
    points.push_back(k);
  }
  std::sort(points.begin(), points.end());
  KeySet s;
  for (std::size_t i = 0; i + 1 < points.size(); i += 2) {
    if (!s.ranges.empty() && points[i] <= s.ranges.back().second) continue;
    s.ranges.push_back({points[i], points[i + 1]});
  }
  s.nan = rng() % 2;
  return s;
}

template <typename T>
void check_scan(ValueType t) {
  std::mt19937_64 rng(std::uint64_t(t) + 100);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<T> elements = random_elements<T>(rng, 1 + rng() % 9000);
    KeySet keys = random_keys(rng, t, elements);
    // Rows near 2^32 cross a bucket of the 64-bit map.
    std::uint64_t first = trial % 3 == 0 ? (std::uint64_t(1) << 32) - rng() % 5000 : rng() % 100000;
    const auto* bytes = reinterpret_cast<const std::byte*>(elements.data());
    Bitmap expect;
    std::uint64_t matches = 0;
    for (std::size_t i = 0; i < elements.size(); ++i)
      if (contains(keys, t, bytes + i * sizeof(T))) {
        expect.add(first + i);
        ++matches;
      }
    // scan_keys adds to what is there: a row far away stays.
    Bitmap got;
    got.add(std::uint64_t(1) << 40);
    expect.add(std::uint64_t(1) << 40);
    scan_keys(t, keys, bytes, elements.size(), first, &got);
    INFO(type_name(t) << " trial " << trial << " ranges " << keys.ranges.size() << " nan " << keys.nan);
    REQUIRE(same_rows(got, expect));
    REQUIRE(count_keys(t, keys, bytes, elements.size()) == matches);
    // matching_indices: the same elements, as ascending indices.
    std::vector<std::uint32_t> indices(elements.size() + 1, 0xFFFFFFFFu);
    const std::size_t n = matching_indices(t, keys, bytes, elements.size(), indices.data());
    REQUIRE(n == matches);
    std::size_t k = 0;
    for (std::size_t i = 0; i < elements.size(); ++i)
      if (contains(keys, t, bytes + i * sizeof(T))) REQUIRE(indices[k++] == i);
    CHECK(indices[elements.size()] == 0xFFFFFFFFu);  // nothing written past `count`
  }
}

}  // namespace

TEST_CASE("scan_keys and count_keys agree with contains() for every dtype", "[index][scan]") {
  check_scan<std::int8_t>(ValueType::I8);
  check_scan<std::uint8_t>(ValueType::U8);
  check_scan<std::int16_t>(ValueType::I16);
  check_scan<std::uint16_t>(ValueType::U16);
  check_scan<std::int32_t>(ValueType::I32);
  check_scan<std::uint32_t>(ValueType::U32);
  check_scan<std::int64_t>(ValueType::I64);
  check_scan<std::uint64_t>(ValueType::U64);
  check_scan<float>(ValueType::F32);
  check_scan<double>(ValueType::F64);
}

namespace {

// PrefixMatcher against contains() of the element's completions: a Yes or
// No holds for the lowest and highest completion, the element itself and
// random ones; a Maybe only where a range's end lies between the two ends'
// keys or an end is NaN.
template <typename T>
void check_prefix_matcher(ValueType t) {
  std::mt19937_64 rng(std::uint64_t(t) + 300);
  std::size_t decided = 0, maybes = 0;
  for (int trial = 0; trial < 60; ++trial) {
    std::vector<T> elements = random_elements<T>(rng, 1 + rng() % 2000);
    KeySet keys = random_keys(rng, t, elements);
    const KeySet norm = normalized(keys);
    for (std::uint32_t unknown = 1; unknown < sizeof(T); ++unknown) {
      const PrefixMatcher match(t, keys, unknown);
      const std::uint64_t mask = (std::uint64_t(1) << (8 * unknown)) - 1;
      for (const T& x : elements) {
        std::uint64_t bits = 0;
        std::memcpy(&bits, &x, sizeof x);
        const std::uint64_t lo = bits & ~mask, hi = lo | mask;
        const PrefixMatch got = match(lo);
        auto in = [&](std::uint64_t v) { return contains(keys, t, reinterpret_cast<const std::byte*>(&v)); };
        INFO(type_name(t) << " unknown " << unknown << " bits " << bits);
        if (got != PrefixMatch::Maybe) {
          ++decided;
          const bool yes = got == PrefixMatch::Yes;
          CHECK(in(lo) == yes);
          CHECK(in(hi) == yes);
          CHECK(in(bits) == yes);
          for (int i = 0; i < 2; ++i) CHECK(in(lo | (rng() & mask)) == yes);
          continue;
        }
        ++maybes;
        const auto* a = reinterpret_cast<const std::byte*>(&lo);
        const auto* b = reinterpret_cast<const std::byte*>(&hi);
        if (is_float(t) && (is_nan(t, a) || is_nan(t, b))) continue;
        std::uint64_t k1 = value_key(t, a), k2 = value_key(t, b);
        if (k1 > k2) std::swap(k1, k2);
        bool end_inside = false;
        for (auto [x0, y0] : norm.ranges) end_inside |= (k1 < x0 && x0 <= k2) || (k1 <= y0 && y0 < k2);
        CHECK(end_inside);
      }
    }
  }
  // Maybe is exact (above); these elements are small integers, so many
  // share their high bytes with a range's end and only some are decided.
  CHECK(decided > 0);
  CHECK(maybes > 0);
}

}  // namespace

TEST_CASE("PrefixMatcher decides from the high bytes exactly when every completion agrees", "[index][scan]") {
  check_prefix_matcher<std::int16_t>(ValueType::I16);
  check_prefix_matcher<std::uint16_t>(ValueType::U16);
  check_prefix_matcher<std::int32_t>(ValueType::I32);
  check_prefix_matcher<std::uint32_t>(ValueType::U32);
  check_prefix_matcher<std::int64_t>(ValueType::I64);
  check_prefix_matcher<std::uint64_t>(ValueType::U64);
  check_prefix_matcher<float>(ValueType::F32);
  check_prefix_matcher<double>(ValueType::F64);
  // -0.0 and +0.0 are one value; NaN ends leave it to the whole element.
  const KeySet zero{{{key(ValueType::F64, 0.0), key(ValueType::F64, 0.0)}}, false};
  const PrefixMatcher m(ValueType::F64, zero, 4);
  std::uint64_t neg_zero = 0;
  const double nz = -0.0;
  std::memcpy(&neg_zero, &nz, 8);
  CHECK(m(neg_zero) == PrefixMatch::Maybe);  // -0.0 down to -tiny: some are 0, some not
  const double big = 1e300;
  std::uint64_t big_bits = 0;
  std::memcpy(&big_bits, &big, 8);
  CHECK(m(big_bits & ~0xFFFFFFFFull) == PrefixMatch::No);
  const std::uint64_t nan_prefix = 0x7FF8000000000000ull;
  CHECK(PrefixMatcher(ValueType::F64, KeySet{{}, true}, 4)(nan_prefix) == PrefixMatch::Maybe);
  CHECK_THROWS(PrefixMatcher(ValueType::F64, zero, 8));
}

TEST_CASE("scan_keys: -0.0 is 0, NaN only by the nan flag, infinities are values", "[index][scan]") {
  std::vector<double> v{-0.0, 0.0, std::nan(""), -INFINITY, INFINITY, 1.5};
  const auto* bytes = reinterpret_cast<const std::byte*>(v.data());
  auto rows = [&](KeySet s) {
    Bitmap b;
    scan_keys(ValueType::F64, s, bytes, v.size(), 0, &b);
    CHECK(count_keys(ValueType::F64, s, bytes, v.size()) == b.cardinality());
    return b.toString();
  };
  std::uint64_t zero = key(ValueType::F64, 0.0);
  CHECK(rows({{{zero, zero}}, false}) == "{0,1}");
  CHECK(rows({{{min_key(ValueType::F64), max_key(ValueType::F64)}}, false}) == "{0,1,3,4,5}");
  CHECK(rows({{}, true}) == "{2}");
  CHECK(rows({{{max_key(ValueType::F64), max_key(ValueType::F64)}}, true}) == "{2,4}");
  CHECK(rows({{}, false}) == "{}");
}

TEST_CASE("scan_keys: float64 throughput, one range", "[.][bench][index][scan]") {
  std::mt19937_64 rng(5);
  std::vector<double> v(std::size_t(1) << 24);  // 128 MiB
  for (auto& x : v) x = std::uniform_real_distribution<double>(0, 1000)(rng);
  const auto* bytes = reinterpret_cast<const std::byte*>(v.data());
  for (double selectivity : {0.001, 0.01, 0.1, 0.5}) {
    KeySet s{{{key(ValueType::F64, 100.0), key(ValueType::F64, 100.0 + 1000 * selectivity)}}, false};
    double best_scan = 1e9, best_count = 1e9;
    std::uint64_t matched = 0;
    for (int rep = 0; rep < 5; ++rep) {
      Bitmap b;
      auto t0 = std::chrono::steady_clock::now();
      for (std::size_t off = 0; off < v.size(); off += std::size_t(1) << 22)  // 32 MiB chunks
        scan_keys(ValueType::F64, s, bytes + off * 8, std::size_t(1) << 22, off, &b);
      auto t1 = std::chrono::steady_clock::now();
      matched = count_keys(ValueType::F64, s, bytes, v.size());
      auto t2 = std::chrono::steady_clock::now();
      best_scan = std::min(best_scan, std::chrono::duration<double>(t1 - t0).count());
      best_count = std::min(best_count, std::chrono::duration<double>(t2 - t1).count());
      REQUIRE(b.cardinality() == matched);
    }
    double gb = double(v.size() * 8) / 1e9;
    WARN("selectivity " << selectivity << ": scan_keys " << gb / best_scan << " GB/s, count_keys "
                        << gb / best_count << " GB/s (" << matched << " rows)");
  }
}

TEST_CASE("conditions: atoms of one array joined by OR become one atom of their united keys", "[index][condition]") {
  auto parse = [](const char* text) {
    auto c = parse_condition(text);
    REQUIRE(std::holds_alternative<Condition>(c));
    return std::get<Condition>(c);
  };
  auto type_of = [](const std::string& name) -> std::optional<ValueType> {
    if (name == "missing") return std::nullopt;
    return ValueType::I32;
  };
  auto keys = [](const char* text) {
    const Condition c = std::get<Condition>(parse_condition(text));
    return atom_keys(c.atom, ValueType::I32);
  };
  // Nested ORs of one array merge into one atom; its keys are the union.
  Condition c = parse("(a==1|a==3)|a in [10,20]");
  std::map<const Atom*, KeySet> united;
  merge_disjunctions(&c, type_of, &united);
  REQUIRE(c.kind == Condition::Kind::Atom);
  REQUIRE(united.size() == 1);
  REQUIRE(united.count(&c.atom) == 1);
  CHECK(united.at(&c.atom) == unite(unite(keys("a==1"), keys("a==3")), keys("in[10,20]")));
  CHECK(united.at(&c.atom).ranges.size() == 3);
  // `!=` matches NaN, and so does a union holding it.
  Condition ne = parse("x!=1|x==1");
  united.clear();
  merge_disjunctions(&ne, [](const std::string&) { return std::optional(ValueType::F64); }, &united);
  REQUIRE(united.size() == 1);
  CHECK(united.begin()->second.nan);
  // Two arrays, a NOT, an AND or an unknown NAME: left as they are.
  for (const char* text : {"a==1|b==2", "a==1|!a==2", "a==1|(a==2&a==3)", "missing==1|missing==2"}) {
    Condition t = parse(text);
    const Condition before = t;
    united.clear();
    merge_disjunctions(&t, type_of, &united);
    INFO(text);
    CHECK(united.empty());
    CHECK(same_tree(t, before));
  }
  // Inside an AND, only the OR merges.
  Condition mixed = parse("b>2&(a==1|a==2)");
  united.clear();
  merge_disjunctions(&mixed, type_of, &united);
  REQUIRE(mixed.kind == Condition::Kind::And);
  CHECK(mixed.children[1].kind == Condition::Kind::Atom);
  CHECK(united.size() == 1);
}
