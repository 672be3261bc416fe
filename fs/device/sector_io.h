// Reads and writes of geometry sectors through the device's batched path,
// with the counters /.mmfs/stats reports. Every data path of the daemon (plain
// files, array cells, views, relayout) goes through here, so a view's IoPlan
// reaches the device as a few large batches, never one cell at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <span>
#include <vector>

#include "fs/device/block_device.h"
#include "geometry/geometry.h"
#include "geometry/service_time.h"

namespace mmfs::fs {

// `sectors` geometry sectors at `lbn`, to or from `buffer` (aligned for O_DIRECT).
struct SectorRun {
  geom::Lbn lbn = 0;
  std::uint64_t sectors = 0;
  std::byte* buffer = nullptr;
};

// Watches the foreground's device batches (the scrub, fs/scrub/scrub_runner.h). It
// may add single sectors to read in the same device call as a batch: on a
// MEMS device, LBNs of the equivalence classes the batch positions the sled
// at, which ride along without changing the batch's service time (MEMS paper
// §5.1, geometry/free_bandwidth.h). Called from any thread that issues I/O,
// concurrently: implementations lock what they share.
class BatchObserver {
 public:
  virtual ~BatchObserver() = default;
  // Before the batch goes to the device: appends the sectors to read with it.
  virtual void before_batch(std::span<const geom::Request> foreground, IoRequest::Op op,
                            std::vector<geom::Lbn>* extra) = 0;
  // After the device served it: the foreground's outcome (0 or its first
  // errno), and the extra sectors: their bytes (extra.size() sectors back to
  // back) and each one's errno (0: read).
  virtual void after_batch(std::span<const geom::Request> foreground, IoRequest::Op op, int foreground_result,
                           std::span<const geom::Lbn> extra, const std::byte* data,
                           std::span<const int> extra_results) = 0;
};

class SectorIo {
 public:
  SectorIo(BlockDevice& device, const geom::Geometry& geometry);

  std::uint32_t sector_size() const { return sector_size_; }
  // See BlockDevice::mirror_sides and MirrorSide.
  std::uint32_t mirror_sides() const { return device_.mirror_sides(); }
  // The volume's geometry: its service model prices a plan's requests.
  const geom::Geometry& geometry() const { return geometry_; }
  // Executes the runs (in any order, up to the device's queue depth at once)
  // and waits for all of them. 0 or the first errno.
  int read(std::span<const SectorRun> runs) { return submit(runs, IoRequest::Op::Read); }
  // The same, and calls `run_done(k)` as soon as every sector of runs[k] has
  // arrived (on this thread, while later runs may still be on the device);
  // never for a run that failed.
  int read(std::span<const SectorRun> runs, const std::function<void(std::size_t run)>& run_done) {
    return submit(runs, IoRequest::Op::Read, true, &run_done);
  }
  // The same for the sectors of bitmap indexes, counted apart in stats()
  // (index_sectors_read), so a query can be shown to have read no data.
  int read_index(std::span<const SectorRun> runs) {
    for (const SectorRun& r : runs) index_sectors_read_ += r.sectors;
    return submit(runs, IoRequest::Op::Read);
  }
  int write(std::span<const SectorRun> runs) { return submit(runs, IoRequest::Op::Write); }
  int flush() {
    ++flushes_;
    return device_.flush();
  }

  // The scrub's own reads (idle time, its completion pass): not foreground
  // activity, never shown to the observer, counted apart in stats().
  int read_background(std::span<const SectorRun> runs) { return submit(runs, IoRequest::Op::Read, false); }
  // Installs (or, with null, removes) the observer of foreground batches.
  // After a removal no new call starts; calls in flight keep their own
  // reference to the observer until they return.
  void set_observer(std::shared_ptr<BatchObserver> observer);
  // Milliseconds since the last foreground batch completed; 0 while one is
  // on the device. The scrub's idle-time reads wait for this to grow.
  double foreground_idle_ms() const;

  // Counters since mount, and the device time the geometry model predicts
  // for the batches issued (each batch served from the model's current state).
  nlohmann::json stats() const;

 private:
  int submit(std::span<const SectorRun> runs, IoRequest::Op op, bool foreground = true,
             const std::function<void(std::size_t run)>* run_done = nullptr);
  // One device call: the foreground batch plus the sectors the observer adds.
  // `request_done`, when set, is told of each foreground request that completed.
  int issue(std::vector<IoRequest>& batch, std::vector<geom::Request>& modeled, IoRequest::Op op, bool foreground,
            const BlockDevice::RequestDone& request_done = nullptr);
  std::shared_ptr<BatchObserver> observer() const;

  BlockDevice& device_;
  const geom::Geometry& geometry_;
  std::uint32_t sector_size_;
  std::atomic<std::uint64_t> requests_{0}, index_sectors_read_{0}, sectors_read_{0}, sectors_written_{0}, batches_{0}, flushes_{0};
  // The scrub's reads: sectors riding along foreground batches, and its own.
  std::atomic<std::uint64_t> ride_along_sectors_{0}, background_sectors_{0}, background_batches_{0};
  // Foreground activity, for idle detection.
  std::atomic<int> foreground_in_flight_{0};
  std::atomic<std::int64_t> foreground_end_ns_{0};
  std::atomic<bool> observed_{false};
  mutable std::mutex observer_mu_;
  std::shared_ptr<BatchObserver> observer_;
  mutable std::mutex model_mu_;
  std::unique_ptr<geom::ServiceTimeModel> model_;
  double modeled_ms_ = 0;
  // The real clock beside the model: each foreground device call's wall time
  // summed (device_ms), and the wall time at least one was on the device
  // (device_busy_ms; calls from several threads overlap). A streamed read's
  // run_done work happens inside its call and counts. Guarded by model_mu_.
  void device_call_started();
  void device_call_ended(std::int64_t started_ns);
  int device_calls_in_flight_ = 0;
  std::int64_t busy_since_ns_ = 0;
  double device_ms_ = 0, device_busy_ms_ = 0;
};

}  // namespace mmfs::fs
