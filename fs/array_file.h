// An array file (SPEC §4): its schema, its current placement (ArrayState), the
// write path with its dirty-cell cache, the chunked read path behind the file
// and every data view, schema changes with relayout, and the views' metadata
// (info, lbn, plan). Thread-safe: reads share the placement, writes and schema
// changes take it exclusively.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <shared_mutex>
#include <string>

#include "fs/array_schema.h"
#include "fs/array_state.h"
#include "fs/metadata.h"
#include "fs/plain_file.h"
#include "fs/sector_io.h"
#include "fs/view_path.h"

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
};


class ArrayFile : public std::enable_shared_from_this<ArrayFile> {
 public:
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
  // truncate to 0: every element reads as zero again.
  int zero(std::string* message);
  // Writes dirty cells back and commits their checksums; `durable` syncs the
  // metadata store too (fsync).
  int flush(bool durable, std::string* message);
  bool holds_data() const;

  // A schema change (SPEC §4): EBUSY for shape/dtype once the array holds
  // data; a new placement (copying the data) when the placement changes;
  // otherwise just the record. Returns when durable.
  int change_schema(const ArraySchema& next, std::string* message);
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

  // Stops prefetching and waits for the loads in flight (before the volume
  // goes away at unmount: they use its device).
  void quiesce();

  // Views.
  int read_view(const DataView& view, std::uint64_t offset, std::size_t length, std::byte* out, std::size_t* got,
                std::string* message);
  // The same bytes without a copy when they lie inside one chunk: *data
  // points into *keep, which must outlive the use. Returns 0 with *data null
  // when the range crosses chunks (use read_view).
  int view_span(const DataView& view, std::uint64_t offset, std::size_t length,
                std::shared_ptr<const AlignedBuffer>* keep, const std::byte** data, std::size_t* got,
                std::string* message);
  // The DataView of the whole array (what read() serves).
  DataView whole() const;
  nlohmann::json info() const;
  int plan(const DataView& view, nlohmann::json* out, std::string* message) const;
  int lbn_text(std::span<const std::uint64_t> coords, std::string* out) const;

 private:
  ArrayFile(const ArrayContext& ctx, Ino ino, ArraySchema schema, std::unique_ptr<ArrayState> state);
  static int build(const ArrayContext& ctx, Ino ino, const ArraySchema& schema, bool allocate,
                   std::unique_ptr<ArrayState>* out, std::string* message);
  int flush_locked(bool durable, std::string* message);
  int commit_placement(const ArraySchema& schema, ArrayState& state, std::vector<Extent> dropped, bool drop_old_sums,
                       const Inode* inode, std::string* message);
  void release_placement_on_failure();
  std::string bad_cell_message(std::uint64_t cell) const;

  // The view's size, and its chunking, under the placement lock.
  std::uint64_t view_chunking(const DataView& view, std::unique_ptr<layouts::SelectionChunks>* out) const;
  using Chunk = std::shared_ptr<const AlignedBuffer>;
  int chunk(const DataView& view, std::uint64_t index, Chunk* out, std::string* message);
  int load_chunk(const DataView& view, std::uint64_t index, AlignedBuffer* out, std::string* message);
  void prefetch(const DataView& view, std::uint64_t index);

  ArrayContext ctx_;
  Ino ino_;
  mutable std::shared_mutex mu_;  // guards schema_, state_, bytes_
  ArraySchema schema_;
  std::unique_ptr<ArrayState> state_;
  std::uint64_t bytes_;
  bool retired_ = false;  // guarded by mu_; see retire_if
  std::atomic<std::uint64_t> generation_{0};  // bumped by every change of the contents

  // Decoded chunks of recent reads (the file and its views), most recent first.
  struct CacheEntry {
    std::string key;
    std::shared_future<Chunk> chunk;
  };
  std::mutex cache_mu_;
  std::list<CacheEntry> cache_;
  int prefetching_ = 0;  // loads running ahead of sequential readers
  bool quiesced_ = false;
  std::condition_variable prefetch_done_;
  static constexpr int kPrefetchDepth = 2;
};

}  // namespace mmfs::fs
