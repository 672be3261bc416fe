// An array's bitmap index on the volume (docs/reference.md §4 `user.mmfs.index`): the
// stored object of indexes/bitmap_index.h in extents of its own, the delta of
// the rows written since it was built, and a cache of decoded bitmaps.
//
// Metadata records (docs/on-disk-format.md, "indexes"):
//   q/<ino>     the index record: encoding, binning, object and delta sizes,
//               the delta's checksum, whether the bins are provisional
//   q/<ino>p    present while the index may lag its data (between the first
//               cell written by a flush and the commit of the flush's delta):
//               an index found with it is rebuilt from the data on load
//   e/<ino>i    the index's extents (object, then delta), so the allocator's
//               mount-time rebuild and mmfsck see them like any extent map
// The object is written to fresh extents and flushed before the record that
// points at it is committed; a replaced object's extents are freed after the
// commit is durable (Metadata::apply's `dropped`). So a crash leaves the old
// index or the new one, each beside the data it describes.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "fs/meta/allocator.h"
#include "fs/meta/metadata.h"
#include "fs/device/sector_io.h"
#include "indexes/bitmap_index.h"

namespace mmfs::fs {

// Bytes and requests a query spent on an index.
struct IndexCost {
  std::uint64_t planned = 0;   // bytes of the bitmaps the plans need (cached or not)
  std::uint64_t bytes = 0;     // bytes of bitmaps read from the device
  std::uint64_t requests = 0;  // device requests
  std::uint64_t cached_bytes = 0;  // bytes of bitmaps served from memory
  std::vector<geom::Request> trace;  // the device requests, for modeled time
};

class ArrayIndex {
 public:
  struct Env {
    Metadata& metadata;
    Allocator& allocator;
    SectorIo& io;
  };
  // Visits the array's elements in C order, in slabs: visit(first_row, bytes, count).
  using Visitor = std::function<void(std::uint64_t, const std::byte*, std::size_t)>;
  using DataReader = std::function<int(const Visitor&, std::string*)>;

  // Builds the index of `rows` elements of `type` from the data (`read` runs
  // twice: bins, then bitmaps) and writes its object to fresh extents,
  // flushed. Nothing is committed: stage() the record. EINVAL for a binning
  // the data cannot have (too many distinct values for `exact`).
  static int build(const Env& env, Ino ino, indexes::ValueType type, const std::string& encoding,
                   const std::string& bins, std::uint64_t rows, const DataReader& read, bool provisional,
                   std::unique_ptr<ArrayIndex>* out, std::string* message);
  // What the array the index belongs to holds: a stored index of any other
  // row count or type is damaged, however well its checksums hold (a query
  // would size bitmaps by its rows, and read values as its type).
  struct Expected {
    std::uint64_t rows;
    indexes::ValueType type;
  };
  // The stored index of `ino` (null when it has none). *stale: the pending
  // marker was found (the caller rebuilds). EIO, with the reason, when it is
  // damaged.
  static int load(const Env& env, Ino ino, const Expected& expected, std::unique_ptr<ArrayIndex>* out, bool* stale,
                  std::string* message);

  // The record, the extents, and the pending marker's removal, for the batch
  // that makes this index current.
  void stage(WriteBatch& batch) const;
  static void stage_pending(Ino ino, WriteBatch& batch);
  // Removal of every index record of `ino` (the extents go with dropped()).
  static void stage_drop(const Metadata& metadata, Ino ino, WriteBatch& batch);
  // The extents the stored record of `ino` names (empty when it does not
  // decode): what a damaged index occupies.
  static std::vector<Extent> stored_extents(Metadata& metadata, Ino ino);
  // Every extent the index occupies.
  std::vector<Extent> extents() const;
  // Frees the extents (an index that was never committed).
  void release();

  const indexes::IndexHeader& header() const { return header_; }
  const std::string& encoding() const { return encoding_; }
  const std::string& bins() const { return bins_; }
  bool provisional() const { return provisional_; }
  std::uint64_t device_bytes() const;
  std::uint64_t object_bytes() const { return object_bytes_; }

  // The rows of an atom from the index and its delta. Thread-safe against
  // other estimates (not against note/persist: the array's lock orders them).
  int estimate(const indexes::KeySet& keys, indexes::Estimate* out, IndexCost* cost, std::string* message);
  // What estimate() would read, without reading.
  indexes::AtomPlan plan(const indexes::KeySet& keys) const { return header_.plan(keys); }
  // Whether the atom's count is known from the header alone (aligned, no delta).
  std::optional<std::uint64_t> exact_count(const indexes::KeySet& keys) const;

  // The whole stored index read back from the device and checked, a step
  // at a time (the caller may let writers in between steps): the header
  // decodes, every bitmap matches its checksum (about 4 MiB of them per
  // step), the delta its own. A query checks only the bitmaps it reads;
  // the scrub checks them all. EIO (or the read's error) with *message
  // naming the first bad part; *bytes_read grows by what was read.
  struct VerifyCursor {
    bool header_checked = false;
    std::size_t bitmaps_checked = 0;
    bool done = false;
  };
  int verify_step(VerifyCursor* cursor, std::uint64_t* bytes_read, std::string* message) const;

  // Rows first_row.. now hold `elements` (the array's write path).
  void note(std::uint64_t first_row, const std::byte* elements, std::size_t count);
  bool delta_changed() const { return delta_changed_; }
  // Why building this index anew failed after a query met it broken
  // (ArrayFile::heal_index): queries do not read the whole array again for it.
  const std::string& heal_failure() const { return heal_failure_; }
  void set_heal_failure(std::string why) { heal_failure_ = std::move(why); }
  // The delta has grown past what it saves, or the bins were chosen before
  // the array held its data: the caller rebuilds.
  bool wants_rebuild() const;
  // Writes the delta to fresh extents (flushed); the old delta's extents go
  // to *dropped. stage() then commits it.
  int persist_delta(std::vector<Extent>* dropped, std::string* message);

 private:
  ArrayIndex(const Env& env, Ino ino);
  // Bytes [offset, offset+length) of a blob stored over `extents`, read as
  // index sectors (`background`: as the scrub's own reads, which the
  // foreground's idle time and counters do not see).
  int read_blob(const std::vector<Extent>& extents, std::uint64_t offset, std::uint64_t length,
                std::vector<std::byte>* out, IndexCost* cost, bool background = false) const;
  // Bitmaps [first, last) of the directory, back to back in the object,
  // read in one request into *bytes and each checked against its checksum:
  // EIO naming the first that fails, or the read's error.
  int read_bitmaps(std::uint32_t first, std::uint32_t last, std::vector<std::byte>* bytes, IndexCost* cost,
                   bool background, std::string* message) const;
  static int write_blob(const Env& env, const std::string& bytes, std::vector<Extent>* extents,
                        std::string* message);
  std::string encode_record() const;
  // The cache holds decoded bitmaps (key: their directory id) and the
  // estimates of atoms whose plans combine several bitmaps (key: the plan's
  // bins; a union of a thousand bins is kept like a bitmap read from the
  // device, so an atom asked again costs a copy, not the union).
  using CacheKey = std::string;
  static CacheKey bitmap_key(std::uint32_t id);
  static CacheKey plan_key(const indexes::AtomPlan& plan);
  struct Cached {
    std::shared_ptr<const indexes::Bitmap> bitmap;
    std::shared_ptr<const indexes::Estimate> estimate;
    std::uint64_t bytes = 0;
    std::list<CacheKey>::iterator at;
  };
  std::optional<Cached> cached(const CacheKey& key);
  void remember(const CacheKey& key, Cached entry);

  Env env_;
  Ino ino_;
  std::string encoding_, bins_;
  bool provisional_ = false;
  indexes::IndexHeader header_;
  std::vector<Extent> object_extents_;
  std::uint64_t object_bytes_ = 0;
  indexes::IndexDelta delta_;
  std::vector<Extent> delta_extents_;
  std::uint64_t delta_bytes_ = 0;
  std::uint64_t delta_checksum_ = 0;
  bool delta_changed_ = false;
  std::string heal_failure_;

  // Most recently used first, within a byte budget.
  static constexpr std::uint64_t kCacheBytes = 512ull << 20;
  mutable std::mutex cache_mu_;
  std::list<CacheKey> lru_;
  std::unordered_map<CacheKey, Cached> cache_;
  std::uint64_t cache_bytes_ = 0;
};

}  // namespace mmfs::fs
