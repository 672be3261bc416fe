// An array's extra copies (user.mmfs.copies; docs/on-disk-format.md,
// "Copies"): building and dropping them in one commit, repairing a bad cell
// from another placement, and how a copy catches up on the primary's writes
// (which placement serves a view: array_file_serving.cc).
//
// A write reaches the primary as before; the copies' cells it lands in are
// noted as behind. The record of cells behind commits no later than the
// primary's new bytes can be read (fs/array/array_file.cc flush_locked), so
// after a crash at any moment every copy cell that may differ from the
// primary is in the record. A copy with any cell behind serves no view; the catch-up (in the
// background after fsync, the last close or an idle spell; at once for a
// read of A@/copy/K@) reads the primary's bytes of the lagging cells, writes
// them into the copy as any write-back does (alternatives first, so a crash
// tears no cell) and commits the copy's checksums with the smaller record.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "fs/array/array_file.h"
#include "fs/array/array_file_internal.h"
#include "fs/array/behind_record.h"
#include "fs/array/copy_spec.h"
#include "layouts/c_order_boxes.h"
#include "layouts/selection_chunks.h"
#include "util/coding.h"

namespace mmfs::fs {

using layouts::CellGrid;
using layouts::DimRange;
using layouts::Selection;
using detail::is_mloc;

namespace {

// The catch-up works in steps of about this many bytes, the lock released between them.
constexpr std::uint64_t kCatchUpStep = 64ull << 20;

}  // namespace

ArrayFile::~ArrayFile() { stop_catch_up(); }

int ArrayFile::open_copies_locked(std::string* message) {
  copies_.clear();
  if (schema_.copies.empty()) return 0;
  std::map<std::uint8_t, Roaring> behind;
  if (auto v = ctx_.metadata.store().get(keys::copy_record(ino_)))
    if (!decode_behind(*v, &behind)) {
      *message = "the record of the copies' lagging cells does not decode (run mmfsck)";
      return EUCLEAN;
    }
  for (std::size_t i = 0; i < schema_.copies.size(); ++i) {
    ArrayCopy c;
    c.spec = schema_.copies[i];
    c.schema = copy_schema(schema_, i);
    if (c.spec.slot == 0) {
      *message = fmt::format("copy {} has no keys in the store (run mmfsck)", i + 1);
      return EUCLEAN;
    }
    if (is_mloc(c.schema)) {
      std::string why;
      const int r = load_image(ctx_, ino_, c.schema, c.spec.slot, &c.placement, &why);
      if (auto it = behind.find(c.spec.slot); it != behind.end()) c.behind = std::move(it->second);
      if ((r == EIO || is_device_failure(r)) && c.placement) {
        // Its directory does not read (damaged, or on a lost member): the copy
        // lags whole until a new image replaces it (the catch-up), and the
        // array opens as ever.
        c.behind.addRange(0, c.placement->grid().cells());
        c.unrecorded = true;
        if (ctx_.on_healed)
          ctx_.on_healed(ino_, fmt::format("copy {}: its mloc image failed to load ({}); it is encoded anew from the "
                                           "other placements", i + 1, why));
      } else if (r) {
        *message = fmt::format("copy {} ({}): {}", i + 1, copies_text({c.spec}), why);
        return r;
      }
      copies_.push_back(std::move(c));
      continue;
    }
    std::unique_ptr<ArrayState> state;
    if (int r = build(ctx_, ino_, c.schema, false, &state, message, nullptr, c.spec.slot)) {
      *message = fmt::format("copy {} ({}): {}", i + 1, copies_text({c.spec}), *message);
      return r;
    }
    std::uint64_t settled = 0;
    if (int r = state->settle_torn_rewrites(&settled)) {
      *message = fmt::format("copy {}: reading the cells a crash interrupted the rewrite of failed", i + 1);
      return r;
    }
    c.placement = cell_placement(std::move(state), ctx_.geometry);
    if (auto it = behind.find(c.spec.slot); it != behind.end()) c.behind = std::move(it->second);
    copies_.push_back(std::move(c));
  }
  copies_lag_on_device_locked();  // what the record holds lags bytes written back
  return 0;
}

void ArrayFile::stage_copies_record_locked(WriteBatch& batch) {
  std::map<std::uint8_t, Roaring> behind;
  for (const ArrayCopy& c : copies_)
    if (!c.behind.isEmpty()) behind[c.spec.slot] = c.behind;
  const std::string record = encode_behind(behind);
  if (record.empty())
    batch.del(keys::copy_record(ino_));
  else
    batch.put(keys::copy_record(ino_), record);
}

void ArrayFile::note_copies_write_locked(std::uint64_t offset, std::size_t length) {
  if (copies_.empty() || length == 0) return;
  const std::uint32_t item = schema_.dtype.itemsize;
  const std::uint64_t lo = offset / item, hi = (offset + length + item - 1) / item;
  layouts::c_order_boxes(schema_.shape, lo, hi, [&](const std::vector<DimRange>& box) {
    for (ArrayCopy& c : copies_) {
      detail::add_touched_cells(c.placement->grid(), box, &c.behind);
      c.unrecorded = true;
    }
  });
}

void ArrayFile::copies_lag_on_device_locked() {
  for (ArrayCopy& c : copies_) c.lag_on_device = c.behind;
}

void ArrayFile::clear_copies_locked(WriteBatch& batch, std::vector<Extent>* dropped) {
  for (ArrayCopy& c : copies_) {
    if (c.placement->image()) {
      // An empty image reads as zeros; should it not build, the copy lags whole instead.
      std::unique_ptr<Placement> none;
      std::string ignored;
      if (encode_image_locked(c.schema, true, &none, &ignored)) {
        c.behind.addRange(0, c.placement->grid().cells());
        c.unrecorded = true;
        continue;
      }
      MlocImage::stage_removal(ctx_.metadata, ino_, batch, dropped, c.spec.slot);
      stage_image(*none, c.spec.slot, batch);
      c.placement = std::move(none);
      c.behind = Roaring();
      c.unrecorded = false;
      continue;
    }
    ArrayState& cells = *c.placement->cells();
    cells.clear();
    cells.sums().stage(batch);
    cells.alternatives().stage(batch);
    c.behind = Roaring();
    c.unrecorded = false;
  }
  copies_lag_on_device_locked();
  stage_copies_record_locked(batch);
}

int ArrayFile::build_new_copies_locked(const ArraySchema& target, std::vector<ArrayCopy>* built,
                                       std::vector<Extent>* allocated, std::string* message) {
  auto release = [&] {
    for (const Extent& e : *allocated) ctx_.allocator.free(e);
    allocated->clear();
    built->clear();
  };
  const bool data = holds_data_locked();
  for (std::size_t i = 0; i < target.copies.size(); ++i) {
    const CopySpec& spec = target.copies[i];
    auto kept = std::find_if(copies_.begin(), copies_.end(),
                             [&](const ArrayCopy& c) { return c.spec.slot == spec.slot; });
    if (kept != copies_.end()) continue;  // moved over after the commit
    ArrayCopy c;
    c.spec = spec;
    c.schema = placed_schema(ctx_, copy_schema(target, i));
    if (is_mloc(c.schema)) {
      if (int r = encode_image_locked(c.schema, false, &c.placement, message)) {
        release();
        *message = fmt::format("copy {} ({}): {}", i + 1, copies_text({spec}), *message);
        return r;
      }
      for (const Extent& e : c.placement->extents()) allocated->push_back(e);
      built->push_back(std::move(c));
      continue;
    }
    std::unique_ptr<ArrayState> state;
    if (int r = build(ctx_, ino_, c.schema, true, &state, message, nullptr, spec.slot)) {
      release();
      *message = fmt::format("copy {} ({}): {}", i + 1, copies_text({spec}), *message);
      return r;
    }
    for (const Extent& e : state->volume_extents()) allocated->push_back(e);
    if (data)
      if (int r = copy_into_locked(*state, message)) {
        release();
        return r;
      }
    c.placement = cell_placement(std::move(state), ctx_.geometry);
    built->push_back(std::move(c));
  }
  return 0;
}

void ArrayFile::stage_copy_keys(ArrayCopy& c, WriteBatch& batch) {
  if (c.placement->image()) {
    stage_image(*c.placement, c.spec.slot, batch);
    return;
  }
  ArrayState& cells = *c.placement->cells();
  cells.stage_extents(ino_, c.spec.slot, batch);
  cells.sums().stage(batch);
  cells.alternatives().stage(batch);
}

bool ArrayFile::placement_lost_locked(std::uint32_t k) const {
  if (!ctx_.member_lost) return false;
  const std::vector<std::uint32_t>& members = k == 0 ? schema_.members : copies_.at(k - 1).spec.members;
  return std::any_of(members.begin(), members.end(), [&](std::uint32_t m) { return ctx_.member_lost(m); });
}

std::string ArrayFile::placement_name(std::uint32_t k) {
  return k == 0 ? std::string("the primary") : fmt::format("copy {}", k);
}

int ArrayFile::change_copies_allowed_locked(const ArraySchema& next, std::string* message) const {
  if (next.copies.empty()) return 0;
  if (next.table_part) {
    *message = "the array is an attribute of a table in capsules: it cannot have copies";
    return EBUSY;
  }
  if (grid_locked().cells() >= (1ull << 32)) {
    *message = "an array of 2^32 cells or more cannot have copies (choose larger cells)";
    return EFBIG;
  }
  return 0;
}

void assign_member_sets(const ArrayContext& ctx, ArraySchema* s) {
  if (!ctx.member_sets || s->copies.empty()) return;  // without copies, the primary stays where it is
  const auto placements = std::uint32_t(s->copies.size() + 1);
  s->members = ctx.member_sets->members_for(placements, 0);
  for (std::uint32_t k = 1; k < placements; ++k) s->copies[k - 1].members = ctx.member_sets->members_for(placements, k);
}

int ArrayFile::change_copies_locked(const ArraySchema& next, bool rebuild, std::string* message) {
  if (int r = change_copies_allowed_locked(next, message)) return r;
  if (int r = flush_locked(false, message)) return r;
  ArraySchema target = next;
  // Before the slots: a copy keeps its slot (and cells) only on the same members.
  assign_member_sets(ctx_, &target);
  {
    std::vector<CopySpec> current = schema_.copies;
    if (rebuild)  // none is kept, but their slots are not reused in this commit
      for (CopySpec& c : current) c.layout.clear();
    assign_copy_slots(current, &target.copies);
  }
  std::vector<ArrayCopy> result;
  std::vector<Extent> allocated;
  auto release = [&] {
    for (const Extent& e : allocated) ctx_.allocator.free(e);
  };
  // The primary moves to its member set in the same commit as the copies
  // (docs/copies-on-members.md): a volume of several devices whose array
  // gains its first copies, or a new number of them.
  std::unique_ptr<ArrayState> moved;
  target.checksum_block = schema_.checksum_block;
  // A sealed mloc image moves as its staging cells, sealed again on its set after the commit.
  if (is_mloc(schema_) && target.members != schema_.members && image_locked() && holds_data_locked())
    if (int r = unseal_locked(true, message)) return r;
  if (target.members != schema_.members && cells_locked()) {
    ArraySchema primary = placed_schema(ctx_, schema_);
    primary.members = target.members;
    primary.copies.clear();
    if (int r = build(ctx_, ino_, primary, true, &moved, message)) {
      *message = fmt::format("moving the array to members {}: {}", fmt::join(target.members, ","), *message);
      return r;
    }
    for (const Extent& e : moved->volume_extents()) allocated.push_back(e);
    if (holds_data_locked())
      if (int r = copy_into_locked(*moved, message)) {
        release();
        return r;
      }
    target.checksum_block = primary.checksum_block;
  }
  if (int r = build_new_copies_locked(target, &result, &allocated, message)) {
    release();
    return r;
  }
  // The new cells on stable storage before the record that points at them.
  if (!allocated.empty())
    if (int r = ctx_.io.flush()) {
      release();
      *message = "device flush failed";
      return r;
    }
  WriteBatch batch;
  std::vector<Extent> dropped;
  batch.put(keys::xattr(ino_, kSchemaXattr), encode_schema(target));
  if (moved) {
    moved->stage_extents(ino_, 0, batch);
    CellChecksums::stage_removal(ctx_.metadata.store(), ino_, batch);
    CellChecksums::stage_removal(ctx_.metadata.store(), ino_, batch, 'a');
    moved->sums().stage(batch);
    moved->alternatives().stage(batch);
    for (const Extent& e : placement_->extents()) dropped.push_back(e);
  }
  for (ArrayCopy& c : result) stage_copy_keys(c, batch);
  for (const ArrayCopy& c : copies_) {
    const bool kept = std::any_of(target.copies.begin(), target.copies.end(),
                                  [&](const CopySpec& s) { return s.slot == c.spec.slot; });
    if (kept) continue;
    batch.del(keys::copy_extents(ino_, c.spec.slot));
    batch.del(keys::copy_mloc_record(ino_, c.spec.slot));
    batch.del(keys::xattr(ino_, set_extents_record(c.spec.slot)));
    CellChecksums::stage_removal(ctx_.metadata.store(), ino_, batch, keys::kCopyChecksumTable, c.spec.slot);
    CellChecksums::stage_removal(ctx_.metadata.store(), ino_, batch, keys::kCopyAltChecksumTable, c.spec.slot);
    for (const Extent& e : c.placement->extents()) dropped.push_back(e);
  }
  // The copies in the order of the list: kept ones moved over, new ones built above.
  std::vector<ArrayCopy> ordered;
  for (const CopySpec& spec : target.copies) {
    auto kept = std::find_if(copies_.begin(), copies_.end(), [&](const ArrayCopy& c) { return c.spec.slot == spec.slot; });
    auto built = std::find_if(result.begin(), result.end(), [&](const ArrayCopy& c) { return c.spec.slot == spec.slot; });
    ArrayCopy c = kept != copies_.end() && kept->placement ? std::move(*kept) : std::move(*built);
    c.spec = spec;
    ordered.push_back(std::move(c));
  }
  // The record names only copies that remain; every cell behind is in it.
  std::vector<ArrayCopy> previous = std::move(copies_);
  copies_ = std::move(ordered);
  stage_copies_record_locked(batch);
  if (int r = ctx_.metadata.apply(batch, std::move(dropped))) {
    // Not applied: the old copies stand (give the kept ones back).
    for (ArrayCopy& c : copies_)
      for (ArrayCopy& p : previous)
        if (!p.placement && p.spec.slot == c.spec.slot) p = std::move(c);
    copies_ = std::move(previous);
    release();
    *message = "metadata commit failed";
    return r;
  }
  for (ArrayCopy& c : copies_) c.unrecorded = false;
  copies_lag_on_device_locked();
  schema_ = target;
  if (moved) replace_placement_locked(cell_placement(std::move(moved), ctx_.geometry));
  ++placement_epoch_;
  if (int r = ctx_.metadata.sync()) {
    *message = "metadata sync failed";
    return r;
  }
  if (is_mloc(schema_) && cells_locked()) return seal_locked(schema_, message);
  return 0;
}

Roaring ArrayFile::blocked_by_lost_locked(std::uint32_t k) const {
  Roaring blocked;
  const ArrayState* primary = cells_locked();
  const Placement& copy = placement_at(k);
  if (!primary || primary->lost().isEmpty() || !copy.cells()) return blocked;
  for (const std::uint32_t cell : primary->lost())
    detail::add_touched_cells(copy.grid(), primary->grid().element_box(cell), &blocked);
  return blocked;
}

bool ArrayFile::overlaps_lost_locked(const std::vector<DimRange>& box) const {
  const ArrayState* primary = cells_locked();
  if (!primary || primary->lost().isEmpty()) return false;
  Roaring touched;
  detail::add_touched_cells(primary->grid(), box, &touched);
  return primary->lost().intersect(touched);
}

Roaring ArrayFile::catchable_locked(std::uint32_t k) const {
  const ArrayCopy& c = copies_.at(k - 1);
  if (c.current()) return {};
  return c.behind - blocked_by_lost_locked(k);
}

int ArrayFile::catch_up_locked(std::size_t k, std::uint64_t budget, bool whole, std::string* message) {
  ArrayCopy& c = copies_.at(k - 1);
  if (c.current()) return 0;
  // An mloc image is never rewritten in place: a new one replaces it whole.
  if (c.placement->image()) return reencode_copy_locked(k, message);
  // The primary's bytes on the device, and the record holding every cell behind durable.
  if (int r = flush_locked(false, message)) return r;
  // Cells over the primary's lost cells wait (blocked_by_lost_locked).
  Roaring todo = catchable_locked(std::uint32_t(k));
  ArrayState& cells = *c.placement->cells();
  const CellGrid& g = cells.grid();
  const std::size_t n = g.dims();
  const std::uint32_t item = g.itemsize();
  const std::uint64_t per_row = g.cells() / g.grid()[0];
  const std::uint64_t slab_rows =
      std::max<std::uint64_t>(1, kCatchUpStep / std::max<std::uint64_t>(1, per_row * cells.cell_storage()));
  AlignedBuffer scratch;
  std::vector<std::uint64_t> at(n);
  std::uint64_t done = 0;
  // Copies the primary's bytes of `box` into the copy, whose cells `part` it covers.
  auto copy_box = [&](const std::vector<DimRange>& box, const Roaring& part) {
    const Selection sel(box);
    const std::uint64_t bytes = sel.elements() * item;
    AlignedBuffer buf(std::max<std::uint64_t>(bytes, 1), AlignedBuffer::Uninitialized{});
    if (int r = read_selection_locked(sel, 0, buf.data(), nullptr, message, {}, &scratch)) return r;
    c.behind -= part;
    c.lag_on_device -= part;
    if (int r = rewrite_box_locked(cells, box, buf.data(), message,
                                   [&](WriteBatch& batch) { stage_copies_record_locked(batch); })) {
      c.behind |= part;
      c.lag_on_device |= part;
      *message = fmt::format("copy {}: {}", k, *message);
      return r;
    }
    for (ArrayCopy& other : copies_) other.unrecorded = false;
    done += bytes;
    return 0;
  };
  while (!todo.isEmpty() && (whole || done < budget)) {
    const std::uint64_t g0 = todo.minimum() / per_row;
    const std::uint64_t g1 = std::min(g.grid()[0], g0 + slab_rows);
    Roaring slab;
    slab.addRange(g0 * per_row, g1 * per_row);
    slab &= todo;
    todo -= slab;
    // The cell-aligned box around the slab's lagging cells.
    std::vector<std::uint64_t> lo(n, ~std::uint64_t{0}), hi(n, 0);
    for (auto it = slab.begin(); it != slab.end(); ++it) {
      g.coords(*it, at);
      for (std::size_t d = 0; d < n; ++d) {
        lo[d] = std::min(lo[d], at[d]);
        hi[d] = std::max(hi[d], at[d]);
      }
    }
    const std::vector<DimRange> box = g.element_box(lo, hi);
    if (!overlaps_lost_locked(box)) {
      if (int r = copy_box(box, slab)) return r;
      continue;
    }
    // The box holds lost cells of the primary, which do not read: cell by
    // cell (none of the slab's is over a lost one).
    for (const std::uint32_t cell : slab) {
      Roaring one;
      one.add(cell);
      if (int r = copy_box(g.element_box(cell), one)) return r;
    }
  }
  if (c.current()) ++placement_epoch_;  // views may be served by it again
  return 0;
}

int ArrayFile::rewrite_box_locked(ArrayState& cells, const std::vector<DimRange>& box, const std::byte* data,
                                  std::string* message, const std::function<void(WriteBatch&)>& also) {
  put_box(cells, box, data);
  return commit_rewrite_locked(cells, message, also);
}

void ArrayFile::put_box(ArrayState& cells, const std::vector<DimRange>& box, const std::byte* data) {
  const CellGrid& g = cells.grid();
  const std::size_t n = g.dims();
  const std::uint32_t item = g.itemsize();
  std::vector<std::uint64_t> stride(n, 1);
  for (std::size_t d = n - 1; d-- > 0;) stride[d] = stride[d + 1] * g.shape()[d + 1];
  bool contiguous = true;  // whole rows of dimension 0: one run of C-order bytes
  std::uint64_t elements = 1;
  for (std::size_t d = 0; d < n; ++d) {
    elements *= box[d].count();
    if (d > 0 && box[d].count() != g.shape()[d]) contiguous = false;
  }
  if (contiguous) {
    cells.write_bytes(box[0].start * stride[0] * item, data, elements * item);
  } else {
    const std::uint64_t row = box[n - 1].count() * item;
    std::vector<std::uint64_t> idx(n, 0);
    for (std::uint64_t r = 0, rows = elements * item / row; r < rows; ++r) {
      std::uint64_t element = box[n - 1].start;
      for (std::size_t d = 0; d + 1 < n; ++d) element += (box[d].start + idx[d]) * stride[d];
      cells.write_bytes(element * item, data + r * row, row);
      for (std::size_t d = n - 1; d-- > 0;) {
        if (++idx[d] < box[d].count()) break;
        idx[d] = 0;
      }
    }
  }
}

int ArrayFile::commit_rewrite_locked(ArrayState& cells, std::string* message,
                                     const std::function<void(WriteBatch&)>& also, bool with_index) {
  if (with_index)
    if (int r = index_before_write_back_locked(message)) return r;
  // Rewritten in place: the new checksums durable as alternatives first (ArrayState).
  std::uint64_t bad = 0;
  auto make_durable = [&](WriteBatch& alternatives) {
    if (int r = ctx_.metadata.apply(alternatives, {})) return r;
    return ctx_.metadata.sync();
  };
  if (int r = cells.write_back(&bad, make_durable)) {
    *message = r == EIO ? cells.failure_message(bad) : "writing cells failed";
    return r;
  }
  if (int r = ctx_.io.flush()) {
    *message = "device flush failed";
    return r;
  }
  WriteBatch batch;
  cells.sums().stage(batch);
  cells.alternatives().stage(batch);
  cells.stage_lost(ino_, batch);
  if (also) also(batch);
  std::vector<Extent> dropped;
  if (with_index)
    if (int r = index_after_write_back_locked(batch, &dropped, message)) return r;
  if (int r = ctx_.metadata.apply(batch, std::move(dropped))) {
    *message = "metadata commit failed";
    return r;
  }
  if (&cells == cells_locked()) copies_lag_on_device_locked();  // the primary's cells rewritten
  return 0;
}

int ArrayFile::heal_locked(std::uint32_t bad_k, std::uint32_t good_k, const Selection& part, std::string* message,
                           std::uint64_t* healed) {
  // Writes that came in since the good bytes were read are on the device
  // first, and the source must still be current: a repair never puts back
  // bytes older than the array's.
  if (int r = flush_locked(false, message)) return r;
  if (good_k > copies_.size() || !servable_locked(good_k)) {
    *message = "the copy to repair from fell behind";
    return EAGAIN;
  }
  Placement& bad_p = placement_at(bad_k);
  ArrayState* cells = bad_p.cells();
  if (!cells) return EIO;
  const CellGrid& g = bad_p.grid();
  const std::uint32_t item = g.itemsize();
  AlignedBuffer probe(std::max<std::uint64_t>(part.elements() * item, 1), AlignedBuffer::Uninitialized{});
  // One read finds every bad cell of the part; each is rewritten from the
  // good placement, and a second read proves them clean. A cell bad again
  // then (its sectors keep failing) gets one more try before EIO.
  std::vector<std::uint64_t> bad_cells;
  for (int pass = 0; pass < 3; ++pass) {
    std::uint64_t first = Placement::kNoBadCell;
    const int r = cells->read_selection(part, probe.data(), &first, {}, nullptr, nullptr, &bad_cells);
    if (r == 0) return 0;
    if (r != EIO || bad_cells.empty()) {
      *message = r == ENOMEM ? "out of memory while verifying the cells read" : "device read failed";
      return r;
    }
    for (const std::uint64_t bad : bad_cells) {
      const std::vector<DimRange> box = g.element_box(bad);
      const Selection cell_sel(box);
      AlignedBuffer good(std::max<std::uint64_t>(cell_sel.elements() * item, 1), AlignedBuffer::Uninitialized{});
      std::uint64_t ignored = 0;
      if (int e = placement_at(good_k).read_selection(cell_sel, 0, good.data(), &ignored, message, {}, nullptr,
                                                      false))
        return e;
      if (int e = rewrite_box_locked(*cells, box, good.data(), message)) return e;
      const std::string what = fmt::format("{}: {}; served from {} and rewritten in place", placement_name(bad_k),
                                           cells->failure_message(bad), placement_name(good_k));
      if (ctx_.on_healed) ctx_.on_healed(ino_, what);
      if (healed) ++*healed;
    }
  }
  *message = fmt::format("{} stayed bad after its rewrite", cells->failure_message(bad_cells.front()));
  return EIO;
}

int ArrayFile::heal_from_mirror_locked(std::uint32_t k, const Selection& part, std::string* message,
                                       std::uint64_t* healed) {
  if (int r = flush_locked(false, message)) return r;
  Placement& p = placement_at(k);
  ArrayState* cells = p.cells();
  if (!cells) {
    *message = "an mloc image is repaired by rewriting it";
    return EIO;
  }
  const CellGrid& g = p.grid();
  const std::uint32_t item = g.itemsize();
  AlignedBuffer probe(std::max<std::uint64_t>(part.elements() * item, 1), AlignedBuffer::Uninitialized{});
  // Each pass reads the part from both sides, every bad cell of each side
  // found by one read, and rewrites each (to both sides) from the side that
  // reads it clean; a rewritten cell reads clean on both, so the passes end.
  std::vector<std::uint64_t> bad_on[2];
  for (int pass = 0; pass < 3; ++pass) {
    bool usable[2] = {true, true};
    for (int side = 0; side < 2; ++side) {
      MirrorSide steer(side);
      std::uint64_t first = Placement::kNoBadCell;
      const int r = cells->read_selection(part, probe.data(), &first, {}, nullptr, nullptr, &bad_on[side]);
      if (r != 0 && !(r == EIO && !bad_on[side].empty())) {
        usable[side] = false;  // failed or missing: nothing to compare or repair from
        bad_on[side].clear();
      }
    }
    if (bad_on[0].empty() && bad_on[1].empty()) return 0;
    for (int side = 0; side < 2; ++side) {
      for (const std::uint64_t bad : bad_on[side]) {
        const std::string why = cells->failure_message(bad);
        if (!usable[1 - side]) {
          *message = fmt::format("{} (the other side of the mirror cannot be read)", why);
          return EIO;
        }
        if (std::binary_search(bad_on[1 - side].begin(), bad_on[1 - side].end(), bad)) {
          *message = fmt::format("{}, on both sides of the mirror", why);
          return EIO;
        }
        const std::vector<DimRange> box = g.element_box(bad);
        const Selection cell_sel(box);
        AlignedBuffer good(std::max<std::uint64_t>(cell_sel.elements() * item, 1), AlignedBuffer::Uninitialized{});
        {
          MirrorSide steer(1 - side);
          std::uint64_t ignored = 0;
          std::string other;
          if (p.read_selection(cell_sel, 0, good.data(), &ignored, &other, {}, nullptr, false) != 0) {
            *message = fmt::format("{}, on both sides of the mirror", why);
            return EIO;
          }
        }
        if (int e = rewrite_box_locked(*cells, box, good.data(), message)) return e;
        if (ctx_.on_healed)
          ctx_.on_healed(ino_, fmt::format("{}: {} on side {} of the mirror; served from side {} and rewritten in "
                                           "place",
                                           placement_name(k), why, side, 1 - side));
        if (healed) ++*healed;
      }
    }
  }
  *message = "a cell stayed bad after its rewrite";
  return EIO;
}

int ArrayFile::repair_placements(const std::atomic<bool>& stop, std::uint64_t* repaired, std::string* message) {
  std::uint64_t epoch = 0;
  {
    std::shared_lock lock(mu_);
    if ((copies_.empty() && (ctx_.io.mirror_sides() < 2 || !cells_locked())) || retired_) return 0;
    epoch = placement_epoch_.load();
  }
  bool passed_lost = false;  // slabs whose only bad cells are lost ones
  for (std::uint32_t k = 0;; ++k) {
    std::uint64_t rows = 0, slab = 1;
    {
      std::shared_lock lock(mu_);
      if (placement_epoch_.load() != epoch || retired_) return 0;
      if (k > copies_.size()) {
        const ArrayState* cells = cells_locked();
        if (!passed_lost || !cells || cells->lost().isEmpty()) return 0;
        *message = fmt::format("the primary: {} cell(s) were lost with a failed member (cell {} first), every other "
                               "cell read clean; they read as errors until written whole",
                               cells->lost().cardinality(), cells->lost().minimum());
        return EIO;
      }
      const CellGrid& g = placement_at(k).grid();
      rows = g.shape()[0];
      const std::uint64_t row_bytes = g.elements() / rows * g.itemsize();
      slab = std::max<std::uint64_t>(1, kCatchUpStep / std::max<std::uint64_t>(1, row_bytes * g.cell()[0])) * g.cell()[0];
    }
    for (std::uint64_t r0 = 0; r0 < rows; r0 += slab) {
      if (stop.load()) return 0;
      std::unique_lock lock(mu_);
      if (placement_epoch_.load() != epoch || retired_) return 0;
      if (k > 0 && !copies_[k - 1].current()) break;  // its catch-up rewrites what lags
      const CellGrid& g = placement_at(k).grid();
      std::vector<DimRange> dims;
      for (std::size_t d = 0; d < g.dims(); ++d) dims.push_back(DimRange{0, g.shape()[d], 1, false});
      dims[0] = DimRange{r0, std::min(rows, r0 + slab), 1, false};
      const Selection part(dims);
      std::string why;
      if (ctx_.io.mirror_sides() > 1 && placement_at(k).cells()) {
        // RAID 1: both sides read, each bad cell rewritten from the other;
        // a cell bad on both is left to the other placements below.
        if (heal_from_mirror_locked(k, part, &why, repaired) == 0) continue;
        if (copies_.empty()) {
          *message = fmt::format("{}: {}", placement_name(k), why);
          return EIO;
        }
        epoch = placement_epoch_.load();
      }
      AlignedBuffer buf(std::max<std::uint64_t>(part.elements() * g.itemsize(), 1), AlignedBuffer::Uninitialized{});
      std::uint64_t ignored = 0, bad = Placement::kNoBadCell;
      const int r = placement_at(k).read_selection(part, 0, buf.data(), &ignored, &why, {}, nullptr, true, &bad);
      if (r == 0) continue;
      if (r == EIO && k > 0 && placement_at(k).image()) {
        // An mloc copy's damaged image is encoded anew from the current placements.
        note_bad_image_locked(k, why);
        if (int e = reencode_copy_locked(k, message)) return e;
        if (repaired) ++*repaired;
        epoch = placement_epoch_.load();
        break;
      }
      if (r == EIO && k == 0 && (placement_at(0).image() || !placement_at(0).readable()) && !copies_.empty()) {
        // An mloc array's damaged image (or one whose directory did not load
        // at open): sealed anew, its bytes read around the damage from the
        // copies (read_selection_locked).
        if (int e = seal_locked(schema_, message)) return e;
        if (ctx_.on_healed)
          ctx_.on_healed(ino_, fmt::format("the primary: its mloc image failed to read ({}); it is encoded anew from "
                                           "the copies", why));
        if (repaired) ++*repaired;
        epoch = placement_epoch_.load();
        break;
      }
      if (r != EIO || bad == Placement::kNoBadCell) {
        *message = fmt::format("{}: {}", k == 0 ? "the primary" : fmt::format("copy {}", k), why);
        return r;
      }
      if (ArrayState* cells = placement_at(k).cells(); cells && cells->is_lost(bad)) {
        // Lost cells have nothing to be repaired from: passed over, as long
        // as they are the slab's only bad ones.
        std::vector<std::uint64_t> all_bad;
        std::uint64_t first = Placement::kNoBadCell;
        const int again = cells->read_selection(part, buf.data(), &first, {}, nullptr, nullptr, &all_bad);
        std::erase_if(all_bad, [&](std::uint64_t c) { return cells->is_lost(c); });
        if (again == EIO && all_bad.empty()) {
          passed_lost = true;
          continue;
        }
      }
      // From each other current placement in turn, until every bad cell of the slab is rewritten.
      int healed = EIO;
      for (std::uint32_t good = 0; good <= copies_.size() && healed != 0; ++good) {
        if (good == k || !servable_locked(good)) continue;
        healed = heal_locked(k, good, part, &why, repaired);
      }
      if (healed != 0) {
        *message = fmt::format("{}: a bad cell no other placement reads clean: {}",
                               k == 0 ? "the primary" : fmt::format("copy {}", k), why);
        return healed;
      }
      epoch = placement_epoch_.load();
    }
  }
}

int ArrayFile::catch_up(std::string* message) {
  std::unique_lock lock(mu_);
  // Lost cells another copy holds come back first: the copies can then
  // catch up over them too.
  if (int r = fill_lost_from_copies_locked(message)) return r;
  for (std::size_t k = 1; k <= copies_.size(); ++k)
    if (int r = catch_up_locked(k, 0, true, message)) return r;
  return copies_.empty() ? 0 : ctx_.metadata.sync();
}

void ArrayFile::kick_catch_up() {
  std::lock_guard guard(catch_up_mu_);
  if (catch_up_running_ || catch_up_stopped_) return;
  if (catch_up_thread_.joinable()) catch_up_thread_.join();  // done: it cleared running last
  catch_up_running_ = true;
  catch_up_thread_ = std::thread([this] { catch_up_worker(); });
}

void ArrayFile::catch_up_worker() {
  for (;;) {
    {
      std::unique_lock lock(mu_);
      {
        std::lock_guard guard(catch_up_mu_);
        if (catch_up_stopped_) break;
      }
      if (retired_) break;
      // A copy on a lost member (a degraded mount) waits for mmfsck --rebuild.
      std::size_t k = 0;
      for (std::size_t i = 0; i < copies_.size() && k == 0; ++i)
        if (!copies_[i].current() && !placement_lost_locked(std::uint32_t(i + 1)) &&
            !catchable_locked(std::uint32_t(i + 1)).isEmpty())
          k = i + 1;
      if (k == 0) break;
      std::string msg;
      if (int r = catch_up_locked(k, kCatchUpStep, false, &msg)) {
        catch_up_error_ = fmt::format("{} (errno {})", msg, r);
        break;
      }
      catch_up_error_.clear();
    }
    std::this_thread::yield();  // a writer waiting for the lock gets it between steps
  }
  std::lock_guard guard(catch_up_mu_);
  catch_up_running_ = false;
}

void ArrayFile::stop_catch_up() {
  std::thread worker;
  {
    std::lock_guard guard(catch_up_mu_);
    catch_up_stopped_ = true;
    worker = std::move(catch_up_thread_);
  }
  if (worker.joinable()) worker.join();
}

}  // namespace mmfs::fs
