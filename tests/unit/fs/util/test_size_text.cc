// Sizes as written on command lines (fs/util/size_text.h): digits with an
// optional binary unit (K, M, G, T, P, with or without "iB", any case, or
// B); anything else, and sizes past 2^64, read as 0.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>

#include "fs/util/size_text.h"

namespace {

constexpr std::size_t MiB = std::size_t(1) << 20;

}  // namespace

TEST_CASE("sizes as written on command lines", "[buffer_pool][size_text]") {
  using mmfs::fs::parse_size;
  CHECK(parse_size("64M") == 64 * MiB);
  CHECK(parse_size("64MiB") == 64 * MiB);
  CHECK(parse_size("2g") == 2048 * MiB);
  CHECK(parse_size("4096") == 4096);
  CHECK(parse_size("0") == 0);
  CHECK(parse_size("") == 0);
  CHECK(parse_size("M") == 0);
  CHECK(parse_size("12x") == 0);
  CHECK(parse_size("-1") == 0);
  CHECK(parse_size("99999999999999999999") == 0);
  CHECK(parse_size("17179869184P") == 0);  // past 2^64
}

TEST_CASE("sizes: every unit, in any case, with or without iB", "[size_text]") {
  using mmfs::fs::parse_size;
  const std::uint64_t K = 1024;
  CHECK(parse_size("7") == 7);
  CHECK(parse_size("7B") == 7);
  CHECK(parse_size("7b") == 7);
  for (const char* k : {"3K", "3k", "3KiB", "3kib", "3KIB"}) CHECK(parse_size(k) == 3 * K);
  CHECK(parse_size("5M") == 5 * K * K);
  CHECK(parse_size("5GiB") == 5 * K * K * K);
  CHECK(parse_size("2T") == 2 * K * K * K * K);
  CHECK(parse_size("2pib") == 2 * K * K * K * K * K);
  CHECK(parse_size("0G") == 0);
  CHECK(parse_size("007K") == 7 * K);  // leading zeros are digits
  // The largest sizes that fit, and the first past 2^64.
  CHECK(parse_size("16383P") == std::uint64_t(16383) << 50);
  CHECK(parse_size("16384P") == 0);
  CHECK(parse_size("17179869183G") == std::uint64_t(17179869183) << 30);
  CHECK(parse_size("17179869184G") == 0);
  CHECK(parse_size("18446744073709551609") == UINT64_MAX - 6);
  CHECK(parse_size("18446744073709551614") == UINT64_MAX - 1);
  CHECK(parse_size("18446744073709551615") == UINT64_MAX);
  CHECK(parse_size("18446744073709551615B") == UINT64_MAX);
  CHECK(parse_size("18446744073709551615K") == 0);
  CHECK(parse_size("18446744073709551616") == 0);
}

TEST_CASE("sizes: malformed text reads as 0", "[size_text]") {
  using mmfs::fs::parse_size;
  for (const char* bad : {"KB", "4KB", "4 K", " 4K", "4K ", "4.5G", "1e3", "+4", "4KiBs", "4Ki", "4iB", "0x10",
                          "4E", "4Z", "K4", "4KK", "G"})
    CHECK(parse_size(bad) == 0);
}
