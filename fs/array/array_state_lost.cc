// ArrayState's cells lost with a failed member (array_state.h, "Cells lost
// with a member"): the set, its record and why such a cell does not read.
// The read and write-back paths that honour the set are in array_state.cc.
#include <fmt/format.h>

#include <algorithm>

#include "fs/array/array_state.h"
#include "fs/array/behind_record.h"
#include "fs/meta/keys.h"

namespace mmfs::fs {

std::string bad_cell_message(std::uint64_t cell) {
  return fmt::format("cell {} failed its checksum (the device returned other bytes than were written)", cell);
}

void ArrayState::set_lost(Roaring cells) {
  lost_ = std::move(cells);
  lost_changed_ = false;
}

void ArrayState::stage_lost(std::uint64_t ino, WriteBatch& batch) {
  if (!lost_changed_) return;
  if (lost_.isEmpty()) batch.del(keys::lost_cells(ino));
  else batch.put(keys::lost_cells(ino), encode_lost(lost_));
  lost_changed_ = false;
}

std::vector<std::uint64_t> ArrayState::take_dropped_lost() {
  std::vector<std::uint64_t> out;
  out.swap(dropped_lost_);
  std::sort(out.begin(), out.end());
  return out;
}

std::string ArrayState::failure_message(std::uint64_t cell) const {
  if (!is_lost(cell)) return bad_cell_message(cell);
  return fmt::format("cell {} was lost with a failed member (the copy promoted over the primary there had not caught "
                     "up on it): it reads as an error until it is written whole",
                     cell);
}

}  // namespace mmfs::fs
