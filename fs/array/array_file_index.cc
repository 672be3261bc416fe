// An array file's bitmap index over its lifetime: built when user.mmfs.index
// or user.mmfs.bins is set, loaded with the array, kept current by writes
// (a delta per flush, committed with the cells' checksums), rebuilt when the
// delta outgrows what it saves or a crash left a flush half done, dropped
// with `none`. See fs/array/array_index.h for the records and their order.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "fs/array/array_file.h"
#include "geometry/striped.h"
#include "util/align.h"

namespace mmfs::fs {

using layouts::DimRange;
using layouts::Selection;

namespace {
// The data is read for an index in slabs of about this size.
constexpr std::uint64_t kIndexSlabBytes = 32ull << 20;
}  // namespace

indexes::ValueType ArrayFile::value_type() const {
  std::shared_lock lock(mu_);
  return *indexes::value_type(schema_.dtype.name);  // schemas hold canonical names
}

std::vector<std::uint64_t> ArrayFile::shape() const {
  std::shared_lock lock(mu_);
  return grid_locked().shape();
}

bool ArrayFile::has_index() const {
  std::shared_lock lock(mu_);
  return index_ != nullptr;
}

int ArrayFile::heal_index(const ArrayIndex* failed, const std::string& why, std::string_view met_by,
                          std::string* message, bool* built, const std::atomic<bool>* stop) {
  std::unique_lock lock(mu_);
  if (built) *built = false;
  if (retired_) {
    *message = "the array file was removed";
    return ESTALE;
  }
  // Healed (or replaced) by another caller meanwhile.
  if (index_.get() != failed || (!failed && index_damage_.empty())) return 0;
  if (ctx_.read_only) {
    *message = fmt::format("{} (a read-only mount does not build the index anew)", why);
    return EIO;
  }
  const std::string& failed_before = index_ ? index_->heal_failure() : damage_heal_failure_;
  if (!failed_before.empty()) {
    *message = fmt::format("{}; building the index anew from the data failed: {}", why, failed_before);
    return EIO;
  }
  std::string build_why;
  if (int r = change_index_locked(schema_, WriteBatch{}, &build_why, stop)) {
    if (r == ECANCELED) {
      // Stopped, not failed: the next query or scrub builds it.
      *message = fmt::format("{}; building the index anew was stopped", why);
      return r;
    }
    if (index_) index_->set_heal_failure(build_why);
    else damage_heal_failure_ = build_why;
    *message = fmt::format("{}; building the index anew from the data failed: {}", why, build_why);
    return r;
  }
  if (built) *built = true;
  if (ctx_.on_index_healed)
    ctx_.on_index_healed(ino_, fmt::format("the bitmap index was built anew from the data after {} met it broken: {}",
                                           met_by, why));
  return 0;
}

int ArrayFile::verify_index(const std::atomic<bool>& stop, bool* rebuilt, std::uint64_t* bytes_read,
                            std::string* message) {
  *rebuilt = false;
  const ArrayIndex* checked = nullptr;
  ArrayIndex::VerifyCursor cursor;
  std::string why;
  int r = 0;
  for (bool first = true; r == 0 && !cursor.done; first = false) {
    // Shared, one step at a time: queries go on beside the check, and a
    // writer waits for one step, not for the whole index.
    std::shared_lock lock(mu_);
    if (retired_ || stop.load()) return 0;
    if (first) {
      if (!index_damage_.empty()) {
        why = index_damage_;
        r = EIO;
        break;
      }
      if (!index_) return 0;
      checked = index_.get();
    } else if (index_.get() != checked) {
      return 0;  // replaced meanwhile (rebuilt, or dropped): nothing of it left to check
    }
    r = checked->verify_step(&cursor, bytes_read, &why);
  }
  if (r == 0) return 0;
  if (!is_device_failure(r)) {
    *message = why;
    return r;
  }
  const int e = heal_index(checked, why, "the scrub", message, rebuilt, &stop);
  // Removed meanwhile: nothing left to check. Stopped (an unmount does not
  // wait for a whole array to be read): the index stays broken, and the
  // next query or scrub builds it.
  return e == ESTALE || e == ECANCELED ? 0 : e;
}

int ArrayFile::rebuild_index(std::string* message) {
  std::unique_lock lock(mu_);
  if (schema_.index == "none" || retired_) return 0;
  return change_index_locked(schema_, WriteBatch{}, message);
}

std::uint64_t ArrayFile::index_device_bytes() const {
  std::shared_lock lock(mu_);
  return index_ ? index_->device_bytes() : 0;
}

int ArrayFile::read_all_locked(const ArrayIndex::Visitor& visit, std::string* message,
                               const std::atomic<bool>* stop) {
  const layouts::CellGrid& g = grid_locked();
  const std::uint64_t S0 = g.shape()[0];
  const std::uint64_t row_bytes = g.elements() / S0 * g.itemsize();
  const std::uint64_t row_elements = g.elements() / S0;
  const std::uint64_t rows = std::max<std::uint64_t>(1, kIndexSlabBytes / std::max<std::uint64_t>(1, row_bytes));
  AlignedBuffer buf(std::min(rows, S0) * row_bytes);  // zeros: an array without data reads as zeros
  const bool data = holds_data_locked();
  const ArrayState* cells = cells_locked();
  auto slab_holds_lost = [&](std::uint64_t r0, std::uint64_t r1) {
    if (!cells) return false;
    for (const std::uint32_t cell : cells->lost()) {
      const DimRange rows = g.element_box(cell)[0];
      if (rows.start < r1 && r0 < rows.stop) return true;
    }
    return false;
  };
  auto stopped = [&] {
    if (!stop || !stop->load()) return false;
    *message = "stopped";
    return true;
  };
  for (std::uint64_t r0 = 0; r0 < S0; r0 += rows) {
    const std::uint64_t r1 = std::min(S0, r0 + rows);
    if (stopped()) return ECANCELED;
    if (data && slab_holds_lost(r0, r1)) {
      if (int r = read_slab_around_lost_locked(r0, r1, buf.data(), message)) return r;
    } else if (data) {
      std::vector<DimRange> dims;
      for (std::size_t d = 0; d < g.dims(); ++d) dims.push_back(DimRange{0, g.shape()[d], 1, false});
      dims[0] = DimRange{r0, r1, 1, false};
      if (int r = read_selection_locked(Selection(dims), 0, buf.data(), nullptr, message)) return r;
    }
    visit(r0 * row_elements, buf.data(), std::size_t((r1 - r0) * row_elements));
  }
  // Also after the last slab: a build stopped here commits nothing.
  return stopped() ? ECANCELED : 0;
}

int ArrayFile::build_index_locked(const ArraySchema& schema, std::unique_ptr<ArrayIndex>* out,
                                  std::string* message, const std::atomic<bool>* stop) {
  ArrayIndex::Env env{ctx_.metadata, ctx_.allocator, ctx_.io};
  auto type = indexes::value_type(schema.dtype.name);
  if (!type) {
    *message = fmt::format("dtype '{}' cannot be indexed", schema.dtype.name);
    return EINVAL;
  }
  auto reader = [&](const ArrayIndex::Visitor& visit, std::string* msg) { return read_all_locked(visit, msg, stop); };
  // An mloc array's index bins as its layout does (100 by default).
  const std::string bins = schema.layout == "mloc" && schema.bins.empty() ? "100" : schema.bins;
  return ArrayIndex::build(env, ino_, *type, schema.index, bins, grid_locked().elements(), reader,
                           !holds_data_locked(), out, message);
}

int ArrayFile::load_index_locked(std::string* message) {
  index_.reset();
  index_damage_.clear();
  damage_heal_failure_.clear();
  if (schema_.index == "none") return 0;
  ArrayIndex::Env env{ctx_.metadata, ctx_.allocator, ctx_.io};
  bool stale = false;
  std::unique_ptr<ArrayIndex> stored;
  // An index that lay on a member the volume lost (a read-write degraded
  // mount) is derived data gone with it: it is built again from the data,
  // which the array's placements on the survivors hold.
  const std::vector<Extent> on_lost = extents_on_lost_member(ArrayIndex::stored_extents(ctx_.metadata, ino_));
  if (on_lost.empty()) {
    // A dtype the index cannot hold has no stored index to load: the build
    // below says why.
    const auto type = indexes::value_type(schema_.dtype.name);
    const ArrayIndex::Expected expected{grid_locked().elements(), type.value_or(indexes::ValueType::U8)};
    int r = type ? ArrayIndex::load(env, ino_, expected, &stored, &stale, message) : 0;
    if (r) {
      if (r != EIO) return r;
      // A damaged index must not take the array with it: its data reads as
      // ever, and setting user.mmfs.index again replaces the index.
      index_damage_ = *message;
      message->clear();
      return 0;
    }
    if (stored && !stale) {
      index_ = std::move(stored);
      return 0;
    }
  }
  // No index yet (a crash between the array's creation and its index), one
  // a crash left behind its data, or one lost with a member: build it from
  // the data as it is now.
  std::unique_ptr<ArrayIndex> fresh;
  if (int r = build_index_locked(schema_, &fresh, message)) {
    if (on_lost.empty() || !is_device_failure(r)) return r;
    // Data on the lost member too, with no copy to read it from: the array
    // opens (what the survivors hold reads), its queries say why not.
    index_damage_ = fmt::format("the array's index lay on a member the volume lost, and it could not be built "
                                "again from the data ({}); set user.mmfs.index again once the data reads",
                                *message);
    message->clear();
    return 0;
  }
  WriteBatch batch;
  fresh->stage(batch);
  std::vector<Extent> dropped = stored ? stored->extents() : on_lost;
  if (int r = ctx_.metadata.apply(batch, std::move(dropped))) {
    fresh->release();
    *message = "metadata commit failed";
    return r;
  }
  if (int r = ctx_.metadata.sync()) {
    *message = "metadata sync failed";
    return r;
  }
  index_ = std::move(fresh);
  if (!on_lost.empty() && ctx_.on_promoted)
    ctx_.on_promoted(ino_, "the array's bitmap index lay on the lost member: it was built again from the data");
  return 0;
}

std::vector<Extent> ArrayFile::extents_on_lost_member(const std::vector<Extent>& extents) const {
  const auto* striped = dynamic_cast<const geom::StripedGeometry*>(&ctx_.geometry);
  if (!striped || !ctx_.member_lost) return {};
  for (const Extent& e : extents)
    for (std::uint64_t at = e.start; at < e.start + e.sectors;) {
      const auto n = std::uint32_t(std::min<std::uint64_t>(e.start + e.sectors - at, UINT32_MAX));
      for (const auto& [member, piece] : striped->split(geom::Request{at, n}))
        if (ctx_.member_lost(member)) return extents;
      at += n;
    }
  return {};
}

int ArrayFile::change_index_locked(const ArraySchema& next, WriteBatch batch, std::string* message,
                                   const std::atomic<bool>* stop) {
  // The index is built from the data on the device.
  if (int r = flush_locked(false, message)) return r;
  std::unique_ptr<ArrayIndex> fresh;
  if (next.index != "none") {
    ArraySchema effective = next;
    if (int r = build_index_locked(effective, &fresh, message, stop)) return r;
    fresh->stage(batch);
  } else {
    ArrayIndex::stage_drop(ctx_.metadata, ino_, batch);
  }
  std::vector<Extent> dropped = index_ ? index_->extents() : std::vector<Extent>{};
  if (!index_ && !index_damage_.empty()) {
    // The damaged index's extents, if its extent record still reads (else
    // they return to the allocator at the next mount, which rebuilds it).
    dropped = ArrayIndex::stored_extents(ctx_.metadata, ino_);
  }
  if (int r = ctx_.metadata.apply(batch, std::move(dropped))) {
    if (fresh) fresh->release();
    *message = "metadata commit failed";
    return r;
  }
  index_ = std::move(fresh);
  index_damage_.clear();
  damage_heal_failure_.clear();
  partial_rows_.clear();
  if (int r = ctx_.metadata.sync()) {
    *message = "metadata sync failed";
    return r;
  }
  return 0;
}

void ArrayFile::note_write_locked(std::uint64_t offset, const std::byte* data, std::size_t length) {
  if (!index_ || length == 0) return;
  const std::uint64_t is = grid_locked().itemsize();
  const std::uint64_t end = offset + length;
  std::uint64_t first = util::div_up(offset, is);  // first element wholly written
  const std::uint64_t last = end / is;           // one past the last wholly written
  if (offset % is) partial_rows_.push_back(offset / is);
  if (end % is && (end / is != offset / is || offset % is == 0)) partial_rows_.push_back(end / is);
  if (last > first) index_->note(first, data + (first * is - offset), std::size_t(last - first));
}

int ArrayFile::index_before_write_back_locked(std::string* message) {
  if (!index_ || (!index_->delta_changed() && partial_rows_.empty())) return 0;
  // From the first cell written until the delta commits, the stored index
  // may lag the data: a crash in between must rebuild it.
  WriteBatch batch;
  ArrayIndex::stage_pending(ino_, batch);
  if (int r = ctx_.metadata.apply(batch, {})) {
    *message = "metadata commit failed";
    return r;
  }
  if (int r = ctx_.metadata.sync()) {
    *message = "metadata sync failed";
    return r;
  }
  return 0;
}

int ArrayFile::index_after_write_back_locked(WriteBatch& batch, std::vector<Extent>* dropped,
                                             std::string* message) {
  if (!index_ || (!index_->delta_changed() && partial_rows_.empty())) return 0;
  if (!partial_rows_.empty()) {
    std::sort(partial_rows_.begin(), partial_rows_.end());
    partial_rows_.erase(std::unique(partial_rows_.begin(), partial_rows_.end()), partial_rows_.end());
    // A lost cell's write-back was dropped, so its rows have no values to
    // note (and would not read): the write or fill that makes it whole does.
    if (const ArrayState* cells = cells_locked(); cells && !cells->lost().isEmpty()) {
      const layouts::CellGrid& g = cells->grid();
      std::vector<std::uint64_t> cc(g.dims());
      std::erase_if(partial_rows_, [&](std::uint64_t row) {
        for (std::size_t d = g.dims(); d-- > 0;) {
          cc[d] = row % g.shape()[d] / g.cell()[d];
          row /= g.shape()[d];
        }
        return cells->is_lost(g.linear(cc));
      });
    }
    indexes::Bitmap rows;
    rows.addMany(partial_rows_.size(), partial_rows_.data());
    const std::uint64_t is = grid_locked().itemsize();
    std::vector<std::byte> values(partial_rows_.size() * is);
    std::uint64_t read = 0;
    if (int r = rows_from_cells(rows, values.data(), &read, message)) return r;
    for (std::size_t i = 0; i < partial_rows_.size(); ++i) index_->note(partial_rows_[i], values.data() + i * is, 1);
    partial_rows_.clear();
  }
  if (index_->wants_rebuild()) {
    std::unique_ptr<ArrayIndex> fresh;
    if (int r = build_index_locked(schema_, &fresh, message)) return r;
    fresh->stage(batch);
    std::vector<Extent> old = index_->extents();
    dropped->insert(dropped->end(), old.begin(), old.end());
    index_ = std::move(fresh);
    return 0;
  }
  if (int r = index_->persist_delta(dropped, message)) return r;
  index_->stage(batch);
  return 0;
}

}  // namespace mmfs::fs
