// Planning an atom over a stored index (indexes/index_plan.cc,
// IndexHeader::plan and evaluate): the fewest bytes, the coarse level for
// wide ranges only, complements, and the rows of every plan against the
// values.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <vector>

#include "indexes/bitmap_index.h"
#include "tests/unit/support/index_test_support.h"

using namespace mmfs::indexes;
using namespace mmfs::indexes::testing;

TEST_CASE("plans: fewest bytes, coarse level for wide ranges only", "[indexes][encodings]") {
  for (Encoding enc : {Encoding::RE, Encoding::IE}) {
    Index ix = make(enc, 200000, 1000);
    REQUIRE(ix.header.coarse_bins() >= 3);
    AtomPlan wide = ix.header.plan(between(100, 899));
    REQUIRE(wide.sure.size() == 1);
    CHECK(wide.sure[0].coarse);
    CHECK(wide.aligned);
    CHECK(wide.bytes < ix.header.fine_bytes() / 2);  // far less than the 800 fine bitmaps
    CHECK(run(ix, wide).sure.cardinality() == truth(ix, 100, 899));
    CHECK(*wide.count == truth(ix, 100, 899));
    AtomPlan one = ix.header.plan(between(500, 500));
    REQUIRE(one.sure.size() == 1);
    CHECK(!one.sure[0].coarse);
    CHECK(one.bitmaps == std::vector<std::uint32_t>{500});
    AtomPlan few = ix.header.plan(between(500, 503));
    CHECK(few.bitmaps.size() == 4);
  }
  // e1: a range covering most bins is answered by its complement.
  Index e1 = make(Encoding::E1, 20000, 50);
  AtomPlan most = e1.header.plan(between(2, 49));
  REQUIRE(most.sure.size() == 1);
  CHECK(most.sure[0].complement);
  CHECK(most.bitmaps == std::vector<std::uint32_t>{0, 1});
  CHECK(run(e1, most).sure.cardinality() == truth(e1, 2, 49));
  AtomPlan some = e1.header.plan(between(2, 5));
  CHECK(!some.sure[0].complement);
  CHECK(some.bitmaps.size() == 4);
  // range: [f, l] = R_l - R_{f-1}; a prefix is one bitmap.
  Index range = make(Encoding::Range, 20000, 50);
  CHECK(range.header.plan(between(0, 9)).bitmaps == std::vector<std::uint32_t>{9});
  CHECK(range.header.plan(between(10, 19)).bitmaps == std::vector<std::uint32_t>{9, 19});
  CHECK(range.header.plan(between(10, 49)).bitmaps == std::vector<std::uint32_t>{9});
  // interval: any range is at most two bitmaps.
  Index interval = make(Encoding::Interval, 20000, 50);
  for (int lo = 0; lo < 50; lo += 7) {
    for (int hi = lo; hi < 50; hi += 5) {
      AtomPlan p = interval.header.plan(between(lo, hi));
      CHECK(p.bitmaps.size() <= 2);
      CHECK(run(interval, p).sure.cardinality() == truth(interval, lo, hi));
    }
  }
  // Fewest bytes: every plan's bytes are at most the e1 fine bitmaps it would otherwise read.
  Index re = make(Encoding::RE, 50000, 300);
  std::mt19937 rng(3);
  for (int q = 0; q < 200; ++q) {
    int lo = int(rng() % 300), hi = lo + int(rng() % (300 - lo));
    AtomPlan p = re.header.plan(between(lo, hi));
    std::uint64_t fine = 0;
    for (int b = lo; b <= hi; ++b) fine += re.header.directory()[std::size_t(b)].length;
    CHECK(p.bytes <= fine);
    CHECK(run(re, p).sure.cardinality() == truth(re, lo, hi));
  }
}
