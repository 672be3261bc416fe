// Bitmap indexes for the index unit tests (indexes/bitmap_index.h): a
// built index of int32 values with exact bins, ranges of keys, and the
// rows a plan yields against the values' truth.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <random>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "indexes/binning.h"
#include "indexes/bitmap_index.h"

namespace mmfs::indexes::testing {

// A string's bytes.
inline std::span<const std::byte> as_bytes(const std::string& s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

// A built index: the values it was built from, its stored object and header.
struct Index {
  std::vector<std::int32_t> values;
  std::string object;
  IndexHeader header;
};

// Values 0..distinct-1, uniformly at random; exact bins (one per value).
inline Index make(Encoding enc, std::size_t rows, std::int32_t distinct, std::uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  Index ix;
  ix.values.resize(rows);
  for (auto& v : ix.values) v = std::int32_t(rng() % std::uint64_t(distinct));
  std::vector<std::uint64_t> lower{min_key(ValueType::I32)};
  for (std::int32_t v = 1; v < distinct; ++v) lower.push_back(std::uint64_t(std::int64_t(v)) ^ (1ull << 63));
  IndexBuilder b(Binning(ValueType::I32, lower), enc, rows);
  b.add(0, reinterpret_cast<const std::byte*>(ix.values.data()), rows);
  ix.object = b.finish();
  auto len = IndexHeader::header_bytes(as_bytes(ix.object).first(IndexHeader::kPrefixBytes));
  REQUIRE(len);
  auto h = IndexHeader::decode(as_bytes(ix.object).first(*len));
  REQUIRE(std::holds_alternative<IndexHeader>(h));
  ix.header = std::get<IndexHeader>(h);
  return ix;
}

// The keys of x in [lo, hi] for int32.
inline KeySet between(std::int32_t lo, std::int32_t hi) {
  return interval_keys(ValueType::I32, *parse_number(std::to_string(lo)), *parse_number(std::to_string(hi)));
}

// The plan's rows, its bitmaps decoded (and checked) from the object.
inline Estimate run(const Index& ix, const AtomPlan& plan) {
  std::map<std::uint32_t, Bitmap> cache;
  return ix.header.evaluate(plan, [&](std::uint32_t id) -> const Bitmap& {
    const auto e = ix.header.directory()[id];
    Bitmap b;
    REQUIRE(ix.header.decode_bitmap(id, as_bytes(ix.object).subspan(e.offset, e.length), &b));
    return cache[id] = std::move(b);
  });
}

// How many of the index's values lie in [lo, hi].
inline std::uint64_t truth(const Index& ix, std::int32_t lo, std::int32_t hi) {
  std::uint64_t n = 0;
  for (auto v : ix.values) n += v >= lo && v <= hi;
  return n;
}

}  // namespace mmfs::indexes::testing
