// The `simulate` mount option (docs/reference.md §3): a BlockDevice wrapper that makes
// every batch take, in wall-clock time, the service time the geometry's model
// predicts for it, so a volume on any disk behaves like the modeled device.
// The model keeps the head position and clock across batches; a batch that
// arrives while the modeled device is still busy waits for it.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>

#include "fs/device/block_device.h"
#include "geometry/geometry.h"
#include "geometry/service_time.h"

namespace mmfs::fs {

class SimulatedDevice final : public BlockDevice {
 public:
  // The geometry must outlive the device.
  SimulatedDevice(std::unique_ptr<BlockDevice> base, const geom::Geometry& geometry);

  std::uint64_t size_bytes() const override { return base_->size_bytes(); }
  std::uint32_t block_size() const override { return base_->block_size(); }
  int submit(std::span<IoRequest> batch) override;
  int flush() override { return base_->flush(); }
  std::uint32_t mirror_sides() const override { return base_->mirror_sides(); }

  // Modeled device time so far, in ms.
  double modeled_ms() const;

 private:
  std::unique_ptr<BlockDevice> base_;
  const geom::Geometry& geometry_;
  mutable std::mutex mu_;
  std::unique_ptr<geom::ServiceTimeModel> model_;
  std::chrono::steady_clock::time_point busy_until_;
  double modeled_ms_ = 0;
};

}  // namespace mmfs::fs
