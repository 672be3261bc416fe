// Moving elements between C order and cells (the bricks a CellGrid cuts an
// array into; a cell's elements are stored as its brick in C order, padding
// included). Pure index math: the daemon's write path scatters with
// for_each_cell_segment, its read path gathers with SelectionGather.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "layouts/cell_grid.h"
#include "layouts/selection.h"

namespace mmfs::layouts {

// Splits the C-order byte range [offset, offset + length) of the array into
// pieces that each stay inside one cell and are contiguous in it (a run along
// the last dimension, possibly cutting elements at either end), and calls
//   visit(cell_linear, cell_coords, byte_in_cell, byte_in_range, bytes)
// for each, in order. REQUIRES offset + length <= the array's bytes.
template <class Visit>
void for_each_cell_segment(const CellGrid& g, std::uint64_t offset, std::uint64_t length, Visit&& visit) {
  if (length == 0) return;
  const std::size_t n = g.dims();
  const std::uint64_t I = g.itemsize();
  const auto& S = g.shape();
  const auto& C = g.cell();
  const auto& G = g.grid();
  // The first element's coordinates by division; after it they advance as
  // an odometer, and a line's cell prefix is recomputed once per line (a
  // write of 8 KiB cells 4 elements wide has a segment every 32 bytes, and
  // dividing per segment cost more than the copy).
  std::vector<std::uint64_t> x(n), cc(n);
  std::uint64_t e = offset / I, within = offset % I;
  for (std::size_t d = n; d-- > 0;) {
    x[d] = e % S[d];
    e /= S[d];
  }
  const std::size_t last = n - 1;
  const std::uint64_t cl = C[last];
  std::uint64_t prefix_linear = 0, prefix_local = 0;  // the line's cells: linear id and brick offset sans last dim
  auto line_prefix = [&] {
    prefix_linear = 0;
    prefix_local = 0;
    for (std::size_t d = 0; d < last; ++d) {
      cc[d] = x[d] / C[d];
      prefix_linear = prefix_linear * G[d] + cc[d];
      prefix_local = prefix_local * C[d] + x[d] % C[d];
    }
    prefix_linear *= G[last];
    prefix_local *= cl;
  };
  line_prefix();
  std::uint64_t pos = offset;
  const std::uint64_t end = offset + length;
  for (;;) {
    const std::uint64_t xl = x[last], cell = xl / cl;
    const std::uint64_t seg_end = std::min(S[last], (cell + 1) * cl);
    const std::uint64_t take = std::min<std::uint64_t>((seg_end - xl) * I - within, end - pos);
    cc[last] = cell;
    visit(prefix_linear + cell, std::span<const std::uint64_t>(cc), (prefix_local + xl - cell * cl) * I + within,
          pos - offset, take);
    pos += take;
    if (pos >= end) return;
    // The segment ended at its cell's edge (only the range's end cuts one short).
    within = 0;
    x[last] = seg_end;
    if (seg_end < S[last]) continue;
    x[last] = 0;
    for (std::size_t d = last; d-- > 0;) {
      if (++x[d] < S[d]) break;
      x[d] = 0;
    }
    line_prefix();
  }
}

// The rows (runs along the last dimension) of the part of cell `cc` inside
// the array, in C order: calls
//   visit(byte_in_cell, byte_in_array, bytes)
// for each, where byte_in_cell is the row's first byte in the cell's brick
// and byte_in_array its first byte in the array's C-order bytes (the
// inverse of for_each_cell_segment, one cell at a time).
template <class Visit>
void for_each_cell_row(const CellGrid& g, std::span<const std::uint64_t> cc, Visit&& visit) {
  const std::size_t n = g.dims(), last = n - 1;
  const std::uint64_t I = g.itemsize();
  const auto& S = g.shape();
  const auto& C = g.cell();
  std::vector<std::uint64_t> extent(n), i(n, 0);
  for (std::size_t d = 0; d < n; ++d) extent[d] = std::min(C[d], S[d] - cc[d] * C[d]);
  const std::uint64_t row_bytes = extent[last] * I;
  for (;;) {
    std::uint64_t in_cell = 0, in_array = 0;
    for (std::size_t d = 0; d < last; ++d) {
      in_cell = in_cell * C[d] + i[d];
      in_array = in_array * S[d] + cc[d] * C[d] + i[d];
    }
    in_cell *= C[last];
    in_array = in_array * S[last] + cc[last] * C[last];
    visit(in_cell * I, in_array * I, row_bytes);
    std::size_t d = last;
    for (;;) {
      if (d == 0) return;
      --d;
      if (++i[d] < extent[d]) break;
      i[d] = 0;
    }
  }
}

// Copies the elements a selection takes from one cell into the selection's
// C-order result. Built once per selection; copy() is called per cell.
class SelectionGather {
 public:
  // `streamed`: the result is larger than the caches and read later by
  // another thread, so whole cache lines of it are written around the cache
  // (no read of each line before it is overwritten). The destructor fences
  // those stores: destroy the gather before handing the result on.
  enum class Stores { cached, streamed };
  SelectionGather(const CellGrid& grid, const Selection& selection, Stores stores = Stores::cached);
  ~SelectionGather();
  SelectionGather(const SelectionGather&) = delete;
  SelectionGather& operator=(const SelectionGather&) = delete;
  // The cells the selection touches, per dimension (their product is every
  // cell to copy from).
  const std::vector<std::vector<std::uint64_t>>& touched() const { return touched_; }
  // `cell` holds the brick of the cell at `coords`; `out` is the result.
  void copy(std::span<const std::uint64_t> coords, const std::byte* cell, std::byte* out);

  // Whether the caller should copy lines of cells (copy_line) rather than
  // cells. A line is the touched cells that differ only in the last
  // coordinate. When a cell's row is shorter than a cache line of a streamed
  // result, a cell copied alone writes parts of lines whose other parts come
  // from other cells copied at other times, and each part costs a read of
  // the line from memory; a line of cells writes each row of the result once,
  // whole, around the cache. A 128 MiB chunk of 16x16x4 float64 cells,
  // verified and gathered as they arrive in Hilbert order: 39 ms cell by
  // cell, 23 ms by lines (bench/micro/bench_read_path.cc).
  bool gathers_lines() const { return lines_; }
  // Copies the line of cells through `coords` (its last coordinate is
  // ignored): cells[j] holds the brick of the cell whose last coordinate is
  // touched().back()[j], or is null for a cell the caller copied itself.
  void copy_line(std::span<const std::uint64_t> coords, std::span<const std::byte* const> cells, std::byte* out);
  // Every touched cell, once, in any order (as its bytes arrive): copied now
  // or, when gathering lines, with its line once the line's last cell has
  // been taken. `cell` must then stay valid until that copy, unless it is
  // `transient` (a scratch buffer the caller reuses): such a cell is copied
  // now, alone.
  void take(std::span<const std::uint64_t> coords, const std::byte* cell, std::byte* out, bool transient = false);

 private:
  // Steps the odometer of dimensions [0, below) and both cursors; false once
  // every position has been visited.
  bool advance(std::size_t below, std::uint64_t* ooff, std::uint64_t* coff);
  // The selected elements of the cell at `cc` along dims [0, below), into
  // first_ and count_; false when the cell holds none.
  bool selected_in(std::span<const std::uint64_t> cc, std::size_t below);

  struct Piece {
    const std::byte* cell;  // the cell's first selected element of a row
    std::uint64_t out, bytes;  // where in the result's row, and how long
  };

  const CellGrid& grid_;
  const Selection& sel_;
  bool stream_;
  bool lines_ = false;
  std::vector<Piece> pieces_;  // scratch of copy_line
  // take() when gathering lines: per dimension, cell coordinate -> index
  // among the touched; per line, the cells still to come; per touched cell
  // (line-major), where its brick is (null: copied already).
  std::vector<std::vector<std::uint32_t>> position_;
  std::vector<std::uint32_t> left_;
  std::vector<const std::byte*> slots_;
  std::vector<std::uint64_t> ostride_, cstride_;
  std::vector<std::vector<std::uint64_t>> touched_;
  std::vector<std::uint64_t> first_, count_, lx_, inc_c_;  // scratch
};

// The byte of element `coords` inside its cell's brick.
std::uint64_t byte_in_cell(const CellGrid& grid, std::span<const std::uint64_t> coords,
                           std::vector<std::uint64_t>* cell_coords);

// Every cell of the product of `touched` (a coordinate list per dimension),
// in C order (none when a dimension has no cell).
template <class Visit>
void for_each_touched_cell(const std::vector<std::vector<std::uint64_t>>& touched, Visit&& visit) {
  const std::size_t n = touched.size();
  for (const auto& t : touched)
    if (t.empty()) return;
  std::vector<std::size_t> idx(n, 0);
  std::vector<std::uint64_t> cc(n);
  for (;;) {
    for (std::size_t d = 0; d < n; ++d) cc[d] = touched[d][idx[d]];
    visit(std::span<const std::uint64_t>(cc));
    std::size_t d = n;
    while (d > 0) {
      --d;
      if (++idx[d] < touched[d].size()) break;
      idx[d] = 0;
      if (d == 0) return;
    }
  }
}

}  // namespace mmfs::layouts
