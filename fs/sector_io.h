// Reads and writes of geometry sectors through the device's batched path,
// with the counters /.mmfs/stats reports. Every data path of the daemon (plain
// files, array cells, views, relayout) goes through here, so a view's IoPlan
// reaches the device as a few large batches, never one cell at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <span>
#include <vector>

#include "fs/block_device.h"
#include "geometry/geometry.h"
#include "geometry/service_time.h"

namespace mmfs::fs {

// `sectors` geometry sectors at `lbn`, to or from `buffer` (aligned for O_DIRECT).
struct SectorRun {
  geom::Lbn lbn = 0;
  std::uint64_t sectors = 0;
  std::byte* buffer = nullptr;
};

class SectorIo {
 public:
  SectorIo(BlockDevice& device, const geom::Geometry& geometry);

  std::uint32_t sector_size() const { return sector_size_; }
  // Executes the runs (in any order, up to the device's queue depth at once)
  // and waits for all of them. 0 or the first errno.
  int read(std::span<const SectorRun> runs) { return submit(runs, IoRequest::Op::Read); }
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

  // Counters since mount, and the device time the geometry model predicts
  // for the batches issued (each batch served from the model's current state).
  nlohmann::json stats() const;

 private:
  int submit(std::span<const SectorRun> runs, IoRequest::Op op);

  BlockDevice& device_;
  const geom::Geometry& geometry_;
  std::uint32_t sector_size_;
  std::atomic<std::uint64_t> requests_{0}, index_sectors_read_{0}, sectors_read_{0}, sectors_written_{0}, batches_{0}, flushes_{0};
  mutable std::mutex model_mu_;
  std::unique_ptr<geom::ServiceTimeModel> model_;
  double modeled_ms_ = 0;
};

}  // namespace mmfs::fs
