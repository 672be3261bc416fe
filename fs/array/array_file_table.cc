// ArrayFile's part in moving several arrays with one commit: the attributes
// of a table placed into (or out of, or growing within) shared capsules
// (fs/table/capsule_table.cc). Each step runs under the array's placement lock,
// which the table holds for all its attributes from staging to adoption.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>

#include "fs/array/array_file.h"

namespace mmfs::fs {

bool ArrayFile::has_dirty_cells() const {
  std::shared_lock lock(mu_);
  return has_dirty_locked();
}

int ArrayFile::stage_placement_locked(const ArraySchema& requested, const std::vector<Extent>* extents, bool copy,
                                      Staged* out, std::string* message) {
  // Cells kept in place keep their checksum blocks; copied ones get the volume's.
  const ArraySchema next = copy ? placed_schema(ctx_, requested) : requested;
  if (retired_) {
    *message = "the array file was removed";
    return ESTALE;
  }
  ArrayState* state = writable_cells_locked();
  if (!state || next.layout == "mloc") {
    *message = "an mloc array cannot be an attribute of a table in capsules or leave one (relayout it first)";
    return EINVAL;
  }
  if (int r = flush_locked(false, message)) return r;
  std::unique_ptr<ArrayState> fresh;
  if (int r = build(ctx_, ino_, next, extents == nullptr, &fresh, message, extents)) return r;
  auto release = [&] {
    if (!extents)
      for (const Extent& e : fresh->volume_extents()) ctx_.allocator.free(e);
  };
  if (copy) {
    if (holds_data_locked())
      if (int r = copy_into_locked(*fresh, message)) {
        release();
        return r;
      }
    out->dropped = state->volume_extents();
  } else {
    // Growing in place: the old cells are where they were.
    const std::vector<Extent>& old = state->layout().extents();
    if (!extents || old.size() > extents->size() || !std::equal(old.begin(), old.end(), extents->begin()) ||
        fresh->grid().cells() < state->grid().cells() ||
        fresh->sums().blocks().per_cell != state->sums().blocks().per_cell) {
      release();
      *message = "a placement that keeps the cells in place must extend the current one";
      return EINVAL;
    }
    for (std::uint64_t i = 0; i < state->sums().entries(); ++i) {
      fresh->sums().set_entry(i, state->sums().entry(i));
      fresh->alternatives().set_entry(i, state->alternatives().entry(i));
    }
  }
  out->schema = next;
  out->bytes = fresh->bytes();
  out->state = std::move(fresh);
  return 0;
}

void ArrayFile::stage_commit_locked(Staged& staged, WriteBatch& batch) {
  batch.put(keys::xattr(ino_, kSchemaXattr), encode_schema(staged.schema));
  staged.state->stage_extents(ino_, 0, batch);
  // The new tables are complete (every record dirty): the old ones go first.
  CellChecksums::stage_removal(ctx_.metadata.store(), ino_, batch);
  CellChecksums::stage_removal(ctx_.metadata.store(), ino_, batch, 'a');
  staged.state->sums().stage(batch);
  staged.state->alternatives().stage(batch);
  if (staged.bytes != bytes_)
    if (std::optional<Inode> inode = ctx_.metadata.inode(ino_)) {
      inode->size = staged.bytes;
      batch.put(keys::inode(ino_), encode_inode(*inode));
    }
}

void ArrayFile::adopt_locked(Staged staged) {
  schema_ = std::move(staged.schema);
  bytes_ = staged.state->bytes();
  replace_placement_locked(cell_placement(std::move(staged.state), ctx_.geometry));
  ++generation_;
}

}  // namespace mmfs::fs
