// [fuzz] fs/table/capsule_table: mutants of a directory's table record (the
// mmfs.table xattr, read back from the volume) through decode_table_record.
// A record that decodes keeps its capsule size within 32 bits and encodes
// back to a record that decodes to the same value.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "fs/table/capsule_table.h"
#include "tests/unit/support/fuzz_support.h"

using namespace mmfs::fs;
using namespace mmfs::testing::fuzz;

TEST_CASE("fuzz: decode_table_record on mutated records", "[fuzz][capsule_table]") {
  const std::vector<std::string> corpus = {encode_table_record({"capsule", 12, 3}),
                                           encode_table_record({"capsule", ~0ull, 4294967295u}),
                                           encode_table_record({"naive", 0, 0})};
  Mutator mutator(seed_of("decode_table_record"), corpus, {"null", "-1", "1e3", "4294967296", "\"layout\":", "[]"});
  Tally tally("decode_table_record");
  for (std::size_t i = 0, n = iterations(6000); i < n; ++i) {
    const std::string text =
        i % 2 ? mutator.next()
              : mutate_json(mutator.pick(), mutator.rng(), {"layout", "records_per_capsule", "capsule_sectors"});
    tally.run(text, [&] {
      auto r = decode_table_record(text);
      if (!r) {
        tally.failed();
        return;
      }
      tally.parsed();
      auto back = decode_table_record(encode_table_record(*r));
      tally.check(back && *back == *r, "no round trip", text);
    });
  }
  tally.finish();
}
