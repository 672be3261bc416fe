// Combining a condition's atoms (indexes/evaluate.h): evaluate_row against a
// column-wise evaluation, combine's sure and maybe rows against brute force
// on random trees and estimates, and the documented formulas by hand.
#include <catch2/catch.hpp>

#include <cstddef>
#include <memory>
#include <random>
#include <string_view>
#include <variant>
#include <vector>

#include "indexes/bitmap.h"
#include "indexes/condition.h"
#include "indexes/evaluate.h"
#include "tests/unit/support/condition_test_support.h"

using namespace mmfs::indexes;
using namespace mmfs::indexes::testing;

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
