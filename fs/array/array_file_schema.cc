// An array file's schema changes (docs/reference.md §4): the copies
// settled first (fs/array/array_file_copies.cc), then the record alone, the
// index, an mloc image sealed again, or a new placement with the data
// copied in (relayout).
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>

#include "fs/array/array_file.h"
#include "fs/array/array_file_internal.h"

namespace mmfs::fs {

using detail::is_mloc;

namespace {
// The same copies in the same order (slots aside).
bool same_copies(const std::vector<CopySpec>& a, const std::vector<CopySpec>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const CopySpec& x, const CopySpec& y) { return x.same_placement(y); });
}
}  // namespace

int ArrayFile::change_schema(const ArraySchema& requested, std::string* message) {
  std::unique_lock lock(mu_);
  if (retired_) {
    *message = "the array file was removed";
    return ESTALE;
  }
  bool data = holds_data_locked();
  if (data && (requested.shape != schema_.shape || requested.dtype != schema_.dtype)) {
    *message = "shape and dtype are frozen once the array holds data (truncate it to 0 first, or make a new file)";
    return EBUSY;
  }
  if (is_mloc(requested) && !requested.copies.empty())
    if (int r = change_copies_allowed_locked(requested, message)) return r;
  if (!same_copies(requested.copies, schema_.copies)) {
    // The daemon sets one attribute at a time: a change of the list changes nothing else.
    ArraySchema next = schema_;
    next.copies = requested.copies;
    return change_copies_locked(next, false, message);
  }
  ArraySchema next = requested;
  next.copies = schema_.copies;  // the same copies: their slots too (a value set again is parsed without them)
  // A new grid (shape or dtype, before any data) cannot keep the copies' cells: they are dropped and built again.
  std::vector<CopySpec> rebuild;
  if (!schema_.copies.empty() && (next.shape != schema_.shape || next.dtype != schema_.dtype)) {
    ArraySchema bare = schema_;
    bare.copies.clear();
    if (int r = change_copies_locked(bare, false, message)) return r;
    rebuild = next.copies;
    next.copies.clear();
  }
  const int r = change_placement_locked(next, data, message);
  if (r != 0 || rebuild.empty()) return r;
  ArraySchema with = schema_;
  with.copies = rebuild;
  return change_copies_locked(with, false, message);
}

int ArrayFile::change_placement_locked(const ArraySchema& next, bool data, std::string* message) {
  bool placement = next.shape != schema_.shape || next.dtype != schema_.dtype || next.layout != schema_.layout ||
                   next.order != schema_.order || next.cell != schema_.cell || next.basic_cube != schema_.basic_cube;
  if (placement && schema_.table_part) {
    *message = "the array is an attribute of a table in capsules: its placement follows the table directory's "
               "user.mmfs.layout (and its length the directory's user.mmfs.shape)";
    return EBUSY;
  }
  // An mloc image also depends on its priority, chunk, compression and bins.
  if (is_mloc(next) && (next.priority != schema_.priority || next.chunk != schema_.chunk ||
                        next.compress != schema_.compress || next.bins != schema_.bins))
    placement = true;
  if (is_mloc(next)) {
    MlocParams params;
    if (int r = mloc_params_of(next, &params, message)) return r;
  }
  if (!placement) {
    if (next.compress != "none" && !is_mloc(next)) {
      std::unique_ptr<ArrayState> probe;
      // build() explains what is not implemented; nothing is allocated.
      if (int r = build(ctx_, ino_, next, false, &probe, message); r == ENOTSUP) return r;
    }
    WriteBatch batch;
    batch.put(keys::xattr(ino_, kSchemaXattr), encode_schema(next));
    // A damaged index is replaced by any setting of user.mmfs.index, the same value included.
    if (next.index != schema_.index || (next.bins != schema_.bins && next.index != "none") ||
        !index_damage_.empty()) {
      if (int r = change_index_locked(next, std::move(batch), message)) return r;
      schema_ = next;
      return 0;
    }
    if (int r = ctx_.metadata.apply(batch, {})) {
      *message = "metadata commit failed";
      return r;
    }
    if (int r = ctx_.metadata.sync()) {
      *message = "metadata sync failed";
      return r;
    }
    schema_ = next;
    return 0;
  }
  if (int r = flush_locked(false, message)) return r;
  if (is_mloc(next)) {
    // Encoded straight from the current placement; a new shape or dtype
    // (only before any data) changes st_size with it.
    if (next.shape != schema_.shape || next.dtype != schema_.dtype) {
      std::optional<Inode> inode = ctx_.metadata.inode(ino_);
      if (inode) {
        inode->size = array_bytes(next);
        WriteBatch b;
        b.put(keys::inode(ino_), encode_inode(*inode));
        if (int r = ctx_.metadata.apply(b, {})) {
          *message = "metadata commit failed";
          return r;
        }
      }
    }
    const ArraySchema before = schema_;
    if (int r = seal_locked(next, message)) return r;
    bytes_ = array_bytes(next);
    if (next.index != before.index || (next.bins != before.bins && next.index != "none"))
      return change_index_locked(next, WriteBatch{}, message);
    return 0;
  }
  return relayout_locked(placed_schema(ctx_, next), data, message);
}

int ArrayFile::relayout_locked(const ArraySchema& next, bool data, std::string* message) {
  std::unique_ptr<ArrayState> fresh;
  if (int r = build(ctx_, ino_, next, true, &fresh, message)) return r;
  auto release = [&] {
    for (const Extent& e : fresh->volume_extents()) ctx_.allocator.free(e);
  };
  if (data)
    if (int r = copy_into_locked(*fresh, message)) {
      release();
      return r;
    }
  // (An image's extents go with its records: commit_placement.)
  std::vector<Extent> dropped = cells_locked() ? placement_->extents() : std::vector<Extent>{};
  // A new shape or dtype (before any data) changes st_size with the placement.
  std::optional<Inode> inode = ctx_.metadata.inode(ino_);
  if (inode) inode->size = fresh->bytes();
  int r = commit_placement(next, *fresh, std::move(dropped), true, inode ? &*inode : nullptr, message);
  if (r > 0) {  // not applied: the old placement stands
    release();
    return r;
  }
  schema_ = next;
  bytes_ = fresh->bytes();
  replace_placement_locked(cell_placement(std::move(fresh), ctx_.geometry));
  ++generation_;
  return -r;
}

}  // namespace mmfs::fs
