#include "layouts/c_order_boxes.h"

#include <algorithm>

namespace mmfs::layouts {

void c_order_boxes(std::span<const std::uint64_t> shape, std::uint64_t first, std::uint64_t last,
                   const std::function<void(const std::vector<DimRange>&)>& emit) {
  const std::size_t n = shape.size();
  if (n == 0 || first >= last) return;
  std::vector<DimRange> box(n);
  std::vector<std::uint64_t> stride(n, 1);
  for (std::size_t d = n - 1; d-- > 0;) stride[d] = stride[d + 1] * shape[d + 1];
  // [a, b): elements of the sub-array of dimensions d.. (box[0..d) fixed).
  std::function<void(std::size_t, std::uint64_t, std::uint64_t)> walk = [&](std::size_t d, std::uint64_t a,
                                                                            std::uint64_t b) {
    const std::uint64_t st = stride[d];
    std::uint64_t i = a / st;
    if (a % st != 0 || b < (i + 1) * st) {  // index i along d is cut: its part, one dimension down
      const std::uint64_t end = std::min(b, (i + 1) * st);
      box[d] = DimRange{i, i + 1, 1, false};
      walk(d + 1, a - i * st, end - i * st);
      if (end == b) return;
      a = end;
      ++i;
    }
    const std::uint64_t whole_end = b / st;  // indices [i, whole_end) whole
    if (whole_end > i) {
      box[d] = DimRange{i, whole_end, 1, false};
      for (std::size_t e = d + 1; e < n; ++e) box[e] = DimRange{0, shape[e], 1, false};
      emit(box);
    }
    if (b % st != 0) {
      box[d] = DimRange{whole_end, whole_end + 1, 1, false};
      walk(d + 1, 0, b - whole_end * st);
    }
  };
  walk(0, first, last);
}

void touched_cell_runs(const CellGrid& grid, std::span<const DimRange> box,
                       const std::function<void(std::uint64_t, std::uint64_t)>& emit) {
  const std::size_t n = grid.dims();
  std::vector<std::uint64_t> lo(n), hi(n);
  for (std::size_t d = 0; d < n; ++d) {
    if (box[d].count() == 0) return;
    lo[d] = box[d].start / grid.cell()[d];
    hi[d] = (box[d].stop - 1) / grid.cell()[d];
  }
  std::vector<std::uint64_t> at = lo;
  for (;;) {
    emit(grid.linear(at), hi[n - 1] - lo[n - 1] + 1);
    std::size_t d = n - 1;
    for (;;) {
      if (d == 0) return;
      --d;
      if (++at[d] <= hi[d]) break;
      at[d] = lo[d];
    }
  }
}

}  // namespace mmfs::layouts
