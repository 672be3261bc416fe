// Shared by the array-file tests (tests/unit/fs/array/test_array_file*.cc):
// random writes mirrored into a byte model, the check that every element
// lies where A@/lbn says, and the shapes, dtypes, cells and layouts they run.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "fs/array/array_file.h"
#include "tests/unit/support/array_test_support.h"
#include "tests/unit/support/array_view_support.h"
#include "tests/unit/support/fs_test_support.h"

namespace mmfs::fs::testing::arrays {

// Random writes in random pieces (cutting elements and cells), with flushes
// and reads in between, mirrored into `model`.
inline void random_writes(ArrayFile& a, Bytes& model, std::mt19937_64& rng, int count) {
  const std::uint64_t N = model.size();
  for (int i = 0; i < count; ++i) {
    std::uint64_t off = rng() % N;
    std::uint64_t max_len = std::min<std::uint64_t>(N - off, rng() % 3 == 0 ? N : 1 + N / 8);
    std::size_t len = std::size_t(1 + rng() % max_len);
    Bytes data = random_bytes(rng, len);
    INFO("write " << len << " at " << off);
    REQUIRE(write_file(a, off, data) == 0);
    std::copy(data.begin(), data.end(), model.begin() + std::ptrdiff_t(off));
    switch (rng() % 6) {
      case 0: {
        std::string msg;
        REQUIRE(a.flush(false, &msg) == 0);
        break;
      }
      case 1: {  // a read sees every write before it
        std::uint64_t ro = rng() % N;
        std::size_t rl = std::size_t(1 + rng() % (N - ro));
        Bytes expect(model.begin() + std::ptrdiff_t(ro), model.begin() + std::ptrdiff_t(ro + rl));
        REQUIRE(bytes_diff(read_file(a, ro, rl), expect) == "");
        break;
      }
      default:
        break;
    }
  }
}

// Every element's bytes are on the device at the sector and offset lbn_text names.
inline void check_locations(ArrayFile& a, const ArraySchema& s, const Bytes& model, MemoryDevice& dev) {
  const std::size_t n = s.shape.size();
  const std::uint32_t I = s.dtype.itemsize;
  std::vector<std::uint64_t> x(n, 0);
  std::set<std::uint64_t> seen;
  int wrong = 0, shared = 0;
  for (std::uint64_t e = 0; e < model.size() / I; ++e) {
    std::uint64_t r = e;
    for (std::size_t d = n; d-- > 0;) {
      x[d] = r % s.shape[d];
      r /= s.shape[d];
    }
    std::string text, msg;
    REQUIRE(a.lbn_text(x, &text, &msg) == 0);
    unsigned long lbn = 0, offset = 0;
    REQUIRE(std::sscanf(text.c_str(), "%lu %lu", &lbn, &offset) == 2);
    REQUIRE(text.back() == '\n');
    REQUIRE(offset + I <= 512);
    std::uint64_t byte = std::uint64_t(lbn) * 512 + offset;
    REQUIRE(byte + I <= dev.bytes().size());
    if (!seen.insert(byte).second) ++shared;  // no two elements share a place
    if (std::memcmp(dev.bytes().data() + byte, model.data() + e * I, I) != 0 && wrong++ < 3)
      FAIL_CHECK("element " << e << " is not at " << text);
  }
  CHECK(wrong == 0);
  CHECK(shared == 0);
}

struct Case {
  std::vector<std::uint64_t> shape;
  std::string dtype;
  std::vector<std::uint64_t> cell;  // empty: the layout's choice
};

inline const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {{37}, "float64", {}},
      {{37}, "float64", {5}},
      {{9, 10, 11}, "float64", {}},
      {{9, 10, 11}, "float64", {2, 3, 4}},  // many one-sector cells, cut at every edge
      {{3, 5, 4, 6}, "int16", {}},
      {{3, 5, 4, 6}, "int16", {2, 2, 3, 4}},
      {{1, 13, 1, 5}, "uint8", {1, 3, 1, 2}},  // single-element dimensions
      {{7, 1, 9}, "int32", {3, 1, 4}},
      {{1}, "float32", {}},                     // one element
      {{13, 40}, "float64", {4, 40}},           // 3-sector cells on 8-sector tracks
      {{30, 40, 20}, "int16", {}},              // several default (4 KiB) cells
  };
  return c;
}

inline const std::vector<std::string> kLayouts = {"naive", "zorder", "hilbert", "multimap"};


}  // namespace mmfs::fs::testing::arrays
