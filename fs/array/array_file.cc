#include "fs/array/array_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "fs/array/array_file_internal.h"
#include "fs/array/copy_spec.h"
#include "fs/array/array_layout.h"
#include "layouts/capsule.h"
#include "layouts/default_layout.h"
#include "layouts/multimap.h"
#include "layouts/plod.h"
#include "layouts/quadrangle_array.h"
#include "layouts/selection_chunks.h"

namespace mmfs::fs {

using layouts::CellGrid;
using layouts::DimRange;
using layouts::Selection;
using detail::add_host_time;
using detail::is_mloc;

namespace {

// Relayout and conversion copy in slabs of about this size.
constexpr std::uint64_t kCopyBudget = 64ull << 20;

// Incomplete cells are kept up to this much memory per array, whatever its cells.
constexpr std::uint64_t kIncompleteCap = 512ull << 20;

// Cells a writer has only partly written stay in memory (writing them now
// means reading them back when the rest arrives), so a sequential writer
// writes each cell once. A sequential writer's incomplete cells are the slab
// of cells (cell[0] rows of the first dimension) it is in, and the next one
// as it crosses into it: two slabs are kept, at least half the dirty limit,
// at most kIncompleteCap. (Half the limit alone was exactly one slab of
// 16x16x4 float64 cells across a (1024, 1024, 256) array, so every slab was
// written unfinished and read back: ingest ran at 115 MB/s.)
std::uint64_t incomplete_allowance(const ArrayState& state) {
  const layouts::CellGrid& g = state.grid();
  const std::uint64_t slab = g.cells() / g.grid()[0] * state.cell_storage();
  return std::min(kIncompleteCap, std::max(ArrayFile::kDirtyLimit / 2, 2 * slab));
}

bool keep_incomplete(const ArrayState& state) {
  return state.incomplete_dirty_bytes() < incomplete_allowance(state);
}

// What a placement's dirty cells call for after a write.
enum class DirtyAction { none, complete_cells, all_cells };
// Complete cells go out once they fill the dirty limit, in one batch (not a
// few at a time beside a large set of kept incomplete ones: each write-back
// costs a device flush and a commit); incomplete ones stay while they fit
// their allowance and `may_keep` (no index delta needs them on the device);
// otherwise every dirty cell goes.
DirtyAction at_dirty_limit(const ArrayState& state, bool may_keep) {
  if (state.dirty_bytes() < ArrayFile::kDirtyLimit) return DirtyAction::none;
  if (!may_keep || !keep_incomplete(state)) return DirtyAction::all_cells;
  return state.dirty_bytes() - state.incomplete_dirty_bytes() >= ArrayFile::kDirtyLimit ? DirtyAction::complete_cells
                                                                                          : DirtyAction::none;
}

}  // namespace


ArrayFile::ArrayFile(const ArrayContext& ctx, Ino ino, ArraySchema schema, std::unique_ptr<Placement> placement)
    : ctx_(ctx), ino_(ino), schema_(std::move(schema)), placement_(std::move(placement)),
      bytes_(array_bytes(schema_)), reader_(ctx.chunk_bytes),
      write_behind_(std::make_unique<WriteBehind>(
          [this](std::uint64_t offset, const std::byte* data, std::size_t length, std::string* message) {
            return write(offset, data, length, message);
          })) {
  mu_.set_write_behind(write_behind_.get());
}

int ArrayFile::open(const ArrayContext& ctx, Ino ino, const ArraySchema& schema, std::shared_ptr<ArrayFile>* out,
                    std::string* message) {
  std::unique_ptr<Placement> placement;
  std::string unreadable;  // why a sealed primary's image does not load
  // A sealed mloc array has an image and no cells; one being written has
  // its staging cells (and no image).
  if (is_mloc(schema) && ctx.metadata.extents(ino).empty()) {
    const int r = load_image(ctx, ino, schema, 0, &placement, message);
    // With copies, an image whose directory does not read (damaged, or on a
    // lost member) leaves the array readable from them.
    if (r && (!placement || schema.copies.empty() || !(r == EIO || is_device_failure(r)))) return r;
    if (r) unreadable = fmt::format("the primary's mloc image does not load: {}", *message);
    message->clear();
    ArraySchema promoted;
    if (int e = promote_if_primary_lost(ctx, ino, schema, placement->grid().cells(), &promoted, message)) return e;
    if (!promoted.shape.empty()) return open(ctx, ino, promoted, out, message);
    if (r) {
      const auto stored = ctx.metadata.store().get(keys::mloc_extents(ino));
      auto extents = stored ? decode_extents(*stored) : std::nullopt;
      placement = unreadable_placement(std::move(placement), extents ? std::move(*extents) : std::vector<Extent>{},
                                       ctx.io.sector_size(), unreadable);
    }
  } else {
    std::unique_ptr<ArrayState> state;
    if (int r = build(ctx, ino, schema, false, &state, message)) return r;
    ArraySchema promoted;
    if (int r = promote_if_primary_lost(ctx, ino, schema, state->grid().cells(), &promoted, message)) return r;
    if (!promoted.shape.empty()) return open(ctx, ino, promoted, out, message);
    std::uint64_t settled = 0;
    if (int r = state->settle_torn_rewrites(&settled)) {
      *message = "reading the cells a crash interrupted the rewrite of failed";
      return r;
    }
    placement = cell_placement(std::move(state), ctx.geometry);
  }
  std::shared_ptr<ArrayFile> a(new ArrayFile(ctx, ino, schema, std::move(placement)));
  bool behind = false;
  {
    std::unique_lock lock(a->mu_);
    if (int r = a->load_index_locked(message)) return r;
    if (int r = a->open_copies_locked(message)) return r;
    // A read-write mount of a volume that loses members: cells a promotion
    // recorded lost may be held by another copy.
    if (ctx.member_lost) a->fill_lost_or_report_locked();
    for (const ArrayCopy& c : a->copies_) behind = behind || !c.current();
  }
  if (behind) a->kick_catch_up();  // a crash or an unmount left copies behind
  if (!unreadable.empty() && ctx.on_served_around)
    ctx.on_served_around(ino, fmt::format("{}; views are served from the copies until a scrub (or mmfsck --rebuild) "
                                          "encodes it anew",
                                          unreadable));
  *out = std::move(a);
  return 0;
}

int ArrayFile::commit_placement(const ArraySchema& schema, ArrayState& state, std::vector<Extent> dropped,
                                bool drop_old_sums, const Inode* inode, std::string* message,
                                const std::function<void(WriteBatch&)>& also) {
  // The new cells must be on stable storage before the record that points at them.
  if (int r = ctx_.io.flush()) {
    *message = "device flush failed";
    return r;
  }
  WriteBatch batch;
  batch.put(keys::xattr(ino_, kSchemaXattr), encode_schema(schema));
  state.stage_extents(ino_, 0, batch);
  MlocImage::stage_removal(ctx_.metadata, ino_, batch, &dropped);  // cells replace an mloc image
  if (drop_old_sums) {
    CellChecksums::stage_removal(ctx_.metadata.store(), ino_, batch);
    CellChecksums::stage_removal(ctx_.metadata.store(), ino_, batch, 'a');
  }
  state.sums().stage(batch);
  batch.del(keys::lost_cells(ino_));  // the new placement was written whole from readable cells
  if (also) also(batch);
  int r = inode ? ctx_.metadata.apply_with_inode(
                      ino_, [&](Inode& n) { n.size = inode->size; }, std::move(batch), std::move(dropped))
                : ctx_.metadata.apply(batch, std::move(dropped));
  if (r) {
    *message = "metadata commit failed";
    return r;
  }
  // From here the store points at the new placement: a failing sync is
  // reported, but the switch stands (the caller must not free the new extents).
  if (int r = ctx_.metadata.sync()) {
    *message = "metadata sync failed";
    return -r;
  }
  return 0;
}


int ArrayFile::create(const ArrayContext& ctx, const Inode& inode, const ArraySchema& requested, PlainFile* source,
                      std::shared_ptr<ArrayFile>* out, std::string* message) {
  // Copies are placed and filled beside the primary and recorded in the
  // same commit: a crash leaves no array, or the array with its copies.
  ArraySchema schema = placed_schema(ctx, requested);
  assign_member_sets(ctx, &schema);
  const std::vector<CopySpec> copies = std::move(schema.copies);
  schema.copies.clear();
  // (With copies, an empty mloc array is placed as staging cells, the copies
  // beside them, and sealed: every copy commits with the array.)
  if (is_mloc(schema) && (source == nullptr || source->size() == 0) && copies.empty()) {
    // Nothing to place: an empty image (no space) until the first write.
    MlocParams params;
    if (int r = mloc_params(schema.shape, schema.dtype.name, schema.chunk, schema.priority, schema.compress,
                            schema.bins, &params, message))
      return r;
    std::unique_ptr<MlocImage> image;
    if (int r = MlocImage::empty(params, ctx.io, &image, message)) return r;
    std::shared_ptr<ArrayFile> a(new ArrayFile(ctx, inode.ino, schema, image_placement(std::move(image), ctx.geometry)));
    WriteBatch batch;
    batch.put(keys::xattr(inode.ino, kSchemaXattr), encode_schema(schema));
    std::vector<Extent> dropped = ctx.metadata.extents(inode.ino);
    if (!dropped.empty()) batch.del(keys::extents(inode.ino));
    CellChecksums::stage_removal(ctx.metadata.store(), inode.ino, batch);
    CellChecksums::stage_removal(ctx.metadata.store(), inode.ino, batch, 'a');
    const std::uint64_t size = a->bytes_;
    if (int r = ctx.metadata.apply_with_inode(
            inode.ino, [&](Inode& n) { n.size = size; }, std::move(batch), std::move(dropped))) {
      *message = "metadata commit failed";
      return r;
    }
    if (int r = ctx.metadata.sync()) {
      *message = "metadata sync failed";
      return r;
    }
    if (schema.index != "none") {
      std::unique_lock lock(a->mu_);
      if (int e = a->load_index_locked(message)) return e;
    }
    *out = std::move(a);
    return 0;
  }
  std::unique_ptr<ArrayState> state;
  if (int r = build(ctx, inode.ino, schema, true, &state, message)) return r;
  std::shared_ptr<ArrayFile> a(new ArrayFile(ctx, inode.ino, schema, nullptr));
  auto release = [&] {
    for (const Extent& e : state->volume_extents()) ctx.allocator.free(e);
  };
  if (source != nullptr && source->size() > 0) {
    AlignedBuffer buf(kCopyBudget);
    for (std::uint64_t off = 0; off < a->bytes_; off += kCopyBudget) {
      std::size_t n = std::size_t(std::min<std::uint64_t>(kCopyBudget, a->bytes_ - off)), got = 0;
      if (int r = source->read(off, n, buf.data(), &got); r || got != n) {
        release();
        *message = "reading the file's bytes failed";
        return r ? r : EIO;
      }
      state->write_bytes(off, buf.data(), n);
      if (const DirtyAction act = at_dirty_limit(*state, true); act != DirtyAction::none) {
        std::uint64_t bad = 0;
        if (int r = state->write_back(&bad, nullptr, act == DirtyAction::complete_cells)) {
          release();
          *message = "writing the array's cells failed";
          return r;
        }
      }
    }
    std::uint64_t bad = 0;
    if (int r = state->write_back(&bad, nullptr)) {
      release();
      *message = "writing the array's cells failed";
      return r;
    }
  }
  // The plain file's blocks and their checksums go with the same commit.
  std::vector<Extent> dropped = ctx.metadata.extents(inode.ino);
  Inode n = inode;
  n.size = a->bytes_;
  a->schema_ = schema;
  a->placement_ = cell_placement(std::move(state), ctx.geometry);
  ArraySchema with = schema;
  std::vector<ArrayCopy> built;
  std::vector<Extent> copy_extents;
  if (!copies.empty()) {
    std::unique_lock lock(a->mu_);
    with.copies = copies;
    assign_copy_slots({}, &with.copies);
    if (int r = a->change_copies_allowed_locked(with, message)) {
      a->release_placement_on_failure();
      return r;
    }
    if (int r = a->build_new_copies_locked(with, &built, &copy_extents, message)) {
      a->release_placement_on_failure();
      return r;
    }
  }
  int r = a->commit_placement(with, *a->writable_cells_locked(), std::move(dropped), true, &n, message,
                              [&](WriteBatch& batch) {
                                for (ArrayCopy& c : built) a->stage_copy_keys(c, batch);
                              });
  if (r > 0) {  // not applied: the new extents are nobody's
    a->release_placement_on_failure();
    for (const Extent& e : copy_extents) ctx.allocator.free(e);
    return r;
  }
  if (!built.empty()) {
    std::unique_lock lock(a->mu_);
    a->copies_ = std::move(built);
    a->schema_ = with;
    ++a->placement_epoch_;
  }
  if (r == 0 && is_mloc(schema)) {
    // The bytes are placed (staging cells): encode them now, as a close would.
    std::unique_lock lock(a->mu_);
    if (int e = a->seal_locked(a->schema_, message)) return e;
  }
  if (r == 0 && schema.index != "none") {
    // The index goes with its own commit: a crash before it leaves an array
    // whose index is built when it is next loaded.
    std::unique_lock lock(a->mu_);
    if (int e = a->load_index_locked(message)) return e;
  }
  *out = std::move(a);
  return -r;  // applied; a failed sync is still an error for the caller
}

void ArrayFile::release_placement_on_failure() {
  if (!cells_locked()) return;
  for (const Extent& e : placement_->extents()) ctx_.allocator.free(e);
  replace_placement_locked(nullptr);
}

void ArrayFile::replace_placement_locked(std::unique_ptr<Placement> next) {
  placement_ = std::move(next);
  ++placement_epoch_;
  copies_lag_on_device_locked();
}

ArraySchema ArrayFile::schema() const {
  std::shared_lock lock(mu_);
  return schema_;
}

std::uint64_t ArrayFile::device_bytes() const {
  std::shared_lock lock(mu_);
  return placement_->device_bytes();
}

bool ArrayFile::holds_data() const {
  std::shared_lock lock(mu_);
  return holds_data_locked();
}

int ArrayFile::flush_locked(bool durable, std::string* message, bool complete_only) {
  if (retired_) return 0;
  if (has_dirty_locked()) {
    if (int r = index_before_write_back_locked(message)) return r;
    // The copies' cells this write-back leaves behind are recorded no later
    // than the new bytes can be read: with the alternatives of cells
    // rewritten in place (durable before those bytes land), else in the
    // commit below (a cell that never held data reads as zeros, in every
    // copy, until then). No sync of its own.
    const bool record = std::any_of(copies_.begin(), copies_.end(), [](const ArrayCopy& c) { return c.unrecorded; });
    bool recorded = false;
    std::uint64_t bad = 0;
    auto make_durable = [&](WriteBatch& alternatives) {
      if (record) stage_copies_record_locked(alternatives);
      if (int r = ctx_.metadata.apply(alternatives, {})) return r;
      recorded = record;
      return ctx_.metadata.sync();
    };
    ArrayState& cells = *writable_cells_locked();
    if (int r = cells.write_back(&bad, make_durable, complete_only)) {
      *message = r == EIO ? cells.failure_message(bad) : "writing cells failed";
      return r;
    }
    const std::vector<std::uint64_t> dropped_lost = cells.take_dropped_lost();
    copies_lag_on_device_locked();
    // Data before the checksums that describe it.
    if (int r = ctx_.io.flush()) {
      *message = "device flush failed";
      return r;
    }
    WriteBatch batch;
    cells.sums().stage(batch);
    cells.alternatives().stage(batch);
    cells.stage_lost(ino_, batch);
    if (record && !recorded) stage_copies_record_locked(batch);
    // The index's delta commits with the checksums of the cells it describes.
    std::vector<Extent> dropped;
    if (int r = index_after_write_back_locked(batch, &dropped, message)) return r;
    if (int r = ctx_.metadata.apply(batch, std::move(dropped))) {
      *message = "metadata commit failed";
      return r;
    }
    if (record)
      for (ArrayCopy& c : copies_) c.unrecorded = false;
    if (!dropped_lost.empty()) {
      if (dropped_lost_writes_ == 0) first_dropped_lost_ = dropped_lost.front();
      dropped_lost_writes_ += dropped_lost.size();
    }
  }
  if (durable) {
    if (int r = ctx_.metadata.sync()) {
      *message = "metadata sync failed";
      return r;
    }
    if (dropped_lost_writes_) {
      // What a disk does with a write it cannot make: the error at the next
      // fsync, the bytes gone.
      *message = fmt::format("{} write-back(s) of cells lost with a failed member were dropped (cell {} first): each "
                             "wrote the cell only in part, and the rest of its bytes are gone; write such a cell "
                             "whole to restore it",
                             dropped_lost_writes_, first_dropped_lost_);
      dropped_lost_writes_ = 0;
      return EIO;
    }
  }
  return 0;
}

int ArrayFile::flush(bool durable, std::string* message) {
  if (int r = write_behind_->take_error(message)) return r;
  std::unique_lock lock(mu_);
  return flush_locked(durable, message);
}

int ArrayFile::flush_periodic(std::string* message) {
  std::unique_lock lock(mu_);
  const std::uint64_t now = generation_.load();
  const bool writing = now != periodic_generation_;
  periodic_generation_ = now;
  const ArrayState* cells = cells_locked();
  const int r = flush_locked(false, message, writing && cells && !index_ && keep_incomplete(*cells));
  // Idle since the last period: the copies catch up.
  if (!writing && std::any_of(copies_.begin(), copies_.end(), [](const ArrayCopy& c) { return !c.current(); }))
    kick_catch_up();
  return r;
}

int ArrayFile::settle(std::string* message) {
  if (int r = write_behind_->take_error(message)) return r;
  std::unique_lock lock(mu_);
  if (retired_) return 0;
  const int r = is_mloc(schema_) && cells_locked() ? seal_locked(schema_, message) : flush_locked(true, message);
  // The primary is durable: the copies catch up after it.
  if (std::any_of(copies_.begin(), copies_.end(), [](const ArrayCopy& c) { return !c.current(); })) kick_catch_up();
  return r;
}

int ArrayFile::mloc_params_of(const ArraySchema& schema, MlocParams* out, std::string* message) const {
  return mloc_params(schema.shape, schema.dtype.name, schema.chunk, schema.priority, schema.compress, schema.bins,
                     out, message);
}

int ArrayFile::read_selection_locked(const Selection& selection, std::uint32_t keep, std::byte* out,
                                     std::uint64_t* bytes_read, std::string* message,
                                     const std::function<void()>& device_done, AlignedBuffer* scratch, bool once) {
  std::uint64_t ignored = 0;
  if (!bytes_read) bytes_read = &ignored;
  if (copies_.empty())
    return placement_->read_selection(selection, keep, out, bytes_read, message, device_done, scratch, once);
  // The current placement the model prices cheapest (queries' scans, index
  // builds, relayouts and catch-ups read the same bytes from any of them).
  std::uint32_t best = 0;
  double best_ms = servable_locked(0) ? placement_->modeled_plan(selection, keep).modeled_ms
                                      : std::numeric_limits<double>::infinity();
  for (std::uint32_t k = 1; k <= copies_.size(); ++k) {
    if (!servable_locked(k)) continue;
    const double ms = placement_at(k).modeled_plan(selection, keep).modeled_ms;
    if (ms < best_ms) best = k, best_ms = ms;
  }
  std::uint64_t bad = Placement::kNoBadCell;
  const int r =
      placement_at(best).read_selection(selection, keep, out, bytes_read, message, device_done, scratch, once, &bad);
  if (r == 0 || !(bad != Placement::kNoBadCell || is_device_failure(r))) return r;
  // A bad cell or a device error: the same bytes from another current
  // placement (views repair the bad cell, ArrayFile::load_part_locked; a
  // scrub repairs it otherwise).
  for (std::uint32_t k = 0; k <= copies_.size(); ++k) {
    if (k == best || !servable_locked(k)) continue;
    std::string other;
    if (placement_at(k).read_selection(selection, keep, out, bytes_read, &other, {}, scratch, once) != 0) continue;
    if (ctx_.on_served_around)
      ctx_.on_served_around(ino_, fmt::format("{} failed to read ({}); served from {}", placement_name(best),
                                              *message, placement_name(k)));
    return 0;
  }
  return r;
}

int ArrayFile::read_rows_locked(std::uint64_t row, std::uint64_t rows, std::byte* out, std::string* message,
                                AlignedBuffer* scratch) {
  const CellGrid& g = grid_locked();
  std::vector<DimRange> dims;
  for (std::size_t d = 0; d < g.dims(); ++d) dims.push_back(DimRange{0, g.shape()[d], 1, false});
  dims[0] = DimRange{row, row + rows, 1, false};
  return read_selection_locked(Selection(dims), 0, out, nullptr, message, {}, scratch);
}

int ArrayFile::commit_image_locked(const ArraySchema& next, std::unique_ptr<Placement> sealed,
                                   std::string* message, std::unique_ptr<ArrayIndex> fresh_index,
                                   const std::function<void(WriteBatch&, std::vector<Extent>*)>& also) {
  // The image is on stable storage (encode flushed it) before the record.
  WriteBatch batch;
  std::vector<Extent> dropped;
  batch.put(keys::xattr(ino_, kSchemaXattr), encode_schema(next));
  // The stored image (the record's, not the placement's: an unreadable one
  // stands in with no image) gives its extents back.
  if (!cells_locked()) MlocImage::stage_removal(ctx_.metadata, ino_, batch, &dropped);
  stage_image(*sealed, 0, batch);
  if (const ArrayState* cells = cells_locked()) {
    batch.del(keys::extents(ino_));
    for (const Extent& e : cells->volume_extents()) dropped.push_back(e);
    CellChecksums::stage_removal(ctx_.metadata.store(), ino_, batch);
    CellChecksums::stage_removal(ctx_.metadata.store(), ino_, batch, 'a');
  }
  if (fresh_index) {
    fresh_index->stage(batch);
    if (index_) {
      const std::vector<Extent> old = index_->extents();
      dropped.insert(dropped.end(), old.begin(), old.end());
    }
  }
  // The copies' record holds whatever the staging cells' writes put behind.
  if (!copies_.empty()) stage_copies_record_locked(batch);
  if (also) also(batch, &dropped);
  if (int r = ctx_.metadata.apply(batch, std::move(dropped))) {
    release_image(*sealed);
    if (fresh_index) fresh_index->release();
    *message = "metadata commit failed";
    return r;
  }
  // The switch stands from here; a failing sync is still reported.
  replace_placement_locked(std::move(sealed));
  if (fresh_index) {
    index_ = std::move(fresh_index);
    partial_rows_.clear();
  }
  schema_ = next;
  ++generation_;
  if (int r = ctx_.metadata.sync()) {
    *message = "metadata sync failed";
    return r;
  }
  return 0;
}

int ArrayFile::seal_locked(const ArraySchema& next, std::string* message) {
  if (cells_locked())
    if (int r = flush_locked(false, message)) return r;
  std::unique_ptr<Placement> image;  // read from the staging placement's sectors, one slab after another
  if (int r = encode_image_locked(next, false, &image, message)) return r;
  return commit_image_locked(next, std::move(image), message);
}

int ArrayFile::unseal_locked(bool copy, std::string* message) {
  std::unique_ptr<ArrayState> staging;
  if (int r = build(ctx_, ino_, schema_, true, &staging, message)) return r;
  auto release = [&] {
    for (const Extent& e : staging->volume_extents()) ctx_.allocator.free(e);
  };
  if (copy && holds_data_locked()) {
    const auto& shape = schema_.shape;
    const std::uint64_t row = array_bytes(schema_) / shape[0];
    const std::uint64_t rows = std::max<std::uint64_t>(1, kCopyBudget / std::max<std::uint64_t>(1, row));
    AlignedBuffer buf(std::min(rows, shape[0]) * row), scratch;
    for (std::uint64_t r0 = 0; r0 < shape[0]; r0 += rows) {
      const std::uint64_t n = std::min(rows, shape[0] - r0);
      if (int r = read_rows_locked(r0, n, buf.data(), message, &scratch)) {
        release();
        return r;
      }
      staging->write_bytes(r0 * row, buf.data(), n * row);
      const DirtyAction act = r0 + n == shape[0] ? DirtyAction::all_cells : at_dirty_limit(*staging, true);
      if (act != DirtyAction::none) {
        std::uint64_t bad = 0;
        if (int r = staging->write_back(&bad, nullptr, act == DirtyAction::complete_cells)) {
          release();
          *message = "writing the staging placement failed";
          return r;
        }
      }
    }
  }
  // commit_placement drops the image's records; its extents go with them.
  int r = commit_placement(schema_, *staging, {}, true, nullptr, message);
  if (r > 0) {
    release();
    return r;
  }
  replace_placement_locked(cell_placement(std::move(staging), ctx_.geometry));
  return -r;
}

namespace {
int past_the_end(std::uint64_t offset, std::size_t length, std::uint64_t bytes, std::string* message) {
  if (offset <= bytes && length <= bytes - offset) return 0;
  *message = fmt::format("write of {} bytes at offset {} passes the array's end ({} bytes: the shape fixes the size)",
                         length, offset, bytes);
  return EFBIG;
}
}  // namespace

int ArrayFile::write_behind(std::uint64_t offset, const std::byte* data, std::size_t length, std::string* message) {
  if (int r = past_the_end(offset, length, bytes_, message)) return r;
  if (length == 0) return 0;
  return write_behind_->submit(offset, data, length, message);
}

int ArrayFile::take_write_error(std::string* message) { return write_behind_->take_error(message); }

int ArrayFile::write(std::uint64_t offset, const std::byte* data, std::size_t length, std::string* message) {
  std::unique_lock lock(mu_);  // on the worker: no drain (write_behind.h)
  if (int r = past_the_end(offset, length, bytes_, message)) return r;
  if (retired_) {
    *message = "the array file was removed";
    return ESTALE;
  }
  if (length == 0) return 0;
  if (int r = promote_in_place_locked(message)) return r;
  if (!cells_locked())
    if (int r = unseal_locked(true, message)) return r;
  ArrayState& cells = *writable_cells_locked();
  cells.write_bytes(offset, data, length);
  note_write_locked(offset, data, length);
  note_copies_write_locked(offset, length);
  ++generation_;
  // Without an index (whose delta reads the rows it notes back from the
  // device), the cells a writer has not finished stay dirty.
  const DirtyAction act = at_dirty_limit(cells, !index_);
  if (act != DirtyAction::none) return flush_locked(false, message, act == DirtyAction::complete_cells);
  return 0;
}

int ArrayFile::zero(std::string* message) {
  std::unique_lock lock(mu_);
  if (!cells_locked()) {  // a sealed mloc array: an empty image and an index of zeros, in one commit
    if (!holds_data_locked() && !index_) return 0;
    std::unique_ptr<Placement> none;
    if (int r = encode_image_locked(schema_, true, &none, message)) return r;
    std::unique_ptr<ArrayIndex> fresh;
    if (index_) {
      // Built while the empty image stands in: the index of all zeros.
      std::swap(placement_, none);
      const int r = build_index_locked(schema_, &fresh, message);
      std::swap(placement_, none);
      if (r) return r;
    }
    ++generation_;
    if (holds_data_locked())
      return commit_image_locked(schema_, std::move(none), message, std::move(fresh),
                                 [&](WriteBatch& batch, std::vector<Extent>* dropped) {
                                   clear_copies_locked(batch, dropped);
                                 });
    WriteBatch batch;
    std::vector<Extent> dropped;
    clear_copies_locked(batch, &dropped);
    if (fresh) {
      fresh->stage(batch);
      const std::vector<Extent> old = index_->extents();  // (a copy: one vector to insert from)
      dropped.insert(dropped.end(), old.begin(), old.end());
    }
    if (int r = ctx_.metadata.apply(batch, std::move(dropped))) {
      if (fresh) fresh->release();
      *message = "metadata commit failed";
      return r;
    }
    if (fresh) index_ = std::move(fresh);
    partial_rows_.clear();
    return 0;
  }
  ArrayState& cells = *writable_cells_locked();
  cells.clear();
  ++generation_;
  WriteBatch batch;
  cells.sums().stage(batch);
  cells.alternatives().stage(batch);
  cells.stage_lost(ino_, batch);
  std::vector<Extent> dropped;
  clear_copies_locked(batch, &dropped);
  std::unique_ptr<ArrayIndex> fresh;
  if (index_) {  // every element is zero again: so is the index
    if (int r = build_index_locked(schema_, &fresh, message)) return r;
    fresh->stage(batch);
    const std::vector<Extent> old = index_->extents();  // (a copy: one vector to insert from)
    dropped.insert(dropped.end(), old.begin(), old.end());
  }
  if (int r = ctx_.metadata.apply(batch, std::move(dropped))) {
    if (fresh) fresh->release();
    *message = "metadata commit failed";
    return r;
  }
  if (fresh) index_ = std::move(fresh);
  partial_rows_.clear();
  return 0;
}

int ArrayFile::copy_into_locked(ArrayState& fresh, std::string* message) {
  // Copy in slabs along dimension 0 aligned to both placements' cells, so
  // every new cell is written whole (no read-back) exactly once.
  const CellGrid& og = grid_locked();
  const CellGrid& ng = fresh.grid();
  std::uint64_t row = og.elements() / og.shape()[0] * og.itemsize();
  std::uint64_t unit = std::lcm(og.cell()[0], ng.cell()[0]);
  std::uint64_t rows = std::max<std::uint64_t>(1, kCopyBudget / std::max<std::uint64_t>(1, unit * row)) * unit;
  std::uint64_t S0 = og.shape()[0];
  AlignedBuffer buf(std::min(rows, S0) * row);
  AlignedBuffer scratch;  // the old placement's sectors, one slab after another
  for (std::uint64_t r0 = 0; r0 < S0; r0 += rows) {
    std::uint64_t r1 = std::min(S0, r0 + rows);
    std::vector<DimRange> dims;
    for (std::size_t d = 0; d < og.dims(); ++d) dims.push_back(DimRange{0, og.shape()[d], 1, false});
    dims[0] = DimRange{r0, r1, 1, false};
    std::uint64_t bad = 0;
    if (int r = read_selection_locked(Selection(dims), 0, buf.data(), nullptr, message, {}, &scratch)) return r;
    fresh.write_bytes(r0 * row, buf.data(), (r1 - r0) * row);
    const DirtyAction act = r1 == S0 ? DirtyAction::all_cells : at_dirty_limit(fresh, true);
    if (act != DirtyAction::none) {
      if (int r = fresh.write_back(&bad, nullptr, act == DirtyAction::complete_cells)) {
        *message = "writing the new placement failed";
        return r;
      }
    }
  }
  return 0;
}

void ArrayFile::retire_if(const std::function<bool()>& remove) {
  std::unique_lock lock(mu_);
  if (retired_ || !remove()) return;
  retired_ = true;
  if (ArrayState* cells = writable_cells_locked()) cells->clear();
  for (ArrayCopy& c : copies_)
    if (ArrayState* cells = c.placement->cells()) cells->clear();
  ++generation_;
  reader_.clear();
}

bool ArrayFile::retired() const {
  std::shared_lock lock(mu_);
  return retired_;
}

}  // namespace mmfs::fs
