// Gap-free Hilbert and Morton orders (see curve_order.h).
//
// The descent. At level i (i = b-1 .. 0) the current sub-cube has side 2^(i+1)
// and origin lo[]; it splits into 2^n children of side h = 2^i. A child is
// named by its position w in the curve order of that sub-cube (0 .. 2^n-1);
// its geometric position is an n-bit word whose bit for dimension j says
// whether the child is in the low half [lo_j, lo_j + h) or the high half
// [lo_j + h, lo_j + 2h) of that dimension. Its in-grid volume is the product
// over dimensions of the overlap of that half with [0, G_j).
//
// Both curves map w to the geometric word through "code bits" c_0 .. c_{n-1},
// each of which drives exactly one dimension (possibly with its halves
// swapped):
//   Morton:  c_k = w_k;               code bit k drives dimension n-1-k.
//   Hilbert: c_k = w_k XOR w_{k+1}    (the Gray code gc(w), w_n = 0); the word
//            is T^-1_(e,d)(gc(w)) = rotl(gc(w), d+1) XOR e, so code bit k
//            drives dimension p = (k+d+1) mod n, halves swapped if bit p of e.
// So vol(w) = prod_k g_k(c_k), where g_k(0), g_k(1) are the overlaps of the
// two halves of the driven dimension. Summing vol(w') over all w' < w: w'
// agrees with w above some bit m where w_m = 1 and w'_m = 0, and is free
// below. Summing a free bit x_k of the product kills the dependence on x_k
// (g_k(x) + g_k(1-x) is the same for either x, in both curves), so
//   sum_{w' < w} vol(w') = sum_{m : w_m = 1} [prod_{k>m} g_k(c_k(w))]
//                            * g_m(c_m with w_m := 0) * prod_{k<m} (g_k(0) + g_k(1)),
// O(n) per level instead of O(2^n n). unrank() chooses the bits of w from the
// top with the same sums. Every partial product above multiplies overlaps of
// distinct dimensions, so it is at most prod G and cannot overflow.
//
// Hilbert state (Hamilton 2006, Algorithm 2): entry point e and direction d of
// the current sub-cube, both 0 at the top. After choosing child w:
//   e <- e XOR rotl(e(w), d+1),  d <- (d + d(w) + 1) mod n,
// with e(0) = 0, e(w) = gc(2 floor((w-1)/2)); d(0) = 0, d(w) = g(w-1) mod n
// for even w, g(w) mod n for odd w, g(x) = number of trailing one bits of x.
#include "layouts/curve_order.h"

#include <algorithm>
#include <array>
#include <bit>
#include <limits>
#include <stdexcept>
#include <string>

namespace mmfs::layouts::detail {
namespace {

constexpr unsigned kMax = GapFreeCurve::kMaxDims;

std::uint32_t gray(std::uint32_t w) { return w ^ (w >> 1); }

std::uint32_t gray_inverse(std::uint32_t g) {
  // Prefix XOR from the top; words have at most 16 bits.
  g ^= g >> 1;
  g ^= g >> 2;
  g ^= g >> 4;
  g ^= g >> 8;
  return g;
}

// Rotations of an n-bit word by k in [0, n].
std::uint32_t rotl(std::uint32_t x, unsigned k, unsigned n) {
  if (k == 0 || k == n) return x;
  const std::uint32_t mask = (std::uint32_t{1} << n) - 1;
  return ((x << k) | (x >> (n - k))) & mask;
}

std::uint32_t rotr(std::uint32_t x, unsigned k, unsigned n) { return rotl(x, n - k, n); }

// Hamilton's e(w): entry corner of child w, relative to the parent's frame.
std::uint32_t entry_point(std::uint32_t w) { return w == 0 ? 0 : gray((w - 1) & ~std::uint32_t{1}); }

// Hamilton's d(w): intra-sub-cube direction of child w.
unsigned direction(std::uint32_t w, unsigned n) {
  if (w == 0) return 0;
  const std::uint32_t x = (w & 1) ? w : w - 1;
  const auto g = static_cast<unsigned>(std::countr_one(x));  // <= n
  return g == n ? 0 : g;
}

// Curve state of a sub-cube; unused (always zero) for Morton.
struct State {
  std::uint32_t e = 0;
  unsigned d = 0;
};

// The per-level factors g_k(c) and the prefix products of their totals.
struct Level {
  std::array<std::array<std::uint64_t, 2>, kMax> g;
  std::array<std::uint64_t, kMax + 1> below;  // below[m] = prod_{k<m} (g_k(0) + g_k(1))
};

class Engine {
 public:
  Engine(CurveKind kind, const std::vector<std::uint64_t>& extents, unsigned bits)
      : hilbert_(kind == CurveKind::kHilbert), G_(extents), n_(static_cast<unsigned>(extents.size())),
        bits_(bits) {}

  // Dimension driven by code bit k in a sub-cube with state s.
  unsigned dim_of(unsigned k, const State& s) const {
    if (!hilbert_) return n_ - 1 - k;
    const unsigned p = k + s.d + 1;  // < 2n
    return p >= n_ ? p - n_ : p;
  }

  // Code bit k of child w.
  unsigned code_bit(std::uint32_t w, unsigned k) const {
    return static_cast<unsigned>(((hilbert_ ? gray(w) : w) >> k) & 1);
  }

  // Code bit k of child w with bit k of w forced to 0 (bits above k are w's).
  unsigned code_bit_if_zero(std::uint32_t w, unsigned k) const {
    return hilbert_ ? static_cast<unsigned>((w >> (k + 1)) & 1) : 0;
  }

  void make_level(const std::uint64_t* lo, std::uint64_t half, const State& s, Level& L) const {
    L.below[0] = 1;
    for (unsigned k = 0; k < n_; ++k) {
      const unsigned j = dim_of(k, s);
      // lo[j] < G_[j]: the current sub-cube is never empty.
      const std::uint64_t room = G_[j] - lo[j];
      const std::uint64_t low = std::min(half, room);
      const std::uint64_t high = room > half ? std::min(half, room - half) : 0;
      const bool swap = hilbert_ && ((s.e >> j) & 1);
      L.g[k][0] = swap ? high : low;
      L.g[k][1] = swap ? low : high;
      L.below[k + 1] = L.below[k] * (low + high);
    }
  }

  // Child of the current sub-cube (state s) holding a cell whose bits at this
  // level form the geometric word `geo` (bit j = dimension j).
  std::uint32_t child_of(std::uint32_t geo, const State& s) const {
    if (hilbert_) return gray_inverse(rotr(geo ^ s.e, s.d + 1, n_));
    std::uint32_t w = 0;
    for (unsigned j = 0; j < n_; ++j) w |= ((geo >> j) & 1) << (n_ - 1 - j);
    return w;
  }

  // Geometric word (bit j = dimension j in the high half) of child w.
  std::uint32_t geometry_of(std::uint32_t w, const State& s) const {
    if (hilbert_) return rotl(gray(w), s.d + 1, n_) ^ s.e;
    std::uint32_t geo = 0;
    for (unsigned j = 0; j < n_; ++j) geo |= ((w >> (n_ - 1 - j)) & 1) << j;
    return geo;
  }

  State next(const State& s, std::uint32_t w) const {
    if (!hilbert_) return s;
    const unsigned d = s.d + direction(w, n_) + 1;  // < 2n
    return State{s.e ^ rotl(entry_point(w), s.d + 1, n_), d >= n_ ? d - n_ : d};
  }

  // True if the sub-cube of side 2^(i+1) at lo lies entirely inside the grid;
  // then so do all its descendants, and in-grid ranks inside it are plain
  // curve indices (the fast path of rank() and unrank()).
  bool inside(const std::uint64_t* lo, unsigned i) const {
    bool all = true;
    for (unsigned j = 0; j < n_; ++j) all &= ((G_[j] - lo[j]) >> i) >= 2;
    return all;
  }

  // Bits of the cell at level i as a geometric word (bit j = dimension j).
  std::uint32_t level_word(std::span<const std::uint64_t> cell, unsigned i) const {
    std::uint32_t geo = 0;
    for (unsigned j = 0; j < n_; ++j) geo |= static_cast<std::uint32_t>((cell[j] >> i) & 1) << j;
    return geo;
  }

  std::uint64_t rank(std::span<const std::uint64_t> cell) const {
    std::array<std::uint64_t, kMax> lo{};
    State s;
    Level L;
    std::uint64_t r = 0;
    for (unsigned i = bits_; i-- > 0;) {
      if (inside(lo.data(), i)) {
        // 2^(n(i+1)) cells fit in the grid, so n*(i+1) <= 63: no overflow.
        std::uint64_t t = 0;
        for (unsigned l = i + 1; l-- > 0;) {
          const std::uint32_t w = child_of(level_word(cell, l), s);
          t = (t << n_) | w;
          s = next(s, w);
        }
        return r + t;
      }
      const std::uint64_t half = std::uint64_t{1} << i;
      make_level(lo.data(), half, s, L);
      const std::uint32_t geo = level_word(cell, i);
      const std::uint32_t w = child_of(geo, s);
      std::uint64_t prefix = 1;  // prod_{k>m} g_k(c_k(w))
      // Branch-free: the bits of w are random for random cells.
      for (unsigned m = n_; m-- > 0;) {
        const std::uint64_t wm = (w >> m) & 1;
        r += wm * (prefix * L.g[m][code_bit_if_zero(w, m)] * L.below[m]);
        prefix *= L.g[m][code_bit(w, m)];
      }
      for (unsigned j = 0; j < n_; ++j) lo[j] += ((geo >> j) & 1) * half;
      s = next(s, w);
    }
    return r;
  }

  void unrank(std::uint64_t r, std::span<std::uint64_t> cell) const {
    std::array<std::uint64_t, kMax> lo{};
    State s;
    Level L;
    const std::uint32_t mask = (std::uint32_t{1} << n_) - 1;
    for (unsigned i = bits_; i-- > 0;) {
      if (inside(lo.data(), i)) {
        for (unsigned l = i + 1; l-- > 0;) {
          const auto w = static_cast<std::uint32_t>(r >> (n_ * l)) & mask;
          const std::uint32_t geo = geometry_of(w, s);
          for (unsigned j = 0; j < n_; ++j) lo[j] += static_cast<std::uint64_t>((geo >> j) & 1) << l;
          s = next(s, w);
        }
        break;
      }
      const std::uint64_t half = std::uint64_t{1} << i;
      make_level(lo.data(), half, s, L);
      std::uint32_t w = 0;
      std::uint64_t prefix = 1;
      for (unsigned m = n_; m-- > 0;) {
        const unsigned c0 = code_bit_if_zero(w, m);
        const std::uint64_t v0 = prefix * L.g[m][c0] * L.below[m];
        const unsigned wm = r >= v0;  // branch-free, as in rank()
        r -= wm * v0;
        w |= wm << m;
        prefix *= L.g[m][c0 ^ wm];
      }
      const std::uint32_t geo = geometry_of(w, s);
      for (unsigned j = 0; j < n_; ++j) lo[j] += ((geo >> j) & 1) * half;
      s = next(s, w);
    }
    std::copy_n(lo.begin(), n_, cell.begin());
  }

  void for_each(const CurveVisitor& f) const {
    Walker walker{*this, f, {}, 0};
    walker.visit(bits_, State{});
  }

 private:
  struct Walker {
    const Engine& eng;
    const CurveVisitor& f;
    std::array<std::uint64_t, kMax> lo;
    std::uint64_t next_rank;

    // Visits the (non-empty) sub-cube of side 2^levels at lo with state s.
    void visit(unsigned levels, const State& s) {
      if (levels == 0) {
        f(next_rank++, std::span<const std::uint64_t>(lo.data(), eng.n_));
        return;
      }
      const unsigned i = levels - 1;
      Level L;
      eng.make_level(lo.data(), std::uint64_t{1} << i, s, L);
      children(i, s, L, eng.n_, 0);
    }

    // Enumerates, in increasing w, the non-empty children whose bits of w
    // above bit `m` are those of `w`. A prefix whose factors are all non-zero
    // always extends to a non-empty child (each dimension of a non-empty
    // sub-cube has a non-empty half on either side of any fixed code bit), so
    // this costs O(n) per non-empty child.
    void children(unsigned i, const State& s, const Level& L, unsigned m, std::uint32_t w) {
      if (m == 0) {
        const std::uint64_t half = std::uint64_t{1} << i;
        const std::uint32_t geo = eng.geometry_of(w, s);
        for (unsigned j = 0; j < eng.n_; ++j)
          if ((geo >> j) & 1) lo[j] += half;
        visit(i, eng.next(s, w));
        for (unsigned j = 0; j < eng.n_; ++j)
          if ((geo >> j) & 1) lo[j] -= half;
        return;
      }
      const unsigned k = m - 1;
      for (std::uint32_t bit = 0; bit < 2; ++bit) {
        const std::uint32_t wk = w | (bit << k);
        if (L.g[k][eng.code_bit(wk, k)] != 0) children(i, s, L, k, wk);
      }
    }
  };

  bool hilbert_;
  const std::vector<std::uint64_t>& G_;
  unsigned n_;
  unsigned bits_;
};

}  // namespace

GapFreeCurve::GapFreeCurve(CurveKind kind, std::vector<std::uint64_t> extents)
    : kind_(kind), extents_(std::move(extents)) {
  if (extents_.empty()) throw std::invalid_argument("curve order: a grid needs at least one dimension");
  if (extents_.size() > kMaxDims)
    throw std::invalid_argument("curve order: " + std::to_string(extents_.size()) +
                                " dimensions, at most " + std::to_string(kMaxDims) + " are supported");
  n_ = static_cast<unsigned>(extents_.size());
  cells_ = 1;
  for (std::uint64_t g : extents_) {
    if (g == 0) throw std::invalid_argument("curve order: zero extent");
    if (cells_ > std::numeric_limits<std::uint64_t>::max() / g)
      throw std::invalid_argument("curve order: cell count overflows 64 bits");
    cells_ *= g;
    bits_ = std::max(bits_, static_cast<unsigned>(std::bit_width(g - 1)));
  }
}

std::uint64_t GapFreeCurve::rank(std::span<const std::uint64_t> cell) const {
  if (cell.size() != n_) throw std::invalid_argument("curve order: rank() of a cell with the wrong dimension count");
  for (unsigned j = 0; j < n_; ++j)
    if (cell[j] >= extents_[j]) throw std::out_of_range("curve order: rank() of a cell outside the grid");
  return Engine(kind_, extents_, bits_).rank(cell);
}

void GapFreeCurve::unrank(std::uint64_t rank, std::span<std::uint64_t> cell) const {
  if (cell.size() != n_) throw std::invalid_argument("curve order: unrank() into a cell with the wrong dimension count");
  if (rank >= cells_) throw std::out_of_range("curve order: unrank() of a rank past the last cell");
  Engine(kind_, extents_, bits_).unrank(rank, cell);
}

void GapFreeCurve::for_each(const CurveVisitor& f) const { Engine(kind_, extents_, bits_).for_each(f); }

}  // namespace mmfs::layouts::detail
