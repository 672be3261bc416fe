// Cells lost with a member that a copy still holds
// (ArrayFile::fill_lost_from_copies_locked; docs/copies-on-members.md,
// "Cells lost with a member"). A promotion records as lost every cell the
// promoted copy lagged. With more than one copy, another one may have caught
// up on some of them before the member died: its catch-up runs in steps, and
// writes landing between steps leave the copies lagging different cells.
// Those bytes still exist, so they are put back into the primary.
#include <fmt/format.h>

#include <algorithm>
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

}  // namespace

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
    return commit_rewrite_locked(*primary, message);
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
