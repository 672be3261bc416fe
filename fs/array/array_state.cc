#include "fs/array/array_state.h"

#include "fs/array/member_sets.h"
#include "fs/meta/keys.h"
#include "fs/meta/metadata.h"

#include "layouts/cell_blocks.h"
#include "layouts/cell_copy.h"
#include "layouts/touched_runs.h"
#include "layouts/whole_cell.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>

namespace mmfs::fs {

using layouts::CellGrid;
using layouts::Run;
using layouts::Selection;

ArrayState::ArrayState(std::unique_ptr<layouts::Layout> layout, CellChecksums sums, CellChecksums alternatives,
                       SectorIo& io, MemberSetSite* site)
    : layout_(std::move(layout)), site_(site), sums_(std::move(sums)), alt_(std::move(alternatives)), io_(io),
      cell_storage_(std::uint64_t(layout_->sectors_per_cell()) * io.sector_size()) {}

std::vector<layouts::Extent> ArrayState::volume_extents() const {
  return site_ ? site_->to_volume(layout_->extents()) : layout_->extents();
}

void ArrayState::stage_extents(std::uint64_t ino, std::uint8_t slot, WriteBatch& batch) const {
  batch.put(slot == 0 ? keys::extents(ino) : keys::copy_extents(ino, slot), encode_extents(volume_extents()));
  if (site_)
    batch.put(keys::xattr(ino, set_extents_record(slot)), encode_extents(layout_->extents()));
  else
    batch.del(keys::xattr(ino, set_extents_record(slot)));
}

bool ArrayState::holds_data() const {
  if (!dirty_.empty()) return true;
  for (std::uint64_t c = 0; c < sums_.cells(); ++c)
    if (may_hold_data(c)) return true;
  return false;
}

bool ArrayState::cell_valid(std::uint64_t cell, std::span<const std::byte> contents) const {
  if (is_lost(cell)) return false;
  const ChecksumBlocks& blocks = sums_.blocks();
  for (std::uint32_t b = 0; b < blocks.per_cell; ++b)
    if (!block_valid(cell, b, blocks.of(contents, b))) return false;
  return true;
}

bool ArrayState::block_valid(std::uint64_t cell, std::uint32_t block, std::span<const std::byte> part) const {
  // Each block matches its checksum or its alternative: a rewrite torn
  // between blocks leaves some old and some new, each verifiable. A lost
  // cell's blocks match its old bytes' checksums: none is the array's.
  if (is_lost(cell)) return false;
  return sums_.verify_block(cell, block, part) || alt_.alternative_matches(cell, block, part);
}

int ArrayState::read_stored_cells(std::span<const std::uint64_t> cells, AlignedBuffer* out) const {
  const std::uint32_t ss = io_.sector_size();
  std::vector<std::uint64_t> coords(grid().dims());
  Run r[2];
  *out = AlignedBuffer(cells.size() * cell_storage_);
  std::vector<SectorRun> runs;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    coords_of(cells[i], coords.data());
    std::size_t k = layout_->cell_runs(coords, r);
    std::byte* p = out->data() + i * cell_storage_;
    for (std::size_t j = 0; j < k; ++j) {
      runs.push_back({r[j].lbn, r[j].sectors, p});
      p += std::uint64_t(r[j].sectors) * ss;
    }
  }
  return io_.read(runs);
}

int ArrayState::settle_torn_rewrites(std::uint64_t* settled) {
  *settled = 0;
  if (!alt_.maybe_recorded()) return 0;  // no rewrite was in flight
  std::vector<std::uint64_t> rewriting;
  for (std::uint64_t c = 0; c < alt_.cells(); ++c)
    if (alt_.any(c) && !is_lost(c)) rewriting.push_back(c);  // a lost cell stays lost, whatever it holds
  if (rewriting.empty()) return 0;
  const std::uint64_t brick = grid().cell_bytes();
  auto settle = [&](std::uint64_t c, const std::byte* stored) {
    const std::span<const std::byte> cell(stored, brick);
    if (cell_valid(c, cell)) return;
    sums_.set(c, cell);
    alt_.clear_cell(c);
    ++*settled;
  };
  AlignedBuffer buf;
  if (read_stored_cells(rewriting, &buf) == 0) {
    for (std::size_t i = 0; i < rewriting.size(); ++i) settle(rewriting[i], buf.data() + i * cell_storage_);
    return 0;
  }
  // The device cannot read some of them (a lost member, a bad sector): the
  // cells it reads are settled; the others keep their alternatives (valid
  // as old or new bytes once readable again; unreadable until then anyway).
  for (std::uint64_t c : rewriting)
    if (read_stored_cells({&c, 1}, &buf) == 0) settle(c, buf.data());
  return 0;
}

void ArrayState::clear() {
  dirty_.clear();
  full_dirty_ = 0;
  sums_.clear();
  alt_.clear();
  if (!lost_.isEmpty()) lost_changed_ = true;
  lost_ = Roaring();
}

void ArrayState::coords_of(std::uint64_t linear, std::uint64_t* coords) const {
  grid().coords(linear, {coords, grid().dims()});
}

std::uint64_t ArrayState::in_array_bytes(std::span<const std::uint64_t> cc) const {
  const CellGrid& g = grid();
  std::uint64_t n = g.itemsize();
  for (std::size_t d = 0; d < g.dims(); ++d)
    n *= std::min(g.cell()[d], g.shape()[d] - cc[d] * g.cell()[d]);
  return n;
}

ArrayState::DirtyCell& ArrayState::dirty_cell(std::uint64_t linear, std::span<const std::uint64_t> cc) {
  auto [it, inserted] = dirty_.try_emplace(linear);
  DirtyCell& dc = it->second;
  if (inserted) {
    dc.need = in_array_bytes(cc);
    const std::uint64_t brick = grid().cell_bytes();
    if (!spare_.empty() && dc.need == brick) {
      // A reused buffer of a cell wholly inside the array is not cleared
      // (the fill cost 6 % of an ingest's CPU): a writer usually overwrites
      // every byte, and write_back clears what it did not (fill_unwritten).
      // The padding after the brick is never written: cleared here.
      dc.data = std::move(spare_.back().data);
      dc.data.resize(cell_storage_);
      std::memset(dc.data.data() + brick, 0, cell_storage_ - brick);
      dc.zeroed = false;
    } else {
      if (!spare_.empty()) dc.data = std::move(spare_.back().data);
      dc.data.assign(cell_storage_, std::byte{0});
    }
    if (!spare_.empty()) {
      dc.written = std::move(spare_.back().written);
      spare_.pop_back();
    }
    // A cell that never held data is all zeros: nothing to read back. Its
    // written bytes are still tracked: a write-back of full cells only
    // (write_back's complete_only) leaves it for its writer to finish.
    dc.complete = !may_hold_data(linear);
    dc.written.assign((brick + 63) / 64, 0);
  }
  return dc;
}

void ArrayState::write_bytes(std::uint64_t offset, const std::byte* data, std::size_t length) {
  // The dirty cells of the line of cells being written, by their last
  // coordinate: consecutive segments cycle through a whole line of cells
  // (every 32 bytes with 16x16x4 float64 cells), and a hash lookup per
  // segment cost more than its copy. Entries are stable: nothing is erased here.
  const std::size_t last = grid().dims() - 1;
  std::vector<DirtyCell*> line(grid().grid()[last], nullptr);
  std::uint64_t line_first = ~0ull;
  layouts::for_each_cell_segment(grid(), offset, length,
                                 [&](std::uint64_t linear, std::span<const std::uint64_t> cc, std::uint64_t at,
                                     std::uint64_t from, std::uint64_t take) {
    if (linear - cc[last] != line_first) {
      std::fill(line.begin(), line.end(), nullptr);
      line_first = linear - cc[last];
    }
    DirtyCell*& slot = line[cc[last]];
    if (slot == nullptr) slot = &dirty_cell(linear, cc);
    DirtyCell* dc = slot;
    // Segments of whole cell rows of 32 or 64 bytes are the common case:
    // copied inline, without a call per segment.
    if (take == 32)
      std::memcpy(dc->data.data() + at, data + from, 32);
    else if (take == 64)
      std::memcpy(dc->data.data() + at, data + from, 64);
    else
      std::memcpy(dc->data.data() + at, data + from, take);
    if (dc->full) return;
    // Mark bytes [at, at + take) written, a word at a time.
    std::uint64_t b = at;
    const std::uint64_t end = at + take;
    while (b < end) {
      const std::uint64_t bit = b % 64;
      const std::uint64_t n = std::min<std::uint64_t>(64 - bit, end - b);
      const std::uint64_t mask = (n == 64 ? ~0ull : ((1ull << n) - 1)) << bit;
      std::uint64_t& w = dc->written[b / 64];
      dc->known += std::uint64_t(std::popcount(mask & ~w));
      w |= mask;
      b += n;
    }
    if (dc->known >= dc->need) {
      dc->full = dc->complete = true;
      ++full_dirty_;
      dc->written.clear();  // keeps its capacity for the buffer's next cell
    }
  });
}

void ArrayState::fill_unwritten(DirtyCell& dc, const std::byte* old) const {
  const std::uint64_t brick = grid().cell_bytes();
  // A word of the written bitset at a time: most words are all written or
  // none (writes come in runs).
  for (std::uint64_t w = 0; w * 64 < brick; ++w) {
    const std::uint64_t bits = dc.written[w], first = w * 64, n = std::min<std::uint64_t>(64, brick - first);
    if (bits == ~0ull) continue;
    if (bits == 0) {
      if (old)
        std::memcpy(dc.data.data() + first, old + first, n);
      else
        std::memset(dc.data.data() + first, 0, n);
      continue;
    }
    for (std::uint64_t b = 0; b < n; ++b)
      if (!(bits & (1ull << b))) dc.data[first + b] = old ? old[first + b] : std::byte{0};
  }
  dc.zeroed = true;
}

int ArrayState::write_back(std::uint64_t* bad_cell, const std::function<int(WriteBatch&)>& make_durable,
                           bool complete_only) {
  if (dirty_.empty()) return 0;
  const std::uint64_t brick = grid().cell_bytes();
  const std::uint32_t ss = io_.sector_size();
  std::vector<std::uint64_t> coords(grid().dims());
  Run r[2];

  // The cells written back now: every dirty cell, or only those whose every
  // byte was written (a sequential writer completes the others soon; writing
  // them now would read them back then).
  std::vector<std::uint64_t> chosen;
  chosen.reserve(dirty_.size());
  for (auto& [linear, dc] : dirty_)
    if (!complete_only || dc.full) chosen.push_back(linear);
  // A lost cell written in part has nothing to complete it from: dropped.
  if (!lost_.isEmpty()) {
    std::erase_if(chosen, [&](std::uint64_t linear) {
      auto it = dirty_.find(linear);
      if (it->second.full || !is_lost(linear)) return false;
      dropped_lost_.push_back(linear);
      dirty_.erase(it);
      return true;
    });
  }
  if (chosen.empty()) return 0;

  // Cells written only in part that hold data: read them, keep the bytes not
  // overwritten.
  std::vector<std::uint64_t> partial;
  for (std::uint64_t linear : chosen)
    if (!dirty_[linear].complete) partial.push_back(linear);
  if (!partial.empty()) {
    AlignedBuffer buf;
    if (int rc = read_stored_cells(partial, &buf)) return rc;
    for (std::size_t i = 0; i < partial.size(); ++i) {
      const std::byte* old = buf.data() + i * cell_storage_;
      if (!cell_valid(partial[i], {old, brick})) {
        *bad_cell = partial[i];
        return EIO;
      }
      fill_unwritten(dirty_[partial[i]], old);
    }
  }
  // Cells that never held data, written in part into a reused buffer: zeros where nothing was written.
  for (std::uint64_t linear : chosen)
    if (DirtyCell& dc = dirty_[linear]; dc.complete && !dc.full && !dc.zeroed) fill_unwritten(dc, nullptr);

  // The new contents' checksums become durable alternatives first. Not for
  // cells that never held data: they read as zeros without the device until
  // their checksums commit, and their sectors hold stale bytes (an earlier
  // file's) until the write lands, which an alternative would make them read
  // after a crash in between (EIO instead of zeros).
  if (make_durable) {
    bool any = false;
    for (std::uint64_t linear : chosen)
      if (may_hold_data(linear)) {
        alt_.set_alternative(linear, {dirty_[linear].data.data(), brick});
        any = true;
      }
    if (any) {
      WriteBatch batch;
      alt_.stage(batch);
      if (int rc = make_durable(batch)) return rc;
    }
  }

  // Write back in LBN order; neighbouring cells become one request.
  std::vector<std::pair<geom::Lbn, std::uint64_t>> order;
  order.reserve(chosen.size());
  for (std::uint64_t linear : chosen) {
    coords_of(linear, coords.data());
    layout_->cell_runs(coords, r);
    order.push_back({r[0].lbn, linear});
  }
  std::sort(order.begin(), order.end());
  // The staging buffer stays between write-backs of a run of writes: a fresh
  // one of tens of MiB is faulted in (and zeroed by the kernel) page by page
  // every time.
  if (staging_.size() < order.size() * cell_storage_)
    staging_ = AlignedBuffer(order.size() * cell_storage_, AlignedBuffer::Uninitialized{});
  AlignedBuffer& staging = staging_;
  std::vector<SectorRun> runs;
  for (std::size_t i = 0; i < order.size(); ++i) {
    std::uint64_t linear = order[i].second;
    std::byte* slot = staging.data() + i * cell_storage_;
    std::memcpy(slot, dirty_[linear].data.data(), cell_storage_);
    coords_of(linear, coords.data());
    std::size_t k = layout_->cell_runs(coords, r);
    std::byte* p = slot;
    for (std::size_t j = 0; j < k; ++j) {
      if (!runs.empty() && runs.back().lbn + runs.back().sectors == r[j].lbn &&
          runs.back().buffer + runs.back().sectors * ss == p)
        runs.back().sectors += r[j].sectors;
      else
        runs.push_back({r[j].lbn, r[j].sectors, p});
      p += std::uint64_t(r[j].sectors) * ss;
    }
  }
  if (int rc = io_.write(runs)) return rc;
  for (std::uint64_t linear : chosen) {
    auto it = dirty_.find(linear);
    sums_.set(linear, {it->second.data.data(), brick});
    alt_.clear_cell(linear);  // dropped when the caller commits the checksums
    if (is_lost(linear)) {    // written whole: the array's bytes again
      lost_.remove(std::uint32_t(linear));
      lost_changed_ = true;
    }
    if (it->second.full) --full_dirty_;
    if (complete_only && spare_.size() * cell_storage_ < kSpareBytes) spare_.push_back(std::move(it->second));
    dirty_.erase(it);
  }
  // A write-back of every dirty cell (fsync, close) ends a run of writes: the
  // buffers go back to the allocator rather than stay with an idle array.
  if (!complete_only) {
    std::vector<DirtyCell>().swap(spare_);
    staging_ = AlignedBuffer();
  }
  return 0;
}

void ArrayState::for_each_dirty_run(
    const std::function<void(std::uint64_t, const std::byte*, std::size_t)>& visit) const {
  std::vector<std::uint64_t> linears;
  linears.reserve(dirty_.size());
  for (const auto& [linear, dc] : dirty_) linears.push_back(linear);
  std::sort(linears.begin(), linears.end());
  std::vector<std::uint64_t> cc(grid().dims());
  for (std::uint64_t linear : linears) {
    const DirtyCell& dc = dirty_.at(linear);
    coords_of(linear, cc.data());
    layouts::for_each_cell_row(grid(), cc, [&](std::uint64_t in_cell, std::uint64_t in_array, std::uint64_t bytes) {
      const std::byte* row = dc.data.data() + in_cell;
      if (dc.full || dc.written.empty()) {
        visit(in_array, row, std::size_t(bytes));
        return;
      }
      // The written bytes of the row, run by run.
      auto written = [&](std::uint64_t b) { return (dc.written[(in_cell + b) / 64] >> ((in_cell + b) % 64)) & 1; };
      for (std::uint64_t b = 0; b < bytes;) {
        if (!written(b)) {
          ++b;
          continue;
        }
        std::uint64_t e = b + 1;
        while (e < bytes && written(e)) ++e;
        visit(in_array + b, row + b, std::size_t(e - b));
        b = e;
      }
    });
  }
}

SectorBuffer::SectorBuffer(const layouts::IoPlan& plan, std::uint32_t sector_size, AlignedBuffer* scratch)
    : sector_size_(sector_size) {
  std::uint64_t total = 0;
  for (const auto& b : plan.batches)
    for (const auto& q : b.requests) {
      placed_.push_back({q.lbn, q.sectors, 0});
      total += q.sectors;
    }
  std::sort(placed_.begin(), placed_.end(), [](const Placed& a, const Placed& b) { return a.lbn < b.lbn; });
  const std::uint64_t bytes = std::max<std::uint64_t>(total, 1) * sector_size;
  if (scratch) {
    if (scratch->size() < bytes) *scratch = AlignedBuffer(bytes, AlignedBuffer::ForIo{});
    data_ = scratch->data();
  } else {
    buffer_ = AlignedBuffer(bytes, AlignedBuffer::ForIo{});
    data_ = buffer_.data();
  }
  std::uint64_t at = 0;
  for (Placed& p : placed_) {
    p.offset = at;
    at += p.sectors * sector_size;
  }
  sectors_ = total;
}

std::vector<SectorRun> SectorBuffer::runs() {
  std::vector<SectorRun> runs;
  runs.reserve(placed_.size());
  for (const Placed& p : placed_) runs.push_back({p.lbn, p.sectors, data_ + p.offset});
  return runs;
}

std::vector<SectorRun> SectorBuffer::runs_of(const layouts::IoBatch& batch) {
  std::vector<SectorRun> runs;
  runs.reserve(batch.requests.size());
  for (const auto& q : batch.requests) runs.push_back({q.lbn, q.sectors, const_cast<std::byte*>(at(q.lbn))});
  return runs;
}

const std::byte* SectorBuffer::at(geom::Lbn lbn) const {
  auto it = std::upper_bound(placed_.begin(), placed_.end(), lbn,
                             [](geom::Lbn l, const Placed& p) { return l < p.lbn; });
  --it;
  return data_ + it->offset + (lbn - it->lbn) * sector_size_;
}

void SectorBuffer::runs_holding(geom::Lbn lbn, std::uint64_t count, std::vector<std::uint32_t>* out) const {
  auto it = std::upper_bound(placed_.begin(), placed_.end(), lbn,
                             [](geom::Lbn l, const Placed& p) { return l < p.lbn; });
  if (it != placed_.begin()) --it;
  for (; it != placed_.end() && it->lbn < lbn + count; ++it)
    if (it->lbn + it->sectors > lbn) out->push_back(std::uint32_t(it - placed_.begin()));
}

layouts::IoPlan ArrayState::plan(const Selection& sel, layouts::TouchedRuns* runs) const {
  layouts::PlanOptions options;
  options.runs = runs;
  const ChecksumBlocks& blocks = sums_.blocks();
  if (blocks.per_cell > 1) options.block_sectors = std::uint32_t(blocks.bytes / io_.sector_size());
  return layouts::plan_selection(*layout_, sel, options);
}

// Verifying and gathering a selection's cells from sectors read, one cell at
// a time in any order: after the whole plan was read (gather_selection), or
// as each request arrives (read_selection).
class ArrayState::CellGather {
 public:
  CellGather(const ArrayState& state, const Selection& sel, const SectorBuffer& sectors, std::byte* out,
             bool partial_cells)
      : state_(state), sectors_(sectors), out_(out),
        // A result larger than the caches is read back later, by the thread
        // that replies from it: write it around them.
        gather_(state.grid(), sel,
                sel.elements() * state.grid().itemsize() >= kStreamedResultBytes
                    ? layouts::SelectionGather::Stores::streamed
                    : layouts::SelectionGather::Stores::cached),
        joined_bytes_(state.cell_storage_), zeros_bytes_(state.grid().cell_bytes()) {
    // A partial plan read only the blocks of some cells that hold the
    // selection: those cells are put together (and verified) block by block.
    if (partial_cells) blocks_.emplace(state.grid(), sel, state.sums_.blocks().bytes, state.sums_.blocks().per_cell);
  }

  const std::vector<std::vector<std::uint64_t>>& touched() const { return gather_.touched(); }

  // Takes the cells' runs from `runs` (the plan kept them) when it was
  // prepared for this selection's cells; cells are then named by their
  // position in the C order of touched().
  void use_runs(layouts::TouchedRuns* runs) { runs_ = runs && runs->covers(touched()) ? runs : nullptr; }

  // Calls visit(lbn, sectors) for each piece of the device cell `cc` (at
  // `position`, see use_runs) is read from (none for a cell that never held
  // data: it reads as zeros).
  template <class Visit>
  void pieces(std::span<const std::uint64_t> cc, std::uint64_t position, Visit&& visit) {
    const CellGrid& g = state_.grid();
    if (!state_.may_hold_data(g.linear(cc))) return;
    Run r[2];
    const std::span<const Run> runs = runs_of(cc, position, r);
    const layouts::BlockMask* mask = blocks_ ? &blocks_->of(cc) : nullptr;
    if (mask && !blocks_->full(*mask)) {
      const std::uint32_t block_sectors = std::uint32_t(state_.sums_.blocks().bytes / state_.io_.sector_size());
      for (std::uint32_t b = 0; b < blocks_->per_cell(); ++b)
        if (mask->has(b))
          layouts::for_each_block_piece(runs, b, block_sectors,
                                        [&](geom::Lbn lbn, std::uint32_t n, std::uint64_t) { visit(lbn, n); });
    } else {
      for (const Run& run : runs) visit(run.lbn, run.sectors);
    }
  }

  // Verifies cell `cc` (at `position`, see use_runs) and copies its part of
  // the selection into the result. EIO with *bad_cell on a mismatch.
  int cell(std::span<const std::uint64_t> cc, std::uint64_t position, std::uint64_t* bad_cell) {
    const CellGrid& g = state_.grid();
    const std::uint32_t ss = state_.io_.sector_size();
    const std::uint64_t linear = g.linear(cc), brick = g.cell_bytes();
    const std::byte* cell;
    const layouts::BlockMask* mask = blocks_ ? &blocks_->of(cc) : nullptr;
    Run r[2];
    if (!state_.may_hold_data(linear)) {
      cell = zeros();
    } else if (mask && !blocks_->full(*mask)) {
      if (!state_.assemble_blocks(linear, runs_of(cc, position, r), *mask, sectors_, joined())) {
        *bad_cell = linear;
        return EIO;
      }
      cell = joined();
    } else {
      const std::span<const Run> runs = runs_of(cc, position, r);
      cell = sectors_.at(runs[0].lbn);
      if (runs.size() == 2) {  // the cell wraps around its track's end: join its two pieces
        std::memcpy(joined(), cell, std::uint64_t(runs[0].sectors) * ss);
        std::memcpy(joined() + std::uint64_t(runs[0].sectors) * ss, sectors_.at(runs[1].lbn),
                    std::uint64_t(runs[1].sectors) * ss);
        cell = joined();
      }
      if (!state_.cell_valid(linear, {cell, brick})) {
        *bad_cell = linear;
        return EIO;
      }
    }
    // A cell put together in `joined_` is copied now: that buffer is the
    // next cell's. The others may wait in `sectors_` for their line.
    gather_.take(cc, cell, out_, cell == joined_.get());
    return 0;
  }

 private:
  std::span<const Run> runs_of(std::span<const std::uint64_t> cc, std::uint64_t position, Run scratch[2]) {
    if (runs_) return runs_->of(*state_.layout_, position, cc);
    return {scratch, state_.layout_->cell_runs(cc, scratch)};
  }

  const ArrayState& state_;
  const SectorBuffer& sectors_;
  std::byte* out_;
  layouts::SelectionGather gather_;
  layouts::TouchedRuns* runs_ = nullptr;
  std::optional<layouts::CellBlocks> blocks_;
  // A cell put together from its pieces, and the brick of a cell never
  // written: allocated at their first use, without filling them (calloc's
  // zeros are the kernel's), so a read of a few blocks of large cells (a
  // C-order copy's 2 MiB rows) faults in only the pages it touches, not two
  // whole cells per read.
  std::byte* joined() {
    if (!joined_) joined_.reset(new std::byte[joined_bytes_]);
    return joined_.get();
  }
  const std::byte* zeros() {
    if (!zeros_) zeros_.reset(static_cast<std::byte*>(std::calloc(zeros_bytes_, 1)));
    if (!zeros_) throw std::bad_alloc();
    return zeros_.get();
  }
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::uint64_t joined_bytes_, zeros_bytes_;
  std::unique_ptr<std::byte[]> joined_;
  std::unique_ptr<std::byte, Free> zeros_;
};


int ArrayState::read_selection(const Selection& sel, std::byte* out, std::uint64_t* bad_cell,
                               const std::function<void()>& device_done, std::uint64_t* bytes_read,
                               AlignedBuffer* scratch, std::vector<std::uint64_t>* all_bad) {
  if (all_bad) all_bad->clear();
  // A selection that is exactly one whole cell (a Zarr chunk served by a
  // copy in the chunk's shape, a slice of one-layer cells) is read straight
  // into `out` and verified there. Through the sector buffer, the whole cell
  // was copied out once more: on a scan of 8 MiB chunks that copy was a
  // third of the daemon's CPU.
  {
    const CellGrid& g = grid();
    const std::uint32_t ss = io_.sector_size();
    const std::uint64_t brick = g.cell_bytes();
    std::vector<std::uint64_t> cc;
    bool whole = brick % ss == 0 && reinterpret_cast<std::uintptr_t>(out) % kBufferAlignment == 0 &&
                 layouts::whole_cell_of(g, sel, &cc);
    const std::uint64_t linear = whole ? g.linear(cc) : 0;
    Run r[2];
    std::size_t n = 0;
    if (whole && may_hold_data(linear)) {
      n = layout_->cell_runs(cc, r);
      whole = (std::uint64_t(r[0].sectors) + (n == 2 ? r[1].sectors : 0)) * ss == brick;
    } else {
      whole = false;  // a cell never written reads as zeros, without the device: the general path
    }
    if (whole) {
      SectorRun runs[2] = {{r[0].lbn, r[0].sectors, out},
                           {r[1].lbn, r[1].sectors, out + std::uint64_t(r[0].sectors) * ss}};
      if (int rc = io_.read(std::span<const SectorRun>(runs, n))) return rc;
      if (bytes_read) *bytes_read += brick;
      if (device_done) device_done();
      if (cell_valid(linear, {out, brick})) return 0;
      if (all_bad) all_bad->push_back(linear);
      *bad_cell = linear;
      return EIO;
    }
  }
  layouts::TouchedRuns cell_runs;
  const layouts::IoPlan p = plan(sel, &cell_runs);
  SectorBuffer sectors(p, io_.sector_size(), scratch);
  CellGather gather(*this, sel, sectors, out, p.partial_cells);
  gather.use_runs(&cell_runs);
  const std::size_t n = grid().dims();

  // Each cell (its coordinates in `coords`), the requests of the plan it
  // waits for, and per request the cells waiting for it (CSR: waiters_at).
  // The cells are verified and gathered as their requests arrive, while the
  // device serves the rest: on a fast device the passes over the bytes read
  // would otherwise follow the whole read, a third of a slice's time.
  const std::vector<SectorRun> runs = sectors.runs();
  std::vector<std::uint64_t> coords;
  std::vector<std::uint32_t> waiting;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> edges;  // (request, cell)
  std::vector<std::uint32_t> mine;
  int failed = 0;
  std::uint64_t bad = 0;  // told the caller only when the device read everything
  // Never throws: it runs inside the device call, with requests still in
  // flight into `sectors`; unwinding there would free their buffers.
  auto take = [&](std::uint32_t c) noexcept {
    if (failed) return;
    try {
      failed = gather.cell({coords.data() + std::size_t(c) * n, n}, c, &bad);
      if (failed == EIO && all_bad) {  // noted; the other cells are still verified
        all_bad->push_back(bad);
        failed = 0;
      }
    } catch (const std::bad_alloc&) {
      failed = ENOMEM;
    }
  };
  layouts::for_each_touched_cell(gather.touched(), [&](std::span<const std::uint64_t> cc) {
    const std::uint32_t c = std::uint32_t(waiting.size());
    coords.insert(coords.end(), cc.begin(), cc.end());
    mine.clear();
    gather.pieces(cc, c, [&](geom::Lbn lbn, std::uint64_t count) { sectors.runs_holding(lbn, count, &mine); });
    std::sort(mine.begin(), mine.end());
    mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
    waiting.push_back(std::uint32_t(mine.size()));
    for (std::uint32_t q : mine) edges.emplace_back(q, c);
  });
  std::vector<std::uint32_t> waiters_at(runs.size() + 1, 0), waiters(edges.size());
  for (const auto& e : edges) ++waiters_at[e.first + 1];
  for (std::size_t q = 0; q < runs.size(); ++q) waiters_at[q + 1] += waiters_at[q];
  {
    std::vector<std::uint32_t> fill(waiters_at.begin(), waiters_at.end() - 1);
    for (const auto& e : edges) waiters[fill[e.first]++] = e.second;
  }
  for (std::uint32_t c = 0; c < waiting.size(); ++c)
    if (waiting[c] == 0) take(c);  // zeros: nothing to read
  const int rc = io_.read(runs, [&](std::size_t q) {
    for (std::uint32_t i = waiters_at[q]; i < waiters_at[q + 1]; ++i)
      if (--waiting[waiters[i]] == 0) take(waiters[i]);
  });
  if (rc) return rc;
  if (bytes_read) *bytes_read += sectors.sectors() * io_.sector_size();
  if (device_done) device_done();
  if (!failed && all_bad && !all_bad->empty()) {
    std::sort(all_bad->begin(), all_bad->end());
    bad = all_bad->front();
    failed = EIO;
  }
  if (failed == EIO) *bad_cell = bad;
  return failed;
}

bool ArrayState::assemble_blocks(std::uint64_t linear, std::span<const Run> runs, const layouts::BlockMask& mask,
                                 const SectorBuffer& sectors, std::byte* cell) const {
  const ChecksumBlocks& blocks = sums_.blocks();
  const std::uint32_t ss = io_.sector_size();
  const std::uint64_t block_sectors = blocks.bytes / ss, brick = grid().cell_bytes();
  for (std::uint32_t b = 0; b < blocks.per_cell; ++b) {
    if (!mask.has(b)) continue;
    std::byte* to = cell + blocks.first(b);
    layouts::for_each_block_piece(runs, b, std::uint32_t(block_sectors),
                                  [&](geom::Lbn lbn, std::uint32_t n, std::uint64_t into) {
                                    std::memcpy(to + into * ss, sectors.at(lbn), std::uint64_t(n) * ss);
                                  });
    if (!block_valid(linear, b, blocks.of({cell, brick}, b))) return false;
  }
  return true;
}

int ArrayState::gather_selection(const Selection& sel, const SectorBuffer& sectors, std::byte* out,
                                 std::uint64_t* bad_cell, bool partial_cells) const {
  CellGather gather(*this, sel, sectors, out, partial_cells);
  int failed = 0;
  std::uint64_t position = 0;
  layouts::for_each_touched_cell(gather.touched(), [&](std::span<const std::uint64_t> cc) {
    if (!failed) failed = gather.cell(cc, position, bad_cell);
    ++position;
  });
  return failed;
}

int ArrayState::read_cells(std::span<const std::uint64_t> cells, CellReads* reads, std::uint64_t* bad_cell,
                           std::uint64_t* bytes_read) {
  const CellGrid& g = grid();
  const std::uint32_t ss = io_.sector_size();
  const std::uint64_t brick = g.cell_bytes();
  struct Want {
    std::uint64_t slot;  // index into cells
    Run runs[2];
    std::size_t n;
  };
  std::vector<Want> wants;
  wants.reserve(cells.size());
  std::vector<std::uint64_t> cc(g.dims());
  for (std::uint64_t i = 0; i < cells.size(); ++i) {
    if (!may_hold_data(cells[i])) continue;
    coords_of(cells[i], cc.data());
    Want w{i, {}, 0};
    w.n = layout_->cell_runs(cc, w.runs);
    wants.push_back(w);
  }
  // Buffer slots in LBN order, so cells next to each other on the device are
  // one request. The slot after the last holds a zero cell.
  std::sort(wants.begin(), wants.end(), [](const Want& a, const Want& b) { return a.runs[0].lbn < b.runs[0].lbn; });
  const std::uint64_t need = (wants.size() + 1) * cell_storage_;
  if (reads->buffer.size() < need)
    reads->buffer = AlignedBuffer(std::max<std::uint64_t>(need, reads->buffer.size() * 5 / 4),
                                  AlignedBuffer::Uninitialized{});
  std::byte* buf = reads->buffer.data();
  std::byte* zero = buf + wants.size() * cell_storage_;
  reads->at.assign(cells.size(), zero);
  if (wants.size() < cells.size()) std::memset(zero, 0, brick);
  std::vector<SectorRun> runs;
  std::uint64_t total = 0;
  for (std::size_t k = 0; k < wants.size(); ++k) {
    std::byte* at = buf + k * cell_storage_;
    for (std::size_t j = 0; j < wants[k].n; ++j) {
      const Run& r = wants[k].runs[j];
      if (!runs.empty() && runs.back().lbn + runs.back().sectors == r.lbn &&
          runs.back().buffer + runs.back().sectors * ss == at)
        runs.back().sectors += r.sectors;
      else
        runs.push_back({r.lbn, r.sectors, at});
      at += std::uint64_t(r.sectors) * ss;
      total += r.sectors;
    }
  }
  if (int rc = io_.read(runs)) return rc;
  if (bytes_read) *bytes_read += total * ss;
  for (std::size_t k = 0; k < wants.size(); ++k) {
    const std::byte* cell = buf + k * cell_storage_;
    const std::uint64_t linear = cells[wants[k].slot];
    if (!cell_valid(linear, {cell, brick})) {
      *bad_cell = linear;
      return EIO;
    }
    reads->at[wants[k].slot] = cell;
  }
  return 0;
}

void ArrayState::element_location(std::span<const std::uint64_t> x, geom::Lbn* lbn, std::uint32_t* offset) const {
  std::vector<std::uint64_t> cc;
  std::uint64_t byte = layouts::byte_in_cell(grid(), x, &cc);
  const std::uint32_t ss = io_.sector_size();
  Run r[2];
  std::size_t k = layout_->cell_runs(cc, r);
  std::uint64_t sector = byte / ss;
  if (sector < r[0].sectors || k == 1) *lbn = r[0].lbn + sector;
  else *lbn = r[1].lbn + (sector - r[0].sectors);
  *offset = std::uint32_t(byte % ss);
}

}  // namespace mmfs::fs
