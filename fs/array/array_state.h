// One placement of an array's cells: grid, layout (with its extents), the
// per-cell checksums and the dirty-cell cache. The write path scatters C-order
// bytes into cells here and writes them back in LBN order; the read path
// executes a selection's IoPlan and gathers the cells into C-order bytes.
// A relayout builds a second ArrayState beside the current one, so both paths
// also serve the copy.
//
// Cells are rewritten in place, so a crash between a cell's new bytes and its
// new checksum must not make it unreadable: before rewriting, write_back()
// makes the new checksum durable as an *alternative* (table 'a'); a cell then
// reads as valid when it matches its checksum or its alternative, and the
// alternative is dropped when the new checksum commits.
//
// Not thread-safe: ArrayFile serialises access.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <roaring/roaring.hh>

#include "fs/meta/cell_checksums.h"
#include "fs/device/sector_io.h"
#include "layouts/cell_blocks.h"
#include "layouts/io_plan.h"
#include "layouts/layout.h"
#include "layouts/selection.h"

namespace mmfs::fs {

class MemberSetSite;

// The one-line reason of a cell that failed its checksum.
std::string bad_cell_message(std::uint64_t cell);

// The sectors of an IoPlan in one buffer, sorted by LBN: read them (all at
// once, or batch by batch), then find any sector of the plan by its LBN.
// Several arrays' plans combined (layouts::combine_plans) share one, so a
// table's record range reads in the combined plan's batches.
class SectorBuffer {
 public:
  // With `scratch`, its memory holds the sectors (grown when too small) and
  // stays the caller's: a loop of reads reuses one buffer, which O_DIRECT
  // reads into fresh memory would otherwise fault in (and the kernel zero)
  // page by page every time.
  SectorBuffer(const layouts::IoPlan& plan, std::uint32_t sector_size, AlignedBuffer* scratch = nullptr);
  // Every request of the plan, in LBN order, each with its place in the buffer.
  std::vector<SectorRun> runs();
  // The requests of one batch of the plan (REQUIRES: a batch of it).
  std::vector<SectorRun> runs_of(const layouts::IoBatch& batch);
  std::uint64_t sectors() const { return sectors_; }
  // The bytes of `lbn` (REQUIRES: a sector of the plan).
  const std::byte* at(geom::Lbn lbn) const;
  // Appends to *out the index in runs() of each request holding a sector of
  // [lbn, lbn + count) (REQUIRES: sectors of the plan).
  void runs_holding(geom::Lbn lbn, std::uint64_t count, std::vector<std::uint32_t>* out) const;

 private:
  struct Placed {
    geom::Lbn lbn;
    std::uint64_t sectors;
    std::uint64_t offset;  // bytes into buffer_
  };
  std::uint32_t sector_size_;
  std::vector<Placed> placed_;
  AlignedBuffer buffer_;  // unless the caller's scratch holds them
  std::byte* data_ = nullptr;
  std::uint64_t sectors_ = 0;
};

class ArrayState {
 public:
  // `site`: the member set the placement lies on (fs/array/member_sets.h):
  // the layout and `io` then work in the set's LBNs. Null: the whole volume.
  ArrayState(std::unique_ptr<layouts::Layout> layout, CellChecksums sums, CellChecksums alternatives, SectorIo& io,
             MemberSetSite* site = nullptr);

  MemberSetSite* site() const { return site_; }
  // The layout's extents as the volume's LBNs (what the store records and
  // the volume's free map gets back).
  std::vector<layouts::Extent> volume_extents() const;
  // Stages the placement's extent map into `batch`: the primary's
  // (slot 0) or a copy's, and the set record beside it (member_sets.h).
  void stage_extents(std::uint64_t ino, std::uint8_t slot, WriteBatch& batch) const;

  const layouts::Layout& layout() const { return *layout_; }
  const layouts::CellGrid& grid() const { return layout_->grid(); }
  CellChecksums& sums() { return sums_; }
  CellChecksums& alternatives() { return alt_; }
  std::uint64_t bytes() const { return grid().elements() * grid().itemsize(); }
  std::uint64_t dirty_bytes() const { return dirty_.size() * cell_storage_; }
  // Memory of one dirty cell (its sectors).
  std::uint64_t cell_storage() const { return cell_storage_; }
  bool has_dirty() const { return !dirty_.empty(); }
  // True when any cell holds data (written back or dirty).
  bool holds_data() const;

  // Scatters `length` C-order bytes at byte `offset` of the array into the
  // dirty cache. REQUIRES offset + length <= bytes().
  void write_bytes(std::uint64_t offset, const std::byte* data, std::size_t length);
  // Writes every dirty cell to its sectors (reading the cells first whose
  // bytes were only partly written and which hold data) and records their
  // checksums in sums() (not staged). Before the first byte is written,
  // `make_durable` (unless null: a placement nothing points at yet) receives
  // the alternatives to commit durably. 0, or an errno with *bad_cell set for
  // EIO from a checksum mismatch.
  // `complete_only`: write back only the cells whose every byte was written
  // (the others stay dirty), so a sequential writer whose cells span more
  // than the dirty limit never writes a cell twice nor reads it back.
  int write_back(std::uint64_t* bad_cell, const std::function<int(WriteBatch&)>& make_durable,
                 bool complete_only = false);
  // Bytes of dirty cells not yet fully written.
  std::uint64_t incomplete_dirty_bytes() const { return (dirty_.size() - full_dirty_) * cell_storage_; }
  // The bytes the dirty cells hold that writes gave them (or a write-back
  // that failed read back beside them), as runs of the array's C-order
  // bytes: visit(offset, data, length), cells in increasing linear order.
  // Writing each into another placement of the same array (write_bytes)
  // carries what this one has not written back over to it.
  void for_each_dirty_run(const std::function<void(std::uint64_t, const std::byte*, std::size_t)>& visit) const;
  // Drops the dirty cache and marks every cell unwritten (reads as zeros),
  // none lost.
  void clear();

  // Cells lost with a failed member (docs/copies-on-members.md, "Cells lost
  // with a member"): a copy promoted over a primary on a lost member had not
  // caught up on them, so what it holds for them is older than the array's
  // bytes, and their bytes exist nowhere else. A lost cell reads as damage
  // (EIO, failure_message says why) until a write gives it whole: its
  // write-back then takes it out of the set. A dirty lost cell written only
  // in part cannot be written back (the bytes not written are gone): the
  // write-back drops it and reports it (take_dropped_lost), as a device
  // would report a write it could not make.
  // The set as recorded (nothing to stage). REQUIRES: cells < 2^32.
  void set_lost(Roaring cells);
  const Roaring& lost() const { return lost_; }
  bool is_lost(std::uint64_t cell) const {
    return !lost_.isEmpty() && cell <= UINT32_MAX && lost_.contains(std::uint32_t(cell));
  }
  // Stages the record of the lost cells (keys::lost_cells of `ino`) if the
  // set changed since it was last staged: with the checksums of the cells
  // written back, so a cell is never found again lost nor whole too early.
  void stage_lost(std::uint64_t ino, WriteBatch& batch);
  // The lost cells written only in part that write-backs dropped since the
  // last call, in increasing order.
  std::vector<std::uint64_t> take_dropped_lost();
  // Why cell `cell` did not read: lost, or failed its checksum.
  std::string failure_message(std::uint64_t cell) const;
  // A crash during write_back can tear a cell that spans several device
  // blocks: each block then holds its old or its new bytes, and the cell
  // matches neither its checksum nor its alternative. That is what a crash
  // may leave of bytes written but not yet synced (ext4 leaves the same), so
  // such a cell is accepted as it is: its checksum becomes that of its
  // contents and the alternative is dropped (both in sums()/alternatives(),
  // not staged: the next load settles them again until a flush commits
  // them). Only cells with an alternative, i.e. mid-rewrite at the crash, are
  // considered; a mismatch anywhere else stays damage (EIO).
  // *settled counts the cells accepted so. A cell the device cannot read (a
  // lost member) keeps its alternative: it is settled at a later load.
  int settle_torn_rewrites(std::uint64_t* settled);

  // Reads the selection into `out` (selection.elements() * itemsize bytes, C
  // order of the selection), executing the layout's IoPlan. Dirty cells must
  // have been written back. EIO with *bad_cell on a checksum mismatch.
  // `device_done`, when given, runs once every device read has completed,
  // before the cells are verified and gathered (a sequential reader starts
  // the next chunk's reads there, keeping the device busy). `all_bad`, when
  // given, receives every cell that fails its checksum, in increasing order,
  // rather than the read stopping at the first (a repair mends them all
  // after one read); *bad_cell is then the first of them.
  int read_selection(const layouts::Selection& selection, std::byte* out, std::uint64_t* bad_cell,
                     const std::function<void()>& device_done = {}, std::uint64_t* bytes_read = nullptr,
                     AlignedBuffer* scratch = nullptr, std::vector<std::uint64_t>* all_bad = nullptr);
  // The selection's cells from sectors already read (a plan that includes
  // plan_selection's for it), verified and gathered as read_selection does.
  // `partial_cells`: the plan read only the blocks of cells that hold the
  // selection (IoPlan partial_cells).
  int gather_selection(const layouts::Selection& selection, const SectorBuffer& sectors, std::byte* out,
                       std::uint64_t* bad_cell, bool partial_cells = false) const;
  // The plan read_selection executes (A@/plan shows it): whole cells, or
  // only the checksum blocks holding the selection when the volume's model
  // serves that faster.
  // `runs`: where to keep the touched cells' runs for the read that follows.
  layouts::IoPlan plan(const layouts::Selection& selection, layouts::TouchedRuns* runs = nullptr) const;
  // Whole cells read for a caller that uses them where they landed. The
  // buffer is kept from one call to the next: a query reading tens of MiB of
  // cells in batches faults its pages in once, and nothing is copied.
  struct CellReads {
    AlignedBuffer buffer;
    std::vector<const std::byte*> at;  // per requested cell: its C-order brick
  };
  // Reads whole cells (linear ids, ascending, unique) in one device batch:
  // the cells of the scattered rows a query needs. reads->at[i] is then cell
  // i's brick of cell_bytes(), valid until the next call with `reads`. Cells
  // that never held data read as zeros. *bytes_read counts the device bytes.
  // EIO with *bad_cell on a mismatch.
  int read_cells(std::span<const std::uint64_t> cells, CellReads* reads, std::uint64_t* bad_cell,
                 std::uint64_t* bytes_read);
  // Results of at least this many bytes are gathered with streamed stores
  // (more than a core's L2: they would only evict the cells being gathered).
  static constexpr std::uint64_t kStreamedResultBytes = 4ull << 20;

  // The sector and byte offset inside it of element `coords`.
  void element_location(std::span<const std::uint64_t> coords, geom::Lbn* lbn, std::uint32_t* offset) const;

 private:
  class CellGather;
  // Reads the stored bytes of `cells` (cell_storage_ each, unverified) into *out.
  int read_stored_cells(std::span<const std::uint64_t> cells, AlignedBuffer* out) const;
  struct DirtyCell {
    std::vector<std::byte> data;        // the cell's sectors (brick in C order, then padding)
    std::vector<std::uint64_t> written;  // one bit per byte of the brick; empty when full
    std::uint64_t known = 0;             // distinct bytes written
    std::uint64_t need = 0;              // bytes of the brick inside the array
    bool full = false;                   // every byte inside the array was written
    bool complete = false;               // every byte is known (full, or a cell that never held
                                         // data: zeros): no read before write-back
    bool zeroed = true;                  // bytes not written hold zeros (false: a reused buffer's
                                         // old bytes, cleared at write-back)
  };
  // Sets the bytes of `dc` not written from `old` (a stored cell), or to zeros.
  void fill_unwritten(DirtyCell& dc, const std::byte* old) const;
  // (A lost cell may: it is verified, and fails, rather than read as zeros.)
  bool may_hold_data(std::uint64_t cell) const { return sums_.any(cell) || alt_.any(cell) || is_lost(cell); }
  bool cell_valid(std::uint64_t cell, std::span<const std::byte> contents) const;
  bool block_valid(std::uint64_t cell, std::uint32_t block, std::span<const std::byte> part) const;
  // Copies the blocks of `mask` of cell `linear` (stored in `runs`) from
  // `sectors` to their places in `cell` (a brick) and verifies each; false
  // on a mismatch.
  bool assemble_blocks(std::uint64_t linear, std::span<const layouts::Run> runs, const layouts::BlockMask& mask,
                       const SectorBuffer& sectors, std::byte* cell) const;
  DirtyCell& dirty_cell(std::uint64_t linear, std::span<const std::uint64_t> cell_coords);
  std::uint64_t in_array_bytes(std::span<const std::uint64_t> cell_coords) const;
  void coords_of(std::uint64_t linear, std::uint64_t* coords) const;

  std::unique_ptr<layouts::Layout> layout_;
  MemberSetSite* site_ = nullptr;
  CellChecksums sums_;
  CellChecksums alt_;
  SectorIo& io_;
  std::uint64_t cell_storage_;  // sectors_per_cell * sector_size
  std::unordered_map<std::uint64_t, DirtyCell> dirty_;
  // Buffers of written-back cells, reused by the next dirty cells: a
  // streaming writer turns over every cell of the array, and allocating and
  // freeing its buffers cost more CPU than filling them (12 % of the daemon
  // on a 1 GiB ingest of 8 KiB cells).
  // At most the dirty limit's worth: dirty and spare cells together never
  // hold more than the most the dirty cells ever held.
  static constexpr std::uint64_t kSpareBytes = 64ull << 20;
  std::vector<DirtyCell> spare_;
  AlignedBuffer staging_;  // write_back's, kept with the spares
  std::uint64_t full_dirty_ = 0;  // entries of dirty_ that are full
  Roaring lost_;
  bool lost_changed_ = false;  // since the last stage_lost
  std::vector<std::uint64_t> dropped_lost_;
};

}  // namespace mmfs::fs
