// [fuzz] fs/util/size_text: mutants of sizes as command lines spell them
// ("4G", "64MiB") through parse_size, against an exact oracle: a nonzero
// result is the digits times the unit, and a size the oracle finds valid
// and in range is not refused.
#include <catch2/catch.hpp>

#include <cctype>
#include <cstdint>
#include <string>

#include "fs/util/size_text.h"
#include "tests/unit/support/fuzz_support.h"

using namespace mmfs::testing::fuzz;

namespace {

// digits [unit], unit one of B K KiB M MiB G GiB T TiB P PiB (any case);
// 0 when malformed or beyond 64 bits.
unsigned __int128 oracle(const std::string& s, bool* valid) {
  *valid = false;
  std::size_t i = 0;
  unsigned __int128 v = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    v = v * 10 + unsigned(s[i++] - '0');
    if (v > ~std::uint64_t(0)) return 0;
  }
  if (i == 0) return 0;
  std::string unit = s.substr(i);
  for (char& c : unit) c = char(std::toupper(static_cast<unsigned char>(c)));
  const char* names[] = {"", "B", "K", "KIB", "M", "MIB", "G", "GIB", "T", "TIB", "P", "PIB"};
  const int shifts[] = {0, 0, 10, 10, 20, 20, 30, 30, 40, 40, 50, 50};
  for (int k = 0; k < 12; ++k) {
    if (unit != names[k]) continue;
    v <<= shifts[k];
    if (v > ~std::uint64_t(0)) return 0;
    *valid = true;
    return v;
  }
  return 0;
}

}  // namespace

TEST_CASE("fuzz: parse_size on mutated sizes", "[fuzz][size_text]") {
  Mutator mutator(seed_of("parse_size"), {"4G", "512M", "64MiB", "12345", "1k", "3TiB", "16P", "100B", "0"},
                  {"K", "KiB", "M", "G", "T", "P", "PiB", "iB", "B"}, 256);
  Tally tally("parse_size");
  for (std::size_t i = 0, n = iterations(10000); i < n; ++i) {
    const std::string text = mutator.next();
    tally.run(text, [&] {
      const std::uint64_t got = mmfs::fs::parse_size(text);
      bool valid = false;
      const unsigned __int128 want = oracle(text, &valid);
      if (got == 0) {
        tally.failed();
        tally.check(!valid || want == 0, "a valid size refused", text);
        return;
      }
      tally.parsed();
      tally.check(valid && got == want, "a size other than the digits times the unit", text);
    });
  }
  tally.finish();
}
