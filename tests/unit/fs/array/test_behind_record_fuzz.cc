// [fuzz] fs/array/behind_record: mutants of the records of copy cells that
// lag the primary (decode_behind) and of the primary's lost cells
// (decode_lost). Both hold CRoaring portable serializations read from the
// volume; CRoaring 0.2.66's readSafe bounds its reads but accepts
// containers that break its invariants (unsorted arrays, overlapping runs,
// a bitset whose cardinality lies), after which maximum() and contains()
// answer wrongly. A record that decodes must hold bitmaps that iterate
// ascending, count what they iterate, contain it, and round-trip.
#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "fs/array/behind_record.h"
#include "tests/unit/support/fuzz_support.h"

using namespace mmfs::fs;
using namespace mmfs::testing::fuzz;

namespace {

// The invariants a decoded 32-bit bitmap must keep.
bool valid(const Roaring& b) {
  const std::uint64_t card = b.cardinality();
  if (card > (1u << 22)) return true;  // too many to walk cheaply (runs); the rest is checked
  std::vector<std::uint32_t> values;
  for (std::uint32_t v : b) values.push_back(v);
  if (values.size() != card) return false;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0 && values[i] <= values[i - 1]) return false;
    if (i % 61 == 0 && !b.contains(values[i])) return false;
  }
  return values.empty() ? b.isEmpty() : b.minimum() == values.front() && b.maximum() == values.back();
}

Roaring cells(std::initializer_list<std::uint32_t> list) {
  Roaring r;
  for (auto v : list) r.add(v);
  return r;
}

std::vector<std::string> lost_corpus() {
  Roaring runs;
  runs.addRange(100, 70000);
  runs.runOptimize();
  Roaring dense;
  for (std::uint32_t v = 0; v < 65536; v += 3) dense.add(v);
  return {encode_lost(cells({0, 1, 2, 9, 1000})), encode_lost(runs), encode_lost(dense),
          encode_lost(cells({7, 65536 * 5 + 3, 4000000000u}))};
}

}  // namespace

TEST_CASE("fuzz: decode_behind on mutated records", "[fuzz][copies]") {
  Roaring runs;
  runs.addRange(10, 5000);
  std::vector<std::string> corpus = {
      encode_behind({{1, cells({0, 5, 9})}}),
      encode_behind({{1, cells({3})}, {2, runs}, {7, cells({1, 2, 3, 100000})}}),
      encode_behind({{255, cells({4000000000u})}}),
  };
  for (const std::string& lost : lost_corpus()) {  // slot 3, the length, the bitmap
    std::string entry(5, '\x03');
    const std::uint32_t n = std::uint32_t(lost.size());
    std::memcpy(entry.data() + 1, &n, 4);
    corpus.push_back(entry + lost);
  }
  Mutator mutator(seed_of("decode_behind"), corpus);
  Tally tally("decode_behind");
  for (std::size_t i = 0, n = iterations(10000); i < n; ++i) {
    const std::string record = mutator.next();
    tally.run(record, [&] {
      std::map<std::uint8_t, Roaring> behind;
      if (!decode_behind(record, &behind)) {
        tally.failed();
        return;
      }
      tally.parsed();
      bool ok = !behind.count(0);
      for (const auto& [slot, b] : behind) ok = ok && valid(b);
      tally.check(ok, "slot 0, or a bitmap that breaks CRoaring's invariants", record);
      std::map<std::uint8_t, Roaring> back;
      tally.check(decode_behind(encode_behind(behind), &back), "its re-encoding does not decode", record);
      for (const auto& [slot, b] : behind)
        tally.check(b.isEmpty() ? !back.count(slot) : back.count(slot) && back[slot] == b, "no round trip", record);
    });
  }
  tally.finish();
}

TEST_CASE("fuzz: decode_lost on mutated records", "[fuzz][copies]") {
  Mutator mutator(seed_of("decode_lost"), lost_corpus());
  Tally tally("decode_lost");
  for (std::size_t i = 0, n = iterations(10000); i < n; ++i) {
    const std::string record = mutator.next();
    tally.run(record, [&] {
      Roaring lost;
      if (!decode_lost(record, &lost)) {
        tally.failed();
        return;
      }
      tally.parsed();
      tally.check(valid(lost), "a bitmap that breaks CRoaring's invariants", record);
      Roaring back;
      tally.check(decode_lost(encode_lost(lost), &back) && back == lost, "no round trip", record);
    });
  }
  tally.finish();
}

TEST_CASE("fuzz: behind and lost records regressions", "[fuzz][copies]") {
  auto entry = [](const std::string& bitmap) {  // one decode_behind entry of slot 3
    std::string e(5, '\x03');
    const std::uint32_t n = std::uint32_t(bitmap.size());
    std::memcpy(e.data() + 1, &n, 4);
    return e + bitmap;
  };
  // An array container out of order (cells 28672, 2, 9, 1000, 1001): readSafe
  // took it and maximum() said 1001, so a lost cell past the array's end
  // passed the check against its cell count.
  std::string unsorted = encode_lost(cells({1, 2, 9, 1000, 1001}));
  REQUIRE(unsorted.size() == 26);  // cookie, count, key+cardinality, offset, 5 values
  unsorted[16] = '\x00';
  unsorted[17] = '\x70';
  Roaring lost;
  CHECK_FALSE(decode_lost(unsorted, &lost));
  std::map<std::uint8_t, Roaring> behind;
  CHECK_FALSE(decode_behind(entry(unsorted), &behind));
  // Runs that overlap ([100, 200) and [150, 250) with the right cardinality).
  Roaring two_runs;
  two_runs.addRange(100, 200);
  two_runs.addRange(300, 400);
  std::string overlapping = encode_lost(two_runs);
  REQUIRE(overlapping.size() == 19);  // run cookie, run flags, key+cardinality, 2 runs
  const std::uint16_t start = 150;
  std::memcpy(overlapping.data() + 15, &start, 2);
  CHECK_FALSE(decode_lost(overlapping, &lost));
  CHECK_FALSE(decode_behind(entry(overlapping), &behind));
  // The records as written still decode.
  CHECK(decode_lost(encode_lost(two_runs), &lost));
  CHECK(lost == two_runs);
  CHECK(decode_behind(entry(encode_lost(two_runs)), &behind));
  CHECK(behind.at(3) == two_runs);
}
