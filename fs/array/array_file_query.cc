// Queries on one array file: the rows of its atoms (from its bitmap index, or
// from one scan of its data), and the elements at a set of rows (read cell
// by cell when they are few, slab by slab when they are many).
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>
#include <memory>

#include "fs/array/array_file.h"
#include "indexes/scan.h"
#include "layouts/cell_copy.h"
#include "layouts/io_plan.h"

namespace mmfs::fs {

using indexes::Bitmap;
using indexes::Estimate;
using layouts::DimRange;
using layouts::Selection;

namespace {

constexpr std::uint64_t kSlabBytes = 32ull << 20;
// Rows are gathered in batches of at most this many (bounded memory). Small
// enough that a batch's cell buffers stay under glibc's largest mmap
// threshold (32 MiB): the next batch then reuses them from the heap, where
// fresh mappings cost the kernel a zeroed page each (a third of the time of a
// 2.7 M-candidate query went to zeroing them).
constexpr std::uint64_t kRowBatch = 1u << 18;

// The linear (C-order) index of element `coords` of an array of `shape`.
std::uint64_t linear_of(std::span<const std::uint64_t> shape, std::span<const std::uint64_t> coords) {
  std::uint64_t r = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) r = r * shape[d] + coords[d];
  return r;
}

}  // namespace

// The rows of a box: one run per innermost line of the selection.
Bitmap selection_rows(const Selection& sel, std::span<const std::uint64_t> shape) {
  Bitmap out;
  const auto& dims = sel.dims();
  const std::size_t n = dims.size();
  std::vector<std::uint64_t> at(n);
  for (std::size_t d = 0; d < n; ++d) at[d] = dims[d].start;
  const DimRange& last = dims[n - 1];
  std::vector<std::uint64_t> rows;
  for (;;) {
    at[n - 1] = last.start;
    const std::uint64_t base = linear_of(shape, at);
    if (last.step == 1) {
      out |= indexes::range_bitmap(base, base + (last.stop - last.start));
    } else {
      rows.clear();
      for (std::uint64_t i = last.start; i < last.stop; i += last.step) rows.push_back(base + (i - last.start));
      out.addMany(rows.size(), rows.data());
    }
    std::size_t d = n - 1;
    for (;;) {
      if (d == 0) return out;
      --d;
      at[d] += dims[d].step;
      if (at[d] < dims[d].stop) break;
      at[d] = dims[d].start;
    }
  }
}

namespace {

// Row `local` of a selection (its C order) as a row of the array.
struct LocalToGlobal {
  const Selection& sel;
  std::span<const std::uint64_t> shape;
  std::vector<std::uint64_t> counts;
  LocalToGlobal(const Selection& s, std::span<const std::uint64_t> sh) : sel(s), shape(sh) {
    for (const DimRange& r : s.dims()) counts.push_back(r.count());
  }
  std::uint64_t operator()(std::uint64_t local) const {
    std::uint64_t row = 0, stride = 1;
    for (std::size_t d = counts.size(); d-- > 0;) {
      const std::uint64_t i = local % counts[d];
      local /= counts[d];
      row += (sel.dims()[d].start + i * sel.dims()[d].step) * stride;
      stride *= shape[d];
    }
    return row;
  }
};

}  // namespace

std::optional<std::uint64_t> ArrayFile::exact_count(const indexes::KeySet& keys) const {
  std::shared_lock lock(mu_);
  if (const MlocImage* image = image_locked(); image && !index_) return image->aligned_count(keys);  // the directory's counts
  if (!index_ || has_dirty_locked()) return std::nullopt;
  return index_->exact_count(keys);
}

int ArrayFile::ready_for_query(std::string* message) {
  if (retired()) {
    *message = "the array file was removed";
    return ESTALE;
  }
  // Dirty cells first: a query sees every write before it.
  std::unique_lock ex(mu_);
  if (has_dirty_locked()) return flush_locked(false, message);
  return 0;
}

int ArrayFile::atom_estimates(const std::vector<indexes::KeySet>& atoms, const std::optional<Selection>& box,
                              std::vector<Estimate>* out, QueryCost* cost, std::string* message) {
  if (int r = ready_for_query(message)) return r;
  const QueryCost before = *cost;
  const ArrayIndex* used = nullptr;
  bool from_index = false;
  {
    std::shared_lock lock(mu_);
    used = index_.get();
    const int r = atom_estimates_locked(atoms, box, out, cost, &from_index, message);
    if (r == 0 || !from_index || !is_device_failure(r)) return r;
  }
  // The index is derived data: built anew from the array's, the query goes on.
  const std::string why = *message;
  if (int r = heal_index(used, why, "a query", message)) return r;
  *cost = before;
  std::shared_lock lock(mu_);
  return atom_estimates_locked(atoms, box, out, cost, &from_index, message);
}

int ArrayFile::atom_estimates_locked(const std::vector<indexes::KeySet>& atoms, const std::optional<Selection>& box,
                                     std::vector<Estimate>* out, QueryCost* cost, bool* from_index,
                                     std::string* message) {
  out->assign(atoms.size(), Estimate{});
  *from_index = false;
  if (!index_damage_.empty()) {
    *message = index_damage_;
    *from_index = true;
    return EIO;
  }
  const auto& shape = grid_locked().shape();
  if (index_) {
    std::optional<Bitmap> in_box;
    if (box) in_box = selection_rows(*box, shape);
    for (std::size_t i = 0; i < atoms.size(); ++i) {
      IndexCost ic;
      if (int r = index_->estimate(atoms[i], &(*out)[i], &ic, message)) {
        *from_index = true;
        return r;
      }
      cost->index_bytes += ic.planned;
      cost->index_read_bytes += ic.bytes;
      cost->requests += ic.requests;
      cost->index_trace.insert(cost->index_trace.end(), ic.trace.begin(), ic.trace.end());
      if (in_box) {
        (*out)[i].own();
        (*out)[i].sure &= *in_box;
        (*out)[i].maybe &= *in_box;
      }
    }
    return 0;
  }
  if (image_locked() && holds_data_locked() && grid_locked().elements() < (1ull << 32))
    return mloc_estimates_locked(atoms, box, out, cost, message);
  // No index: one pass over the data (or the box) answers every atom exactly.
  cost->scanned = true;
  const auto type = *indexes::value_type(schema_.dtype.name);
  const Selection sel = box ? *box : Selection::all(shape);
  const std::uint64_t is = grid_locked().itemsize();
  const auto& dims = sel.dims();
  const std::uint64_t first_count = dims[0].count();
  const std::uint64_t line = sel.elements() / std::max<std::uint64_t>(1, first_count);
  const std::uint64_t step_rows = std::max<std::uint64_t>(1, kSlabBytes / std::max<std::uint64_t>(1, line * is));
  AlignedBuffer buf(std::min(step_rows, first_count) * line * is);
  const bool contiguous = !box;  // the slab's elements are consecutive rows of the array
  std::vector<Bitmap> local(atoms.size());
  for (std::uint64_t k0 = 0; k0 < first_count; k0 += step_rows) {
    const std::uint64_t k1 = std::min(first_count, k0 + step_rows);
    std::vector<DimRange> part = dims;
    part[0] = DimRange{dims[0].start + k0 * dims[0].step, dims[0].start + (k1 - 1) * dims[0].step + 1,
                       dims[0].step, dims[0].fixed};
    const Selection slab(part);
    const std::uint64_t n = slab.elements();
    if (holds_data_locked()) {
      std::uint64_t bytes = 0;
      if (int r = read_selection_locked(slab, 0, buf.data(), &bytes, message)) return r;
      cost->data_bytes += bytes;
    } else {
      std::memset(buf.data(), 0, n * is);
    }
    const std::uint64_t first = k0 * line;
    for (std::size_t i = 0; i < atoms.size(); ++i)
      indexes::scan_keys(type, atoms[i], buf.data(), std::size_t(n), contiguous ? first + dims[0].start * line : first,
                         &local[i]);
  }
  for (std::size_t i = 0; i < atoms.size(); ++i) {
    if (contiguous) {
      (*out)[i].sure = std::move(local[i]);
      continue;
    }
    LocalToGlobal to_row(sel, shape);
    std::vector<std::uint64_t> rows;
    rows.reserve(local[i].cardinality());
    for (std::uint64_t local_row : indexes::rows_of(local[i])) rows.push_back(to_row(local_row));
    std::sort(rows.begin(), rows.end());  // a box's C order is the array's, but stay safe with steps
    (*out)[i].sure.addMany(rows.size(), rows.data());
  }
  return 0;
}

int ArrayFile::mloc_query_output(const indexes::KeySet& keys, bool values, std::string* out, QueryCost* cost,
                                 std::string* message) {
  if (int r = ready_for_query(message)) return r;
  std::shared_lock lock(mu_);
  const MlocImage* image = image_locked();
  if (index_ || !image || !image->holds_data() || grid_locked().elements() >= (1ull << 32)) return ENOTSUP;
  return image->match_output(keys, values ? MlocImage::MatchOutput::Values : MlocImage::MatchOutput::Coords, out,
                             &cost->data_bytes, message);
}

int ArrayFile::mloc_estimates_locked(const std::vector<indexes::KeySet>& atoms, const std::optional<Selection>& box,
                                     std::vector<Estimate>* out, QueryCost* cost, std::string* message) {
  const MlocImage& image = *image_locked();
  std::vector<std::uint64_t> ranks;
  std::optional<Bitmap> in_box;
  if (box) {
    ranks = image.chunks_of(*box);
    in_box = selection_rows(*box, grid_locked().shape());
    if (ranks.empty()) return 0;
  }
  std::vector<bool> hint(image.grid().bins(), false);
  for (std::size_t i = 0; i < atoms.size(); ++i) {
    if (int r = image.match_rows(atoms[i], ranks, &(*out)[i].sure, &cost->data_bytes, message)) return r;
    if (in_box) (*out)[i].sure &= *in_box;
    const auto uses = image.bin_uses(atoms[i]);
    for (std::size_t b = 0; b < uses.size(); ++b) hint[b] = hint[b] || uses[b] != MlocImage::BinUse::None;
  }
  std::lock_guard h(hint_mu_);
  mloc_hint_ = std::move(hint);
  return 0;
}

// Rows are gathered in batches, each a plan (the cell and byte of every
// row), a device read of the cells and a copy out. The read of one batch
// runs on a second thread while this one plans the next and copies the
// last: the 86 MiB of cells a 2.7 M-candidate query reads then arrive while
// its rows are mapped and copied, not before.
int ArrayFile::rows_from_cells(const Bitmap& rows, std::byte* out, std::uint64_t* data_bytes,
                               std::string* message) {
  const layouts::CellGrid& g = grid_locked();
  const auto& shape = g.shape();
  const std::size_t n = shape.size();
  const std::uint64_t is = g.itemsize();
  struct Batch {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> where;  // (cell, byte in cell) per row
    std::vector<std::uint64_t> cells;                            // ascending, unique
    ArrayState::CellReads reads;  // kept across batches: its pages fault in once
    std::uint64_t bad = 0, bytes = 0;
  };
  Batch batches[2];
  std::vector<std::uint64_t> coords(n), cc;
  const std::uint64_t last_extent = shape[n - 1], last_cell_extent = g.cell()[n - 1];
  const std::vector<std::uint64_t> wanted = indexes::rows_of(rows);
  std::size_t next_row = 0;
  // A batch ends only between slabs of cells (cell[0] rows of the first
  // dimension): no cell spans two slabs, so none is read by two batches.
  const std::uint64_t slab_rows = g.cell()[0] * (g.elements() / shape[0]);
  auto plan = [&](Batch* b) {
    b->where.clear();
    b->cells.clear();
    // The previous row's place: a row further along the same cell's line of
    // the last dimension (the common case for ascending candidates) moves
    // its byte, without the divisions of a full unravel.
    bool have_prev = false;
    std::uint64_t prev = 0, cell = 0, byte = 0, in_line = 0;
    while (next_row < wanted.size()) {
      const std::uint64_t row = wanted[next_row];
      if (b->where.size() >= kRowBatch && row / slab_rows != prev / slab_rows) break;
      ++next_row;
      const std::uint64_t delta = row - prev;
      if (have_prev && row > prev && coords[n - 1] + delta < last_extent && in_line + delta < last_cell_extent) {
        coords[n - 1] += delta;
        in_line += delta;
        byte += delta * is;
      } else {
        std::uint64_t rem = row;
        for (std::size_t d = n; d-- > 0;) {
          coords[d] = rem % shape[d];
          rem /= shape[d];
        }
        byte = layouts::byte_in_cell(g, coords, &cc);
        cell = g.linear(cc);
        in_line = coords[n - 1] % last_cell_extent;
        have_prev = true;
      }
      prev = row;
      b->where.push_back({cell, byte});
      // Ascending rows meet the same cell in runs (a cell's line of the
      // last dimension): only a change of cell is noted before the sort.
      if (b->cells.empty() || b->cells.back() != cell) b->cells.push_back(cell);
    }
    std::sort(b->cells.begin(), b->cells.end());
    b->cells.erase(std::unique(b->cells.begin(), b->cells.end()), b->cells.end());
    return !b->where.empty();
  };
  ArrayState& state = *writable_cells_locked();
  auto read = [&state](Batch* b) { return state.read_cells(b->cells, &b->reads, &b->bad, &b->bytes); };
  std::uint64_t done = 0;
  auto copy = [&](const Batch& b) {
    std::uint64_t last_cell = ~0ull;
    const std::byte* brick_at = nullptr;
    for (const auto& [cell, byte] : b.where) {
      if (cell != last_cell) {
        brick_at = b.reads.at[std::size_t(std::lower_bound(b.cells.begin(), b.cells.end(), cell) - b.cells.begin())];
        last_cell = cell;
      }
      std::memcpy(out + done * is, brick_at + byte, is);
      ++done;
    }
  };
  if (!plan(&batches[0])) return 0;
  std::future<int> reading = std::async(std::launch::async, read, &batches[0]);
  for (int i = 0;; i ^= 1) {
    const bool more = plan(&batches[i ^ 1]);  // while batch i is read
    const int r = reading.get();
    *data_bytes += batches[i].bytes;
    batches[i].bytes = 0;
    if (r) {
      *message = r == EIO ? state.failure_message(batches[i].bad) : "reading the array failed";
      return r;
    }
    if (more) reading = std::async(std::launch::async, read, &batches[i ^ 1]);
    copy(batches[i]);  // while batch i^1 is read
    if (!more) return 0;
  }
}

int ArrayFile::gather_rows(const Bitmap& rows, std::string* out, QueryCost* cost, std::string* message) {
  {
    std::unique_lock ex(mu_);
    if (has_dirty_locked())
      if (int r = flush_locked(false, message)) return r;
  }
  std::shared_lock lock(mu_);
  const std::uint64_t is = grid_locked().itemsize();
  const std::uint64_t count = rows.cardinality();
  out->assign(count * is, '\0');
  if (count == 0 || !holds_data_locked()) return 0;
  if (const MlocImage* image = image_locked()) {
    std::vector<bool> hint;
    {
      std::lock_guard h(hint_mu_);
      hint = mloc_hint_;
    }
    return image->gather(rows, hint, reinterpret_cast<std::byte*>(out->data()), &cost->data_bytes, message);
  }
  // Many rows: stream the array slab by slab (sequential reads beat one
  // request per cell); few: read just their cells.
  const std::uint64_t cells = grid_locked().cells();
  const std::uint64_t per_cell = grid_locked().cell_elements();
  if (count / std::max<std::uint64_t>(1, per_cell) * 4 < cells && count * 8 < grid_locked().elements())
    return rows_from_cells(rows, reinterpret_cast<std::byte*>(out->data()), &cost->data_bytes, message);
  std::byte* dst = reinterpret_cast<std::byte*>(out->data());
  std::uint64_t done = 0;
  const std::vector<std::uint64_t> wanted = indexes::rows_of(rows);
  auto it = wanted.begin();
  int rc = 0;
  std::string msg;
  const std::uint64_t row_elements = grid_locked().elements() / grid_locked().shape()[0];
  read_all_locked(
      [&](std::uint64_t first, const std::byte* p, std::size_t n) {
        if (rc) return;
        while (it != wanted.end() && *it < first + n) {
          std::memcpy(dst + done * is, p + (*it - first) * is, is);
          ++done;
          ++it;
        }
        cost->data_bytes += n * is;
        (void)row_elements;
      },
      &msg);
  if (done != count) {
    *message = msg.empty() ? "reading the array failed" : msg;
    return EIO;
  }
  return 0;
}

layouts::IoPlan ArrayFile::scan_plan(const std::optional<Selection>& box) const {
  std::shared_lock lock(mu_);
  const Selection sel = box ? *box : Selection::all(grid_locked().shape());
  return placement_->plan(sel, 0);
}

layouts::IoPlan ArrayFile::rows_plan(const Bitmap& rows) const {
  std::shared_lock lock(mu_);
  // A sealed mloc array gathers rows by reading the whole array (for now).
  const ArrayState* state = cells_locked();
  if (!state) return placement_->plan(Selection::all(grid_locked().shape()), 0);
  const layouts::CellGrid& g = grid_locked();
  const auto& shape = g.shape();
  std::vector<std::uint64_t> coords(shape.size()), cc;
  std::vector<std::uint64_t> cells;
  for (std::uint64_t row : indexes::rows_of(rows)) {
    std::uint64_t rem = row;
    for (std::size_t d = shape.size(); d-- > 0;) {
      coords[d] = rem % shape[d];
      rem /= shape[d];
    }
    layouts::byte_in_cell(g, coords, &cc);
    cells.push_back(g.linear(cc));
  }
  std::sort(cells.begin(), cells.end());
  cells.erase(std::unique(cells.begin(), cells.end()), cells.end());
  std::vector<std::uint64_t> flat;
  flat.reserve(cells.size() * shape.size());
  std::vector<std::uint64_t> c(shape.size());
  for (std::uint64_t linear : cells) {
    std::uint64_t rem = linear;
    for (std::size_t d = shape.size(); d-- > 0;) {
      c[d] = rem % g.grid()[d];
      rem /= g.grid()[d];
    }
    flat.insert(flat.end(), c.begin(), c.end());
  }
  layouts::IoPlan plan = layouts::plan_cells(state->layout(), flat, rows.cardinality() * g.itemsize());
  return plan;
}

}  // namespace mmfs::fs
