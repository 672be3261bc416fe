// indexes/condition: the condition grammar (accepted and refused texts with
// their positions, precedence, limits) and the canonical text's round trip.
// Combining atoms is tested in test_evaluate.cc, the index-less scan in
// test_scan.cc, ORs of one array in test_disjunctions.cc.
#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "indexes/condition.h"
#include "indexes/evaluate.h"
#include "tests/unit/support/condition_test_support.h"

using namespace mmfs::indexes;
using namespace mmfs::indexes::testing;

namespace {

ConditionError refused(std::string_view text) {
  auto r = parse_condition(text);
  if (std::holds_alternative<Condition>(r))
    FAIL("'" << text << "' accepted as " << to_text(std::get<Condition>(r)));
  return std::get<ConditionError>(r);
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
