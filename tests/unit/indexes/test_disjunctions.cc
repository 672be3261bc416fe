// Atoms of one array joined by OR as one atom of their united keys
// (indexes/disjunctions.h): the keys of an atom by hand, which ORs merge and
// which are left as they are.
#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "indexes/condition.h"
#include "indexes/disjunctions.h"
#include "indexes/values.h"

using namespace mmfs::indexes;

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

namespace {

// An int32's key: its value widened to 64 bits, sign bit flipped (order-preserving).
std::uint64_t k32(std::int64_t v) { return std::uint64_t(v) ^ (std::uint64_t(1) << 63); }

KeySet keys_of(const char* text, ValueType t) {
  auto c = parse_condition(text);
  REQUIRE(std::holds_alternative<Condition>(c));
  REQUIRE(std::get<Condition>(c).kind == Condition::Kind::Atom);
  return atom_keys(std::get<Condition>(c).atom, t);
}

using Ranges = std::vector<std::pair<std::uint64_t, std::uint64_t>>;

}  // namespace

TEST_CASE("atom_keys: comparisons and intervals as key ranges of the dtype, by hand", "[index][condition]") {
  const std::uint64_t lo = k32(-2147483648LL), hi = k32(2147483647LL);
  CHECK(keys_of("x==5", ValueType::I32) == KeySet{Ranges{{k32(5), k32(5)}}, false});
  CHECK(keys_of("x<3", ValueType::I32) == KeySet{Ranges{{lo, k32(2)}}, false});
  CHECK(keys_of("x>2.5", ValueType::I32) == KeySet{Ranges{{k32(3), hi}}, false});  // no int32 between 2.5 and 3
  CHECK(keys_of("x>=-7", ValueType::I32) == KeySet{Ranges{{k32(-7), hi}}, false});
  CHECK(keys_of("x!=0", ValueType::I32) == KeySet{Ranges{{lo, k32(-1)}, {k32(1), hi}}, false});
  CHECK(keys_of("x in [10, 20]", ValueType::I32) == KeySet{Ranges{{k32(10), k32(20)}}, false});
  CHECK(keys_of("x in [20, 10]", ValueType::I32).ranges.empty());  // low above high: nothing
  CHECK(keys_of("x==3000000000", ValueType::I32).ranges.empty());  // no int32 holds it
  // Unsigned keys are the values themselves.
  CHECK(keys_of("x in [1, 4]", ValueType::U8) == KeySet{Ranges{{1, 4}}, false});
  CHECK(keys_of("x<=300", ValueType::U8) == KeySet{Ranges{{0, 255}}, false});
  // Only != and a comparison with NaN's complement match NaN.
  CHECK(keys_of("x!=1", ValueType::F64).nan);
  CHECK_FALSE(keys_of("x==1", ValueType::F64).nan);
  CHECK_FALSE(keys_of("x in [0, 1]", ValueType::F64).nan);
}

TEST_CASE("merge_disjunctions: the merged atom is the first child's, with its name and position",
          "[index][condition]") {
  auto c = parse_condition("b>0&(a==7|a==1|a==4)");
  REQUIRE(std::holds_alternative<Condition>(c));
  Condition tree = std::get<Condition>(c);
  const Atom first = tree.children[1].children[0].atom;
  std::map<const Atom*, KeySet> united;
  std::size_t asked = 0;
  merge_disjunctions(&tree, [&](const std::string& name) -> std::optional<ValueType> {
    ++asked;
    CHECK(name == "a");
    return ValueType::I32;
  }, &united);
  CHECK(asked == 1);  // only the OR's name; the AND's child b is no OR
  const Condition& merged = tree.children[1];
  REQUIRE(merged.kind == Condition::Kind::Atom);
  CHECK(merged.atom.name == "a");
  CHECK(merged.atom.position == first.position);
  CHECK(merged.atom.op == CompareOp::Eq);
  REQUIRE(united.count(&merged.atom) == 1);
  CHECK(united.at(&merged.atom) == KeySet{Ranges{{k32(1), k32(1)}, {k32(4), k32(4)}, {k32(7), k32(7)}}, false});
  // Adjacent keys unite into one range.
  auto d = parse_condition("a==1|a==2|a in [3, 5]");
  Condition adjacent = std::get<Condition>(d);
  united.clear();
  merge_disjunctions(&adjacent, [](const std::string&) { return std::optional(ValueType::I32); }, &united);
  CHECK(united.at(&adjacent.atom) == KeySet{Ranges{{k32(1), k32(5)}}, false});
}
