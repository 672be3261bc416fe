// [fuzz] layouts/mloc: mutants of user.mmfs.priority texts through
// parse_mloc_priority. An accepted text is a permutation of V, M and S that
// mloc_priority_text spells back exactly as written.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "layouts/mloc.h"
#include "tests/unit/support/fuzz_support.h"

using namespace mmfs::layouts;
using namespace mmfs::testing::fuzz;

TEST_CASE("fuzz: parse_mloc_priority on mutated priorities", "[fuzz][mloc]") {
  Mutator mutator(seed_of("parse_mloc_priority"), {"V-M-S", "S-V-M", "M-S-V", "V-S-M"}, {"V", "M", "S", "-", "v"});
  Tally tally("parse_mloc_priority");
  for (std::size_t i = 0, n = iterations(4000); i < n; ++i) {
    const std::string text = mutator.next();
    tally.run(text, [&] {
      auto p = parse_mloc_priority(text);
      if (!p) {
        tally.failed();
        return;
      }
      tally.parsed();
      std::string letters{char((*p)[0]), char((*p)[1]), char((*p)[2])};
      std::sort(letters.begin(), letters.end());
      tally.check(letters == "MSV", "not a permutation of V, M, S", text);
      tally.check(mloc_priority_text(*p) == text, "spelled back differently", text);
    });
  }
  tally.finish();
}
