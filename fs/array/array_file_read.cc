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

// A larger chunk is chosen when the model reads it at least this much
// cheaper per byte: it costs memory and the first bytes' latency.
constexpr double kChunkGain = 0.9;

}  // namespace

std::uint64_t ArrayFile::view_chunking(DataView* view, std::unique_ptr<layouts::SelectionChunks>* out) const {
  std::shared_lock lock(mu_);
  if (view->chunk_bytes == 0) view->chunk_bytes = chunk_bytes_locked(view->selection, view->spelling);
  *out = std::make_unique<layouts::SelectionChunks>(view->selection, grid_locked(), view->chunk_bytes);
  return view->bytes(grid_locked().itemsize());
}

std::uint64_t ArrayFile::chunk_bytes_locked(const Selection& selection, const std::string& spelling) const {
  const std::uint64_t base = ctx_.chunk_bytes;
  const std::uint64_t total = selection.elements() * grid_locked().itemsize();
  if (!placement_->chunks_by_model() || total <= base) return base;
  const std::uint64_t epoch = placement_epoch_.load();
  {
    std::lock_guard lock(budget_mu_);
    auto it = chunk_budgets_.find(spelling);
    if (it != chunk_budgets_.end() && it->second.first == epoch) return it->second.second;
  }
  // The model's time per byte of a chunk from the middle of the view.
  auto cost = [&](std::uint64_t budget) {
    const layouts::SelectionChunks ch(selection, grid_locked(), budget);
    const Selection part = ch.selection(ch.count() / 2);
    const layouts::IoPlan p = placement_->modeled_plan(part, 0);
    return p.modeled_ms / double(std::max<std::uint64_t>(1, part.elements()));
  };
  const std::uint64_t best = layouts::choose_chunk_budget(base, ctx_.max_chunk_scale, total, kChunkGain, cost);
  std::lock_guard lock(budget_mu_);
  if (chunk_budgets_.size() >= 256) chunk_budgets_.clear();  // views come and go; choosing again is cheap
  chunk_budgets_[spelling] = {epoch, best};
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
  DataView v = view;
  std::unique_ptr<layouts::SelectionChunks> ch;
  std::uint64_t total = view_chunking(&v, &ch);
  std::uint64_t chunks = ch->count();
  if (offset >= total) return 0;
  length = std::size_t(std::min<std::uint64_t>(length, total - offset));
  std::uint64_t c = ch->index_at(offset);
  if (ch->index_at(offset + length - 1) != c) return 0;
  ChunkReader::Chunk chunk_data;
  if (int r = reader_.reader_chunk(shared_from_this(), v, c, chunks, &chunk_data, message)) return r;
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
  std::shared_lock lock(mu_);
  const std::uint64_t budget = view.chunk_bytes ? view.chunk_bytes : chunk_bytes_locked(view.selection, view.spelling);
  layouts::SelectionChunks ch(view.selection, grid_locked(), budget);
  Selection part = ch.selection(index);
  std::uint64_t bytes = part.elements() * grid_locked().itemsize();
  *out = AlignedBuffer(std::max<std::uint64_t>(bytes, 1), AlignedBuffer::Uninitialized{});
  const bool once = ch.count() == 1;  // no later piece of this view wants the same chunks
  if (int r = read_selection_locked(part, view.plod_bytes, out->data(), nullptr, message, device_done, nullptr, once))
    return r;
  if (view.plod_bytes != 0)
    layouts::apply_plod({out->data(), bytes}, grid_locked().itemsize(), schema_.dtype.name == "float64", view.plod_bytes);
  return 0;
}

ChunkStats ArrayFile::chunk_stats() const { return reader_.stats(); }

void ArrayFile::quiesce() { reader_.quiesce(); }

void ArrayFile::wait_for_prefetches() { reader_.wait_for_prefetches(); }

int ArrayFile::read_view(const DataView& view, std::uint64_t offset, std::size_t length, std::byte* out,
                         std::size_t* got, std::string* message) {
  *got = 0;
  if (retired()) {
    *message = "the array file was removed";
    return ESTALE;
  }
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
    if (int r = reader_.reader_chunk(shared_from_this(), v, c, chunks, &data, message)) return r;
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

}  // namespace mmfs::fs
