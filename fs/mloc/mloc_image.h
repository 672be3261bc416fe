// An mloc array's sealed image on the volume (layouts/mloc.h, paper 004):
// the directory, the per-(bin, chunk) position lists and the (bin, byte
// group, chunk) units in the priority's order, in extents of its own.
//
// Metadata records (docs/on-disk-format.md, "mloc"):
//   x/<ino>mmfs.mloc  the image's record: directory bytes, their checksum,
//                     image bytes
//   e/<ino>m          the image's extents
// An image is written whole to fresh extents and flushed before its record
// is committed; the image it replaces is freed with that commit. Images are
// never rewritten in place: writes go to a staging placement (fs/array/array_file.h)
// that the next seal encodes into a new image.
//
// Reads fetch only what they need: the units of the chunks a selection
// touches, of the byte groups a PLoD keeps, and (queries) of the bins a
// condition touches. Every stored piece is checksummed; a mismatch is EIO.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "fs/meta/allocator.h"
#include "fs/meta/metadata.h"
#include "fs/device/sector_io.h"
#include "indexes/binning.h"
#include "indexes/bitmap.h"
#include "layouts/cell_grid.h"
#include "layouts/io_plan.h"
#include "layouts/mloc_codec.h"
#include "layouts/mloc_directory.h"
#include "layouts/mloc_select.h"
#include "layouts/selection.h"

namespace mmfs::fs {

// What an mloc placement is made of (from the schema).
struct MlocParams {
  std::vector<std::uint64_t> shape;
  std::vector<std::uint64_t> chunk;  // empty: MlocGrid::default_chunk
  indexes::ValueType type = indexes::ValueType::F64;
  layouts::MlocPriority priority{layouts::MlocLevel::Value, layouts::MlocLevel::Precision,
                                 layouts::MlocLevel::Space};
  int zstd_level = 0;                // 0: no compression
  std::string bins;                  // user.mmfs.bins text
};

// Reads rows [row, row + rows) of dimension 0 (C-order bytes) into `out`.
using RowReader = std::function<int(std::uint64_t row, std::uint64_t rows, std::byte* out, std::string* message)>;

class MlocImage {
 public:
  ~MlocImage();
  MlocImage(const MlocImage&) = delete;
  MlocImage& operator=(const MlocImage&) = delete;
  // No image: every element reads as zero. EINVAL with a reason when the
  // chunk makes more units than an image may have.
  static int empty(const MlocParams& params, SectorIo& io, std::unique_ptr<MlocImage>* out, std::string* message);
  // The stored image of `ino` (nullptr in *out when it has none); `slot`:
  // of the array's mloc copy in that slot (keys::copy_mloc_record), 0 its own.
  // `own`: the image's extents as `io` addresses them, when that is not as
  // the store's extent map holds them (an image on a member set, whose map
  // is in the volume's LBNs: the caller checked they are the same sectors).
  static int load(Metadata& metadata, SectorIo& io, Ino ino, const MlocParams& params,
                  std::unique_ptr<MlocImage>* out, std::string* message, std::uint8_t slot = 0,
                  const std::vector<Extent>* own = nullptr);
  // Encodes the array `read` yields into a new image on fresh extents,
  // flushed; nothing is committed (stage() it). Two passes over the data:
  // the bins, then the units.
  static int encode(const MlocParams& params, const RowReader& read, SpaceSource& allocator, SectorIo& io,
                    std::unique_ptr<MlocImage>* out, std::string* message);

  bool holds_data() const { return dir_.has_value(); }
  const layouts::MlocGrid& grid() const { return *grid_; }
  // The chunks as a CellGrid (cell = chunk): how views are cut into pieces.
  const layouts::CellGrid& chunk_cells() const { return *cells_; }
  const std::vector<Extent>& extents() const { return extents_; }
  std::uint64_t device_bytes() const;
  const indexes::Binning* binning() const { return binning_ ? &*binning_ : nullptr; }

  // The selection's elements (C order) with the `keep` most significant
  // bytes of each read from the device (0: all); the rest of each element
  // is left for apply_plod. *bytes_read counts the device bytes. `once`:
  // no later read will want these chunks (a view read in one piece), so
  // chunks are decoded straight into `out`, selected elements only, and not
  // kept; otherwise whole chunks are decoded and kept for the next piece.
  int read_selection(const layouts::Selection& selection, std::uint32_t keep, std::byte* out,
                     std::uint64_t* bytes_read, std::string* message, bool once = false) const;
  // The sector of the element's most significant byte (an mloc element's
  // bytes lie in one unit per byte group) and its offset there. ENOTSUP
  // when the image is compressed (no byte has a sector of its own), EIO when
  // the chunk's positions fail their checksum. An empty image: ENODATA.
  int element_location(std::span<const std::uint64_t> coords, geom::Lbn* lbn, std::uint32_t* offset,
                       std::string* message) const;
  // Queries from the level structure (the paper's §III-D). How a condition's
  // keys meet each bin: Aligned (every key of the bin matches: its rows
  // come from the position lists alone), Edge (some do: the bin's elements
  // are read and checked), or untouched.
  enum class BinUse : std::uint8_t { None, Aligned, Edge };
  std::vector<BinUse> bin_uses(const indexes::KeySet& keys) const;
  // Adds to *rows the rows of the chunks `ranks` (all when empty) whose
  // values have `keys`, reading only the position lists of aligned bins and
  // the units of edge bins. Fewer than 2^32 elements.
  int match_rows(const indexes::KeySet& keys, const std::vector<std::uint64_t>& ranks, indexes::Bitmap* rows,
                 std::uint64_t* bytes_read, std::string* message) const;
  // A query's answer straight from the level structure, in row order: the
  // values of the elements that have `keys` from one read of the bins the
  // condition touches (match_rows then gather() would read an edge bin
  // twice and walk every slab twice), or their rows as little-endian u64
  // (coords) with no bitmap built. ENOTSUP: a slab too large for values.
  enum class MatchOutput : std::uint8_t { Values, Coords };
  int match_output(const indexes::KeySet& keys, MatchOutput output, std::string* out, std::uint64_t* bytes_read,
                   std::string* message) const;
  // The count the directory alone answers: every touched bin aligned.
  std::optional<std::uint64_t> aligned_count(const indexes::KeySet& keys) const;
  // The elements at `rows` (ascending), in that order, into `out`. The bins
  // in `hint` (when not empty) are searched first; a row found in none of
  // them is looked up in the other bins of its chunk, so the answer never
  // depends on the hint.
  int gather(const indexes::Bitmap& rows, const std::vector<bool>& hint, std::byte* out, std::uint64_t* bytes_read,
             std::string* message) const;
  // The chunks a box touches, by rank.
  std::vector<std::uint64_t> chunks_of(const layouts::Selection& box) const;

  // The device requests read_selection would issue.
  layouts::IoPlan plan(const layouts::Selection& selection, std::uint32_t keep, const geom::Geometry& geometry) const;

  // The record and extent map, for the batch that makes this image current
  // (`slot`: as the mloc copy in that slot; an empty image: no record, and a
  // copy's extent map empty).
  // `stored`: the extent map to record instead of extents() (an image on a
  // member set: the same sectors in the volume's LBNs).
  void stage(Ino ino, WriteBatch& batch, std::uint8_t slot = 0, const std::vector<Extent>* stored = nullptr) const;
  // Removal of any image record of `ino` (its extents go with `dropped`).
  static void stage_removal(Metadata& metadata, Ino ino, WriteBatch& batch, std::vector<Extent>* dropped,
                            std::uint8_t slot = 0);
  // Frees the extents (an image that was never committed).
  void release(SpaceSource& allocator);

  // A@/info: bins, chunks, units, and stored against raw bytes per byte group.
  nlohmann::json describe() const;

 private:
  explicit MlocImage(SectorIo& io);
  // A byte range of the image to fetch, and where it lands in the read buffer.
  struct Piece {
    std::uint64_t offset = 0, bytes = 0;
    std::size_t at = 0;
  };
  // Queries walk the array a slab at a time: the chunks of one chunk row of
  // dimension 0, whose rows are [first_row, end_row) of the array. Their
  // bitsets start at word_row, first_row rounded down to 2^16 (a bitmap
  // container), so that finished slabs become containers as they are.
  struct Slab {
    std::uint64_t first_row = 0, end_row = 0, word_row = 0;
    std::vector<std::uint64_t> ranks;  // the slab's chunks among those asked for, in the curve's order
  };
  // match_rows (rows) or match_output (values or coords, all chunks).
  int match(const indexes::KeySet& keys, const std::vector<std::uint64_t>& ranks, indexes::Bitmap* rows,
            std::string* values, std::string* coords, std::uint64_t* bytes_read, std::string* message) const;
  // Elements of an edge (bin, chunk) whose leading groups did not decide
  // the condition: their indices in the (bin, chunk) and brick positions.
  struct Undecided {
    std::uint32_t bin = 0;
    std::uint64_t rank = 0;
    std::vector<std::uint32_t> indices, positions;
  };
  // Reads the other groups of those (bin, chunk)s and adds the rows whose
  // whole element has `keys`.
  int settle_undecided(const indexes::KeySet& keys, const std::vector<Undecided>& open, indexes::Bitmap* rows,
                       std::uint64_t* bytes_read, std::string* message) const;
  // The slabs of `ranks` that hold any, by first row.
  std::vector<Slab> slabs_of(const std::vector<std::uint64_t>& ranks) const;
  // Batches of pieces, each read on a second thread while the batch before
  // it is consumed here. pieces_of(i) lists batch i's pieces and, in
  // *first, where each of its chunks' pieces start; consume(i) decodes them
  // from the buffer. The first error stops it. Every read of the image
  // (views, region queries, gathers) goes through here; its two buffers are
  // lent by MlocBrickCache between reads.
  using BatchPieces = std::function<void(std::size_t, std::vector<Piece>*, std::vector<std::size_t>*)>;
  using BatchConsumer = std::function<int(std::size_t, const std::vector<Piece>&, const std::vector<std::size_t>&,
                                          const AlignedBuffer&)>;
  int pipelined(std::size_t batches, const BatchPieces& pieces_of, const BatchConsumer& consume,
                std::uint64_t* bytes_read, std::string* message) const;
  // Reads the pieces (merging near ones) into *buffer (reused when it is
  // large enough); pieces[i].at is set.
  int fetch(std::vector<Piece>& pieces, AlignedBuffer* buffer, std::uint64_t* bytes_read,
            std::vector<geom::Request>* trace) const;
  // The requests the pieces (sorted) need, in sectors of the volume.
  void sector_runs(const std::vector<Piece>& pieces, std::vector<std::pair<geom::Lbn, std::uint64_t>>* runs,
                   std::vector<std::pair<std::uint64_t, std::uint64_t>>* spans) const;
  // The pieces holding chunk `rank`'s positions and its first `groups` groups.
  void chunk_pieces(std::uint64_t rank, std::uint32_t groups, std::vector<Piece>* out) const;
  // The pieces of position entry e (a bin in a chunk): its position list,
  // then its first `groups` units. Nothing, and false, when the chunk holds
  // no value of the bin.
  bool entry_pieces(std::uint64_t e, std::uint32_t groups, std::vector<Piece>* out) const;
  // The position list of (bin, rank), fetched as `piece`, checked and
  // decoded (EIO with a reason when it fails its checksum or does not decode).
  int positions_of(std::uint32_t bin, std::uint64_t rank, const Piece& piece, const AlignedBuffer& buffer,
                   std::vector<std::byte>* scratch, std::vector<std::uint32_t>* out, std::string* message) const;
  // Unit (bin, group, rank) of `count` elements, fetched as `piece`, checked:
  // *plane points at its raw bytes (in the buffer when stored raw, else in
  // *scratch, unpacked). EIO with a reason.
  int plane_of(std::uint32_t bin, std::uint32_t group, std::uint64_t rank, std::uint64_t count, const Piece& piece,
               const AlignedBuffer& buffer, std::vector<std::byte>* scratch, const std::byte** plane,
               std::string* message) const;
  // Decodes chunk `rank` from the fetched pieces (in chunk_pieces' order,
  // starting at `first`) into `brick`, or, with `targets` (placed at the
  // chunk), its selected elements into the selection's result `brick`.
  int decode_chunk(std::uint64_t rank, std::uint32_t groups, const std::vector<Piece>& pieces, std::size_t first,
                   const AlignedBuffer& buffer, std::byte* brick, std::string* message,
                   const layouts::MlocSelectionTargets* targets = nullptr) const;

  SectorIo& io_;
  const std::uint64_t cache_owner_;  // this image's bricks in MlocBrickCache
  // One read_selection at a time: the pieces of a sequential read (the
  // reader's and the prefetched ones) share chunks, and a piece that waits
  // here finds them decoded instead of decoding them again.
  mutable std::mutex read_mu_;
  std::optional<layouts::MlocGrid> grid_;
  std::optional<layouts::CellGrid> cells_;
  std::optional<layouts::MlocCatalog> dir_;  // absent for an empty image
  std::uint64_t header_hash_ = 0;            // of the directory's bytes (the record keeps it)
  std::optional<indexes::Binning> binning_;
  std::vector<Extent> extents_;
  // Gaps up to this are read through rather than split into two requests
  // (choose_merge_gap, once the directory is known).
  std::uint32_t merge_gap_sectors_ = 0;
  void choose_merge_gap();
};

// The MlocParams of a schema's fields (EINVAL with a reason when the
// priority or compression is malformed).
int mloc_params(std::vector<std::uint64_t> shape, std::string_view dtype, std::vector<std::uint64_t> chunk,
                std::string_view priority, std::string_view compress, std::string bins, MlocParams* out,
                std::string* message);

}  // namespace mmfs::fs
