#include "layouts/regrid.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace mmfs::layouts {
namespace {

// One dimension of a box [lo, hi) cut where the grid's cells of `cell`
// elements begin: segment s is the part of the box in grid cell first + s.
struct Cut {
  std::uint64_t lo = 0, hi = 0, cell = 1, first = 0;
  Cut(const DimRange& r, std::uint64_t grid) : lo(r.start), hi(r.stop), cell(grid) {
    if (grid == 0 || r.step != 1 || r.fixed || r.stop <= r.start)
      throw std::invalid_argument("regrid: a box of step 1 without fixed or empty dimensions and a grid of cells > 0");
    first = r.start / grid;
  }
  std::uint64_t segments() const { return (hi - 1) / cell - first + 1; }
  std::uint64_t start(std::uint64_t s) const { return std::max(lo, (first + s) * cell); }
  std::uint64_t before(std::uint64_t s) const { return start(s) - lo; }  // elements in the segments before s
  std::uint64_t length(std::uint64_t s) const { return std::min(hi, (first + s + 1) * cell) - start(s); }
  std::uint64_t total() const { return hi - lo; }
};

std::vector<Cut> cuts(const Selection& box, std::span<const std::uint64_t> grid) {
  const auto& dims = box.dims();
  if (dims.empty() || grid.size() != dims.size()) throw std::invalid_argument("regrid: one grid cell size per dimension");
  std::vector<Cut> c;
  c.reserve(dims.size());
  for (std::size_t d = 0; d < dims.size(); ++d) c.emplace_back(dims[d], grid[d]);
  return c;
}

// Copies one source row's segments to their blocks and moves each block's
// write position on by one row. `Bytes` > 0: every segment is that long (a
// thin chunk's one element), a copy the compiler turns into a load and a
// store; 0: each its own length.
template <std::size_t Bytes>
void copy_segments(const std::byte* from, std::span<std::byte*> to, std::span<const std::uint64_t> src_at,
                   std::span<const std::uint64_t> bytes) {
  for (std::size_t g = 0; g < to.size(); ++g) {
    const std::size_t n = Bytes ? Bytes : bytes[g];
    std::memcpy(to[g], from + src_at[g], n);
    to[g] += n;
  }
}

}  // namespace

// Block (s_0, ..., s_{r-1}) begins after every block before it in C order of
// the blocks: along dimension d, the blocks with a smaller s_d (before_d(s_d)
// elements of that dimension, whole in the dimensions after d, and as long
// as this block in the dimensions before d). Inside a block, elements are in
// C order of the block's own lengths.
void regrid(const Selection& box, std::span<const std::uint64_t> grid, std::uint32_t itemsize, const std::byte* src,
            std::byte* dst) {
  const std::vector<Cut> c = cuts(box, grid);
  const std::size_t r = c.size();
  const std::size_t outer = r - 1;  // the dimensions a row's position runs over
  std::vector<std::uint64_t> tail(r, 1);  // elements of the box in the dimensions after d
  for (std::size_t d = r - 1; d-- > 0;) tail[d] = tail[d + 1] * c[d + 1].total();
  const Cut& last = c[r - 1];
  const std::uint64_t last_segments = last.segments();
  std::vector<std::uint64_t> last_before(last_segments), last_bytes(last_segments);
  for (std::uint64_t g = 0; g < last_segments; ++g) {
    last_before[g] = last.before(g);
    last_bytes[g] = last.length(g) * itemsize;
  }
  const std::uint64_t row_bytes = last.total() * itemsize;
  std::uint64_t rows = 1;
  for (std::size_t d = 0; d < outer; ++d) rows *= c[d].total();

  std::vector<std::uint64_t> last_src(last_segments);
  for (std::uint64_t g = 0; g < last_segments; ++g) last_src[g] = last_before[g] * itemsize;
  std::uint64_t same = last_bytes[0];
  for (std::uint64_t b : last_bytes)
    if (b != same) same = 0;
  auto copy = copy_segments<0>;
  switch (same) {
    case 1: copy = copy_segments<1>; break;
    case 2: copy = copy_segments<2>; break;
    case 4: copy = copy_segments<4>; break;
    case 8: copy = copy_segments<8>; break;
    case 16: copy = copy_segments<16>; break;
    default: break;
  }

  // Each segment's write position for the row at hand. The next row along
  // the last outer dimension, in the same segment, lands one row further in
  // the same blocks; any other step (a new segment, a carry) recomputes them.
  std::vector<std::byte*> to(last_segments);
  std::vector<std::uint64_t> seg(outer, 0), within(outer, 0);  // each row's segment and place in it
  auto place = [&]() {
    std::uint64_t block_at = 0;  // the row's block's first element, for last segment 0
    std::uint64_t above = 1;     // the block's elements in the dimensions before the last
    std::uint64_t row_in = 0;    // the row's index among its block's rows
    for (std::size_t d = 0; d < outer; ++d) {
      block_at += c[d].before(seg[d]) * tail[d] * above;
      const std::uint64_t len = c[d].length(seg[d]);
      above *= len;
      row_in = row_in * len + within[d];
    }
    for (std::uint64_t g = 0; g < last_segments; ++g)
      to[g] = dst + (block_at + last_before[g] * above + row_in * (last_bytes[g] / itemsize)) * itemsize;
  };
  place();
  std::uint64_t run_left = outer ? c[outer - 1].length(0) - 1 : 0;  // rows after this one in the same segment
  for (std::uint64_t row = 0; row < rows; ++row) {
    copy(src + row * row_bytes, to, last_src, last_bytes);
    if (row + 1 == rows) break;
    if (run_left > 0) {
      --run_left;
      ++within[outer - 1];
      continue;  // `to` has moved on by one row already
    }
    for (std::size_t d = outer; d-- > 0;) {
      if (++within[d] < c[d].length(seg[d])) break;
      within[d] = 0;
      if (++seg[d] < c[d].segments()) break;
      seg[d] = 0;
    }
    place();
    run_left = c[outer - 1].length(seg[outer - 1]) - within[outer - 1] - 1;
  }
}

bool regrid_keeps_order(const Selection& box, std::span<const std::uint64_t> grid) {
  const std::vector<Cut> c = cuts(box, grid);
  for (std::size_t d = 1; d < c.size(); ++d)
    if (c[d].segments() != 1) return false;
  return true;
}

RegridBlock regrid_block(const Selection& box, std::span<const std::uint64_t> grid, std::uint32_t itemsize,
                         std::span<const std::uint64_t> at) {
  const std::vector<Cut> c = cuts(box, grid);
  if (at.size() != c.size()) throw std::invalid_argument("regrid_block: one coordinate per dimension");
  std::uint64_t offset = 0, above = 1, tail = 1;
  std::vector<std::uint64_t> tails(c.size(), 1);
  for (std::size_t d = c.size(); d-- > 0;) {
    tails[d] = tail;
    tail *= c[d].total();
  }
  for (std::size_t d = 0; d < c.size(); ++d) {
    if (at[d] < c[d].lo || at[d] >= c[d].hi) throw std::invalid_argument("regrid_block: the element is outside the box");
    const std::uint64_t s = at[d] / c[d].cell - c[d].first;
    offset += c[d].before(s) * tails[d] * above;
    above *= c[d].length(s);
  }
  return {offset * itemsize, above * itemsize};
}

}  // namespace mmfs::layouts
