// An array file's read side: the chunking of a view (its size chosen by the
// volume's model), the chunks loaded from the placement for the ChunkReader,
// and the reads of the file and of its views through it.
#include "fs/array/array_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "fs/array/array_file_internal.h"
#include "fs/array/array_layout.h"
#include "layouts/c_order_boxes.h"
#include "layouts/capsule.h"
#include "layouts/default_layout.h"
#include "layouts/multimap.h"
#include "layouts/plod.h"
#include "layouts/quadrangle_array.h"
#include "layouts/regrid.h"
#include "layouts/selection_chunks.h"
#include "util/align.h"

namespace mmfs::fs {

using layouts::CellGrid;
using layouts::DimRange;
using layouts::Selection;
using detail::add_host_time;
using detail::is_mloc;

namespace {

// A larger chunk is chosen when the model reads it at least this much
// cheaper per byte: it costs memory and the first bytes' latency.
constexpr double kChunkGain = 0.9;

}  // namespace

std::uint64_t ArrayFile::view_chunking(DataView* view, std::unique_ptr<layouts::SelectionChunks>* out) const {
  std::shared_lock lock(mu_);
  if (!view->cut) {
    if (view->copy >= 0) {  // A@/copy/K@: that placement only (load_chunk refuses a K that is gone)
      view->served = std::uint32_t(view->copy) <= copies_.size() ? std::uint32_t(view->copy) : 0;
      if (view->chunk_bytes == 0) view->chunk_bytes = chunk_bytes_locked(view->selection, view->spelling, view->served);
    } else if (view->chunk_bytes == 0) {
      view->served = serving_locked(view->selection, view->spelling, &view->chunk_bytes);
    } else {
      view->served = 0;  // a chunk size the caller chose: the primary's cells
    }
    view->served_epoch = placement_epoch_.load();
    view->cut = std::make_shared<const CellGrid>(placement_at(view->served).grid());
  }
  *out = std::make_unique<layouts::SelectionChunks>(view->selection, *view->cut, view->chunk_bytes);
  return view->bytes(grid_locked().itemsize());
}

std::uint64_t ArrayFile::chunk_bytes_locked(const Selection& selection, const std::string& spelling,
                                            std::uint32_t k) const {
  const Placement& placement = placement_at(k);
  const std::uint64_t base = ctx_.chunk_bytes;
  const std::uint64_t total = selection.elements() * placement.grid().itemsize();
  if (!placement.chunks_by_model() || total <= base) return base;
  const std::uint64_t epoch = placement_epoch_.load();
  const std::string key = k == 0 ? spelling : fmt::format("{}#{}", spelling, k);
  {
    std::lock_guard lock(budget_mu_);
    auto it = chunk_budgets_.find(key);
    if (it != chunk_budgets_.end() && it->second.first == epoch) return it->second.second;
  }
  // The model's time per byte of a chunk from the middle of the view.
  auto cost = [&](std::uint64_t budget) {
    const layouts::SelectionChunks ch(selection, placement.grid(), budget);
    const Selection part = ch.selection(ch.count() / 2);
    const layouts::IoPlan p = placement.modeled_plan(part, 0);
    return p.modeled_ms / double(std::max<std::uint64_t>(1, part.elements()));
  };
  const std::uint64_t best = layouts::choose_chunk_budget(base, ctx_.max_chunk_scale, total, kChunkGain, cost);
  std::lock_guard lock(budget_mu_);
  if (chunk_budgets_.size() >= 256) chunk_budgets_.clear();  // views come and go; choosing again is cheap
  chunk_budgets_[key] = {epoch, best};
  return best;
}

DataView ArrayFile::whole() const {
  DataView all;
  std::shared_lock lock(mu_);
  all.selection = Selection::all(grid_locked().shape());
  all.spelling = "";
  return all;
}

int ArrayFile::read(std::uint64_t offset, std::size_t length, std::byte* out, std::size_t* got,
                    std::string* message) {
  return read_view(whole(), offset, length, out, got, message);
}

int ArrayFile::view_span(const DataView& view, std::uint64_t offset, std::size_t length,
                         std::shared_ptr<const AlignedBuffer>* keep, const std::byte** data, std::size_t* got,
                         std::string* message) {
  *data = nullptr;
  *got = 0;
  if (retired()) {
    *message = "the array file was removed";
    return ESTALE;
  }
  if (view.within) return within_span(view, offset, length, keep, data, got, message);
  DataView v = view;
  std::unique_ptr<layouts::SelectionChunks> ch;
  std::uint64_t total = view_chunking(&v, &ch);
  std::uint64_t chunks = ch->count();
  if (offset >= total) return 0;
  length = std::size_t(std::min<std::uint64_t>(length, total - offset));
  std::uint64_t c = ch->index_at(offset);
  if (ch->index_at(offset + length - 1) != c) return 0;
  ChunkReader::Chunk chunk_data;
  if (int r = reader_.reader_chunk(shared_from_this(), v, c, chunks, &chunk_data, message)) {
    // A chunk over cells lost with a member: read_view reads around them.
    if (r == EIO && reads_around_lost(v)) {
      message->clear();
      return 0;
    }
    return r;
  }
  std::uint64_t base = ch->offset(c);
  if (offset < base || offset + length > base + chunk_data->size()) return 0;
  *data = chunk_data->data() + (offset - base);
  *got = length;
  *keep = std::move(chunk_data);
  return 0;
}

int ArrayFile::load_chunk(const DataView& view, std::uint64_t index, AlignedBuffer* out, std::string* message,
                          const std::function<void()>& device_done) {
  // Dirty cells first: a read sees every write before it.
  {
    std::shared_lock lock(mu_);
    if (has_dirty_locked()) {
      lock.unlock();
      std::unique_lock ex(mu_);
      if (int r = flush_locked(false, message)) return r;
    }
  }
  if (view.copy > 0) {
    // A@/copy/K@ reads copy K only, caught up first if it lags: both under
    // the exclusive lock, so no write comes between.
    std::unique_lock ex(mu_);
    if (std::size_t(view.copy) > copies_.size()) {
      *message = fmt::format("copy {} does not exist (the array has {} cop{})", view.copy, copies_.size(),
                             copies_.size() == 1 ? "y" : "ies");
      return ENOENT;
    }
    if (int r = catch_up_locked(std::size_t(view.copy), 0, true, message)) return r;
    return load_part_locked(view, index, std::uint32_t(view.copy), out, message, device_done, &ex);
  }
  std::shared_lock lock(mu_);
  // The placement the view was cut for, unless it changed or fell behind since (then the primary).
  std::uint32_t from = view.served;
  if (view.copy == 0 || view.served_epoch != placement_epoch_.load() || from > copies_.size() ||
      (from > 0 && !copies_[from - 1].current()))
    from = 0;
  // (An unreadable primary serves nothing: the first current copy instead,
  // but A@/copy/0@ reads the primary only.)
  for (std::uint32_t k = 1; view.copy < 0 && !servable_locked(from) && k <= copies_.size(); ++k)
    if (servable_locked(k)) from = k;
  return load_part_locked(view, index, from, out, message, device_done, nullptr, &lock);
}

int ArrayFile::load_part_locked(const DataView& view, std::uint64_t index, std::uint32_t from, AlignedBuffer* out,
                                std::string* message, const std::function<void()>& device_done,
                                std::unique_lock<DrainingSharedMutex>* exclusive,
                                std::shared_lock<DrainingSharedMutex>* shared) {
  const std::uint64_t budget = view.chunk_bytes ? view.chunk_bytes : chunk_bytes_locked(view.selection, view.spelling, from);
  const layouts::SelectionChunks ch(view.selection, view.cut ? *view.cut : placement_at(from).grid(), budget);
  const Selection part = ch.selection(index);
  const std::uint64_t bytes = part.elements() * grid_locked().itemsize();
  // A chunk kept rearranged (DataView::regrid) is gathered into a buffer of
  // its own first, unless its C order is already the rearranged one.
  const bool rearrange = !view.regrid.empty() && !layouts::regrid_keeps_order(part, view.regrid);
  AlignedBuffer gathered;
  AlignedBuffer* into = out;
  if (rearrange) {
    gathered = AlignedBuffer(std::max<std::uint64_t>(bytes, 1), AlignedBuffer::Uninitialized{});
    into = &gathered;
  }
  *out = AlignedBuffer(std::max<std::uint64_t>(bytes, 1), AlignedBuffer::Uninitialized{});
  const bool once = ch.count() == 1;  // no later piece of this view wants the same chunks
  std::uint64_t ignored = 0, bad = Placement::kNoBadCell;
  int r = placement_at(from).read_selection(part, view.plod_bytes, into->data(), &ignored, message, device_done,
                                            nullptr, once, &bad);
  // An mloc copy's image is not repaired piece by piece: one that fails is encoded anew whole.
  const bool bad_image = r == EIO && from > 0 && placement_at(from).image();
  const std::string image_error = bad_image ? *message : std::string();
  std::unique_lock<DrainingSharedMutex> taken;  // the exclusive lock a repair takes, unless the caller holds it
  if (r == EIO && bad != Placement::kNoBadCell && ctx_.io.mirror_sides() > 1) {
    // RAID 1: the other side of the mirror may hold the cell intact. It is
    // rewritten from there (to both sides) and the part read again.
    const std::uint64_t epoch = placement_epoch_.load();
    if (!exclusive) {
      shared->unlock();
      taken = std::unique_lock<DrainingSharedMutex>(mu_);
    }
    std::string why;
    if (placement_epoch_.load() == epoch && heal_from_mirror_locked(from, part, &why) == 0) {
      bad = Placement::kNoBadCell;
      r = placement_at(from).read_selection(part, view.plod_bytes, into->data(), &ignored, message, {}, nullptr, once,
                                            &bad);
    }
  }
  if (r == EIO && bad != Placement::kNoBadCell) {
    // Self-healing: the same bytes from another current placement, and the
    // bad cells rewritten from it (under the exclusive lock).
    std::uint32_t good = 0;
    bool found = false;
    for (std::uint32_t k = 0; k <= copies_.size() && !found; ++k) {
      if (k == from || !servable_locked(k)) continue;
      std::string other;
      found = placement_at(k).read_selection(part, view.plod_bytes, into->data(), &ignored, &other, {}, nullptr,
                                             once) == 0;
      good = k;
    }
    if (found) {
      const std::uint64_t epoch = placement_epoch_.load();
      if (!exclusive && !taken.owns_lock()) {
        shared->unlock();
        taken = std::unique_lock<DrainingSharedMutex>(mu_);
      }
      std::string why;
      // Unless the placements changed meanwhile, the bad one is repaired.
      if (placement_epoch_.load() == epoch && heal_locked(from, good, part, &why) == 0) {
        r = 0;
        // A@/copy/K@ serves copy K's own bytes: read again, repaired.
        if (view.copy >= 0)
          r = placement_at(from).read_selection(part, view.plod_bytes, into->data(), &ignored, message, {}, nullptr,
                                                once);
      } else if (view.copy < 0) {
        r = 0;  // served from the good placement; the bad one is repaired by a later read or a scrub
      } else {
        *message = why;
      }
    }
  } else if (r != 0 && bad == Placement::kNoBadCell && view.copy < 0 && is_device_failure(r)) {
    // The device could not read the placement (a member lost, a bad
    // sector): the same bytes from another current copy. Nothing is
    // rewritten: the failed sectors are the device's to remap or replace.
    for (std::uint32_t k = 0; k <= copies_.size(); ++k) {
      if (k == from || !servable_locked(k)) continue;
      std::string other;
      if (placement_at(k).read_selection(part, view.plod_bytes, into->data(), &ignored, &other, {}, nullptr, once) != 0)
        continue;
      if (ctx_.on_served_around)
        ctx_.on_served_around(ino_, fmt::format("{} failed to read ({}: {}); served from {}", placement_name(from),
                                                std::strerror(r), *message, placement_name(k)));
      r = 0;
      break;
    }
  }
  if (bad_image) {
    const std::uint64_t epoch = placement_epoch_.load();
    if (!exclusive && !taken.owns_lock()) {
      shared->unlock();
      taken = std::unique_lock<DrainingSharedMutex>(mu_);
    }
    if (placement_epoch_.load() == epoch) {
      note_bad_image_locked(from, image_error);
      kick_catch_up();
    }
  }
  if (r) {
    if (from > 0) *message = fmt::format("copy {}: {}", from, *message);
    return r;
  }
  if (view.plod_bytes != 0)
    layouts::apply_plod({into->data(), bytes}, grid_locked().itemsize(), schema_.dtype.name == "float64", view.plod_bytes);
  if (rearrange) layouts::regrid(part, view.regrid, grid_locked().itemsize(), gathered.data(), out->data());
  return 0;
}

ChunkStats ArrayFile::chunk_stats() const { return reader_.stats(); }

void ArrayFile::quiesce() {
  reader_.quiesce();
  stop_catch_up();
}

void ArrayFile::wait_for_prefetches() { reader_.wait_for_prefetches(); }

int ArrayFile::read_view(const DataView& view, std::uint64_t offset, std::size_t length, std::byte* out,
                         std::size_t* got, std::string* message) {
  *got = 0;
  if (retired()) {
    *message = "the array file was removed";
    return ESTALE;
  }
  if (view.within) return read_within(view, offset, length, out, got, message);
  DataView v = view;
  std::unique_ptr<layouts::SelectionChunks> ch;
  std::uint64_t total = view_chunking(&v, &ch);
  std::uint64_t chunks = ch->count();
  if (offset >= total) return 0;
  length = std::size_t(std::min<std::uint64_t>(length, total - offset));
  std::uint64_t pos = offset, end = offset + length;
  while (pos < end) {
    std::uint64_t c = ch->index_at(pos);
    ChunkReader::Chunk data;
    if (int r = reader_.reader_chunk(shared_from_this(), v, c, chunks, &data, message)) {
      if (r != EIO || !reads_around_lost(v)) return r;
      // The chunk holds cells lost with a member: the bytes asked for, read
      // by themselves, fail only if they are in one.
      const Selection part = ch->selection(c);
      std::unique_lock ex(mu_);
      const std::uint64_t base = ch->offset(c);
      const std::uint64_t n = std::min(end, base + part.elements() * grid_locked().itemsize()) - pos;
      if (int e = flush_locked(false, message)) return e;
      if (int e = read_around_lost_locked(part, pos - base, pos - base + n, out + (pos - offset), message)) return e;
      pos += n;
      continue;
    }
    std::uint64_t base = ch->offset(c);
    std::uint64_t n = std::min<std::uint64_t>(end - pos, base + data->size() - pos);
    if (data->size() == 0 || pos < base || n == 0) {
      *message = "internal error: chunk does not cover the requested bytes";
      return EIO;
    }
    std::memcpy(out + (pos - offset), data->data() + (pos - base), n);
    pos += n;
  }
  *got = length;
  return 0;
}

bool ArrayFile::reads_around_lost(const DataView& view) const {
  if (view.plod_bytes != 0 || !view.regrid.empty() || view.copy > 0) return false;
  std::shared_lock lock(mu_);
  const ArrayState* cells = cells_locked();
  return cells && !cells->lost().isEmpty();
}

int ArrayFile::read_around_lost_locked(const Selection& part, std::uint64_t from, std::uint64_t to, std::byte* out,
                                       std::string* message) {
  const std::uint32_t item = grid_locked().itemsize();
  const std::uint64_t first = from / item, last = util::div_up(to, item);
  std::vector<std::uint64_t> shape;
  for (const DimRange& d : part.dims()) shape.push_back(d.count());
  AlignedBuffer buf(std::max<std::uint64_t>((last - first) * item, 1), AlignedBuffer::Uninitialized{});
  std::uint64_t at = 0;
  int failed = 0;
  // The elements as boxes of the part (at most two per dimension), each
  // read by itself: only a box holding a lost cell fails.
  layouts::c_order_boxes(shape, first, last, [&](const std::vector<DimRange>& box) {
    if (failed) return;
    std::vector<DimRange> dims = part.dims();
    for (std::size_t d = 0; d < dims.size(); ++d) {
      const DimRange& p = part.dims()[d];
      dims[d] = DimRange{p.start + box[d].start * p.step, p.start + (box[d].stop - 1) * p.step + 1, p.step, p.fixed};
    }
    const Selection sel(std::move(dims));
    failed = read_selection_locked(sel, 0, buf.data() + at, nullptr, message);
    at += sel.elements() * item;
  });
  if (failed) return failed;
  std::memcpy(out, buf.data() + (from - first * item), to - from);
  return 0;
}

bool ArrayFile::begin_box(const std::string& box) {
  std::lock_guard lock(budget_mu_);
  if (std::find(boxes_begun_.begin(), boxes_begun_.end(), box) != boxes_begun_.end()) return false;
  if (boxes_begun_.size() >= kBoxesBegun) boxes_begun_.pop_front();
  boxes_begun_.push_back(box);
  return true;
}

bool ArrayFile::alone_beats_box_locked(const DataView& view, double* alone_ms, double* box_ms) const {
  // Read alone, the view may cost a fraction of its box (one row of each
  // cell of a 1x1024x256 chunk over 32x32x8 cells: a thousand small requests
  // against 64 MiB), or about as much (one plane of each cell, every sector
  // of it), when the box read once serves its other chunks too. Half: a
  // reader going on through the box pays the chunk alone and then the box.
  const double alone = serving_cost_locked(view.selection, view.spelling);
  const double box = serving_cost_locked(view.within->selection, view.within->spelling);
  if (alone_ms) *alone_ms = alone;
  if (box_ms) *box_ms = box;
  return 2 * alone <= box;
}

void ArrayFile::choose_within(DataView* view) {
  if (!view->within || view->plod_bytes != 0) return;
  std::shared_lock lock(mu_);
  if (single_run_placement_locked(view->selection)) {
    view->within.reset();
    return;
  }
  if (!begin_box(view->within->spelling) || reader_.holds_view(*this, view->within->spelling)) return;
  if (alone_beats_box_locked(*view)) view->within.reset();  // the box is cold
}

// A view's C-order bytes are its parts in the enclosing box's chunks, in
// order (each of those is a C-order range of the box, so the view's elements
// in it are a C-order range of the view), and each part is one block of that
// chunk, rearranged along the reader's grid (DataView::regrid).
int ArrayFile::within_parts(const DataView& view, DataView* outer, std::unique_ptr<layouts::SelectionChunks>* ch,
                            const std::function<bool(const WithinPart&)>& visit, std::string* message) const {
  *outer = *view.within;
  const std::uint32_t item = schema().dtype.itemsize;
  const auto& in = view.selection.dims();
  if (outer->regrid.size() != in.size()) {
    *message = "internal error: the enclosing box of a chunk has no grid";
    return EIO;
  }
  view_chunking(outer, ch);
  const auto& around = outer->selection.dims();
  auto outer_byte = [&](auto corner) {
    std::uint64_t at = 0;
    for (std::size_t d = 0; d < in.size(); ++d) at = at * around[d].count() + (corner(d) - around[d].start);
    return at * item;
  };
  const std::uint64_t first = (*ch)->index_at(outer_byte([&](std::size_t d) { return in[d].start; }));
  const std::uint64_t last = (*ch)->index_at(outer_byte([&](std::size_t d) { return in[d].stop - 1; }));
  WithinPart part;
  std::vector<std::uint64_t> corner(in.size());
  for (std::uint64_t c = first; c <= last; ++c) {
    const Selection piece = (*ch)->selection(c);
    // The view's first element in this piece of the box, if any.
    bool meets = true;
    for (std::size_t d = 0; d < in.size() && meets; ++d) {
      const auto& p = piece.dims()[d];
      corner[d] = std::max(p.start, in[d].start);
      meets = corner[d] < std::min(p.stop, in[d].stop);
    }
    if (!meets) continue;
    part.chunk = c;
    part.block = layouts::regrid_block(piece, outer->regrid, item, corner);
    if (!visit(part)) return 0;
    part.at += part.block.bytes;
  }
  if (part.at != view.bytes(item)) {
    *message = "internal error: the enclosing box did not cover the chunk";
    return EIO;
  }
  return 0;
}

void ArrayFile::prefetch_next_box(const DataView& view, const DataView& outer) {
  // A chunk of the box after its first, first read: a reader going through
  // the chunks in order, which reads the next box after this one's, so the
  // device reads it now. (Not at the first: a reader of one chunk would wait
  // for the next box's loads.)
  if (!outer.next_within) return;
  const auto& in = view.selection.dims();
  const auto& around = outer.selection.dims();
  bool first_of_box = true;
  for (std::size_t d = 0; d < in.size() && first_of_box; ++d) first_of_box = in[d].start == around[d].start;
  if (first_of_box) return;
  {
    std::lock_guard lock(budget_mu_);
    if (next_box_started_ == outer.next_within->spelling) return;
  }
  begin_box(outer.next_within->spelling);  // its first chunk's open reads through it
  DataView next = *outer.next_within;
  std::unique_ptr<layouts::SelectionChunks> next_chunks;
  view_chunking(&next, &next_chunks);
  // Until the pipeline has had room for all of them, each chunk's read asks again.
  if (reader_.prefetch_next_view(shared_from_this(), next, next_chunks->count(),
                                 outer.bytes(schema().dtype.itemsize))) {
    std::lock_guard lock(budget_mu_);
    next_box_started_ = next.spelling;
  }
}

int ArrayFile::read_within(const DataView& view, std::uint64_t offset, std::size_t length, std::byte* out,
                           std::size_t* got, std::string* message) {
  const std::uint64_t total = view.bytes(schema().dtype.itemsize);
  if (offset >= total) return 0;
  length = std::size_t(std::min<std::uint64_t>(length, total - offset));
  const std::uint64_t end = offset + length;
  DataView outer;
  std::unique_ptr<layouts::SelectionChunks> ch;
  int failed = 0;
  int r = within_parts(view, &outer, &ch, [&](const WithinPart& p) {
    if (p.at >= end) return false;
    if (p.at + p.block.bytes <= offset) return true;
    ChunkReader::Chunk data;
    if ((failed = reader_.reader_chunk(shared_from_this(), outer, p.chunk, ch->count(), &data, message))) return false;
    if (p.block.offset + p.block.bytes > data->size()) {
      *message = "internal error: a chunk of the enclosing box is shorter than its blocks";
      failed = EIO;
      return false;
    }
    const std::uint64_t from = std::max(offset, p.at), to = std::min(end, p.at + p.block.bytes);
    std::memcpy(out + (from - offset), data->data() + p.block.offset + (from - p.at), to - from);
    return true;
  }, message);
  if (failed || r) return failed ? failed : r;
  if (offset == 0) prefetch_next_box(view, outer);
  *got = length;
  return 0;
}

int ArrayFile::within_span(const DataView& view, std::uint64_t offset, std::size_t length,
                           std::shared_ptr<const AlignedBuffer>* keep, const std::byte** data, std::size_t* got,
                           std::string* message) {
  const std::uint64_t total = view.bytes(schema().dtype.itemsize);
  if (offset >= total) return 0;
  length = std::size_t(std::min<std::uint64_t>(length, total - offset));
  DataView outer;
  std::unique_ptr<layouts::SelectionChunks> ch;
  int failed = 0;
  int r = within_parts(view, &outer, &ch, [&](const WithinPart& p) {
    if (p.at + p.block.bytes <= offset) return true;
    if (offset + length > p.at + p.block.bytes) return false;  // across two blocks: read_within copies it
    ChunkReader::Chunk chunk;
    if ((failed = reader_.reader_chunk(shared_from_this(), outer, p.chunk, ch->count(), &chunk, message)))
      return false;
    if (p.block.offset + p.block.bytes > chunk->size()) return false;
    *data = chunk->data() + p.block.offset + (offset - p.at);
    *got = length;
    *keep = std::move(chunk);
    return false;
  }, message);
  if (failed || r) return failed ? failed : r;
  if (offset == 0 && *data) prefetch_next_box(view, outer);
  return 0;
}

}  // namespace mmfs::fs
