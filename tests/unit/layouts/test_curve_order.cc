// Gap-free Hilbert and Morton orders of N-dimensional grids (layouts/curve_order.h).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

#include "layouts/curve_order.h"
#include "tests/unit/support/layout_test_support.h"

using mmfs::layouts::HilbertOrder;
using mmfs::layouts::ZOrder;
using mmfs::layouts::testing::d2xy;
using u64 = std::uint64_t;
using Cell = std::vector<u64>;
using Shape = std::vector<u64>;

namespace {

u64 product(const Shape& g) {
  return std::accumulate(g.begin(), g.end(), u64{1}, [](u64 a, u64 b) { return a * b; });
}

unsigned padded_bits(const Shape& g) {
  unsigned b = 0;
  for (u64 e : g) {
    while ((u64{1} << b) < e) ++b;
  }
  return b;
}

// C-order linear index of a cell (to check that every cell is hit once).
u64 linear(const Shape& g, const Cell& c) {
  u64 x = 0;
  for (std::size_t j = 0; j < g.size(); ++j) x = x * g[j] + c[j];
  return x;
}

// Every cell of the grid in C order.
std::vector<Cell> all_cells(const Shape& g) {
  std::vector<Cell> out;
  Cell c(g.size(), 0);
  for (u64 k = 0; k < product(g); ++k) {
    out.push_back(c);
    for (std::size_t j = g.size(); j-- > 0;) {
      if (++c[j] < g[j]) break;
      c[j] = 0;
    }
  }
  return out;
}

// ---- Reference curves over the padded cube, written independently of the
// library: each gives the index of a cell in the full (padded) curve.

// Morton key, dimension 0 most significant within each level's group.
u64 ref_morton_index(const Cell& c, unsigned b) {
  u64 h = 0;
  for (unsigned i = b; i-- > 0;)
    for (std::size_t j = 0; j < c.size(); ++j) h = (h << 1) | ((c[j] >> i) & 1);
  return h;
}

// Hamilton, "Compact Hilbert Indices" (2006), Algorithm 2 HilbertIndex,
// transcribed literally with bit loops. Bit j of a level word = dimension j.
u64 ref_hilbert_index(const Cell& p, unsigned b) {
  const unsigned n = static_cast<unsigned>(p.size());
  auto bit = [](u64 x, unsigned i) -> unsigned { return static_cast<unsigned>((x >> i) & 1); };
  auto rotr1 = [n](unsigned x) { return (x >> 1) | ((x & 1) << (n - 1)); };
  auto rotl1 = [n](unsigned x) { return ((x << 1) | (x >> (n - 1))) & ((1u << n) - 1); };
  auto rotr = [&](unsigned x, unsigned k) {
    for (unsigned t = 0; t < k % n; ++t) x = rotr1(x);
    return x;
  };
  auto rotl = [&](unsigned x, unsigned k) {
    for (unsigned t = 0; t < k % n; ++t) x = rotl1(x);
    return x;
  };
  auto gc = [](unsigned i) { return i ^ (i >> 1); };
  auto gc_inverse = [n](unsigned g) {
    unsigned w = 0, acc = 0;
    for (unsigned k = n; k-- > 0;) {
      acc ^= (g >> k) & 1;
      w |= acc << k;
    }
    return w;
  };
  auto trailing_ones = [](unsigned i) {
    unsigned t = 0;
    while (i & 1) {
      ++t;
      i >>= 1;
    }
    return t;
  };
  auto entry = [&](unsigned i) { return i == 0 ? 0u : gc(2 * ((i - 1) / 2)); };
  auto dir = [&](unsigned i) {
    if (i == 0) return 0u;
    return (i % 2 == 0 ? trailing_ones(i - 1) : trailing_ones(i)) % n;
  };
  u64 h = 0;
  unsigned e = 0, d = 0;
  for (unsigned i = b; i-- > 0;) {
    unsigned l = 0;
    for (unsigned j = 0; j < n; ++j) l |= bit(p[j], i) << j;
    l = rotr(l ^ e, d + 1);
    const unsigned w = gc_inverse(l);
    e = e ^ rotl(entry(w), d + 1);
    d = (d + dir(w) + 1) % n;
    h = (h << n) | w;
  }
  return h;
}

// The gap-free order by brute force: the grid's cells sorted by their index
// in the padded curve.
template <class IndexFn>
std::vector<Cell> brute_force_order(const Shape& g, IndexFn index) {
  std::vector<std::pair<u64, Cell>> keyed;
  for (Cell& c : all_cells(g)) {
    const u64 key = index(c);
    keyed.emplace_back(key, std::move(c));
  }
  std::sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (std::size_t k = 1; k < keyed.size(); ++k) REQUIRE(keyed[k - 1].first != keyed[k].first);
  std::vector<Cell> out;
  for (auto& [key, c] : keyed) out.push_back(std::move(c));
  return out;
}

// The cells in for_each order, checking that the ranks come 0, 1, 2, ...
template <class Order>
std::vector<Cell> walk(const Order& order) {
  std::vector<Cell> out;
  u64 expected = 0;
  bool in_order = true;
  order.for_each([&](u64 r, std::span<const u64> c) {
    if (r != expected) in_order = false;
    ++expected;
    out.emplace_back(c.begin(), c.end());
  });
  CHECK(in_order);
  CHECK(expected == order.cells());
  return out;
}

// rank/unrank/for_each agree and form a bijection onto [0, cells).
template <class Order>
void check_bijection(const Order& order, const Shape& g) {
  INFO("shape of " << g.size() << " dims, " << order.cells() << " cells");
  REQUIRE(order.cells() == product(g));
  const std::vector<Cell> seq = walk(order);
  REQUIRE(seq.size() == order.cells());
  std::vector<char> seen(order.cells(), 0);
  Cell c(g.size());
  std::size_t bad_unrank = 0, bad_rank = 0, dup = 0, outside = 0;
  for (u64 r = 0; r < order.cells(); ++r) {
    order.unrank(r, c);
    if (c != seq[r]) ++bad_unrank;
    for (std::size_t j = 0; j < g.size(); ++j)
      if (c[j] >= g[j]) ++outside;
    if (outside) break;
    if (order.rank(c) != r) ++bad_rank;
    char& s = seen[linear(g, c)];
    if (s) ++dup;
    s = 1;
  }
  CHECK(outside == 0);
  CHECK(bad_unrank == 0);
  CHECK(bad_rank == 0);
  CHECK(dup == 0);
  // unrank(rank(c)) == c, starting from the cells.
  std::size_t bad_roundtrip = 0;
  for (const Cell& cell : all_cells(g)) {
    order.unrank(order.rank(cell), c);
    if (c != cell) ++bad_roundtrip;
  }
  CHECK(bad_roundtrip == 0);
}

// Every aligned block of side 2^k of the padded cube holds a contiguous run
// of ranks (true of any gap-free recursive curve order).
template <class Order>
void check_blocks_contiguous(const Order& order, const Shape& g) {
  const unsigned b = padded_bits(g);
  const std::vector<Cell> seq = walk(order);
  for (unsigned k = 1; k < b; ++k) {
    std::map<Cell, std::pair<u64, u64>> first_last;  // block -> (first rank, count)
    std::size_t broken = 0;
    for (u64 r = 0; r < seq.size(); ++r) {
      Cell block = seq[r];
      for (u64& x : block) x >>= k;
      auto [it, fresh] = first_last.try_emplace(block, r, 0);
      if (it->second.first + it->second.second != r) ++broken;
      ++it->second.second;
    }
    INFO("block side 2^" << k);
    CHECK(broken == 0);
  }
}

bool face_adjacent(const Cell& a, const Cell& b) {
  u64 dist = 0;
  for (std::size_t j = 0; j < a.size(); ++j) dist += a[j] > b[j] ? a[j] - b[j] : b[j] - a[j];
  return dist == 1;
}

std::vector<Shape> random_shapes() {
  std::mt19937_64 rng(0x6d6d6673'63757276ULL);  // fixed seed
  std::vector<Shape> shapes = {
      {1},        {37},          {1, 1, 1},       {5, 1, 7},       {1, 33},          {33, 1},
      {3, 5},     {7, 9, 11},    {3, 5, 7, 9},    {2, 3, 1, 4, 5, 6}, {17, 1, 1, 19}, {37, 37, 37},
      {1, 1, 37}, {36, 1, 5, 2}, {9, 9, 9, 9, 9}, {6, 5, 4, 3, 2, 7}, {2, 2, 2, 2, 2, 3},
  };
  while (shapes.size() < 60) {
    const unsigned n = 1 + static_cast<unsigned>(rng() % 6);
    Shape g(n);
    for (u64& e : g) e = 1 + rng() % 37;
    if (product(g) <= 200000) shapes.push_back(g);
  }
  return shapes;
}

}  // namespace

TEST_CASE("curve order: bad grids are rejected") {
  CHECK_THROWS_AS(HilbertOrder(Shape{}), std::invalid_argument);
  CHECK_THROWS_AS(ZOrder(Shape{}), std::invalid_argument);
  CHECK_THROWS_AS(HilbertOrder(Shape(17, 2)), std::invalid_argument);
  CHECK_THROWS_AS(ZOrder(Shape(17, 1)), std::invalid_argument);
  CHECK_THROWS_AS(HilbertOrder(Shape{4, 0, 3}), std::invalid_argument);
  CHECK_THROWS_AS(ZOrder(Shape{0}), std::invalid_argument);
  CHECK_THROWS_AS(HilbertOrder(Shape{u64{1} << 32, u64{1} << 32}), std::invalid_argument);
  CHECK_THROWS_AS(ZOrder(Shape{3, u64{1} << 63}), std::invalid_argument);
  CHECK_NOTHROW(HilbertOrder(Shape(16, 1)));
  CHECK_NOTHROW(HilbertOrder(Shape{std::numeric_limits<u64>::max()}));

  HilbertOrder h({4, 5, 6});
  Cell c(3);
  CHECK_THROWS_AS(h.unrank(120, c), std::out_of_range);
  CHECK_THROWS_AS(h.rank(Cell{0, 5, 0}), std::out_of_range);
  CHECK_THROWS_AS(h.rank(Cell{0, 0}), std::invalid_argument);
  Cell short_cell(2);
  CHECK_THROWS_AS(h.unrank(0, short_cell), std::invalid_argument);
}

TEST_CASE("curve order: a single cell and 1-D grids") {
  for (const Shape& g : {Shape{1}, Shape(16, 1), Shape{1, 1, 1}}) {
    HilbertOrder h(g);
    ZOrder z(g);
    CHECK(h.cells() == 1);
    CHECK(h.bits() == 0);
    CHECK(h.rank(Cell(g.size(), 0)) == 0);
    CHECK(z.rank(Cell(g.size(), 0)) == 0);
    check_bijection(h, g);
    check_bijection(z, g);
  }
  // In 1-D both curves are the identity.
  for (u64 e : {2u, 5u, 8u, 37u}) {
    HilbertOrder h({e});
    ZOrder z({e});
    for (u64 x = 0; x < e; ++x) {
      CHECK(h.rank(Cell{x}) == x);
      CHECK(z.rank(Cell{x}) == x);
    }
  }
}

TEST_CASE("curve order: random shapes are bijections onto [0, cells)") {
  for (const Shape& g : random_shapes()) {
    check_bijection(HilbertOrder(g), g);
    check_bijection(ZOrder(g), g);
  }
}

TEST_CASE("curve order: gap-free order is the padded curve with out-of-grid cells removed") {
  for (const Shape& g : random_shapes()) {
    const unsigned b = padded_bits(g);
    INFO("shape of " << g.size() << " dims, " << product(g) << " cells");
    HilbertOrder h(g);
    ZOrder z(g);
    CHECK(h.bits() == b);
    CHECK(walk(h) == brute_force_order(g, [b](const Cell& c) { return ref_hilbert_index(c, b); }));
    CHECK(walk(z) == brute_force_order(g, [b](const Cell& c) { return ref_morton_index(c, b); }));
  }
}

TEST_CASE("curve order: 2-D Hilbert matches the textbook d2xy, with gaps removed") {
  for (const Shape& g : {Shape{8, 8}, Shape{16, 16}, Shape{5, 7}, Shape{13, 3}, Shape{1, 9}, Shape{37, 20}}) {
    const u64 side = u64{1} << padded_bits(g);
    std::vector<Cell> expected;
    for (u64 d = 0; d < side * side; ++d) {
      u64 x, y;
      d2xy(side, d, x, y);
      if (x < g[0] && y < g[1]) expected.push_back({x, y});
    }
    HilbertOrder h(g);
    INFO(g[0] << " x " << g[1]);
    CHECK(walk(h) == expected);
  }
}

TEST_CASE("curve order: aligned blocks hold contiguous rank runs") {
  for (const Shape& g : random_shapes()) {
    check_blocks_contiguous(HilbertOrder(g), g);
    check_blocks_contiguous(ZOrder(g), g);
  }
}

TEST_CASE("curve order: Hilbert steps are face-adjacent on power-of-two cubes") {
  for (const Shape& g : {Shape{8, 8}, Shape{8, 8, 8}, Shape(4, 4), Shape(5, 4), Shape{16, 16, 16}, Shape(16, 2)}) {
    HilbertOrder h(g);
    const std::vector<Cell> seq = walk(h);
    REQUIRE(seq.size() == product(g));
    CHECK(seq.front() == Cell(g.size(), 0));
    std::size_t jumps = 0;
    for (std::size_t k = 1; k < seq.size(); ++k)
      if (!face_adjacent(seq[k - 1], seq[k])) ++jumps;
    INFO(g.size() << " dims of side " << g[0]);
    CHECK(jumps == 0);
  }
}

TEST_CASE("curve order: Hilbert runs stay face-adjacent inside full blocks of a ragged grid") {
  // Gaps can only open where the padded curve leaves the grid: within each
  // fully in-grid aligned block the gap-free order is still a Hilbert walk.
  const Shape g{24, 20, 12};
  HilbertOrder h(g);
  const std::vector<Cell> seq = walk(h);
  std::size_t jumps = 0;
  for (std::size_t k = 1; k < seq.size(); ++k) {
    bool same_block = true;
    for (std::size_t j = 0; j < g.size(); ++j) same_block &= (seq[k - 1][j] >> 2) == (seq[k][j] >> 2);
    if (same_block && !face_adjacent(seq[k - 1], seq[k])) ++jumps;
  }
  CHECK(jumps == 0);
}

TEST_CASE("curve order: Z-order on 4x4 is the textbook Morton sequence") {
  const std::vector<Cell> morton = {{0, 0}, {0, 1}, {1, 0}, {1, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3},
                                    {2, 0}, {2, 1}, {3, 0}, {3, 1}, {2, 2}, {2, 3}, {3, 2}, {3, 3}};
  ZOrder z({4, 4});
  CHECK(walk(z) == morton);
  for (u64 r = 0; r < morton.size(); ++r) CHECK(z.rank(morton[r]) == r);
  // Ragged: on 3x3 the padded 4x4 sequence loses the cells with a 3 and closes up.
  const std::vector<Cell> ragged = {{0, 0}, {0, 1}, {1, 0}, {1, 1}, {0, 2}, {1, 2}, {2, 0}, {2, 1}, {2, 2}};
  CHECK(walk(ZOrder({3, 3})) == ragged);
}

TEST_CASE("curve order: 16 dimensions") {
  const Shape twos(16, 2);
  HilbertOrder h(twos);
  ZOrder z(twos);
  CHECK(h.cells() == 65536);
  check_bijection(h, twos);
  check_bijection(z, twos);
  // Z-order on the 2^16 cube is the plain binary count, dimension 0 first.
  Cell c(16);
  for (u64 r : {u64{0}, u64{1}, u64{0x8000}, u64{0x1234}, u64{0xffff}}) {
    z.unrank(r, c);
    for (unsigned j = 0; j < 16; ++j) CHECK(c[j] == ((r >> (15 - j)) & 1));
  }
  // Mixed small extents, including 1s.
  const Shape mixed{3, 1, 2, 2, 1, 3, 2, 1, 2, 2, 1, 2, 3, 1, 2, 2};
  const unsigned b = padded_bits(mixed);
  check_bijection(HilbertOrder(mixed), mixed);
  check_bijection(ZOrder(mixed), mixed);
  CHECK(walk(HilbertOrder(mixed)) == brute_force_order(mixed, [b](const Cell& x) { return ref_hilbert_index(x, b); }));
  CHECK(walk(ZOrder(mixed)) == brute_force_order(mixed, [b](const Cell& x) { return ref_morton_index(x, b); }));
}

TEST_CASE("curve order: huge extents do not overflow") {
  std::mt19937_64 rng(42);
  const Shape shapes[] = {{std::numeric_limits<u64>::max()},
                          {(u64{1} << 32) + 7, (u64{1} << 31) - 3},
                          {1000003, 999983, 1000033},
                          {65537, 3, 65521, 7, 5}};
  for (const Shape& g : shapes) {
    HilbertOrder h(g);
    ZOrder z(g);
    Cell c(g.size()), back(g.size());
    for (int t = 0; t < 2000; ++t) {
      for (std::size_t j = 0; j < g.size(); ++j) c[j] = rng() % g[j];
      const u64 rh = h.rank(c), rz = z.rank(c);
      REQUIRE(rh < h.cells());
      REQUIRE(rz < z.cells());
      h.unrank(rh, back);
      REQUIRE(back == c);
      z.unrank(rz, back);
      REQUIRE(back == c);
    }
    // The last rank and the first exist.
    h.unrank(h.cells() - 1, back);
    CHECK(h.rank(back) == h.cells() - 1);
    h.unrank(0, back);
    CHECK(h.rank(back) == 0);
  }
  HilbertOrder one_d({std::numeric_limits<u64>::max()});
  CHECK(one_d.rank(Cell{std::numeric_limits<u64>::max() - 1}) == std::numeric_limits<u64>::max() - 1);
}

TEST_CASE("curve order: ranking a 1024x1024x64 grid is fast") {
  const Shape g{1024, 1024, 64};
  HilbertOrder h(g);
  ZOrder z(g);
  std::mt19937_64 rng(7);
  std::vector<Cell> cells(100000, Cell(3));
  for (Cell& c : cells)
    for (std::size_t j = 0; j < 3; ++j) c[j] = rng() % g[j];
  // O(levels * dims) per rank: 2e5 ranks take a few milliseconds (no timed assertion).
  u64 sum = 0;
  for (const Cell& c : cells) sum += h.rank(c) + z.rank(c);
  CHECK(sum > 0);
  Cell back(3);
  for (std::size_t k = 0; k < 1000; ++k) {
    h.unrank(h.rank(cells[k]), back);
    CHECK(back == cells[k]);
  }
}
