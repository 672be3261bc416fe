// Int16 arrays with a bitmap index for the array index unit tests
// (fs/array/array_index.h, fs/array/array_file_index.cc): random small values,
// writes and reads of them, an array created holding them, and the check that
// the index's answers equal the data's.
#pragma once

#include <catch2/catch.hpp>

#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "fs/array/array_file.h"
#include "indexes/bitmap.h"
#include "indexes/values.h"
#include "tests/unit/support/array_test_support.h"

namespace mmfs::fs::testing::array_indexes {

using Values = std::vector<std::int16_t>;

// Small values, so `exact` bins hold one value each and every atom is aligned.
inline Values random_values(std::mt19937_64& rng, std::size_t n) {
  Values v(n);
  for (auto& x : v) x = std::int16_t(int(rng() % 41) - 20);
  return v;
}

// Writes `v` from element `first` on.
inline int write_values(ArrayFile& a, std::uint64_t first, const Values& v) {
  std::string msg;
  return a.write(first * 2, reinterpret_cast<const std::byte*>(v.data()), v.size() * 2, &msg);
}

// Every element of the array.
inline Values read_values(ArrayFile& a) {
  Values v(a.size() / 2);
  std::size_t got = 0;
  std::string msg;
  int r = a.read(0, a.size(), reinterpret_cast<std::byte*>(v.data()), &got, &msg);
  INFO(msg);
  REQUIRE(r == 0);
  REQUIRE(got == a.size());
  return v;
}

// A new array `name` of `s` on `m` holding `data` from element 0 on, flushed.
inline std::shared_ptr<ArrayFile> create_with_values(const arrays::Mount& m, const std::string& name,
                                                     const ArraySchema& s, const Values& data) {
  auto a = arrays::create_array(m, name, s);
  REQUIRE(write_values(*a, 0, data) == 0);
  std::string msg;
  REQUIRE(a->flush(true, &msg) == 0);
  return a;
}

// The keys of `x OP c` for int16.
inline indexes::KeySet keys(indexes::CompareOp op, int c) {
  return indexes::compare_keys(indexes::ValueType::I16, op, *indexes::parse_number(std::to_string(c)));
}

// Every comparison with a few constants: the index's rows equal the data's.
inline void check_index_matches(ArrayFile& a, const Values& data, bool expect_aligned,
                                const std::string& when = "") {
  using indexes::CompareOp;
  INFO(when);
  for (CompareOp op : {CompareOp::Eq, CompareOp::Ne, CompareOp::Lt, CompareOp::Ge})
    for (int c : {-20, -3, 0, 7, 25}) {
      const indexes::KeySet k = keys(op, c);
      std::vector<indexes::Estimate> est;
      QueryCost cost;
      std::string msg;
      REQUIRE(a.atom_estimates({k}, std::nullopt, &est, &cost, &msg) == 0);
      indexes::Bitmap truth;
      for (std::size_t i = 0; i < data.size(); ++i)
        if (indexes::contains(k, indexes::ValueType::I16, reinterpret_cast<const std::byte*>(&data[i])))
          truth.add(std::uint64_t(i));
      INFO("op " << int(op) << " constant " << c);
      CHECK(!cost.scanned);
      const indexes::Bitmap& sure = est[0].sure_rows();  // possibly lent by the index's cache
      CHECK(indexes::is_subset(sure, truth));
      CHECK(indexes::is_subset(truth, sure | est[0].maybe));
      if (expect_aligned) CHECK(indexes::same_rows(sure, truth));
      if (expect_aligned) CHECK(est[0].maybe.isEmpty());
      // Asked again, the atom comes from memory (bitmaps, or the combined
      // rows of a range of bins) and is the same.
      std::vector<indexes::Estimate> again;
      QueryCost cost2;
      REQUIRE(a.atom_estimates({k}, std::nullopt, &again, &cost2, &msg) == 0);
      CHECK(cost2.index_read_bytes == 0);
      CHECK(indexes::same_rows(again[0].sure_rows(), sure));
      CHECK(indexes::same_rows(again[0].maybe, est[0].maybe));
    }
}

// `s` with an index of `encoding` over `bins`.
inline ArraySchema indexed(ArraySchema s, const std::string& encoding, const std::string& bins) {
  s.index = encoding;
  s.bins = bins;
  return s;
}

}  // namespace mmfs::fs::testing::array_indexes
