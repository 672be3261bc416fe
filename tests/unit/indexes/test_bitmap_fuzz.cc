// [fuzz] indexes/bitmap: mutants of serialized bitmaps (an index's stored
// bitmaps are untrusted bytes) through deserialize() and
// or_serialized_into(). CRoaring 0.2.66's readSafe bounds its reads but
// accepts containers that break its invariants (unsorted arrays, overlapping
// runs, wrong cardinalities), so deserialize checks every container itself:
// a bitmap it accepts must iterate ascending, count what it iterates,
// contain what it iterates and round-trip; or_serialized_into must accept
// exactly what deserialize accepts (within its words) and set the same rows.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "indexes/bitmap.h"
#include "tests/unit/support/fuzz_support.h"

using namespace mmfs::indexes;
using namespace mmfs::testing::fuzz;

namespace {

std::vector<std::string> corpus() {
  std::vector<std::string> out;
  out.push_back(serialize(Bitmap()));
  Bitmap small;
  for (std::uint64_t r : {1, 5, 9, 70000, 70001}) small.add(r);
  out.push_back(serialize(small));
  out.push_back(serialize(range_bitmap(5, 70000)));                       // runs
  Bitmap dense;
  for (std::uint64_t r = 0; r < 65536; r += 3) dense.add(r);              // a bitset container
  out.push_back(serialize(dense));
  Bitmap mixed = range_bitmap(100, 200) | range_bitmap((1ull << 32) - 3, (1ull << 32) + 5);
  mixed.add(std::uint64_t(1) << 40);                                      // several buckets
  out.push_back(serialize(mixed));
  Bitmap arrays;
  for (std::uint64_t r = 0; r < 131072; r += 997) arrays.add(r);          // two array containers
  out.push_back(serialize(arrays));
  return out;
}

// Rows of words (row r: bit r % 64 of word r / 64).
std::vector<std::uint64_t> rows_in(const std::vector<std::uint64_t>& words) {
  std::vector<std::uint64_t> rows;
  for (std::size_t w = 0; w < words.size(); ++w)
    for (std::uint64_t bits = words[w]; bits; bits &= bits - 1) rows.push_back(64 * w + std::uint64_t(__builtin_ctzll(bits)));
  return rows;
}

}  // namespace

TEST_CASE("fuzz: bitmap deserialize on mutated serializations", "[fuzz][index][bitmap]") {
  Mutator mutator(seed_of("bitmap deserialize"), corpus());
  Tally tally("indexes::deserialize");
  constexpr std::size_t kWords = 2 * 1024;  // rows 0 .. 2^17 - 1
  for (std::size_t i = 0, n = iterations(15000); i < n; ++i) {
    const std::string bytes = mutator.next();
    tally.run(bytes, [&] {
      Bitmap b;
      const bool ok = deserialize(bytes_of(bytes), &b);
      std::vector<std::uint64_t> words(kWords, 0);
      const bool ored = or_serialized_into(bytes_of(bytes), words);
      if (!ok) {
        tally.failed();
        tally.check(!ored, "or_serialized_into accepts what deserialize refuses", bytes);
        return;
      }
      tally.parsed();
      const std::uint64_t card = b.cardinality();
      if (card > (1u << 22)) return;  // a few run containers can hold many rows: keep each mutant cheap
      const std::vector<std::uint64_t> rows = rows_of(b);
      tally.check(rows.size() == card, "cardinality differs from the rows iterated", bytes);
      bool ascending = true, contained = true;
      for (std::size_t k = 0; k < rows.size(); ++k) {
        if (k > 0 && rows[k] <= rows[k - 1]) ascending = false;
        if (k % 97 == 0 && !b.contains(rows[k])) contained = false;
      }
      tally.check(ascending, "rows not strictly ascending", bytes);
      tally.check(contained, "a row iterated is not contained", bytes);
      tally.check(b.isEmpty() == rows.empty(), "isEmpty disagrees with the rows", bytes);
      Bitmap back;
      tally.check(deserialize(bytes_of(serialize(b)), &back) && same_rows(back, b), "no round trip", bytes);
      const bool fits = rows.empty() || rows.back() < 64 * kWords;
      tally.check(ored == fits, "or_serialized_into disagrees with deserialize on rows in range", bytes);
      if (ored && fits) tally.check(rows_in(words) == rows, "or_serialized_into sets other rows", bytes);
    });
  }
  tally.finish();
}
