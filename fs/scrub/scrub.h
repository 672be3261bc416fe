// The scrub's engine (docs/daemon.md, "Scrub"): given sectors
// read from the device — by whatever path read them — it counts coverage,
// gathers the sectors of checksummed units (array cells, plain-file blocks,
// superblocks) and verifies each unit once it has all of it, and keeps the
// findings. It does no I/O itself: fs/scrub/scrub_runner.h decides what is read
// and when. Thread-safe.
//
// Coverage: one bit per sector of the volume; every sector read counts once,
// whichever path read it. A read error is a finding.
//
// Gathering: a unit of one sector is verified at once; a larger one waits in
// memory, sector by sector, up to a cap (ScrubOptions::partial_bytes). Units
// pushed out by the cap, and those still incomplete when every sector has
// been covered (some of their sectors were covered by a foreground read,
// which verifies what it reads, or a write), are *pending*: the completion
// pass reads each whole and verifies it.
//
// Findings: a unit that fails its checksum is only *suspect* at first. The
// metadata changes under a running scrub — a rewrite in place commits the
// new checksum after the new bytes (docs/daemon.md, "Crash safety"), an
// array may be moved — so a mismatch can be a race, not damage. A suspect is
// read again (confirm()), and reported only when it still matches neither
// the checksum nor the alternative recorded before that read nor those
// recorded after it, and its object's placement has not changed since the
// scrub started.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "fs/meta/meta_store.h"
#include "fs/scrub/scrub_map.h"
#include "geometry/types.h"

namespace mmfs::fs {

// One bit per sector, allocated in chunks as sectors are covered and freed
// again when a chunk is full: a sequential scan keeps one chunk in memory.
class CoverageMap {
 public:
  explicit CoverageMap(std::uint64_t sectors);
  // Marks [lbn, lbn + count) (clipped to the map); returns how many were new.
  std::uint64_t mark(geom::Lbn lbn, std::uint64_t count = 1);
  bool covered(geom::Lbn lbn) const;
  std::uint64_t count() const { return count_; }
  std::uint64_t sectors() const { return sectors_; }
  bool complete() const { return count_ == sectors_; }
  // The first uncovered sector at or after `from`, wrapping around; nullopt when complete.
  std::optional<geom::Lbn> next_uncovered(geom::Lbn from) const;
  // How many sectors from `lbn` on are uncovered, at most `limit`.
  std::uint64_t uncovered_run(geom::Lbn lbn, std::uint64_t limit) const;

 private:
  static constexpr std::uint64_t kChunkSectors = 1u << 20;  // 128 KiB of bits
  struct Chunk {
    std::vector<std::uint64_t> bits;  // empty when full or empty (see `full`)
    std::uint64_t count = 0;
  };
  std::uint64_t chunk_sectors(std::size_t c) const;
  std::uint64_t sectors_;
  std::uint64_t count_ = 0;
  std::vector<Chunk> chunks_;
};

// The checksums recorded for a unit: the committed one and the alternative
// of a rewrite in progress (0: none). Both 0: the unit never held data.
struct StoredChecksums {
  std::uint32_t sum = 0;
  std::uint32_t alt = 0;
  bool operator==(const StoredChecksums&) const = default;
};

// What the engine asks of the current metadata.
class ScrubMetadata {
 public:
  virtual ~ScrubMetadata() = default;
  virtual StoredChecksums checksums(Ino ino, std::uint64_t unit) const = 0;
  // False when the object's extents or schema record differ from the map's
  // snapshot (moved, truncated, removed): its findings are void.
  virtual bool unchanged(const ScrubObject& object) const = 0;
};

// The metadata store of a mounted volume (records c/ and a/ of
// fs/meta/cell_checksums.h, e/ and the schema xattr of fs/meta/metadata.h).
std::unique_ptr<ScrubMetadata> store_metadata(const MetaStore& store);

// How a sector reached the engine.
enum class ReadPath { FreeBandwidth, IdleTime, Completion, Foreground };
const char* to_string(ReadPath path);

struct ScrubFinding {
  geom::Lbn lbn = 0;  // the unit's first sector, or the unreadable sector
  std::vector<layouts::Run> runs;  // every sector of the unit (a checksum does not say which one is bad)
  Ino ino = 0;        // 0: no file (metadata, free space, a superblock)
  std::string path;   // the file, or what the sector holds
  std::string what;   // "cell 17 of /t/a failed its checksum"
  std::optional<std::uint32_t> object;  // the map's object it was found in (none: metadata, free space)
  std::optional<std::uint64_t> unit;    // the object's checksummed unit it lies in
  // Empty while it holds; else why it no longer does (the recheck after
  // the scrub's repairs: repaired from a copy or mirror, the owner moved).
  std::string resolved;
};

struct ScrubOptions {
  std::uint64_t partial_bytes = 32ull << 20;  // incomplete units kept in memory
  std::size_t finding_list = 100;             // findings listed in status()
};

class ScrubEngine {
 public:
  // `report` is called (under the engine's lock: it must not call back) for
  // every finding, once.
  ScrubEngine(std::unique_ptr<OwnerMap> map, std::unique_ptr<ScrubMetadata> metadata, ScrubOptions options,
              std::function<void(const ScrubFinding&)> report);

  const OwnerMap& map() const { return *map_; }
  std::uint64_t sectors() const { return map_->sectors(); }

  // Sectors read by the scrub: lbns[i]'s bytes at data + i * sector_size,
  // results[i] its errno (0: read). Sectors past the map are ignored.
  void deliver(std::span<const geom::Lbn> lbns, const std::byte* data, std::span<const int> results, ReadPath how);
  // A run of consecutive sectors (`result` for all of it).
  void deliver_run(geom::Lbn first, std::uint64_t count, const std::byte* data, int result, ReadPath how);
  // Sectors a foreground request read (successfully): covered, not gathered.
  void foreground_read(geom::Lbn first, std::uint64_t count);

  // The next uncovered sector at or after `from` (wrapping), and how many
  // follow it uncovered (at most `limit`).
  std::optional<std::pair<geom::Lbn, std::uint64_t>> next_uncovered(geom::Lbn from, std::uint64_t limit) const;
  bool coverage_complete() const;

  // A unit to read whole: pending ones (the completion pass) or suspects.
  struct UnitJob {
    std::uint32_t object = 0;
    std::uint64_t unit = 0;
    std::vector<layouts::Run> runs;  // in the unit's sector order
    StoredChecksums before;          // recorded before the read (suspects)
    bool confirm = false;            // a suspect's second read
  };
  // Suspects first; then, once coverage is complete, pending units (the
  // incomplete ones are moved there first). nullopt: nothing to read.
  std::optional<UnitJob> next_unit_job();
  // The unit's bytes (runs back to back), or the read's errno.
  void finish_unit_job(const UnitJob& job, const std::byte* data, int result);

  // The recheck, once the scan and the repairs that run beside it are done
  // (copies, mirrors, indexes built anew): each listed finding still open,
  // and the sectors to read again to see whether it still holds (the whole
  // unit for a checksummed one). A finding is damage the scrub saw; one the
  // repairs have since mended should not read as outstanding, as ZFS lists
  // only errors a scrub could not repair.
  struct RecheckJob {
    std::size_t finding = 0;         // its place in the listed findings
    std::vector<layouts::Run> runs;  // empty: decided without a read (the owner changed)
  };
  std::vector<RecheckJob> recheck_jobs() const;
  // The job's sectors (runs back to back), or the read's errno. The finding
  // is resolved when its owner has moved or been rewritten since (the bad
  // sectors no longer hold it), or its sectors now read (and, for a unit,
  // match its checksum).
  void finish_recheck(const RecheckJob& job, const std::byte* data, int result);

  // Every sector covered, every unit verified or found bad.
  bool complete() const;
  std::uint64_t findings() const;
  // The counters and the findings, as /.mmfs/scrub shows them.
  nlohmann::json status() const;

 private:
  struct UnitKey {
    std::uint32_t object = 0;
    std::uint64_t unit = 0;
    bool operator==(const UnitKey&) const = default;
    bool operator<(const UnitKey& o) const { return object != o.object ? object < o.object : unit < o.unit; }
  };
  struct UnitKeyHash {
    std::size_t operator()(const UnitKey& k) const { return std::hash<std::uint64_t>{}(k.unit * 1000003u ^ k.object); }
  };
  struct Partial {
    std::vector<std::byte> data;
    std::vector<bool> have;
    std::uint32_t count = 0;
  };

  void take_sector_locked(geom::Lbn lbn, const std::byte* data, int result, ReadPath how);
  // Checks a whole unit; a mismatch makes it a suspect (or, on a confirming
  // read, a finding). `how` counts where the verification came from.
  void verify_locked(const UnitKey& key, std::span<const std::byte> unit, ReadPath how,
                     const StoredChecksums* before = nullptr);
  bool unit_valid_locked(const ScrubObject& object, std::uint64_t unit, std::span<const std::byte> bytes,
                         const StoredChecksums* before, std::string* why);
  void report_locked(std::vector<layouts::Run> runs, std::optional<std::uint32_t> object,
                     std::optional<std::uint64_t> unit, std::string path, std::string what);
  void evict_locked();

  std::unique_ptr<OwnerMap> map_;
  std::unique_ptr<ScrubMetadata> metadata_;
  ScrubOptions options_;
  std::function<void(const ScrubFinding&)> report_;

  mutable std::mutex mu_;
  CoverageMap coverage_;
  std::unordered_map<UnitKey, Partial, UnitKeyHash> partial_;
  std::deque<UnitKey> partial_order_;  // oldest first (may name units since completed)
  std::uint64_t partial_bytes_ = 0;
  std::set<UnitKey> pending_;
  std::set<UnitKey> suspects_;
  std::set<UnitKey> settled_;  // reported bad or unreadable: never verified again
  std::set<geom::Lbn> unreadable_;
  bool swept_ = false;  // the incomplete units moved to pending after full coverage

  std::map<ReadPath, std::uint64_t> sectors_by_, verified_by_;
  std::uint64_t unwritten_ = 0, false_alarms_ = 0, void_findings_ = 0, evicted_ = 0;
  std::uint64_t findings_ = 0, resolved_ = 0;
  std::deque<ScrubFinding> finding_list_;
};

}  // namespace mmfs::fs
