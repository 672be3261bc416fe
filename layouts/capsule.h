// The capsule layout of the MEMS paper (Schlosser et al., CMU-CS-03-125,
// §5.2.2-§5.2.4): two-dimensional data (a table of records, a matrix) placed
// so that both a whole record and a whole attribute (column) read at the
// device's full parallelism.
//
// A capsule holds `records` records of every attribute; attribute i fills
// blocks[i] sectors of it (CapsuleResolve). The c = sum(blocks) sectors of a
// capsule lie in one equivalence class, so a record is one parallel access;
// the same block of consecutive capsules lies on sequential LBNs of one
// track, so an attribute streams with all p tips.
//
// Placement (CapsuleAlloc): capsules are allocated in bands of c consecutive
// tracks. The capsule in slot s of a band is anchored at the s-th LBN of the
// band's first track; its block b is the member of the anchor's equivalence
// class on the band's track b that sits in the anchor's square column (the
// paper's "offset into E by a multiple of p"). When track b lies outside the
// class (the band crosses into the next cylinder and micropositioning does not
// reach it), the capsule is split: its remaining blocks take the LBN at offset
// s of the first such track as a new anchor and continue in that class (two
// parallel accesses, the second physically after the first; the paper allows
// and counts such capsules). Both routines ask the geometry only for
// equivalent() and track_boundaries() (the paper's get_equivalent and
// get_boundaries); the layout precomputes from them, once per band, the
// points where its capsules split and then places cells by the MEMStore's
// position arithmetic, which the unit tests prove equal to capsule_alloc.
//
// A volume of P > 1 striped MEMStores (geometry/striped.h: volume track t is
// member track t / P of member t mod P; p stays one member's tips). An
// equivalence class lives on one member, so a capsule must stay on one
// member; and an attribute should stream from all P members at once. A band
// therefore becomes a band GROUP of c·P consecutive volume tracks starting
// at a multiple of P (the same member tracks m0..m0+c-1 on every member): P
// member bands side by side. It holds P·T capsules; slot s is the member
// band of member s / T, its slot s mod T there, placed by the member's own
// capsule arithmetic and mapped to the volume by StripedGeometry::volume_lbn.
// Block b of the group's capsules is thus the P consecutive volume tracks
// g0 + b·P .. g0 + b·P + P-1 (member k's track m0 + b for capsules
// [k·T, (k+1)·T)): P·T sequential VLBNs, one whole track on every member, so
// an attribute streams with every member's tips while a record stays one
// parallel access of one member; a part owning blocks [f, f+n) of each band
// owns ONE run of n·P tracks per group. "Track" in the band arithmetic (the
// extents, band_part_extents) reads "P tracks"; capsules_per_band() is P·T.
// With P = 1 (or a plain MemStore) every placement is the single device's.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "geometry/memstore.h"
#include "geometry/striped.h"
#include "layouts/layout.h"
#include "util/align.h"

namespace mmfs::layouts {

// CapsuleResolve (§5.2.3): records per capsule and sectors per attribute.
struct CapsuleFormat {
  std::uint64_t records = 0;             // records per capsule
  std::vector<std::uint32_t> blocks;     // sectors of each attribute per capsule
  std::vector<std::uint32_t> first;      // first block of each attribute in the capsule
  std::uint32_t total = 0;               // c: sectors per capsule
  // Records of attribute i per sector (records / blocks[i]): the cell of its array.
  std::uint64_t records_per_block(std::size_t i) const { return records / blocks[i]; }
  // Bytes of records stored per byte of capsule (<= 1).
  double density(std::span<const std::uint32_t> record_bytes, std::uint32_t sector_size) const;
};

// Chooses the capsule for attributes of `record_bytes` bytes each: every
// attribute's records of a capsule fill whole sectors evenly (blocks[i]
// divides records, records/blocks[i] of them fit a sector), and among the
// capsules of at most `parallelism` sectors (one parallel access) the one that
// stores the most record bytes per sector, the fewer sectors on a tie. When
// even one sector per attribute exceeds `parallelism`, each attribute gets one
// sector holding as many records as the widest attribute allows. Throws
// std::invalid_argument for no attributes, a zero size, or a record larger
// than a sector.
CapsuleFormat capsule_resolve(std::span<const std::uint32_t> record_bytes, std::uint32_t sector_size,
                              std::uint32_t parallelism);

// The capsule of exactly `records` records (each attribute's records spread
// evenly over the fewest sectors), e.g. to reproduce the paper's 60-record
// capsules. Throws std::invalid_argument as capsule_resolve does.
CapsuleFormat capsule_with_records(std::span<const std::uint32_t> record_bytes, std::uint32_t sector_size,
                                   std::uint64_t records);

// CapsuleAlloc (§5.2.3) for the capsule in `slot` of the band of `blocks`
// tracks starting at `band_start` (a track's first LBN): the LBN of each
// block, from equivalent() and track_boundaries() only. `splits`, when
// given, receives the blocks that start a new class (empty when the capsule
// lies in one class).
std::vector<Lbn> capsule_alloc(const geom::Geometry& geometry, Lbn band_start, std::uint32_t blocks,
                               std::uint64_t slot, std::vector<std::uint32_t>* splits = nullptr);

// Which blocks of each capsule an array owns. A matrix (or any array given
// layout=capsule) owns whole capsules: dim 0 indexes records, every other
// grid coordinate is an attribute of one sector (cell[0] records of cell[1:]
// columns). An attribute of a table owns `cells_per_capsule` blocks from
// `first_block` of capsules `capsule_blocks` long, shared with the other
// attributes of its table.
struct CapsulePart {
  std::uint32_t capsule_blocks = 0;  // c (0: the array's own capsules, c = its attributes)
  std::uint32_t first_block = 0;
  std::uint32_t cells_per_capsule = 1;  // along dim 0
};

// The extents of whole bands (`band_sectors` each) in `extents`, one per
// band: an allocator may hand adjacent bands back joined.
std::vector<Extent> split_into_bands(std::span<const Extent> extents, std::uint64_t band_sectors);
// What CapsuleLayout::place() takes for `part` of a table placed in `bands`
// (whole bands, each block of them `block_sectors` long: a track, or P tracks
// on a striped volume, i.e. CapsuleLayout::capsules_per_band()): the part's
// blocks [first_block, first_block + cells_per_capsule) of every band. For a
// part of several attributes per capsule (a matrix of its own), pass the
// owned block count as cells_per_capsule.
std::vector<Extent> band_part_extents(std::span<const Extent> bands, std::uint64_t block_sectors,
                                      const CapsulePart& part);

class CapsuleLayout final : public Layout {
 public:
  // Throws std::invalid_argument when the geometry is neither a MEMStore nor
  // a striped volume of MEMStores, a cell is larger than one sector, or the
  // part does not fit the grid.
  CapsuleLayout(const geom::Geometry& geometry, CellGrid grid, CapsulePart part = {});

  std::string name() const override { return "capsule"; }
  // Bands: groups of `capsule_blocks` whole tracks, times P from a multiple
  // of P on a striped volume (the whole band even when this array owns part
  // of it; a table hands each attribute its blocks).
  SpaceRequest space() const override;
  // Takes one extent per band: the blocks of the band this array owns
  // ([first_block, first_block + owned) of the band's blocks, each
  // capsules_per_band() sectors).
  void place(std::vector<Extent> extents) override;
  std::size_t cell_runs(std::span<const std::uint64_t> cell, Run out[2]) const override;
  nlohmann::json describe() const override;

  const CapsulePart& part() const { return part_; }
  std::uint32_t owned_blocks() const { return owned_; }
  std::uint64_t attributes() const { return attributes_; }
  std::uint64_t capsules() const { return capsules_; }
  // P·T capsules a band (group); also the sectors of one block of a band.
  std::uint64_t capsules_per_band() const { return band_capsules_; }
  std::uint64_t band_sectors() const { return std::uint64_t(part_.capsule_blocks) * band_capsules_; }
  std::uint64_t bands() const { return util::div_up(capsules_, band_capsules_); }
  // P: the striped volume's members (1 on one device).
  std::uint32_t members() const { return members_; }
  // Capsules whose blocks lie in two equivalence classes (or more).
  std::uint64_t split_capsules() const { return split_; }

  // The capsule and block (within the whole capsule) of a cell.
  void locate(std::span<const std::uint64_t> cell, std::uint64_t* capsule, std::uint32_t* block) const;
  // The LBN of `block` of `capsule` (REQUIRES place()).
  Lbn block_lbn(std::uint64_t capsule, std::uint32_t block) const;

  // The default cell of an array given layout=capsule: one sector of records
  // of one column (sector / itemsize along dim 0, 1 elsewhere), so that every
  // column is an attribute.
  static std::vector<std::uint64_t> default_cell(std::span<const std::uint64_t> shape, std::uint32_t itemsize,
                                                 std::uint32_t sector_size);

 private:
  // The device the capsule arithmetic runs on: the volume's MemStore, or the
  // member of a striped volume (`striped_`, whose volume_lbn() maps back).
  const geom::MemStore& mems_;
  const geom::StripedGeometry* striped_ = nullptr;
  std::uint32_t members_ = 1;
  CapsulePart part_;
  std::uint32_t owned_ = 0;
  std::uint64_t attributes_ = 1;
  std::uint64_t capsules_ = 0;
  std::uint64_t track_ = 0;          // T: sectors per (member) track = capsules per member band
  std::uint64_t band_capsules_ = 0;  // P·T
  std::uint64_t split_ = 0;
  // Per band: the band's first LBN (on a striped volume the member LBN, the
  // same on every member) and the blocks where its capsules change class
  // (ascending, each > 0; the same for every member band of a group).
  struct Band {
    Lbn start = 0;
    std::vector<std::uint32_t> splits;
  };
  std::vector<Band> bands_;
  // The device LBN of `block` of the capsule in `slot` (< T) of a band.
  Lbn member_block_lbn(const Band& band, std::uint64_t slot, std::uint32_t block) const;
};

}  // namespace mmfs::layouts
