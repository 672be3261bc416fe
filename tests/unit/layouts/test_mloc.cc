// MLOC's pure structure (layouts/mloc.h) against brute force: priorities,
// byte groups, chunk grids along the Hilbert curve, unit numbering and
// default chunks. The unit codec is in test_mloc_codec.cc, the image
// directory in test_mloc_directory.cc.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "layouts/curve_order.h"
#include "layouts/mloc.h"
#include "layouts/mloc_codec.h"
#include "tests/unit/support/mloc_test_support.h"

using namespace mmfs::layouts;
using namespace mmfs::layouts::testing;

namespace {

// A unit's coordinate on a level: V -> bin, M -> group, S -> chunk rank.
u64 level_value(MlocLevel l, u64 bin, u64 group, u64 rank) {
  switch (l) {
    case MlocLevel::Value: return bin;
    case MlocLevel::Precision: return group;
    case MlocLevel::Space: return rank;
  }
  return ~u64{0};
}

}  // namespace

// ---------------------------------------------------------------- priorities

TEST_CASE("mloc: the six V-M-S priorities parse and round-trip through their text", "[mloc]") {
  const auto texts = all_priority_texts();
  REQUIRE(texts.size() == 6);
  std::set<std::string> distinct(texts.begin(), texts.end());
  CHECK(distinct.size() == 6);
  for (const std::string& t : texts) {
    INFO(t);
    auto p = parse_mloc_priority(t);
    REQUIRE(p.has_value());
    CHECK(char((*p)[0]) == t[0]);
    CHECK(char((*p)[1]) == t[2]);
    CHECK(char((*p)[2]) == t[4]);
    CHECK(mloc_priority_text(*p) == t);
  }
  auto vms = parse_mloc_priority("V-M-S");
  REQUIRE(vms.has_value());
  CHECK(*vms == kVMS);
  // Brute force over every 5-character "a-b-c" with letters from "VMSX":
  // exactly the permutations of V, M, S are accepted.
  const std::string letters = "VMSX";
  int accepted = 0;
  for (char a : letters)
    for (char b : letters)
      for (char c : letters) {
        std::string t{a, '-', b, '-', c};
        bool perm = std::set<char>{a, b, c} == std::set<char>{'V', 'M', 'S'};
        INFO(t);
        CHECK(parse_mloc_priority(t).has_value() == perm);
        accepted += perm;
      }
  CHECK(accepted == 6);
}

TEST_CASE("mloc: malformed priorities are rejected", "[mloc]") {
  for (const char* bad : {"", "V-M", "V-V-S", "VMS", "v-m-s", "V-M-S-", "V-M-X", "V_M_S", "V-M-S ", " V-M-S",
                          "V--MS", "VM--S", "S-S-S", "-V-M-S"}) {
    INFO(bad);
    CHECK_FALSE(parse_mloc_priority(bad).has_value());
  }
}

// ---------------------------------------------------------------- byte groups

TEST_CASE("mloc: byte groups, most significant first", "[mloc]") {
  SECTION("float64: the first two bytes together, then one byte at a time") {
    const std::vector<MlocByteGroup> want{{0, 2}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}, {7, 1}};
    CHECK(mloc_byte_groups(8, true) == want);
  }
  SECTION("other dtypes: one byte a group") {
    for (u32 item : {1u, 2u, 4u, 8u, 16u}) {
      INFO("itemsize " << item);
      auto g = mloc_byte_groups(item, false);
      REQUIRE(g.size() == item);
      for (u32 i = 0; i < item; ++i) CHECK(g[i] == MlocByteGroup{i, 1});
    }
    // float32/int64/uint16/int8 (the float64 flag only applies to 8-byte items).
    CHECK(mloc_byte_groups(4, true).size() == 4);
    CHECK(mloc_byte_groups(8, false).size() == 8);
    CHECK(mloc_byte_groups(2, false).size() == 2);
    CHECK(mloc_byte_groups(1, false).size() == 1);
  }
  SECTION("groups tile the element's bytes exactly, in significance order") {
    for (u32 item : {1u, 2u, 4u, 8u}) {
      for (bool f64 : {false, true}) {
        auto g = mloc_byte_groups(item, f64);
        u32 next = 0;
        for (const auto& x : g) {
          CHECK(x.first_rank == next);
          CHECK(x.bytes >= 1);
          next += x.bytes;
        }
        CHECK(next == item);
      }
    }
  }
}

TEST_CASE("mloc: groups_for_bytes is the fewest leading groups holding the kept bytes", "[mloc]") {
  const auto f64 = mloc_byte_groups(8, true);
  CHECK(mloc_groups_for_bytes(f64, 1) == 1);
  CHECK(mloc_groups_for_bytes(f64, 2) == 1);
  CHECK(mloc_groups_for_bytes(f64, 3) == 2);
  CHECK(mloc_groups_for_bytes(f64, 8) == 7);
  CHECK(mloc_groups_for_bytes(f64, 0) == 7);
  CHECK(mloc_groups_for_bytes(mloc_byte_groups(4, false), 2) == 2);
  // Brute force: the smallest n whose first n groups cover min(keep, itemsize)
  // bytes; keep 0 means all of them.
  for (u32 item : {1u, 2u, 4u, 8u}) {
    for (bool flag : {false, true}) {
      const auto g = mloc_byte_groups(item, flag);
      for (u32 keep = 0; keep <= 12; ++keep) {
        u32 want = u32(g.size());
        if (keep != 0) {
          u32 covered = 0;
          for (u32 n = 0; n <= g.size(); ++n) {
            if (covered >= std::min(keep, item)) {
              want = n;
              break;
            }
            if (n < g.size()) covered += g[n].bytes;
          }
        }
        INFO("itemsize " << item << " float64 " << flag << " keep " << keep);
        CHECK(mloc_groups_for_bytes(g, keep) == want);
      }
    }
  }
}

// ---------------------------------------------------------------- chunk grid

TEST_CASE("mloc: chunk grids are ceil(shape/chunk), ranked along the Hilbert curve, clipped at the edges", "[mloc]") {
  struct Case {
    Shape shape, chunk;
  };
  const std::vector<Case> cases{
      {{1000}, {64}},
      {{37, 50}, {8, 16}},
      {{9, 10, 11}, {4, 4, 4}},
      {{5, 6, 7, 3}, {2, 4, 3, 2}},
      {{16, 16}, {4, 4}},
  };
  for (const Case& k : cases) {
    const std::size_t n = k.shape.size();
    MlocGrid g = make_grid(k.shape, 4, k.chunk, 3);
    INFO("shape dims " << n << " shape[0] " << k.shape[0]);
    REQUIRE(g.dims() == n);
    CHECK(g.shape() == k.shape);
    CHECK(g.chunk() == k.chunk);
    // Brute-force chunk counts: step a chunk at a time until past the end.
    Shape want_grid(n, 0);
    for (std::size_t d = 0; d < n; ++d)
      for (u64 lo = 0; lo < k.shape[d]; lo += k.chunk[d]) ++want_grid[d];
    REQUIRE(g.chunk_grid() == want_grid);
    REQUIRE(g.chunks() == product(want_grid));
    CHECK(g.elements() == product(k.shape));
    CHECK(g.units() == u64(g.bins()) * g.groups().size() * g.chunks());

    // Ranks are a bijection, coords_of inverts rank_of, and the order is
    // the library's gap-free Hilbert order over the chunk grid.
    HilbertOrder curve(want_grid);
    std::vector<bool> seen(g.chunks(), false);
    for_each_index(want_grid, [&](const Shape& c) {
      u64 r = g.rank_of(c);
      REQUIRE(r < g.chunks());
      CHECK_FALSE(seen[r]);
      seen[r] = true;
      auto back = g.coords_of(r);
      CHECK(Shape(back.begin(), back.end()) == c);
      CHECK(r == curve.rank(c));
    });
    CHECK(std::count(seen.begin(), seen.end(), true) == std::ptrdiff_t(g.chunks()));
    for (u64 r = 0; r < g.chunks(); ++r) CHECK(g.rank_of(g.coords_of(r)) == r);
    Shape outside(n, 0);
    outside[n - 1] = want_grid[n - 1];
    CHECK_THROWS_AS(g.rank_of(outside), std::out_of_range);

    // Every array element lies in exactly the box of the chunk x / chunk;
    // boxes start at coords * chunk, stay inside the array, and their sizes
    // (and chunk_elements) are the brute-force element counts.
    std::vector<u64> count(g.chunks(), 0);
    Shape lo(n), ext(n);
    for_each_index(k.shape, [&](const Shape& x) {
      Shape c(n);
      for (std::size_t d = 0; d < n; ++d) c[d] = x[d] / k.chunk[d];
      u64 r = g.rank_of(c);
      g.chunk_box(r, lo.data(), ext.data());
      for (std::size_t d = 0; d < n; ++d) REQUIRE((lo[d] <= x[d] && x[d] < lo[d] + ext[d]));
      ++count[r];
    });
    u64 total = 0;
    for (u64 r = 0; r < g.chunks(); ++r) {
      g.chunk_box(r, lo.data(), ext.data());
      auto c = g.coords_of(r);
      u64 box = 1;
      for (std::size_t d = 0; d < n; ++d) {
        CHECK(lo[d] == c[d] * k.chunk[d]);
        CHECK(ext[d] >= 1);
        CHECK(ext[d] <= k.chunk[d]);
        CHECK(lo[d] + ext[d] <= k.shape[d]);
        box *= ext[d];
      }
      CHECK(box == count[r]);
      CHECK(g.chunk_elements(r) == count[r]);
      total += g.chunk_elements(r);
    }
    CHECK(total == g.elements());
  }
}

TEST_CASE("mloc: consecutive chunk ranks are face-adjacent on power-of-two chunk grids", "[mloc]") {
  for (const auto& [shape, chunk] : std::vector<std::pair<Shape, Shape>>{
           {{64, 48}, {4, 3}},          // a 16 x 16 chunk grid
           {{16, 24, 8}, {2, 3, 1}},    // 8 x 8 x 8
           {{32, 32}, {32, 1}},         // 1 x 32
           {{8, 8, 8, 8}, {2, 2, 2, 2}},  // 4 x 4 x 4 x 4
       }) {
    MlocGrid g = make_grid(shape, 8, chunk, 2, kVMS, true);
    INFO("grid dims " << g.dims() << " chunks " << g.chunks());
    for (u64 r = 0; r + 1 < g.chunks(); ++r) {
      auto a = g.coords_of(r), b = g.coords_of(r + 1);
      u64 l1 = 0;
      for (std::size_t d = 0; d < g.dims(); ++d) l1 += a[d] > b[d] ? a[d] - b[d] : b[d] - a[d];
      INFO("rank " << r);
      REQUIRE(l1 == 1);
    }
  }
}

TEST_CASE("mloc: a chunk larger than the shape is clipped", "[mloc]") {
  MlocGrid g = make_grid({5, 7}, 2, {100, 3}, 4);
  CHECK(g.chunk() == Shape{5, 3});
  CHECK(g.chunk_grid() == Shape{1, 3});
  CHECK(g.chunks() == 3);
  std::multiset<u64> sizes;
  for (u64 r = 0; r < g.chunks(); ++r) sizes.insert(g.chunk_elements(r));
  CHECK(sizes == std::multiset<u64>{15, 15, 5});
  MlocGrid whole = make_grid({10, 3}, 8, {1000, 1000}, 1);
  CHECK(whole.chunk() == Shape{10, 3});
  CHECK(whole.chunks() == 1);
  CHECK(whole.chunk_elements(0) == 30);
}

TEST_CASE("mloc: bad grids throw invalid_argument", "[mloc]") {
  CHECK_THROWS_AS(make_grid(Shape{}, 4, Shape{}, 1), std::invalid_argument);
  CHECK_THROWS_AS(make_grid(Shape(17, 1), 4, Shape(17, 1), 1), std::invalid_argument);
  CHECK_THROWS_AS(make_grid(Shape{10, 10}, 4, Shape{0, 5}, 1), std::invalid_argument);
  CHECK_THROWS_AS(make_grid(Shape{10, 0}, 4, Shape{5, 5}, 1), std::invalid_argument);
  CHECK_THROWS_AS(make_grid(Shape{10, 10}, 4, Shape{5}, 1), std::invalid_argument);
  CHECK_THROWS_AS(make_grid(Shape{10, 10}, 4, Shape{5, 5, 5}, 1), std::invalid_argument);
  CHECK_THROWS_AS(make_grid(Shape{10, 10}, 4, Shape{5, 5}, 0), std::invalid_argument);
  CHECK_THROWS_AS(make_grid(Shape{10, 10}, 0, Shape{5, 5}, 1), std::invalid_argument);
  // Too many units: 2^27 chunks of one group and one bin.
  CHECK_THROWS_AS(make_grid(Shape{1u << 14, 1u << 13}, 1, Shape{1, 1}, 1), std::invalid_argument);
  // Exactly kMaxUnits is allowed, one more unit is not.
  static_assert(MlocGrid::kMaxUnits == (u64{1} << 26));
  CHECK(make_grid(Shape{64}, 8, Shape{1}, 1u << 17).units() == MlocGrid::kMaxUnits);
  CHECK_THROWS_AS(make_grid(Shape{64}, 8, Shape{1}, (1u << 17) + 1), std::invalid_argument);
  // bins x groups x chunks = 2^29 x 8 x 2^32 wraps to 0 in 64 bits.
  CHECK_THROWS_AS(make_grid(Shape{u64{1} << 32}, 8, Shape{1}, 1u << 29), std::invalid_argument);
  // A chunk count that itself overflows 64 bits (to 0, and to 2).
  CHECK_THROWS_AS(make_grid(Shape{u64{1} << 32, u64{1} << 32}, 1, Shape{1, 1}, 1), std::invalid_argument);
  CHECK_THROWS_AS(make_grid(Shape{(u64{1} << 63) + 1, 2}, 1, Shape{1, 1}, 1), std::invalid_argument);
  // Chunks of more than 2^32 elements.
  CHECK_THROWS_AS(make_grid(Shape{1u << 17, 1u << 16}, 1, Shape{1u << 17, 1u << 16}, 1), std::invalid_argument);
  CHECK_THROWS_AS(make_grid(Shape{1u << 16, 1u << 16}, 1, Shape{1u << 16, 1u << 16}, 1), std::invalid_argument);
}

// ---------------------------------------------------------------- units

TEST_CASE("mloc: unit() numbers units in the priority's order, outermost level first", "[mloc]") {
  struct Case {
    Shape shape, chunk;
    u32 itemsize;
    bool float64;
    u32 bins;
  };
  for (const Case& k : std::vector<Case>{{{13, 9}, {4, 5}, 8, true, 5},    // 8 chunks, 7 groups, 5 bins
                                         {{50}, {5}, 2, false, 3},          // 10 chunks, 2 groups, 3 bins
                                         {{6, 6, 6}, {3, 2, 6}, 4, false, 11}}) {
    for (const std::string& text : all_priority_texts()) {
      const MlocPriority p = priority_of(text);
      MlocGrid g = make_grid(k.shape, k.itemsize, k.chunk, k.bins, p, k.float64);
      const u64 B = g.bins(), G = g.groups().size(), C = g.chunks();
      INFO(text << " bins " << B << " groups " << G << " chunks " << C);
      REQUIRE(g.units() == B * G * C);
      // Sort every (bin, group, chunk) by the key the priority names,
      // outermost first: unit() must number them 0, 1, 2, ... in that order.
      std::vector<std::pair<std::array<u64, 3>, std::array<u64, 3>>> all;  // key, (b, g, c)
      for (u64 b = 0; b < B; ++b)
        for (u64 gr = 0; gr < G; ++gr)
          for (u64 c = 0; c < C; ++c) {
            std::array<u64, 3> key{};
            for (int i = 0; i < 3; ++i) key[i] = level_value(p[i], b, gr, c);
            all.push_back({key, {b, gr, c}});
          }
      std::sort(all.begin(), all.end());
      std::vector<bool> hit(g.units(), false);
      for (u64 i = 0; i < all.size(); ++i) {
        const auto& [b, gr, c] = all[i].second;
        const u64 u = g.unit(u32(b), u32(gr), c);
        REQUIRE(u < g.units());
        CHECK_FALSE(hit[u]);
        hit[u] = true;
        REQUIRE(u == i);
      }
    }
  }
  // A few worked values (bins 5, 7 float64 groups, 8 chunks).
  MlocGrid vms = make_grid({13, 9}, 8, {4, 5}, 5, priority_of("V-M-S"), true);
  CHECK(vms.unit(1, 0, 0) == 7 * 8);
  CHECK(vms.unit(0, 1, 0) == 8);
  CHECK(vms.unit(0, 0, 1) == 1);
  MlocGrid svm = make_grid({13, 9}, 8, {4, 5}, 5, priority_of("S-V-M"), true);
  CHECK(svm.unit(0, 0, 1) == 5 * 7);
  CHECK(svm.unit(1, 0, 0) == 7);
  CHECK(svm.unit(0, 1, 0) == 1);
  MlocGrid msv = make_grid({13, 9}, 8, {4, 5}, 5, priority_of("M-S-V"), true);
  CHECK(msv.unit(0, 1, 0) == 8 * 5);
  CHECK(msv.unit(0, 0, 1) == 5);
  CHECK(msv.unit(1, 0, 0) == 1);
}

TEST_CASE("mloc: position entries are bins outermost, chunks along the curve, whatever the priority", "[mloc]") {
  for (const std::string& text : all_priority_texts()) {
    MlocGrid g = make_grid({13, 9}, 8, {4, 5}, 5, priority_of(text), true);
    u64 i = 0;
    for (u32 b = 0; b < g.bins(); ++b)
      for (u64 c = 0; c < g.chunks(); ++c) CHECK(g.position_entry(b, c) == i++);
  }
}

// ---------------------------------------------------------------- default chunk

TEST_CASE("mloc: default chunks are balanced power-of-two bricks of at most 2 MiB", "[mloc]") {
  CHECK(MlocGrid::default_chunk(Shape{1024, 1024, 256}, 8) == Shape{64, 64, 64});
  // 2^19 elements: one more doubling than a cube, on the last dimension.
  CHECK(MlocGrid::default_chunk(Shape{1024, 1024, 256}, 4) == Shape{64, 64, 128});
  CHECK(MlocGrid::default_chunk(Shape{10, 3}, 8) == Shape{10, 3});
  CHECK(MlocGrid::default_chunk(Shape{u64{1} << 30}, 4) == Shape{u64{1} << 19});
  const std::vector<Shape> shapes{{1024, 1024, 256}, {10, 3},          {u64{1} << 30}, {1000, 1000},
                                  {7, 300, 5000},    {100000, 2, 100000}, Shape(12, 3),    {1, 1, 1 << 20}};
  for (const Shape& s : shapes) {
    for (u32 item : {1u, 2u, 4u, 8u, 16u}) {
      const Shape c = MlocGrid::default_chunk(s, item);
      INFO("dims " << s.size() << " shape[0] " << s[0] << " itemsize " << item);
      REQUIRE(c.size() == s.size());
      const u64 elems = product(c);
      CHECK(elems * item <= MlocGrid::kDefaultChunkBytes);
      for (std::size_t d = 0; d < s.size(); ++d) {
        CHECK(c[d] >= 1);
        CHECK(c[d] <= s[d]);
        const bool pow2 = (c[d] & (c[d] - 1)) == 0;
        CHECK((pow2 || c[d] == s[d]));
        // Maximal: no side that can still grow fits one more doubling.
        if (c[d] < s[d]) {
          const u64 grown = elems / c[d] * std::min(2 * c[d], s[d]);
          CHECK(grown * item > MlocGrid::kDefaultChunkBytes);
        }
      }
    }
  }
}
