// The directory of an mloc image (docs/on-disk-format.md, "mloc"): where
// every position list and unit (layouts/mloc_codec.h) lies and what it must
// hash to. Pure.
//
// An image: the directory, padded to a sector; the position lists in
// position-entry order (bins, then chunks along the curve); the units in the
// priority's order. Offsets are prefix sums of the stored sizes, so the
// directory holds sizes and checksums only.
//
// Two forms of the same tables:
// - MlocDirectory, dense: an entry for every (bin, chunk) and every unit.
//   What the encoder fills in and encode() writes.
// - MlocCatalog, sparse: the entries of the (bin, chunk)s a chunk holds
//   values of, read in place from a version 2 directory's bytes. What a
//   reader keeps. Building the dense tables on every cold open (7.4 MB for
//   a 2 GiB float64 array with 101 bins, 63 % of its (bin, chunk)s present)
//   took 5 ms of fresh pages and table walks; reading in place takes 1.6.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "layouts/mloc.h"

namespace mmfs::layouts {

struct MlocPositionEntry {
  std::uint32_t count = 0;   // elements of the bin in the chunk
  std::uint32_t raw = 0;     // serialised bitmap bytes
  std::uint32_t stored = 0;  // after packing
  std::uint32_t checksum = 0;  // of the stored bytes
};
struct MlocUnitEntry {
  std::uint32_t stored = 0;
  std::uint32_t checksum = 0;
};

// What a directory says before its tables: what the grid needs, and the
// bins (opaque here: the fs layer's binning).
struct MlocHeader {
  std::vector<std::uint64_t> shape, chunk;
  std::uint32_t itemsize = 0;
  bool float64 = false;
  MlocPriority priority{MlocLevel::Value, MlocLevel::Precision, MlocLevel::Space};
  std::uint32_t bins = 0;
  std::int32_t zstd_level = 0;  // 0: stored raw
  std::uint32_t value_type = 0;
  std::vector<std::uint64_t> bin_lower;

  MlocGrid grid() const { return MlocGrid(shape, itemsize, float64, chunk, bins, priority); }
};

// Where an image's pieces lie, in bytes from the image's start: the dense form.
struct MlocDirectory : MlocHeader {
  std::vector<MlocPositionEntry> positions;  // grid.position_entry order
  std::vector<MlocUnitEntry> units;          // grid.unit order

  // What encode() writes: 2, entries of the (bin, chunk)s that have any
  // (docs/on-disk-format.md); 1, both tables whole (images written before
  // version 2, which decode() still reads).
  std::uint32_t version = 2;

  // Fills the offsets below from the sizes; REQUIRES the sizes of `grid`.
  void locate(std::uint32_t sector_size);
  std::uint64_t header_bytes = 0;     // encode().size()
  std::uint64_t positions_start = 0;  // header, rounded up to a sector
  std::uint64_t data_start = 0;
  std::uint64_t image_bytes = 0;
  // Entry i's bytes, from the image's start.
  std::uint64_t position_offset(std::size_t i) const { return offset_of(positions, position_blocks, i); }
  std::uint64_t unit_offset(std::size_t i) const { return offset_of(units, unit_blocks, i); }
  // The offsets of every kOffsetBlock-th entry; an entry adds the sizes
  // before it in its block.
  static constexpr std::size_t kOffsetBlock = 64;
  std::vector<std::uint64_t> position_blocks, unit_blocks;

  std::string encode() const;
  std::uint64_t encoded_bytes() const;  // encode().size()
  // Per position entry: whether version 2 stores it and its units (any of
  // them not zero).
  std::vector<bool> present() const;
  // nullopt when malformed (sizes that disagree with the grid included).
  static std::optional<MlocDirectory> decode(std::string_view bytes, std::uint32_t sector_size);

 private:
  // locate() for a header whose size is known (decode: the bytes it read).
  void locate(std::uint32_t sector_size, std::uint64_t header);
  // Whether encode() writes version 1: asked to, or tables the grid does
  // not describe (written whole so that decode() can refuse them).
  bool dense_tables() const;
  template <class Entry>
  static std::uint64_t offset_of(const std::vector<Entry>& entries, const std::vector<std::uint64_t>& blocks,
                                 std::size_t i) {
    std::uint64_t at = blocks[i / kOffsetBlock];
    for (std::size_t k = i - i % kOffsetBlock; k < i; ++k) at += entries[k].stored;
    return at;
  }
};

// The sparse form, for readers: a version 2 directory's bytes read in
// place. Entries are looked up by position entry e = grid.position_entry(bin,
// chunk) and byte group; a (bin, chunk) the directory leaves out reads as
// all zero (no elements, nothing stored). Offsets come from a prefix sum per
// kOffsetBlock entries, as in MlocDirectory.
class MlocCatalog {
 public:
  // The same checks as MlocDirectory::decode (nullopt exactly when it
  // refuses the bytes). `bytes` are read in place while `keep` lives; with
  // no `keep` the catalog keeps a copy. A version 1 directory is read
  // through MlocDirectory and re-encoded (its pieces stay where they are).
  static std::optional<MlocCatalog> decode(std::string_view bytes, std::uint32_t sector_size,
                                           std::shared_ptr<const void> keep = nullptr);
  // A located directory's entries (through its version 2 bytes).
  static MlocCatalog of(const MlocDirectory& d);

  const MlocHeader& header() const { return head_; }
  const MlocGrid& grid() const { return *grid_; }
  std::uint64_t header_bytes() const { return header_bytes_; }
  std::uint64_t positions_start() const { return positions_start_; }
  std::uint64_t data_start() const { return data_start_; }
  std::uint64_t image_bytes() const { return image_bytes_; }

  bool present(std::uint64_t e) const { return slot(e) != kAbsent; }
  MlocPositionEntry position(std::uint64_t e) const {
    const std::uint64_t s = slot(e);
    return s == kAbsent ? MlocPositionEntry{} : position_at(s);
  }
  MlocUnitEntry unit(std::uint64_t e, std::uint32_t group) const {
    const std::uint64_t s = slot(e);
    return s == kAbsent ? MlocUnitEntry{} : unit_at(table_index(e, s, group));
  }
  // Where the pieces lie, from the image's start; REQUIRE present(e).
  std::uint64_t position_offset(std::uint64_t e) const;
  std::uint64_t unit_offset(std::uint64_t e, std::uint32_t group) const;

  // Elements of bin b in the whole array.
  std::uint64_t bin_elements(std::uint32_t b) const { return bin_elements_[b]; }
  // Position lists stored (entries with elements), and their bytes.
  std::uint64_t lists() const { return lists_; }
  std::uint64_t positions_stored() const { return data_start_ - positions_start_; }
  std::uint64_t positions_raw() const { return positions_raw_; }
  // Stored bytes of every unit of byte group k.
  std::uint64_t group_stored(std::uint32_t k) const { return group_stored_[k]; }

 private:
  static constexpr std::uint64_t kAbsent = ~std::uint64_t(0);
  static constexpr std::size_t kOffsetBlock = MlocDirectory::kOffsetBlock;
  MlocCatalog() = default;
  // The entry's index among the present ones: a rank in the presence bits.
  std::uint64_t slot(std::uint64_t e) const {
    const std::uint64_t w = bits_[e / 64], bit = std::uint64_t(1) << (e % 64);
    if (!(w & bit)) return kAbsent;
    return before_[e / 64] + std::uint64_t(std::popcount(w & (bit - 1)));
  }
  MlocPositionEntry position_at(std::uint64_t s) const {
    MlocPositionEntry p;
    std::memcpy(&p, positions_ + s * sizeof p, sizeof p);
    return p;
  }
  MlocUnitEntry unit_at(std::uint64_t i) const {
    MlocUnitEntry u;
    std::memcpy(&u, units_ + i * sizeof u, sizeof u);
    return u;
  }
  // Where unit (slot s of entry e, group k) is in the unit table: the unit
  // order of the priority, present (bin, chunk)s only.
  std::uint64_t table_index(std::uint64_t e, std::uint64_t s, std::uint32_t k) const;
  // A version 2 directory's bytes, its pieces placed from positions_start.
  static std::optional<MlocCatalog> from_v2(std::string_view bytes, std::shared_ptr<const void> keep,
                                            std::uint64_t positions_start, std::uint64_t header_bytes);
  // Reads and checks the tables (positions_, units_ set); false when malformed.
  bool read_tables(std::uint64_t positions_start, std::uint64_t header_bytes);

  std::shared_ptr<const void> keep_;
  MlocHeader head_;
  std::optional<MlocGrid> grid_;
  std::uint32_t groups_ = 0;
  int precision_level_ = 0;  // where the priority puts M: 0 outermost .. 2 innermost
  bool bins_first_ = true;   // V before S in the priority
  std::uint64_t present_ = 0;
  std::vector<std::uint64_t> bits_;    // presence, one bit per position entry
  std::vector<std::uint64_t> before_;  // present entries before each word of bits_
  // Slots in the order the priority gives bins and chunks (empty: slot
  // order, bins first), and where each bin's or chunk's run starts in it.
  std::vector<std::uint32_t> order_of_slot_;
  std::vector<std::uint64_t> run_start_;
  const char* positions_ = nullptr;  // present position entries, slot order
  const char* units_ = nullptr;      // present unit entries, unit order
  std::vector<std::uint64_t> position_blocks_, unit_blocks_;
  std::vector<std::uint64_t> bin_elements_, group_stored_;
  std::uint64_t lists_ = 0, positions_raw_ = 0;
  std::uint64_t header_bytes_ = 0, positions_start_ = 0, data_start_ = 0, image_bytes_ = 0;
};

}  // namespace mmfs::layouts
