// Cells lost with a member that a copy still holds
// (ArrayFile::fill_lost_from_copies_locked; docs/copies-on-members.md,
// "Cells lost with a member"). A promotion records as lost every cell the
// promoted copy lagged. With more than one copy, another one may have caught
// up on some of them before the member died: its catch-up runs in steps, and
// writes landing between steps leave the copies lagging different cells.
// Those bytes still exist, so they are put back into the primary.
//
// Also what the rest of the array file does around the cells that stay
// lost: queries over them fail (check_query_scope), and an index is built
// without them (read_slab_around_lost_locked).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "fs/array/array_file.h"
#include "fs/array/array_file_internal.h"

namespace mmfs::fs {

using layouts::DimRange;
using layouts::Selection;

namespace {

// The filled cells' bytes written back per commit: bounds what the primary's
// dirty cells hold meanwhile.
constexpr std::uint64_t kFillStep = 64ull << 20;

// Whether the elements `r` selects along a dimension meet [lo, hi).
bool meets(const DimRange& r, std::uint64_t lo, std::uint64_t hi) {
  if (r.count() == 0) return false;
  const std::uint64_t first = r.start >= lo ? r.start : r.start + util::div_up(lo - r.start, r.step) * r.step;
  return first < hi && first < r.stop;
}

// Calls visit(row, data, count) for each run of `box`'s C-order bytes
// `data` along its last dimension (step 1, no dimension fixed), `row` the
// C-order element index of the run's first element in an array of `shape`.
template <class Visit>
void for_each_box_run(std::span<const std::uint64_t> shape, const std::vector<DimRange>& box, const std::byte* data,
                      std::uint32_t itemsize, Visit&& visit) {
  const std::size_t n = box.size();
  const std::uint64_t run = box[n - 1].count();
  std::vector<std::uint64_t> at(n);
  for (std::size_t d = 0; d < n; ++d) at[d] = box[d].start;
  for (;;) {
    std::uint64_t row = 0;
    for (std::size_t d = 0; d < n; ++d) row = row * shape[d] + at[d];
    visit(row, data, run);
    data += run * itemsize;
    std::size_t d = n - 1;
    for (;;) {
      if (d == 0) return;
      --d;
      if (++at[d] < box[d].stop) break;
      at[d] = box[d].start;
    }
  }
}

}  // namespace

int ArrayFile::check_query_scope(const std::optional<Selection>& box, std::string* message) const {
  std::shared_lock lock(mu_);
  const ArrayState* cells = cells_locked();
  if (!cells || cells->lost().isEmpty()) return 0;
  for (const std::uint32_t cell : cells->lost()) {
    if (box) {
      const std::vector<DimRange> elements = cells->grid().element_box(cell);
      bool inside = true;
      for (std::size_t d = 0; d < elements.size() && inside; ++d)
        inside = meets(box->dims()[d], elements[d].start, elements[d].stop);
      if (!inside) continue;
    }
    *message = cells->failure_message(cell) + ", and the query's answer depends on its values";
    return EIO;
  }
  return 0;
}

void ArrayFile::note_box_locked(const std::vector<DimRange>& box, const std::byte* data) {
  if (!index_) return;
  const layouts::CellGrid& g = grid_locked();
  for_each_box_run(g.shape(), box, data, g.itemsize(), [&](std::uint64_t row, const std::byte* at, std::uint64_t n) {
    index_->note(row, at, std::size_t(n));
  });
}

int ArrayFile::read_slab_around_lost_locked(std::uint64_t r0, std::uint64_t r1, std::byte* out,
                                            std::string* message) {
  const ArrayState& cells = *cells_locked();
  const layouts::CellGrid& g = cells.grid();
  const std::uint32_t item = g.itemsize();
  std::vector<std::uint64_t> slab_shape = g.shape();
  slab_shape[0] = r1 - r0;
  std::uint64_t slab_elements = 1;
  for (std::uint64_t s : slab_shape) slab_elements *= s;
  std::memset(out, 0, slab_elements * item);
  std::vector<DimRange> slab;
  for (std::uint64_t s : g.shape()) slab.push_back(DimRange{0, s, 1, false});
  slab[0] = DimRange{r0, r1, 1, false};
  AlignedBuffer piece;
  int failed = 0;
  // Each run of cells along the last dimension, cut at its lost cells: the
  // pieces between are read as boxes, each copied into the slab row by row.
  auto read_cells = [&](std::uint64_t first, std::uint64_t count) {
    if (failed || count == 0) return;
    std::vector<DimRange> box = g.element_box(first);
    box.back().stop = g.element_box(first + count - 1).back().stop;
    box[0].start = std::max(box[0].start, r0);
    box[0].stop = std::min(box[0].stop, r1);
    const Selection sel(box);
    const std::uint64_t bytes = sel.elements() * item;
    if (piece.size() < bytes) piece = AlignedBuffer(bytes, AlignedBuffer::Uninitialized{});
    if ((failed = read_selection_locked(sel, 0, piece.data(), nullptr, message))) return;
    box[0].start -= r0;
    box[0].stop -= r0;
    for_each_box_run(slab_shape, box, piece.data(), item, [&](std::uint64_t row, const std::byte* at, std::uint64_t n) {
      std::memcpy(out + row * item, at, n * item);
    });
  };
  layouts::touched_cell_runs(g, slab, [&](std::uint64_t first, std::uint64_t count) {
    std::uint64_t from = first;
    for (std::uint64_t c = first; c < first + count; ++c) {
      if (!cells.is_lost(c)) continue;
      read_cells(from, c - from);
      from = c + 1;
    }
    read_cells(from, first + count - from);
  });
  return failed;
}

bool ArrayFile::copy_holds_current_locked(std::uint32_t k, const std::vector<DimRange>& box) const {
  const ArrayCopy& c = copies_.at(k - 1);
  if (placement_lost_locked(k)) return false;
  if (c.current()) return true;
  if (!c.placement->cells()) return false;  // an mloc image is current whole or not at all
  Roaring touched;
  detail::add_touched_cells(c.placement->grid(), box, &touched);
  return !touched.intersect(c.behind);
}

int ArrayFile::fill_lost_from_copies_locked(std::string* message) {
  ArrayState* primary = writable_cells_locked();
  if (!primary || primary->lost().isEmpty() || copies_.empty() || retired_ || placement_lost_locked(0)) return 0;
  // Bytes written since are on the device first: a filled cell then holds
  // the copy's bytes and nothing else is written back with it.
  if (int r = flush_locked(false, message)) return r;
  const layouts::CellGrid& g = primary->grid();
  const std::uint32_t item = g.itemsize();
  std::map<std::uint32_t, std::uint64_t> filled;  // copy -> cells taken from it
  std::uint64_t first_filled = 0, total = 0, pending = 0;
  std::string unread;  // why the last copy that should have held a cell did not read it
  auto commit = [&]() {
    pending = 0;
    return commit_rewrite_locked(*primary, message, {}, true);
  };
  const Roaring lost = primary->lost();
  for (const std::uint32_t cell : lost) {
    const std::vector<DimRange> box = g.element_box(cell);
    const Selection sel(box);
    AlignedBuffer bytes(std::max<std::uint64_t>(sel.elements() * item, 1), AlignedBuffer::Uninitialized{});
    for (std::uint32_t k = 1; k <= copies_.size(); ++k) {
      if (!copy_holds_current_locked(k, box)) continue;
      std::uint64_t ignored = 0;
      std::string why;
      // Verified against the copy's checksums: a copy that does not read
      // clean gives nothing, and the next one is tried.
      if (int r = placement_at(k).read_selection(sel, 0, bytes.data(), &ignored, &why, {}, nullptr, false)) {
        unread = fmt::format("{}: {} (errno {})", placement_name(k), why, r);
        continue;
      }
      put_box(*primary, box, bytes.data());
      // Its values in the index: whatever the index held for it (the values
      // of a partial write that was dropped) is not what the cell holds now.
      note_box_locked(box, bytes.data());
      if (total++ == 0) first_filled = cell;
      ++filled[k];
      pending += sel.elements() * item;
      break;
    }
    if (pending >= kFillStep)
      if (int r = commit()) return r;
  }
  if (pending)
    if (int r = commit()) return r;
  if (total == 0) return 0;
  std::string from;
  for (const auto& [k, n] : filled) from += fmt::format("{}{} from {}", from.empty() ? "" : ", ", n, placement_name(k));
  const std::uint64_t left = primary->lost().cardinality();
  if (ctx_.on_healed)
    ctx_.on_healed(ino_, fmt::format("{} cell(s) lost with a failed member (cell {} first) were filled from a copy "
                                     "that held them current ({}); {} remain lost{}",
                                     total, first_filled, from, left,
                                     unread.empty() ? std::string() : fmt::format(" (last copy unread: {})", unread)));
  return 0;
}

void ArrayFile::fill_lost_or_report_locked() {
  std::string why;
  if (int r = fill_lost_from_copies_locked(&why); r != 0 && ctx_.on_promoted)
    ctx_.on_promoted(ino_, fmt::format("the cells lost with the member were not filled from the copies that hold "
                                       "them: {} (errno {}); they stay lost until written whole",
                                       why, r));
}

}  // namespace mmfs::fs
