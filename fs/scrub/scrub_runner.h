// The scrub in motion (docs/daemon.md, "Scrub"): what the engine
// (fs/scrub/scrub.h) is given to read, and when.
//
// * free-bandwidth (MEMS volumes; MEMS paper §5.1): the runner watches every
//   foreground device batch (SectorIo's BatchObserver) and adds the LBNs
//   geom::FreeBandwidthScan picks for it — untouched LBNs of the equivalence
//   classes the batch's row passes sit at, filling the passes' free slots —
//   to the same device call. The batch's modeled service time does not
//   change (geometry/free_bandwidth.h; tests/unit/geometry/test_free_bandwidth.cc).
//   Foreground reads count as scanned, as in the paper: the read path
//   verified them. The runner issues no request of its own except, in idle
//   time, the second read of a suspect and, once the free scan has touched
//   every LBN of the volume it can reach, the completion pass (sectors never
//   read — written by the foreground, past the modeled device, dropped — and
//   units not gathered whole).
// * idle-time (disk and flash: no free bandwidth): a background thread reads
//   the volume in track-sized runs whenever no foreground batch has been on
//   the device for `idle_ms`, one run at a time, so a foreground request
//   waits behind at most one run.
//
// Stopping (stop(), unmount) removes the observer and joins the thread; a
// batch in flight keeps its own reference to the runner, which touches
// only its own state, never the volume.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "fs/scrub/scrub.h"
#include "fs/device/sector_io.h"
#include "geometry/free_bandwidth.h"
#include "geometry/geometry.h"

namespace mmfs::fs {

enum class ScrubMode { FreeBandwidth, IdleTime };
const char* to_string(ScrubMode mode);
// The mode a volume's geometry calls for: free-bandwidth on MEMS.
ScrubMode default_scrub_mode(const geom::Geometry& geometry);
// One line saying what the mode reads.
std::string scrub_how(ScrubMode mode, const geom::Geometry& geometry);

struct ScrubRunnerOptions {
  double idle_ms = 50;                        // no foreground batch for this long: idle
  std::uint64_t max_run_sectors = 2048;       // an idle-time read at most (and at most a track)
  std::uint64_t queue_bytes = 64ull << 20;    // ride-along bytes waiting for the engine
  ScrubOptions engine;
};

enum class ScrubState { Running, Done, Stopped };
const char* to_string(ScrubState state);

class ScrubRunner final : public BatchObserver, public std::enable_shared_from_this<ScrubRunner> {
 public:
  // Starts a scrub of the mapped volume. The geometry and `io` must outlive
  // stop(). Returns 0, or an errno with *message (ENOTSUP: free-bandwidth
  // on a geometry without equivalence classes).
  static int start(SectorIo& io, const geom::Geometry& geometry, ScrubMode mode, std::unique_ptr<ScrubEngine> engine,
                   ScrubRunnerOptions options, std::shared_ptr<ScrubRunner>* out, std::string* message);
  ~ScrubRunner() override;

  // Stops the scrub (if running) and waits for its thread. Idempotent.
  void stop();
  // Once the scrub is done and the repairs beside it have run: reads each
  // open finding again (ScrubEngine::recheck_jobs) and marks those that no
  // longer hold. Returns early once `stop` is set or the scrub is stopped.
  void recheck_findings(const std::atomic<bool>& stop);
  ScrubState state() const { return state_.load(); }
  ScrubMode mode() const { return mode_; }
  // The engine's status plus state, mode, times and the runner's counters.
  nlohmann::json status() const;

  void before_batch(std::span<const geom::Request> foreground, IoRequest::Op op,
                    std::vector<geom::Lbn>* extra) override;
  void after_batch(std::span<const geom::Request> foreground, IoRequest::Op op, int foreground_result,
                   std::span<const geom::Lbn> extra, const std::byte* data, std::span<const int> extra_results) override;

 private:
  ScrubRunner(SectorIo& io, const geom::Geometry& geometry, ScrubMode mode, std::unique_ptr<ScrubEngine> engine,
              ScrubRunnerOptions options);
  void run();
  // Feeds the ride-along sectors waiting in the queue to the engine.
  void drain();
  // One piece of idle-time work; false when there was none.
  bool idle_work();
  bool free_scan_over() const;

  SectorIo& io_;
  const geom::Geometry& geometry_;
  const ScrubMode mode_;
  std::unique_ptr<ScrubEngine> engine_;
  const ScrubRunnerOptions options_;
  std::atomic<ScrubState> state_{ScrubState::Running};
  std::chrono::system_clock::time_point started_;
  std::chrono::steady_clock::time_point started_steady_;
  std::atomic<std::int64_t> finished_ms_{-1};  // elapsed when it ended

  // Free bandwidth: the picker (not thread-safe) and its counters.
  mutable std::mutex scan_mu_;
  std::unique_ptr<geom::FreeBandwidthScan> scan_;
  std::uint64_t reachable_ = 0;          // LBNs of the volume the free scan can pick
  std::uint64_t touched_in_volume_ = 0;  // of which touched (foreground or picked)
  std::uint64_t picked_ = 0, picked_past_volume_ = 0;

  // Ride-along sectors, from the foreground's threads to the scrub's.
  struct Delivery {
    std::vector<geom::Lbn> lbns;
    std::vector<std::byte> data;
    std::vector<int> results;
  };
  mutable std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<Delivery> queue_;
  std::uint64_t queue_bytes_ = 0;
  std::uint64_t dropped_ = 0;  // sectors read but not queued (queue full): the completion pass reads them
  std::atomic<std::uint64_t> delivered_{0};  // ride-along sectors handed to the engine
  bool stopping_ = false;

  geom::Lbn cursor_ = 0;  // idle-time: where the next run starts
  std::atomic<std::uint64_t> own_reads_{0};
  std::thread thread_;
};

}  // namespace mmfs::fs
