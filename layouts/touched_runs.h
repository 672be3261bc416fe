// The device runs of the cells a selection touches, worked out once per read.
//
// A cell's runs come from Layout::cell_runs, which for a curve layout is a
// rank along the curve (about 0.2 us for a Hilbert cell of a 3-D grid). A
// read needed them up to four times per cell: the whole-cell plan, the
// blocks-only plan it is weighed against, the requests each cell waits for,
// and the cell's verification and gather; on a cold slice of the default
// array (4,096 cells) that was about 3 ms of CPU. The plan and the read walk
// the cells in different orders, so a cell is named by its position in the
// C-order product of the touched lists (dimension n-1 fastest), which both
// can compute.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "layouts/layout.h"

namespace mmfs::layouts {

class TouchedRuns {
 public:
  // For the cells of the product of `touched` (a coordinate list per
  // dimension); forgets what an earlier selection's cells held.
  void prepare(const std::vector<std::vector<std::uint64_t>>& touched) {
    touched_ = touched;
    strides_.assign(touched.size(), 1);
    std::uint64_t cells = 1;
    for (std::size_t d = touched.size(); d-- > 0;) {
      strides_[d] = cells;
      cells *= touched[d].size();
    }
    entries_.assign(cells, Entry{});
  }

  // True when `touched` is the product this memo was prepared for.
  bool covers(const std::vector<std::vector<std::uint64_t>>& touched) const { return touched == touched_; }

  // The C-order position of the cell at index idx[d] of each touched list.
  std::uint64_t position(std::span<const std::size_t> idx) const {
    std::uint64_t p = 0;
    for (std::size_t d = 0; d < idx.size(); ++d) p += idx[d] * strides_[d];
    return p;
  }

  // The runs of `cell`, at `position`; from the layout the first time.
  std::span<const Run> of(const Layout& layout, std::uint64_t position, std::span<const std::uint64_t> cell) {
    Entry& e = entries_[position];
    if (e.count == 0) e.count = static_cast<std::uint8_t>(layout.cell_runs(cell, e.runs));
    return {e.runs, e.count};
  }

 private:
  struct Entry {
    Run runs[2];
    std::uint8_t count = 0;  // 0: not worked out yet (a cell has 1 or 2 runs)
  };
  std::vector<std::vector<std::uint64_t>> touched_;
  std::vector<std::uint64_t> strides_;
  std::vector<Entry> entries_;
};

}  // namespace mmfs::layouts
