#include "fs/device/simulated_device.h"

#include <thread>
#include <vector>

#include "util/align.h"

namespace mmfs::fs {

SimulatedDevice::SimulatedDevice(std::unique_ptr<BlockDevice> base, const geom::Geometry& geometry)
    : base_(std::move(base)),
      geometry_(geometry),
      model_(geometry.make_service_model()),
      busy_until_(std::chrono::steady_clock::now()) {}

int SimulatedDevice::submit(std::span<IoRequest> batch) {
  // The sectors each request touches, as the model sees them.
  const std::uint64_t ss = geometry_.sector_size();
  std::vector<geom::Request> requests;
  requests.reserve(batch.size());
  for (const IoRequest& r : batch) {
    geom::Lbn first = r.offset / ss;
    geom::Lbn last = util::div_up(r.offset + r.length, ss);
    if (r.length == 0 || last > geometry_.capacity_sectors()) continue;  // the base device rejects or serves it
    requests.push_back({first, std::uint32_t(last - first)});
  }
  std::chrono::steady_clock::time_point done;
  {
    std::lock_guard lock(mu_);
    double ms = requests.empty() ? 0.0 : model_->serve(requests);
    modeled_ms_ += ms;
    auto now = std::chrono::steady_clock::now();
    if (busy_until_ < now) {
      // The modeled device sat idle meanwhile: its platter kept turning.
      model_->idle(std::chrono::duration<double, std::milli>(now - busy_until_).count());
      busy_until_ = now;
    }
    busy_until_ += std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double, std::milli>(ms));
    done = busy_until_;
  }
  int r = base_->submit(batch);
  std::this_thread::sleep_until(done);
  return r;
}

double SimulatedDevice::modeled_ms() const {
  std::lock_guard lock(mu_);
  return modeled_ms_;
}

}  // namespace mmfs::fs
