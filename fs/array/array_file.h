// An array file (docs/reference.md §4): its schema, its current placement (fs/array/placement.h), the
// write path with its dirty-cell cache, the chunked read path behind the file
// and every data view, schema changes with relayout, and the views' metadata
// (info, lbn, plan). Thread-safe: reads share the placement, writes and schema
// changes take it exclusively.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include <roaring/roaring.hh>

#include "fs/array/array_index.h"
#include "fs/array/array_schema.h"
#include "fs/array/array_state.h"
#include "fs/array/chunk_reader.h"
#include "fs/array/copy_promotion.h"
#include "fs/array/member_sets.h"
#include "fs/array/placement.h"
#include "fs/meta/metadata.h"
#include "fs/mloc/mloc_image.h"
#include "fs/file/plain_file.h"
#include "fs/device/sector_io.h"
#include "fs/array/view_types.h"
#include "fs/array/write_behind.h"
#include "layouts/io_plan.h"
#include "layouts/regrid.h"

namespace mmfs::layouts {
class SelectionChunks;
}

namespace mmfs::fs {

// What an array needs of the mounted volume.
struct ArrayContext {
  Metadata& metadata;
  Allocator& allocator;
  SectorIo& io;
  const geom::Geometry& geometry;
  std::string geometry_name;
  // Reads of the file and of views are served from chunks of about this many
  // bytes: large enough that a chunk's requests stream, small enough to
  // cache a few (tests use small ones to exercise many chunks).
  std::uint64_t chunk_bytes = 32ull << 20;
  // A view may be read in chunks of up to this many times chunk_bytes, when
  // the model reads them cheaper per byte (ArrayFile::chunk_bytes_locked).
  std::uint64_t max_chunk_scale = 4;
  // Called after a cell that failed its checksum was served from another
  // copy and rewritten in place from it (the daemon counts it and writes
  // `message` to .mmfs/errors); may be empty.
  std::function<void(Ino ino, const std::string& message)> on_healed = nullptr;
  // Called after a bitmap index that a query or the scrub met broken was
  // built anew from the data (heal_index); may be empty.
  std::function<void(Ino ino, const std::string& message)> on_index_healed = nullptr;
  // Called after a piece of a view that a device error kept from one
  // placement (a lost member, an unreadable sector), or a piece of another
  // read (a query's scan, an index build, a relayout) that a bad cell or a
  // device error kept from one, was served from another copy; may be empty.
  std::function<void(Ino ino, const std::string& message)> on_served_around = nullptr;
  // The volume's member sets (fs/array/member_sets.h): on a volume of
  // several devices, an array's copies each lie on their own. Null: every
  // placement lies on the whole volume (a placement recorded on a set then
  // does not open).
  MemberSets* member_sets = nullptr;
  // A read-write mount of a volume running without members (-o degraded):
  // which are lost. Set, an array whose primary lies on a lost member
  // has a current copy on survivors promoted at its open
  // (fs/array/copy_promotion.h), and the copies' background catch-up
  // passes over copies on lost members. Null: no member is lost.
  MemberLost member_lost = nullptr;
  // Called after such a promotion (the daemon counts it and writes
  // `message` to .mmfs/errors); may be empty.
  std::function<void(Ino ino, const std::string& message)> on_promoted = nullptr;
  // A read-only mount: nothing derived (an index) is built anew on reads.
  bool read_only = false;
};

// The rows (C-order linear indices) of a box of an array of `shape`.
indexes::Bitmap selection_rows(const layouts::Selection& box, std::span<const std::uint64_t> shape);

// What a query spent on one array.
struct QueryCost {
  std::uint64_t index_bytes = 0;   // bitmaps the query needs (the plan's bytes)
  std::uint64_t index_read_bytes = 0;  // of which read from the device (not cached)
  std::uint64_t data_bytes = 0;    // cells read from the device
  std::uint64_t requests = 0;      // device requests for the index
  bool scanned = false;            // answered by a scan of the data (no index)
  std::vector<geom::Request> index_trace;  // the index's device requests
};

// An extra copy of an array (user.mmfs.copies, fs/array/array_file_copies.cc):
// the same elements in another placement, kept in step with the primary.
struct ArrayCopy {
  CopySpec spec;
  ArraySchema schema;  // as placed (copy_schema with the volume's checksum block)
  std::unique_ptr<Placement> placement;
  // The copy's cells whose bytes lag the primary's: never read until caught
  // up. The store's record (keys::copy_record) holds at least these once the
  // primary's write-back that made them lag is durable.
  Roaring behind;
  // The cells of `behind` that may lag bytes the primary has written back
  // (which its device alone then holds); the others lag only bytes the
  // primary's dirty cells hold, so writing those into this copy makes it
  // whole (ArrayFile::promote_in_place_locked). Conservative: all of
  // `behind` at open and after every write-back of the primary's cells.
  Roaring lag_on_device;
  bool unrecorded = false;  // `behind` has cells the record lacks
  bool current() const { return behind.isEmpty(); }
};

// `schema` as the volume places it: with the volume's checksum block
// (fs/meta/cell_checksums.h). mloc images keep checksums of their own pieces.
ArraySchema placed_schema(const ArrayContext& ctx, const ArraySchema& schema);
// On a volume of several devices, the member set of the primary and of each
// copy of `s` (fs/array/member_sets.h); nothing changes without copies.
void assign_member_sets(const ArrayContext& ctx, ArraySchema* s);

class ArrayFile : public ChunkSource, public std::enable_shared_from_this<ArrayFile> {
 public:
  ~ArrayFile() override;
  // The xattr record holding the schema (outside the user namespace, so no
  // client can name it).
  static constexpr std::string_view kSchemaXattr = "mmfs.schema";
  // Dirty cells beyond this are written back at once.
  static constexpr std::uint64_t kDirtyLimit = 64ull << 20;

  // An existing array: its schema's placement over its stored extents.
  static int open(const ArrayContext& ctx, Ino ino, const ArraySchema& schema, std::shared_ptr<ArrayFile>* out,
                  std::string* message);
  // Makes `ino` an array file of `schema`: allocates its placement, lays out
  // `source` (the plain file's bytes, or nullptr for an empty file) and
  // commits schema, extents and checksums in one batch (dropping the plain
  // file's extents), then syncs.
  static int create(const ArrayContext& ctx, const Inode& inode, const ArraySchema& schema, PlainFile* source,
                    std::shared_ptr<ArrayFile>* out, std::string* message);

  Ino ino() const { return ino_; }
  ArraySchema schema() const;
  std::uint64_t size() const { return bytes_; }
  std::uint64_t device_bytes() const;

  // The array file's bytes (C order).
  int read(std::uint64_t offset, std::size_t length, std::byte* out, std::size_t* got, std::string* message);
  // EFBIG past the end (nothing written).
  int write(std::uint64_t offset, const std::byte* data, std::size_t length, std::string* message);
  // The daemon's write (fs/array/write_behind.h): EFBIG past the end at once;
  // otherwise the bytes are queued and written by the array's worker, in
  // order, before anything else reads or changes the array. Returns the
  // error of an earlier queued write that failed, if any (and queues
  // nothing then).
  int write_behind(std::uint64_t offset, const std::byte* data, std::size_t length, std::string* message);
  // Waits for the queued writes; the error of one that failed, if any (once).
  int take_write_error(std::string* message);
  // truncate to 0: every element reads as zero again.
  int zero(std::string* message);
  // Writes dirty cells back and commits their checksums; `durable` syncs the
  // metadata store too (fsync).
  int flush(bool durable, std::string* message);
  // The daemon's periodic flush (the caller syncs the metadata): an array written since the last
  // one keeps the cells its writer has not finished in memory (they would be
  // read back when the rest arrives); an idle array is flushed whole.
  int flush_periodic(std::string* message);
  // flush(true), and an mloc array written since its last seal is encoded
  // into a new image (re-binned) and the staging placement dropped: fsync,
  // the last close and unmount call this.
  int settle(std::string* message);
  bool holds_data() const;

  // A schema change (docs/reference.md §4): EBUSY for shape/dtype once the array holds
  // data; a new placement (copying the data) when the placement changes;
  // otherwise just the record. Returns when durable.
  int change_schema(const ArraySchema& next, std::string* message);
  // Moving several arrays in one commit (a table's capsules,
  // fs/table/capsule_table.h), in three steps under placement_mutex() held
  // exclusively: stage a placement on extents the caller allocated, put it
  // into the caller's batch, and adopt it once the batch has applied.
  struct Staged {
    ArraySchema schema;
    std::unique_ptr<ArrayState> state;
    std::vector<Extent> dropped;  // extents of the replaced placement: the commit frees them
    std::uint64_t bytes = 0;      // st_size of `schema`
  };
  DrainingSharedMutex& placement_mutex() const { return mu_; }
  // Writes dirty cells back, builds `next` on `extents` and fills it: with
  // `copy`, the array's bytes are copied in (a new placement, the old one
  // dropped at the commit); without, `extents` must begin with the current
  // ones and the current cells keep their sectors and checksums (a table
  // growing: new cells read as zeros). EINVAL for a sealed mloc array.
  // `extents` null: the placement allocates its own (freed here on failure;
  // the caller frees staged ones it does not commit).
  int stage_placement_locked(const ArraySchema& next, const std::vector<Extent>* extents, bool copy, Staged* out,
                             std::string* message);
  const ArraySchema& schema_locked() const { return schema_; }
  // Schema, extents, checksum tables and size of the staged placement into `batch`.
  void stage_commit_locked(Staged& staged, WriteBatch& batch);
  // After the batch applied: the staged placement is the array's.
  void adopt_locked(Staged staged);
  // Under placement_mutex() (shared at least): the current placement's
  // cells, null for a sealed mloc array.
  const ArrayState* cells_locked() const { return placement_->cells(); }
  bool has_dirty_cells() const;

  // Effective value of a schema attribute (getfattr), layout choices filled in.
  std::string attr_text(std::string_view name) const;

  // The inode is being removed. `remove` performs the metadata change that
  // may free the array (the last unlink, a rename over it, the last close of
  // an orphan) and says whether the inode is gone; it runs with every write
  // and flush of this array excluded, so no write-back can land in extents
  // the removal frees, nor checksums outlive their inode. When it reports the
  // inode gone, the dirty cells and cached chunks are dropped and the file is
  // retired: flushes do nothing, reads and writes answer ESTALE.
  void retire_if(const std::function<bool()>& remove);
  bool retired() const;

  // Stops prefetching and the copies' catch-up, and waits for the loads in
  // flight (before the volume goes away at unmount: they use its device).
  void quiesce();
  // Copies (fs/array/array_file_copies.cc): starts catching up the copies
  // that lag in the background, unless that runs already.
  void kick_catch_up();
  // Catches every copy up now (returns when each is current and durable,
  // but for cells over the primary's lost cells: catchable_locked).
  int catch_up(std::string* message);
  // The scrub's repair (arrays with copies): reads every current placement
  // whole, a slab at a time, and rewrites each cell that fails its checksum
  // from another placement that reads it clean. *repaired counts them.
  // Returns early, with 0, once `stop` is set or the copies change. Cells
  // lost with a member (ArrayState::lost) are passed over, every other cell
  // read; then EIO says how many are lost.
  int repair_placements(const std::atomic<bool>& stop, std::uint64_t* repaired, std::string* message);
  // Waits for the background loads in flight, without stopping new ones.
  void wait_for_prefetches();

  // Views.
  int read_view(const DataView& view, std::uint64_t offset, std::size_t length, std::byte* out, std::size_t* got,
                std::string* message);
  // The same bytes without a copy when they lie inside one chunk: *data
  // points into *keep, which must outlive the use. Returns 0 with *data null
  // when the range crosses chunks (use read_view).
  int view_span(const DataView& view, std::uint64_t offset, std::size_t length,
                std::shared_ptr<const AlignedBuffer>* keep, const std::byte** data, std::size_t* got,
                std::string* message);
  // Called at the open of a view with an enclosing box (DataView::within):
  // clears view->within when the view is better read by itself.
  // - Some placement reads it in one request of about its own bytes
  //   (single_run_placement_locked: a copy chunked as the reader chunks, or
  //   a chunk that is one run inside a cell): the box would only read more.
  // - The box is cold (no reader began it, none of its chunks is cached or
  //   loading) and the model reads the view alone in at most half the box's
  //   time: a reader of one chunk then does not wait for the whole box. The
  //   box is marked begun, so its next chunk reads through it (a reader
  //   going through the chunks pays the one chunk read alone once).
  void choose_within(DataView* view);
  // A view read through its enclosing box (DataView::within): its bytes
  // taken from the enclosing box's cached chunks, one block of each
  // (rearranged along the view's grid at their load, layouts/regrid.h).
  int read_within(const DataView& view, std::uint64_t offset, std::size_t length, std::byte* out, std::size_t* got,
                  std::string* message);
  // view_span of such a view: bytes inside one block, without a copy.
  int within_span(const DataView& view, std::uint64_t offset, std::size_t length,
                  std::shared_ptr<const AlignedBuffer>* keep, const std::byte** data, std::size_t* got,
                  std::string* message);
  // One part of such a view: bytes [at, at + block.bytes) of the view are
  // `block` of the enclosing box's chunk `chunk`.
  struct WithinPart {
    std::uint64_t chunk = 0;
    layouts::RegridBlock block;
    std::uint64_t at = 0;
  };
  // Calls `visit` with the view's parts in order until it returns false;
  // *outer and *ch are the enclosing box as read (view_chunking). EIO when
  // the parts do not make up the view (visit stopped early excepted).
  int within_parts(const DataView& view, DataView* outer, std::unique_ptr<layouts::SelectionChunks>* ch,
                   const std::function<bool(const WithinPart&)>& visit, std::string* message) const;
  // After a read of a chunk of the box: the next box's loads (DataView::next_within).
  void prefetch_next_box(const DataView& view, const DataView& outer);
  // The DataView of the whole array (what read() serves).
  DataView whole() const;
  nlohmann::json info() const;
  ChunkStats chunk_stats() const;
  int plan(const DataView& view, nlohmann::json* out, std::string* message) const;
  // ENOTSUP on a compressed mloc array (its elements have no sector).
  // `copy`: through that placement (0 = the primary; ENOENT past the copies).
  int lbn_text(std::span<const std::uint64_t> coords, std::string* out, std::string* message, int copy = 0) const;

  // Bitmap index and queries (fs/array/array_file_index.cc, fs/array/array_file_query.cc).
  indexes::ValueType value_type() const;
  std::uint64_t generation() const override { return generation_.load(); }
  std::vector<std::uint64_t> shape() const;
  bool has_index() const;
  // Builds the index again from the data and replaces the stored one, whose
  // bytes lay on a member rebuilt blank (mmfsck --rebuild). 0 without one.
  int rebuild_index(std::string* message);
  // The scrub's check of the index (ArrayIndex::verify: every bitmap, not
  // only those queries read): one found broken, or damaged at load, is
  // built anew from the data as a query would (heal_index), *rebuilt set;
  // *bytes_read grows by what the check read. 0 without an index or once
  // `stop` is set, also in the middle of that build (the index stays as it
  // was, for the next query or scrub to build); else the error, *message
  // saying why (a read-only mount, data that does not read either).
  int verify_index(const std::atomic<bool>& stop, bool* rebuilt, std::uint64_t* bytes_read, std::string* message);
  std::uint64_t index_device_bytes() const;
  // The rows of each atom (keys of this array's dtype), inside `box` when
  // given: from the index (sure and candidate rows), or, without one, from
  // one scan of the data for all atoms together (exact: no candidates). The
  // sure rows may be lent by the index's cache (Estimate::sure_rows).
  int atom_estimates(const std::vector<indexes::KeySet>& atoms, const std::optional<layouts::Selection>& box,
                     std::vector<indexes::Estimate>* out, QueryCost* cost, std::string* message);
  // The count of an atom when the index header alone answers it (no read).
  std::optional<std::uint64_t> exact_count(const indexes::KeySet& keys) const;
  // EIO, with the reason, when a query's scope (`box`, else the whole array)
  // holds a cell lost with a member (ArrayState::lost): its values are gone,
  // so no answer over them is true, from the index or from the data.
  int check_query_scope(const std::optional<layouts::Selection>& box, std::string* message) const;
  // The elements at `rows` (ascending linear indices), in that order.
  int gather_rows(const indexes::Bitmap& rows, std::string* out, QueryCost* cost, std::string* message);
  // The values (or coords) of the elements that have `keys`, in row order,
  // in one pass over the bins they touch, when a sealed mloc image with no
  // bitmap index answers the query (MlocImage::match_output); ENOTSUP
  // otherwise, and the caller takes atom_estimates (and gather_rows).
  int mloc_query_output(const indexes::KeySet& keys, bool values, std::string* out, QueryCost* cost,
                        std::string* message);
  // The device requests that read the cells holding `rows`, or (without
  // rows) the whole array or `box` (plan views; nothing is read).
  layouts::IoPlan rows_plan(const indexes::Bitmap& rows) const;
  layouts::IoPlan scan_plan(const std::optional<layouts::Selection>& box) const;
  const geom::Geometry& geometry() const { return ctx_.geometry; }

 private:
  // Index lifecycle, under the exclusive lock.
  // Every element in row order, a slab at a time; ECANCELED once `stop`
  // (when given) is set.
  int read_all_locked(const ArrayIndex::Visitor& visit, std::string* message,
                      const std::atomic<bool>* stop = nullptr);
  // atom_estimates under the shared lock; *from_index: an error came from
  // the index (damaged at load, a bitmap failing its checksum or its read).
  int atom_estimates_locked(const std::vector<indexes::KeySet>& atoms, const std::optional<layouts::Selection>& box,
                            std::vector<indexes::Estimate>* out, QueryCost* cost, bool* from_index,
                            std::string* message);
  // `met_by` (a query, the scrub) met the index `failed` (null: the damage
  // found at load) broken for `why`: the index is derived from the data, so
  // it is built anew from it (reported to on_index_healed) and the query goes on.
  // 0 also when another caller healed it first (*built says whether this
  // one did); else the error, *message saying both reasons. ECANCELED when
  // `stop` was set during the build: nothing is recorded against the index,
  // which stays broken until the next heal.
  int heal_index(const ArrayIndex* failed, const std::string& why, std::string_view met_by, std::string* message,
                 bool* built = nullptr, const std::atomic<bool>* stop = nullptr);
  // read_all_locked's slab of rows [r0, r1) of dimension 0 into `out` (C
  // order) when it holds lost cells: every other cell as it reads, the lost
  // ones as zeros. What an index holds for a lost cell is never used (queries
  // over it fail, check_query_scope), and the write or fill that makes the
  // cell whole again notes its values.
  int read_slab_around_lost_locked(std::uint64_t r0, std::uint64_t r1, std::byte* out, std::string* message);
  // Folds the C-order bytes of element box `box` into the index's delta.
  void note_box_locked(const std::vector<layouts::DimRange>& box, const std::byte* data);
  int build_index_locked(const ArraySchema& schema, std::unique_ptr<ArrayIndex>* out, std::string* message,
                         const std::atomic<bool>* stop = nullptr);
  // Loads the stored index (rebuilding one a crash left behind its data, or
  // one that lay on a member the volume lost).
  int load_index_locked(std::string* message);
  // `extents` when one of them lies on a member ctx_.member_lost names, else none.
  std::vector<Extent> extents_on_lost_member(const std::vector<Extent>& extents) const;
  // Makes `next`'s index/bins current: builds, commits with `batch`, drops the old.
  int change_index_locked(const ArraySchema& next, WriteBatch batch, std::string* message,
                          const std::atomic<bool>* stop = nullptr);
  // Folds the write [offset, offset+length) into the index's delta.
  void note_write_locked(std::uint64_t offset, const std::byte* data, std::size_t length);
  // Before write-back: the pending marker, durable. After: partial rows, the
  // delta (or a rebuild), staged into `batch` with the dropped extents.
  int index_before_write_back_locked(std::string* message);
  int index_after_write_back_locked(WriteBatch& batch, std::vector<Extent>* dropped, std::string* message);
  int rows_from_cells(const indexes::Bitmap& rows, std::byte* out, std::uint64_t* data_bytes, std::string* message);
  ArrayFile(const ArrayContext& ctx, Ino ino, ArraySchema schema, std::unique_ptr<Placement> placement);
  // The placement of `schema`: on the stored extents, on newly allocated
  // ones (`allocate`), or on `given` ones the caller allocated and still owns
  // (fresh checksums, as for allocate).
  // `slot`: an extra copy's placement (its extents and checksum tables).
  static int build(const ArrayContext& ctx, Ino ino, const ArraySchema& schema, bool allocate,
                   std::unique_ptr<ArrayState>* out, std::string* message,
                   const std::vector<Extent>* given = nullptr, std::uint8_t slot = 0);
  // Copies the array's bytes (from whichever placement holds them) into `fresh`, written back.
  int copy_into_locked(ArrayState& fresh, std::string* message);
  // change_schema once the copies are settled: the record, the index, or a new placement.
  int change_placement_locked(const ArraySchema& next, bool data, std::string* message);
  // The non-mloc part of change_schema: `next` on fresh extents, the data copied when `data`.
  int relayout_locked(const ArraySchema& next, bool data, std::string* message);
  // complete_only: write back only the complete dirty cells (ArrayState::write_back).
  int flush_locked(bool durable, std::string* message, bool complete_only = false);

  // Copies (fs/array/array_file_copies.cc).
  // At open, on a degraded mount (ctx.member_lost): when `schema`'s primary
  // lies on a lost member and a current copy on survivors can take its
  // place, commits the promotion (fs/array/copy_promotion.h) and returns the
  // schema to open in *promoted; else leaves *promoted empty.
  static int promote_if_primary_lost(const ArrayContext& ctx, Ino ino, const ArraySchema& schema,
                                     std::uint64_t primary_cells, ArraySchema* promoted, std::string* message);
  // Under an array loaded before a member was lost while the volume runs:
  // when its primary lies on the lost member and a copy on the survivors
  // lags nothing but bytes the primary's dirty cells hold (ArrayCopy::
  // lag_on_device), the same promotion, committed; the placements built
  // again from the store; and the old primary's dirty bytes written into the
  // new one. The write path calls it before a write lands. 0 when it
  // promoted or had nothing to do; on a failure after the commit the array
  // is retired (its next load builds it).
  int promote_in_place_locked(std::string* message);
  // At open: each copy of schema_ on its stored extents, with its record of cells behind.
  int open_copies_locked(std::string* message);
  // Makes `next.copies` the array's copies: keeps those whose placement is
  // unchanged (all are rebuilt when `rebuild` says the grid changed), builds
  // the new ones from the data and drops the others, in one commit with
  // `next` as the schema record. Returns when durable.
  int change_copies_locked(const ArraySchema& next, bool rebuild, std::string* message);
  // RAID 1: every cell of placement k in `part` that fails its checksum on
  // one side of the mirror is rewritten (to both sides) from the other,
  // each reported to on_healed. EIO when a cell is bad on both sides.
  int heal_from_mirror_locked(std::uint32_t k, const layouts::Selection& part, std::string* message,
                              std::uint64_t* healed = nullptr);
  // Whether placement `k` lies on a member the volume lost (ctx_.member_lost).
  bool placement_lost_locked(std::uint32_t k) const;
  // The cells of copy `k` (>= 1) over any of the primary's cells lost with a
  // member (ArrayState::lost): their bytes exist nowhere, so they stay
  // behind, serving nothing, until those cells are written whole.
  Roaring blocked_by_lost_locked(std::uint32_t k) const;
  // Whether a chunk of `view` that fails may be read around cells lost with
  // a member (ArrayState::lost): a plain view of the array's bytes (not
  // plod, a regridded chunk or one copy's), the primary having lost cells.
  bool reads_around_lost(const DataView& view) const;
  // Bytes [from, to) of the C-order result of `part`, read by themselves
  // into `out` (dirty cells written back): EIO only if they hold a lost cell.
  int read_around_lost_locked(const layouts::Selection& part, std::uint64_t from, std::uint64_t to, std::byte* out,
                              std::string* message);
  // Whether the element box `box` holds any of the primary's lost cells.
  bool overlaps_lost_locked(const std::vector<layouts::DimRange>& box) const;
  // The cells copy `k` can catch up on now: behind and not blocked.
  Roaring catchable_locked(std::uint32_t k) const;
  // "the primary" or "copy K", for messages.
  static std::string placement_name(std::uint32_t k);
  // Whether `next` (the current placement's array) may have its copies.
  int change_copies_allowed_locked(const ArraySchema& next, std::string* message) const;
  // The copies of `target` that copies_ lacks (by slot): placed on new
  // extents (appended to *allocated) and filled from the primary, not yet
  // flushed or recorded. On failure everything allocated is freed.
  int build_new_copies_locked(const ArraySchema& target, std::vector<ArrayCopy>* built,
                              std::vector<Extent>* allocated, std::string* message);
  // A copy's extent map, checksums and alternatives into `batch`.
  void stage_copy_keys(ArrayCopy& c, WriteBatch& batch);
  // The copies' cells that the C-order bytes [offset, offset+length) lie in lag.
  void note_copies_write_locked(std::uint64_t offset, std::size_t length);
  // Every cell a copy lags may now lag bytes on the primary's device alone
  // (its cells were written back, or the copies or placements changed).
  void copies_lag_on_device_locked();
  void stage_copies_record_locked(WriteBatch& batch);
  // Catches copy `k` (1-based) up on at most about `budget` bytes of its
  // cells; `whole`: until it is current.
  int catch_up_locked(std::size_t k, std::uint64_t budget, bool whole, std::string* message);
  // Every copy's cells back to unwritten (truncate to 0), staged into
  // `batch`; an mloc copy's image gives its extents to *dropped.
  void clear_copies_locked(WriteBatch& batch, std::vector<Extent>* dropped);
  // mloc images (fs/array/array_file_build.cc), the primary's or a copy's,
  // on the member set of `members` or the whole volume: the set's site
  // (null: the volume); the stored image of `schema` in `slot` (an empty one
  // when none is stored, or as a stand-in when it fails to load: the error
  // is returned with it); the array as it reads now (`empty`: zeros)
  // encoded on fresh extents, flushed, not recorded; an image's records into
  // a batch (its extent map in the volume's LBNs, a set's own extents
  // beside it); its extents freed (never recorded).
  static int image_site(const ArrayContext& ctx, const std::vector<std::uint32_t>& members, MemberSetSite** site,
                        std::string* message);
  static int load_image(const ArrayContext& ctx, Ino ino, const ArraySchema& schema, std::uint8_t slot,
                        std::unique_ptr<Placement>* out, std::string* message);
  int encode_image_locked(const ArraySchema& schema, bool empty, std::unique_ptr<Placement>* out,
                          std::string* message);
  void stage_image(const Placement& image, std::uint8_t slot, WriteBatch& batch) const;
  void release_image(Placement& image);
  // mloc copies (an image, never rewritten in place): copy k's image
  // replaced whole by one of the current bytes in one commit that clears its
  // cells behind; and an image that failed to read (`why`) put behind whole,
  // so it serves nothing until replaced, reported to on_healed.
  int reencode_copy_locked(std::size_t k, std::string* message);
  void note_bad_image_locked(std::uint32_t k, const std::string& why);
  // The placement `k` names (0: the primary; 1..: copies_[k-1]).
  Placement& placement_at(std::uint32_t k) const { return k == 0 ? *placement_ : *copies_[k - 1].placement; }
  // Whether placement `k` may serve reads: the primary unless it is
  // unreadable (unreadable_placement), a copy when it is current.
  bool servable_locked(std::uint32_t k) const {
    return k == 0 ? placement_->readable() : copies_[k - 1].current();
  }
  // The placement that reads `selection` cheapest under the volume's model
  // (the primary or a current copy), and its chunk size. `priced_ms`, when
  // given, receives the chosen placement's modeled time if the choice priced
  // it (every placement priced), else NaN (no copies, a shortcut, a choice
  // remembered).
  std::uint32_t serving_locked(const layouts::Selection& selection, const std::string& spelling,
                               std::uint64_t* budget, double* priced_ms = nullptr) const;
  // The placement (the primary or a current copy) that reads `selection` in
  // one request of at most a quarter more than its bytes — a copy whose
  // cells are the reader's chunks — if one does. No read of the selection
  // can cost much less, so serving_locked takes it without pricing the
  // others: for a thin chunk across many cells of the primary that pricing
  // cost more CPU than the read itself (every chunk of a Zarr scan is a new
  // view).
  // `plans`, when given, receives per placement the modeled plan of the
  // whole selection it priced (none for a placement it passed over).
  std::optional<std::uint32_t> single_run_placement_locked(
      const layouts::Selection& selection, std::vector<std::optional<layouts::IoPlan>>* plans = nullptr) const;
  // The model's time of a view read through placement `k` in chunks of
  // `budget` bytes (as A@/plan prices it; a long view from sample chunks).
  // `whole`: the placement's modeled plan of the whole selection, when
  // already made (a view of one chunk then prices nothing again).
  double view_cost_locked(std::uint32_t k, const layouts::Selection& selection, std::uint64_t budget,
                          const layouts::IoPlan* whole = nullptr) const;
  // Whether the model reads `view` (one with an enclosing box) alone in at
  // most half its box's time (choose_within); *alone_ms and *box_ms, when
  // given, receive the two times.
  bool alone_beats_box_locked(const DataView& view, double* alone_ms = nullptr, double* box_ms = nullptr) const;
  // The model's time of the view spelled `spelling` read through the
  // placement that serves it (serving_locked).
  double serving_cost_locked(const layouts::Selection& selection, const std::string& spelling) const;
  // Self-healing: placement `bad_k` reads `part` again, each cell that
  // fails its checksum rewritten in place from placement `good_k` (current),
  // until it reads clean. Under the exclusive lock.
  int heal_locked(std::uint32_t bad_k, std::uint32_t good_k, const layouts::Selection& part, std::string* message,
                  std::uint64_t* healed = nullptr);
  // Writes the C-order bytes `data` of `box` (cell-aligned) into `cells` and
  // commits them as a write-back does (alternatives first).
  // `also` stages more into the commit (the copies' record).
  int rewrite_box_locked(ArrayState& cells, const std::vector<layouts::DimRange>& box, const std::byte* data,
                         std::string* message, const std::function<void(WriteBatch&)>& also = {});
  // rewrite_box_locked's halves: the bytes into `cells` (dirty, not written
  // back), then every dirty cell of `cells` written back and committed.
  static void put_box(ArrayState& cells, const std::vector<layouts::DimRange>& box, const std::byte* data);
  // `with_index`: the index's delta noted with the rewritten bytes commits
  // with their checksums, as a flush's does.
  int commit_rewrite_locked(ArrayState& cells, std::string* message,
                            const std::function<void(WriteBatch&)>& also = {}, bool with_index = false);
  // Cells lost with a member (fs/array/array_file_lost.cc): each of the
  // primary's lost cells that a copy on surviving members holds current is
  // read from it (verified) and written whole into the primary, which makes
  // it the array's again (ArrayState::lost). A promotion records every cell
  // the promoted copy lagged as lost; another copy may have caught up on
  // some of them before the member was lost, and those bytes are not lost.
  // Reported to on_healed. A cell no copy reads clean stays lost; only a
  // device or metadata failure of the primary's write-back is an error.
  int fill_lost_from_copies_locked(std::string* message);
  // Whether copy `k` (>= 1) holds the bytes of `box` current: on members the
  // volume has, and none of its cells that `box` touches behind.
  bool copy_holds_current_locked(std::uint32_t k, const std::vector<layouts::DimRange>& box) const;
  // fill_lost_from_copies_locked where nothing waits for its result (an
  // open, a promotion): a failure goes to on_promoted, the cells stay lost.
  void fill_lost_or_report_locked();
  void catch_up_worker();
  void stop_catch_up();

  // The placement behind reads. Every array but a sealed mloc one has cells;
  // a sealed mloc array has only its image, and its first write unpacks the
  // image into a staging placement of cells (naive), which settle() encodes
  // into a new image.
  const layouts::CellGrid& grid_locked() const { return placement_->grid(); }
  bool holds_data_locked() const { return placement_->holds_data(); }
  ArrayState* writable_cells_locked() { return placement_->cells(); }
  MlocImage* image_locked() const { return placement_->image(); }
  bool has_dirty_locked() const { return cells_locked() && cells_locked()->has_dirty(); }
  // The selection's C-order elements (`keep` most significant bytes of
  // each at least; 0 = all) from whichever placement holds them. `once`:
  // the whole of a view that is read in one piece (an mloc image then
  // decodes only the selected elements and keeps no chunk).
  int read_selection_locked(const layouts::Selection& selection, std::uint32_t keep, std::byte* out,
                            std::uint64_t* bytes_read, std::string* message,
                            const std::function<void()>& device_done = {}, AlignedBuffer* scratch = nullptr,
                            bool once = false);
  // Reads rows [row, row+rows) of dimension 0 into out (for re-encoding);
  // `scratch` as SectorBuffer's (a loop of reads reuses one buffer).
  int read_rows_locked(std::uint64_t row, std::uint64_t rows, std::byte* out, std::string* message,
                       AlignedBuffer* scratch = nullptr);
  // The staging placement of a sealed mloc array (its image's elements
  // copied in when `copy`), committed; the image is dropped with it.
  int unseal_locked(bool copy, std::string* message);
  // Encodes the array as it reads now into a new image for `next` and makes
  // it current in one commit (dropping the cells or the older image).
  int seal_locked(const ArraySchema& next, std::string* message);
  // `fresh_index`, when given, replaces the index in the same commit (so a
  // crash never pairs the new image with the old index).
  // `also` adds to the batch (and to the extents it drops).
  int commit_image_locked(const ArraySchema& next, std::unique_ptr<Placement> image, std::string* message,
                          std::unique_ptr<ArrayIndex> fresh_index = nullptr,
                          const std::function<void(WriteBatch&, std::vector<Extent>*)>& also = {});
  int mloc_params_of(const ArraySchema& schema, MlocParams* out, std::string* message) const;
  // `also` adds to the same batch (a new array's copies).
  int commit_placement(const ArraySchema& schema, ArrayState& state, std::vector<Extent> dropped, bool drop_old_sums,
                       const Inode* inode, std::string* message,
                       const std::function<void(WriteBatch&)>& also = nullptr);
  void release_placement_on_failure();
  // Makes `next` the placement behind reads (a new chunk-size epoch).
  void replace_placement_locked(std::unique_ptr<Placement> next);

  // The view's size, and its chunking, under the placement lock; sets
  // view->chunk_bytes (and view->served) when it is 0.
  std::uint64_t view_chunking(DataView* view, std::unique_ptr<layouts::SelectionChunks>* out) const;
  // The size of the chunks a view of `selection` is read in
  // (layouts::choose_chunk_budget, priced by the volume's model on a chunk
  // from the middle of the view): a layout's runs grow with the cell layers
  // a chunk spans, as a 2^k-aligned block of a Hilbert or Z-order grid is
  // one run. Remembered per view spelling and placement.
  std::uint64_t chunk_bytes_locked(const layouts::Selection& selection, const std::string& spelling,
                                   std::uint32_t k = 0) const;
  // ChunkSource: chunk `index` of `view` from whichever placement holds it
  // (dirty cells written back first), PLoD applied.
  int load_chunk(const DataView& view, std::uint64_t index, AlignedBuffer* out, std::string* message,
                 const std::function<void()>& device_done) override;
  // load_chunk's read of chunk `index` of `view` from placement `from`
  // (self-healing a bad cell from another current placement), under the
  // lock the caller holds: `exclusive`, or `shared` (released for a repair).
  int load_part_locked(const DataView& view, std::uint64_t index, std::uint32_t from, AlignedBuffer* out,
                       std::string* message, const std::function<void()>& device_done,
                       std::unique_lock<DrainingSharedMutex>* exclusive,
                       std::shared_lock<DrainingSharedMutex>* shared = nullptr);

  ArrayContext ctx_;
  Ino ino_;
  // Guards schema_, placement_ and the rest; lock() and lock_shared() first wait
  // for the queued writes (write_behind_'s worker takes mu_.raw()).
  mutable DrainingSharedMutex mu_;
  ArraySchema schema_;
  std::unique_ptr<Placement> placement_;  // cells, or a sealed mloc array's image (maybe empty)
  // The bins the last query's atoms touched on this mloc array: where
  // gather_rows looks first for the values of its result (only a hint).
  mutable std::mutex hint_mu_;
  std::vector<bool> mloc_hint_;
  // A query's start: ESTALE for a removed file, then dirty cells flushed.
  int ready_for_query(std::string* message);
  // An mloc array's atoms from its level structure (fs/mloc/mloc_query.cc).
  int mloc_estimates_locked(const std::vector<indexes::KeySet>& atoms, const std::optional<layouts::Selection>& box,
                            std::vector<indexes::Estimate>* out, QueryCost* cost, std::string* message);
  std::atomic<std::uint64_t> bytes_;  // changed under mu_; read without it by write_behind
  bool retired_ = false;  // guarded by mu_; see retire_if
  // Lost cells written only in part whose bytes write-backs dropped
  // (ArrayState::take_dropped_lost) since the last durable flush, which
  // reports them once as EIO, as the kernel reports a failed write-back at
  // the next fsync whichever flush met it. Guarded by mu_.
  std::uint64_t dropped_lost_writes_ = 0;
  std::uint64_t first_dropped_lost_ = 0;
  std::unique_ptr<ArrayIndex> index_;      // guarded by mu_; null without an index
  // Why the stored index could not be loaded (guarded by mu_; empty when it
  // could). The array stays usable: the next query builds the index anew
  // from the data (heal_index), and failing that answers EIO with this
  // reason until user.mmfs.index is set again.
  std::string index_damage_;
  // Why heal_index failed for index_damage_ (guarded by mu_): queries do
  // not read the whole array again for it until the index changes.
  std::string damage_heal_failure_;
  std::vector<std::uint64_t> partial_rows_;  // rows a write cut: their values are read at flush
  std::atomic<std::uint64_t> generation_{0};  // bumped by every change of the contents
  std::uint64_t periodic_generation_ = 0;     // generation_ at the last flush_periodic (under mu_)

  // Decoded chunks of recent reads (the file and its views) and the
  // sequential readers' prefetch pipeline (fs/array/chunk_reader.h).
  ChunkReader reader_;
  // The chosen chunk size per view spelling (guarded by budget_mu_), for the
  // placement it was chosen on (placement_epoch_, bumped whenever placement_ is
  // replaced).
  mutable std::mutex budget_mu_;
  mutable std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> chunk_budgets_;
  // The enclosing box whose loads prefetch_next_box started last, all of
  // them (guarded by budget_mu_): each chunk of a box after its first would
  // start them again.
  std::string next_box_started_;
  // Enclosing boxes a reader began (choose_within) or is expected in next
  // (prefetch_next_box), most recent last (guarded by budget_mu_).
  std::deque<std::string> boxes_begun_;
  static constexpr std::size_t kBoxesBegun = 16;
  // Marks the box spelled `box` begun; false when it already was.
  bool begin_box(const std::string& box);
  std::atomic<std::uint64_t> placement_epoch_{0};
  // The placement chosen to serve each view spelling (serving_locked), for
  // the placement epoch and set of current copies it was chosen under.
  struct ServingChoice {
    std::uint64_t epoch = 0;
    std::uint32_t current = 0;
    std::uint32_t copy = 0;
    std::uint64_t budget = 0;
  };
  mutable std::map<std::string, ServingChoice> serving_cache_;  // guarded by budget_mu_
  // A@/info's layout_choice (the model's prices of every candidate), computed
  // at the first info of the schema it is for (choice_key_, its record).
  mutable std::mutex choice_mu_;
  mutable std::string choice_key_;
  mutable nlohmann::json choice_json_;

  // Extra copies (guarded by mu_), and their background catch-up.
  std::vector<ArrayCopy> copies_;
  std::string catch_up_error_;  // guarded by mu_: why the last catch-up failed (A@/info)
  std::mutex catch_up_mu_;
  std::thread catch_up_thread_;  // guarded by catch_up_mu_
  bool catch_up_running_ = false;
  bool catch_up_stopped_ = false;

  // Last: destroyed first, its worker done with the members above.
  std::unique_ptr<WriteBehind> write_behind_;
};

}  // namespace mmfs::fs
