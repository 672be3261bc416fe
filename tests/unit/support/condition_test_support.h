// Conditions for the condition, evaluate and scan unit tests: parsing that
// must succeed, hand-built atoms and nodes, and random trees whose atoms
// carry an id in `position`.
#pragma once

#include <catch2/catch.hpp>

#include <cstddef>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "indexes/condition.h"
#include "indexes/values.h"

namespace mmfs::indexes::testing {

using Kind = Condition::Kind;

inline Condition parsed(std::string_view text) {
  auto r = parse_condition(text);
  if (auto* e = std::get_if<ConditionError>(&r)) FAIL("'" << text << "' refused: " << e->message);
  return std::get<Condition>(r);
}

inline Number number(std::string_view text) {
  auto n = parse_number(text);
  REQUIRE(n);
  return *n;
}

inline Condition atom(std::string name, CompareOp op, std::string_view value) {
  Condition c;
  c.atom.name = std::move(name);
  c.atom.op = op;
  c.atom.value = number(value);
  return c;
}

inline Condition interval(std::string name, std::string_view low, std::string_view high) {
  Condition c;
  c.atom.name = std::move(name);
  c.atom.interval = true;
  c.atom.low = number(low);
  c.atom.high = number(high);
  return c;
}

inline Condition node(Kind kind, std::vector<Condition> children) {
  Condition c;
  c.kind = kind;
  c.children = std::move(children);
  return c;
}

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

}  // namespace mmfs::indexes::testing
