// A view's result cut into chunks (layouts/selection_chunks.h): the chunks
// tile the result in order, each a selection of its own bytes (against the
// brute-force result), and the budget chosen by the cost of each size.
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <stdexcept>
#include <vector>

#include "layouts/selection_chunks.h"
#include "tests/unit/support/selection_test_support.h"

using namespace mmfs::layouts;
using namespace mmfs::layouts::testing;

TEST_CASE("selection chunks tile the result in order, each a selection of its bytes", "[cell_copy]") {
  std::mt19937_64 rng(11);
  CellGrid g({40, 30, 20}, 8, {4, 4, 4}, {2, 1, 0});
  std::vector<std::byte> array(g.elements() * 8);
  for (auto& b : array) b = std::byte(rng());
  for (std::uint64_t budget : {8ull, 64ull, 1000ull, 5000ull, 1ull << 20}) {
    for (int k = 0; k < 20; ++k) {
      Selection sel = k == 0 ? Selection::all(g.shape()) : random_selection(g, rng);
      SelectionChunks ch(sel, g, budget);
      std::vector<std::byte> joined;
      for (std::uint64_t c = 0; c < ch.count(); ++c) {
        REQUIRE(ch.offset(c) == joined.size());
        auto part = brute(g, array, ch.selection(c));
        if (!part.empty()) {
          CHECK(ch.index_at(ch.offset(c)) == c);
          CHECK(ch.index_at(ch.offset(c) + part.size() - 1) == c);
        }
        joined.insert(joined.end(), part.begin(), part.end());
      }
      CHECK(joined == brute(g, array, sel));
      CHECK_THROWS_AS(ch.selection(ch.count()), std::out_of_range);
    }
  }
}

TEST_CASE("choose_chunk_budget: a larger chunk only when it is cheaper per byte by the gain", "[selection_chunks]") {
  using mmfs::layouts::choose_chunk_budget;
  constexpr std::uint64_t kBase = 32;
  std::vector<std::uint64_t> priced;
  auto cost_of = [&](std::map<std::uint64_t, double> table) {
    priced.clear();
    return [&priced, table](std::uint64_t b) {
      priced.push_back(b);
      return table.at(b);
    };
  };
  // Each doubling 20 % cheaper: the largest allowed.
  CHECK(choose_chunk_budget(kBase, 4, 1000, 0.9, cost_of({{32, 1.0}, {64, 0.8}, {128, 0.64}})) == 128);
  CHECK(priced == std::vector<std::uint64_t>{32, 64, 128});
  // 5 % cheaper is not worth the memory; a later size is judged against the best so far.
  CHECK(choose_chunk_budget(kBase, 4, 1000, 0.9, cost_of({{32, 1.0}, {64, 0.95}, {128, 0.85}})) == 128);
  CHECK(choose_chunk_budget(kBase, 4, 1000, 0.9, cost_of({{32, 1.0}, {64, 0.95}, {128, 0.92}})) == 32);
  CHECK(choose_chunk_budget(kBase, 4, 1000, 0.9, cost_of({{32, 1.0}, {64, 0.5}, {128, 0.48}})) == 64);
  // Capped by max_scale, and no size past the first that holds the whole result.
  CHECK(choose_chunk_budget(kBase, 2, 1000, 0.9, cost_of({{32, 1.0}, {64, 0.5}})) == 64);
  CHECK(choose_chunk_budget(kBase, 4, 60, 0.9, cost_of({{32, 1.0}, {64, 0.5}})) == 64);
  CHECK(priced == std::vector<std::uint64_t>{32, 64});
  // A result of one base chunk or less is not priced at all.
  CHECK(choose_chunk_budget(kBase, 4, 32, 0.9, cost_of({})) == kBase);
  CHECK(priced.empty());
}
