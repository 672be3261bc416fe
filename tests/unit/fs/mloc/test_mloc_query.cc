// Queries from an mloc image's level structure (fs/mloc/mloc_query.cc)
// against brute force over the values it was encoded from: how a
// condition's keys meet each bin, the rows of every chunk or of some, the
// count the directory alone answers, the values and coordinates of the
// matching elements, and the elements at given rows.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "fs/mloc/mloc_image.h"
#include "indexes/bitmap.h"
#include "indexes/values.h"
#include "tests/unit/support/array_test_support.h"
#include "tests/unit/support/fs_test_support.h"
#include "tests/unit/support/mloc_image_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;
using namespace mmfs::fs::testing::arrays;
using indexes::KeySet;
using indexes::ValueType;

namespace {

using testing::mloc_images::encode;

constexpr std::uint64_t kRows = 37, kCols = 29;

std::uint64_t key32(std::int32_t v) { return std::uint64_t(std::int64_t(v)) ^ (std::uint64_t(1) << 63); }

KeySet between(std::int32_t lo, std::int32_t hi) { return KeySet{{{key32(lo), key32(hi)}}, false}; }

// A 37 x 29 int32 array of values in [-50, 150), its image in 8 x 8 chunks
// with bins cut at 0, 10, 20, 50 and 100.
struct Fixture {
  std::unique_ptr<geom::Geometry> g = toy_disk();
  Mount m = mount(formatted(*g));
  std::vector<std::int32_t> values;
  std::unique_ptr<MlocImage> image;
  explicit Fixture(std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    values.resize(kRows * kCols);
    for (auto& v : values) v = std::int32_t(rng() % 200) - 50;
    MlocParams p;
    std::string msg;
    REQUIRE(mloc_params({kRows, kCols}, "int32", {8, 8}, "V-M-S", "none", "edges:0,10,20,50,100", &p, &msg) == 0);
    Bytes model(values.size() * 4);
    std::memcpy(model.data(), values.data(), model.size());
    image = encode(m, p, model);
  }
  std::vector<std::uint64_t> rows_where(std::int32_t lo, std::int32_t hi) const {
    std::vector<std::uint64_t> out;
    for (std::uint64_t r = 0; r < values.size(); ++r)
      if (values[r] >= lo && values[r] <= hi) out.push_back(r);
    return out;
  }
};

}  // namespace

TEST_CASE("mloc query: a bin is aligned when all its keys match, edge when some may, untouched else",
          "[mloc][query]") {
  Fixture f(31);
  const auto* binning = f.image->binning();
  REQUIRE(binning);
  const auto& lower = binning->lower();
  REQUIRE(lower.size() == 6);  // below 0, [0, 10), [10, 20), [20, 50), [50, 100), 100 and up
  CHECK(lower[1] == key32(0));
  CHECK(lower[5] == key32(100));
  using Use = MlocImage::BinUse;
  auto uses = [&](std::int32_t lo, std::int32_t hi) { return f.image->bin_uses(between(lo, hi)); };
  CHECK(uses(10, 19) == std::vector<Use>{Use::None, Use::None, Use::Aligned, Use::None, Use::None, Use::None});
  CHECK(uses(12, 15) == std::vector<Use>{Use::None, Use::None, Use::Edge, Use::None, Use::None, Use::None});
  CHECK(uses(5, 49) == std::vector<Use>{Use::None, Use::Edge, Use::Aligned, Use::Aligned, Use::None, Use::None});
  // The outer bins reach the dtype's ends: aligned only when the keys do.
  const KeySet every{{{indexes::min_key(ValueType::I32), indexes::max_key(ValueType::I32)}}, false};
  CHECK(f.image->bin_uses(every) == std::vector<Use>(6, Use::Aligned));
  CHECK(uses(-1000, 1000) == std::vector<Use>{Use::Edge, Use::Aligned, Use::Aligned, Use::Aligned, Use::Aligned,
                                              Use::Edge});
  CHECK(f.image->bin_uses(KeySet{}) == std::vector<Use>(6, Use::None));
  // The count from the directory alone, when every touched bin is aligned.
  CHECK(f.image->aligned_count(between(10, 49)) == f.rows_where(10, 49).size());
  CHECK(f.image->aligned_count(every) == kRows * kCols);
  CHECK_FALSE(f.image->aligned_count(between(-1000, 1000)).has_value());
  CHECK_FALSE(f.image->aligned_count(between(12, 15)).has_value());
}

TEST_CASE("mloc query: the matching rows of every chunk or of some, against brute force", "[mloc][query]") {
  Fixture f(32);
  std::mt19937_64 rng(5);
  for (int q = 0; q < 40; ++q) {
    const std::int32_t lo = std::int32_t(rng() % 220) - 60, hi = lo + std::int32_t(rng() % 80);
    INFO("x in [" << lo << ", " << hi << "]");
    indexes::Bitmap rows;
    std::uint64_t bytes = 0;
    std::string msg;
    REQUIRE(f.image->match_rows(between(lo, hi), {}, &rows, &bytes, &msg) == 0);
    CHECK(indexes::rows_of(rows) == f.rows_where(lo, hi));
    // Only the chunks of a box: rows of its chunks, whole chunks.
    const layouts::Selection box({{5, 20, 1, false}, {9, 17, 1, false}});
    const std::vector<std::uint64_t> ranks = f.image->chunks_of(box);
    std::set<std::uint64_t> in_chunks;
    for (std::uint64_t rank : ranks) {
      const auto c = f.image->grid().coords_of(rank);
      for (std::uint64_t i = c[0] * 8; i < std::min(kRows, c[0] * 8 + 8); ++i)
        for (std::uint64_t j = c[1] * 8; j < std::min(kCols, c[1] * 8 + 8); ++j) in_chunks.insert(i * kCols + j);
    }
    std::vector<std::uint64_t> want;
    for (std::uint64_t r : f.rows_where(lo, hi))
      if (in_chunks.count(r)) want.push_back(r);
    indexes::Bitmap some;
    REQUIRE(f.image->match_rows(between(lo, hi), ranks, &some, &bytes, &msg) == 0);
    CHECK(indexes::rows_of(some) == want);
  }
  // Rows 0..1 of chunks (0, 1) and (1, 2) hold the box's corner: ranks of exactly those chunks.
  const std::vector<std::uint64_t> corner =
      f.image->chunks_of(layouts::Selection({{7, 9, 1, false}, {15, 17, 1, false}}));
  std::set<std::uint64_t> want_ranks;
  for (std::uint64_t ci : {0u, 1u})
    for (std::uint64_t cj : {1u, 2u}) want_ranks.insert(f.image->grid().rank_of(std::vector<std::uint64_t>{ci, cj}));
  CHECK(corner == std::vector<std::uint64_t>(want_ranks.begin(), want_ranks.end()));
}

TEST_CASE("mloc query: values and coordinates of the matching elements in row order; elements at rows",
          "[mloc][query]") {
  Fixture f(33);
  for (auto [lo, hi] : std::vector<std::pair<std::int32_t, std::int32_t>>{{12, 15}, {10, 49}, {-50, 149}, {200, 300}}) {
    INFO("x in [" << lo << ", " << hi << "]");
    const std::vector<std::uint64_t> rows = f.rows_where(lo, hi);
    std::string values, coords, msg;
    std::uint64_t bytes = 0;
    REQUIRE(f.image->match_output(between(lo, hi), MlocImage::MatchOutput::Values, &values, &bytes, &msg) == 0);
    REQUIRE(f.image->match_output(between(lo, hi), MlocImage::MatchOutput::Coords, &coords, &bytes, &msg) == 0);
    REQUIRE(values.size() == rows.size() * 4);
    REQUIRE(coords.size() == rows.size() * 8);
    for (std::size_t k = 0; k < rows.size(); ++k) {
      std::int32_t v;
      std::uint64_t r;
      std::memcpy(&v, values.data() + 4 * k, 4);
      std::memcpy(&r, coords.data() + 8 * k, 8);  // little-endian host
      CHECK(r == rows[k]);
      CHECK(v == f.values[rows[k]]);
    }
  }
  // The elements at any rows, whatever bins the hint names.
  indexes::Bitmap rows;
  for (std::uint64_t r : {0u, 1u, 30u, 500u, 1072u}) rows.add(std::uint64_t(r));
  for (const std::vector<bool>& hint : {std::vector<bool>{}, std::vector<bool>(6, false), std::vector<bool>(6, true),
                                        std::vector<bool>{false, false, true, false, false, false}}) {
    std::vector<std::int32_t> got(5, 7777);
    std::uint64_t bytes = 0;
    std::string msg;
    REQUIRE(f.image->gather(rows, hint, reinterpret_cast<std::byte*>(got.data()), &bytes, &msg) == 0);
    CHECK(got == std::vector<std::int32_t>{f.values[0], f.values[1], f.values[30], f.values[500], f.values[1072]});
  }
}
