#include "layouts/cell_copy.h"

#include <algorithm>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>

#include "util/align.h"
#endif

namespace mmfs::layouts {

namespace {

template <std::size_t N>
void copy_fixed_rows(std::byte* dst, std::uint64_t dstep, const std::byte* src, std::uint64_t sstep,
                     std::uint64_t rows) {
  for (std::uint64_t i = 0; i < rows; ++i, dst += dstep, src += sstep) std::memcpy(dst, src, N);
}

#if defined(__SSE2__)
// Whole cache lines written around the cache: no line of the result is read
// from memory before it is overwritten, and the result does not evict the
// cells still to be gathered.
template <std::size_t N>
void stream_fixed_rows(std::byte* dst, std::uint64_t dstep, const std::byte* src, std::uint64_t sstep,
                       std::uint64_t rows) {
  static_assert(N % 64 == 0);
  for (std::uint64_t i = 0; i < rows; ++i, dst += dstep, src += sstep)
    for (std::size_t k = 0; k < N; k += 16)
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + k), _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + k)));
}

// Rows of whole, aligned cache lines are streamed; false if these are not.
bool stream_rows(std::byte* dst, std::uint64_t dstep, const std::byte* src, std::uint64_t sstep,
                 std::uint64_t rows, std::uint64_t run) {
  if (reinterpret_cast<std::uintptr_t>(dst) % 64 != 0 || dstep % 64 != 0) return false;
  switch (run) {
    case 64: stream_fixed_rows<64>(dst, dstep, src, sstep, rows); return true;
    case 128: stream_fixed_rows<128>(dst, dstep, src, sstep, rows); return true;
    case 256: stream_fixed_rows<256>(dst, dstep, src, sstep, rows); return true;
    default: return false;
  }
}
#else
bool stream_rows(std::byte*, std::uint64_t, const std::byte*, std::uint64_t, std::uint64_t, std::uint64_t) {
  return false;
}
#endif

// `rows` runs of `run` bytes, `sstep` apart in the cell and `dstep` apart in
// the result. Common run lengths get a copy the compiler inlines as vector moves.
void copy_rows(std::byte* dst, std::uint64_t dstep, const std::byte* src, std::uint64_t sstep, std::uint64_t rows,
               std::uint64_t run, bool stream) {
  if (dstep == run && sstep == run) {  // the rows are contiguous on both sides
    std::memcpy(dst, src, run * rows);
    return;
  }
  if (stream && stream_rows(dst, dstep, src, sstep, rows, run)) return;
  switch (run) {
    case 8: return copy_fixed_rows<8>(dst, dstep, src, sstep, rows);
    case 16: return copy_fixed_rows<16>(dst, dstep, src, sstep, rows);
    case 32: return copy_fixed_rows<32>(dst, dstep, src, sstep, rows);
    case 64: return copy_fixed_rows<64>(dst, dstep, src, sstep, rows);
    case 128: return copy_fixed_rows<128>(dst, dstep, src, sstep, rows);
    case 256: return copy_fixed_rows<256>(dst, dstep, src, sstep, rows);
    default:
      for (std::uint64_t i = 0; i < rows; ++i, dst += dstep, src += sstep) std::memcpy(dst, src, run);
  }
}

// One cell's part of a row of a line (copy_line): streamed where it is whole
// 16-byte units, so that consecutive parts fill the result's lines in the
// write-combining buffers and no line is read before it is overwritten.
inline void put_piece(std::byte* dst, const std::byte* src, std::uint64_t bytes, bool stream) {
#if defined(__SSE2__)
  if (stream && bytes % 16 == 0 && reinterpret_cast<std::uintptr_t>(dst) % 16 == 0) {
    for (std::uint64_t k = 0; k < bytes; k += 16)
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + k), _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + k)));
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

}  // namespace

SelectionGather::SelectionGather(const CellGrid& grid, const Selection& selection, Stores stores)
    : grid_(grid), sel_(selection), stream_(stores == Stores::streamed) {
  const std::size_t n = grid.dims();
  const auto& dims = selection.dims();
  ostride_.assign(n, 0);
  cstride_.assign(n, 1);
  std::uint64_t s = grid.itemsize();
  for (std::size_t d = n; d-- > 0;) {
    if (!dims[d].fixed) {
      ostride_[d] = s;
      s *= dims[d].count();
    }
  }
  for (std::size_t d = n - 1; d-- > 0;) cstride_[d] = cstride_[d + 1] * grid.cell()[d + 1];
  touched_.resize(n);
  for (std::size_t d = 0; d < n; ++d) touched_[d] = cells_touched(dims[d], grid.cell()[d]);
  first_.resize(n);
  count_.resize(n);
  lx_.resize(n);
  inc_c_.resize(n);
  const std::size_t L = n - 1;
  lines_ = stream_ && n >= 2 && !dims[L].fixed && dims[L].step == 1 && touched_[L].size() >= 2 &&
           grid.cell()[L] * grid.itemsize() < 64;
}

void SelectionGather::take(std::span<const std::uint64_t> cc, const std::byte* cell, std::byte* out, bool transient) {
  if (!lines_ || transient) copy(cc, cell, out);
  if (!lines_) return;
  const std::size_t n = grid_.dims(), L = n - 1, width = touched_[L].size();
  if (position_.empty()) {  // the first take: the line bookkeeping
    position_.resize(n);
    std::size_t lines = 1;
    for (std::size_t d = 0; d < n; ++d) {
      position_[d].assign(grid_.grid()[d], 0);
      for (std::size_t i = 0; i < touched_[d].size(); ++i) position_[d][touched_[d][i]] = std::uint32_t(i);
      if (d < L) lines *= touched_[d].size();
    }
    left_.assign(lines, std::uint32_t(width));
    slots_.assign(lines * width, nullptr);
  }
  std::size_t line = 0;
  for (std::size_t d = 0; d < L; ++d) line = line * touched_[d].size() + position_[d][cc[d]];
  const std::byte** slots = slots_.data() + line * width;
  slots[position_[L][cc[L]]] = transient ? nullptr : cell;
  if (--left_[line] == 0) copy_line(cc, {slots, width}, out);
}

bool SelectionGather::selected_in(std::span<const std::uint64_t> cc, std::size_t below) {
  const auto& C = grid_.cell();
  const auto& dims = sel_.dims();
  for (std::size_t d = 0; d < below; ++d) {
    const DimRange& R = dims[d];
    std::uint64_t lo = cc[d] * C[d], hi = std::min(lo + C[d], grid_.shape()[d]);
    std::uint64_t f = std::max(lo, R.start);
    if ((f - R.start) % R.step) f += R.step - (f - R.start) % R.step;
    std::uint64_t stop = std::min(hi, R.stop);
    if (f >= stop) return false;
    first_[d] = f;
    count_[d] = util::div_up(stop - f, R.step);
  }
  return true;
}

void SelectionGather::copy(std::span<const std::uint64_t> cc, const std::byte* cell, std::byte* out) {
  const std::size_t n = grid_.dims();
  const std::uint64_t I = grid_.itemsize();
  const auto& C = grid_.cell();
  const auto& dims = sel_.dims();
  if (!selected_in(cc, n)) return;
  // Odometer over all dimensions but the last (the last is a run), moving
  // both cursors by additions: this loop runs once per row of every cell.
  const std::size_t L = n - 1;
  const std::uint64_t step_l = dims[L].step;
  std::uint64_t ooff = 0, coff = 0;
  for (std::size_t d = 0; d < n; ++d) {
    ooff += (first_[d] - dims[d].start) / dims[d].step * ostride_[d];
    coff += (first_[d] - cc[d] * C[d]) * cstride_[d] * I;
    inc_c_[d] = cstride_[d] * dims[d].step * I;
  }
  const std::uint64_t run = count_[L] * I;
  if (step_l != 1) {
    std::fill(lx_.begin(), lx_.end(), 0);
    for (;;) {
      const std::byte* src = cell + coff;
      std::byte* dst = out + ooff;
      for (std::uint64_t i = 0; i < count_[L]; ++i) std::memcpy(dst + i * I, src + i * inc_c_[L], I);
      if (!advance(L, &ooff, &coff)) return;
    }
  }
  // Contiguous runs: the rows of the second-to-last dimension are copied by
  // one tight loop (a full read copies 64-byte rows of 8x8x8 float64 cells,
  // tens of millions per GiB, so a call to memcpy per row is the cost).
  if (n == 1) {
    std::memcpy(out + ooff, cell + coff, run);
    return;
  }
  const std::size_t R = n - 2;
  const std::uint64_t rows = count_[R], ostep = ostride_[R], cstep = inc_c_[R];
  std::fill(lx_.begin(), lx_.end(), 0);
  for (;;) {
    copy_rows(out + ooff, ostep, cell + coff, cstep, rows, run, stream_);
    if (!advance(R, &ooff, &coff)) return;
  }
}

void SelectionGather::copy_line(std::span<const std::uint64_t> cc, std::span<const std::byte* const> cells,
                                std::byte* out) {
  const std::size_t L = grid_.dims() - 1;
  const std::uint64_t I = grid_.itemsize();
  const auto& C = grid_.cell();
  const auto& dims = sel_.dims();
  if (!selected_in(cc, L)) return;
  // Each cell's part of a row: the same for every row (the last dimension
  // is taken with step 1, so the parts are contiguous in the result's row).
  const DimRange& R = dims[L];
  pieces_.clear();
  for (std::size_t j = 0; j < cells.size() && j < touched_[L].size(); ++j) {
    if (cells[j] == nullptr) continue;
    const std::uint64_t lo_c = touched_[L][j] * C[L];
    const std::uint64_t lo = std::max(lo_c, R.start), hi = std::min({lo_c + C[L], grid_.shape()[L], R.stop});
    if (lo < hi) pieces_.push_back({cells[j] + (lo - lo_c) * I, (lo - R.start) * I, (hi - lo) * I});
  }
  std::uint64_t ooff = 0, coff = 0;
  for (std::size_t d = 0; d < L; ++d) {
    ooff += (first_[d] - dims[d].start) / dims[d].step * ostride_[d];
    coff += (first_[d] - cc[d] * C[d]) * cstride_[d] * I;
    inc_c_[d] = cstride_[d] * dims[d].step * I;
  }
  std::fill(lx_.begin(), lx_.end(), 0);
  for (;;) {
    std::byte* row = out + ooff;
    for (const Piece& p : pieces_) put_piece(row + p.out, p.cell + coff, p.bytes, stream_);
    if (!advance(L, &ooff, &coff)) return;
  }
}

SelectionGather::~SelectionGather() {
#if defined(__SSE2__)
  // Streamed stores are weakly ordered: fence them before the result is
  // handed to another thread.
  if (stream_) _mm_sfence();
#endif
}

bool SelectionGather::advance(std::size_t below, std::uint64_t* ooff, std::uint64_t* coff) {
  for (std::size_t d = below; d-- > 0;) {
    *ooff += ostride_[d];
    *coff += inc_c_[d];
    if (++lx_[d] < count_[d]) return true;
    *ooff -= ostride_[d] * count_[d];
    *coff -= inc_c_[d] * count_[d];
    lx_[d] = 0;
  }
  return false;
}

std::uint64_t byte_in_cell(const CellGrid& grid, std::span<const std::uint64_t> x,
                           std::vector<std::uint64_t>* cc) {
  cc->resize(grid.dims());
  std::uint64_t local = 0;
  for (std::size_t d = 0; d < grid.dims(); ++d) {
    (*cc)[d] = x[d] / grid.cell()[d];
    local = local * grid.cell()[d] + x[d] % grid.cell()[d];
  }
  return local * grid.itemsize();
}

}  // namespace mmfs::layouts
