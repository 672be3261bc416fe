// A crash-consistent key-value store on a region of a block device: the
// metadata of an mmfs volume (inodes, directories, xattrs, extent maps,
// array schemas, index locations) is kept in it.
//
// The whole state lives in memory. Durability is a write-ahead log of
// transactions plus checkpoints (docs/on-disk-format.md, "metadata"):
//   * apply() changes the in-memory state atomically and queues the batch;
//   * sync() makes every batch applied so far durable with one log write and
//     one device flush, shared by every thread waiting at that moment (group
//     commit);
//   * when the log fills, a checkpoint (the whole state) is written to the
//     older of two slots and the log restarts behind it.
// A crash at any instant leaves, after open(), the state of some prefix of
// the applied batches that includes every batch whose sync() returned.
// Every block on the device carries a checksum, and every structure is kept
// in two copies (version 2 regions), so one bad block is read from its twin
// and rewritten. open() refuses a region it cannot trust with EUCLEAN
// (corrupt) rather than returning a mixed state; mmfsck can salvage the
// longest consistent prefix of it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fs/device/block_device.h"

namespace mmfs::fs {

// Byte range of the device the store owns; offset and length multiples of
// the device block size. At least 64 KiB.
struct MetaRegion {
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

// An atomic group of changes.
class WriteBatch {
 public:
  void put(std::string key, std::string value);
  void del(std::string key);
  bool empty() const { return ops_.empty(); }
  std::size_t size() const { return ops_.size(); }
  struct Op {
    bool is_put;
    std::string key, value;
  };
  const std::vector<Op>& ops() const { return ops_; }
  std::vector<Op> take_ops() && { return std::move(ops_); }

 private:
  std::vector<Op> ops_;
};

// What open() may do beyond reading the newest consistent state.
struct MetaOpenOptions {
  // Rewrite a copy found corrupt or incomplete from its good twin (the
  // device must be writable): the daemon's mount and `mmfsck -y`.
  bool repair = false;
  // Read and compare both copies of every live structure, not only the first
  // good one (mmfsck). Without it, open() reads the second copy of a
  // structure only when the first fails, plus the last write's twin.
  bool verify_copies = false;
  // When a log chunk or checkpoint is lost in both copies but later metadata
  // exists, open the longest consistent prefix instead of refusing and, with
  // `repair`, make it the durable state (`mmfsck -y`).
  bool salvage = false;
};

// What open() found and did, one line each.
struct MetaOpenReport {
  std::vector<std::string> problems;  // damage: a corrupt copy, metadata lost in both copies
  std::vector<std::string> repairs;   // copies rewritten from their twins, a salvaged prefix made durable
  std::uint64_t lost_batches = 0;     // batches after a salvaged prefix known to be lost
};

struct MetaStats {
  std::uint64_t batches_applied = 0, batches_durable = 0;
  std::uint64_t log_writes = 0, flushes = 0, checkpoints = 0;
  std::uint64_t log_bytes_used = 0, log_bytes_total = 0;
  std::uint64_t state_bytes = 0;  // serialized size of the state (what a checkpoint writes)
};

class MetaStore {
 public:
  // Writes an empty store into the region (mkfs). Returns 0 or an errno.
  // `version` 0 is the current format; 1 (one copy of everything) is kept
  // for tests of the volumes formatted before version 2.
  static int format(BlockDevice& device, const MetaRegion& region, std::uint32_t version = 0);
  // Opens the store: reads the newest valid checkpoint and replays the log
  // after it, taking each structure from whichever copy is intact. Returns
  // nullptr with *error set (EUCLEAN: corrupt/unreadable metadata; EIO:
  // device error) and a one-line *message. `report` (optional) says what was
  // found and repaired.
  static std::unique_ptr<MetaStore> open(BlockDevice& device, const MetaRegion& region, int* error,
                                         std::string* message, const MetaOpenOptions& options = {},
                                         MetaOpenReport* report = nullptr);
  ~MetaStore();

  // Applies the batch to the in-memory state (atomically with respect to
  // readers) and queues it for the log. Returns the batch's sequence number.
  // Fails with ENOSPC (nothing applied) when the state would no longer fit a
  // checkpoint slot.
  int apply(const WriteBatch& batch, std::uint64_t* sequence = nullptr);
  // Makes every batch applied before the call durable. Thread-safe; callers
  // that arrive while a flush is in progress share the next one.
  int sync();
  // Writes a checkpoint now and restarts the log behind it.
  int checkpoint();

  std::optional<std::string> get(std::string_view key) const;
  // Visits keys with the given prefix in ascending order; stop by returning false.
  void scan(std::string_view prefix, const std::function<bool(std::string_view, std::string_view)>& visit) const;
  MetaStats stats() const;

 private:
  struct Impl;
  friend class MetaOpener;
  explicit MetaStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mmfs::fs
