// util/roaring_portable.h: the complete check of one 32-bit CRoaring
// "portable" serialization, shared by the bitmap indexes (indexes/bitmap.cc)
// and MLOC's position lists (layouts/mloc_codec.cc).
//
// CRoaring 0.2.66's safe readers only bound their reads: they accept
// containers that break the library's invariants (unsorted arrays,
// overlapping runs, wrong cardinalities), which later operations trust, and
// they print to stderr on a bad cookie. Bytes from a device are checked here
// first, and handed to the library only when they pass.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "util/coding.h"

namespace mmfs::util {

constexpr std::uint32_t kRoaringCookieNoRun = 12346;
constexpr std::uint32_t kRoaringCookieRun = 12347;
constexpr std::uint32_t kRoaringMaxArray = 4096;  // the most values an array container holds

// What check_portable32 hands each container to, once it is checked.
struct IgnoreContainers {
  void run(std::uint16_t, std::uint32_t, std::uint32_t) {}
  void bitset(std::uint16_t, const std::byte*) {}
  void array(std::uint16_t, const std::byte*, std::uint32_t) {}
};

// Checks the 32-bit portable serialization at the front of `b` completely —
// lengths, key order, sorted arrays, disjoint in-range runs, bitmap
// cardinalities — and returns its length (nullopt when malformed).
// Each container, once checked, goes to `visit`: run(key, start, length - 1)
// per run, bitset(key, its 8 KiB), array(key, its values, count).
template <class Visit = IgnoreContainers>
std::optional<std::size_t> check_portable32(std::span<const std::byte> b, Visit&& visit = {}) {
  std::size_t pos = 0;
  auto need = [&](std::size_t n) { return n <= b.size() - pos; };
  if (!need(4)) return std::nullopt;
  std::uint32_t cookie = get_le<std::uint32_t>(b.data());
  pos = 4;
  bool has_run = (cookie & 0xFFFF) == kRoaringCookieRun;
  std::uint32_t size = 0;
  if (has_run) {
    size = (cookie >> 16) + 1;
  } else if (cookie == kRoaringCookieNoRun) {
    if (!need(4)) return std::nullopt;
    size = get_le<std::uint32_t>(b.data() + pos);
    pos += 4;
    if (size > (1u << 16)) return std::nullopt;
  } else {
    return std::nullopt;
  }
  const std::byte* run_flags = b.data() + pos;
  if (has_run) {
    if (!need((size + 7) / 8)) return std::nullopt;
    pos += (size + 7) / 8;
  }
  if (!need(std::size_t(size) * 4)) return std::nullopt;
  const std::byte* keycards = b.data() + pos;
  pos += std::size_t(size) * 4;
  if (!has_run || size >= 4) {  // offsets (not used by the reader)
    if (!need(std::size_t(size) * 4)) return std::nullopt;
    pos += std::size_t(size) * 4;
  }
  long prev_key = -1;
  bool any_run = false;
  for (std::uint32_t k = 0; k < size; ++k) {
    std::uint16_t key = get_le<std::uint16_t>(keycards + 4 * k);
    std::uint32_t card = std::uint32_t(get_le<std::uint16_t>(keycards + 4 * k + 2)) + 1;
    if (long(key) <= prev_key) return std::nullopt;
    prev_key = key;
    bool is_run = has_run && (std::to_integer<unsigned>(run_flags[k / 8]) >> (k % 8)) & 1;
    if (is_run) {
      any_run = true;
      if (!need(2)) return std::nullopt;
      std::uint32_t runs = get_le<std::uint16_t>(b.data() + pos);
      pos += 2;
      if (runs == 0 || !need(std::size_t(runs) * 4)) return std::nullopt;
      long prev_end = -2;
      std::uint32_t total = 0;
      for (std::uint32_t r = 0; r < runs; ++r) {
        std::uint32_t start = get_le<std::uint16_t>(b.data() + pos + 4 * r);
        std::uint32_t len = get_le<std::uint16_t>(b.data() + pos + 4 * r + 2);
        if (long(start) <= prev_end + 1 || start + len > 0xFFFF) return std::nullopt;
        prev_end = long(start + len);
        total += len + 1;
      }
      if (total != card) return std::nullopt;
      for (std::uint32_t r = 0; r < runs; ++r)
        visit.run(key, get_le<std::uint16_t>(b.data() + pos + 4 * r), get_le<std::uint16_t>(b.data() + pos + 4 * r + 2));
      pos += std::size_t(runs) * 4;
    } else if (card > kRoaringMaxArray) {
      if (!need(8192)) return std::nullopt;
      std::uint32_t ones = 0;
      for (std::size_t w = 0; w < 1024; ++w) ones += std::popcount(get_le<std::uint64_t>(b.data() + pos + 8 * w));
      if (ones != card) return std::nullopt;
      visit.bitset(key, b.data() + pos);
      pos += 8192;
    } else {
      if (!need(std::size_t(card) * 2)) return std::nullopt;
      long prev = -1;
      for (std::uint32_t i = 0; i < card; ++i) {
        std::uint16_t v = get_le<std::uint16_t>(b.data() + pos + 2 * i);
        if (long(v) <= prev) return std::nullopt;
        prev = v;
      }
      visit.array(key, b.data() + pos, card);
      pos += std::size_t(card) * 2;
    }
  }
  // A run cookie without runs would re-serialize shorter than it reads,
  // and Roaring64Map::readSafe steps by the re-serialized size.
  if (has_run && !any_run) return std::nullopt;
  return pos;
}

}  // namespace mmfs::util
