// The BlockDevice of a volume of several devices: its byte space
// is the volume LBN space of a StripedGeometry (geometry/striped.h), in which
// volume track t lives on stripe member t mod p as member track t / p. Every
// layer above (metadata store, allocator, layouts, planner, SectorIo) works
// on volume LBNs unchanged; this class routes each request's pieces to the
// members' own devices.
//
// Stripe units. A request is cut at volume track boundaries: each piece is a
// whole or partial member track (Atropos §5.3: the stripe unit is exactly one
// track, so a track-sized, track-aligned request is one zero-latency access
// of one member). A batch becomes one sub-batch per device; the sub-batches
// run in parallel, each on its own device's queue (an io_uring per image or
// block device, libnbd's asynchronous handles per NBD export).
//
// RAID 1 (raid = 1). The volume has 2p devices: devices 2k and 2k+1 hold
// identical copies of stripe member k, sector for sector (the same member
// LBNs, so both copies have the physical layout the geometry models). A read
// piece goes to the less busy healthy copy (fewer bytes queued on it, this
// batch's assignments included), so a scan keeps both copies busy. A write
// goes to every healthy copy. A copy whose I/O fails with a device error
// (EIO, or a vanished device: ENODEV, ENXIO, ENOTCONN, ESHUTDOWN, ...) is
// marked failed: the failure listener hears of it once (the volume records
// it in the survivors' superblocks, the daemon in /.mmfs/errors), the failed
// reads are retried on the twin, and the device is not used again until it
// is rebuilt (mmfsck --rebuild). A request fails only when both copies do.
//
// RAID 0 (raid = 0). Each stripe member is one device. A failing device is
// not marked failed: its requests return their errno (EIO for the affected
// data, never other bytes), the other devices keep serving, and a device
// that comes back (an NBD server restarted) is used again. stats() counts
// its errors. The volume may record a member lost (record_lost: its copy of
// the metadata failed a write, fs/device/split_meta_device.h); its requests
// still go to it (what it still serves is served), its flush errors no
// longer fail the volume's flush (nothing new is placed on it, and what it
// held is rebuilt or lost), and a fsync of data elsewhere stands.
//
// Threads: submit() and flush() may be called from many threads at once;
// the parallel sub-batches run on a small pool owned by the device.
#pragma once

#include <atomic>
#include <cerrno>
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

#include "fs/device/block_device.h"
#include "geometry/striped.h"

namespace mmfs::fs {

// One device of a volume: its target (path or NBD URI, for messages) and the open device.
struct MemberTarget {
  std::string target;
  std::unique_ptr<BlockDevice> device;
};

// The targets of a command line: each argument, split at commas unless it
// names an existing file (the mount helper passes several members as one
// comma-separated source).
std::vector<std::string> split_targets(const std::vector<std::string>& args);

// Opens every target (buffered when its filesystem has no O_DIRECT). On
// failure returns false with *error and a *message naming the target.
// With `left_out` (a degraded mount), a target that does not open is left
// out instead, its one-line reason appended there; false only when none opens.
bool open_targets(const std::vector<std::string>& targets, OpenOptions options, std::vector<MemberTarget>* out,
                  int* error, std::string* message, std::vector<std::string>* left_out = nullptr);

// The place of a member the volume knows failed and that is not there:
// every request and flush fails with ENODEV. RAID 1 sends it none; on RAID 0
// its data's requests fail, and its flush is no error (StripedDevice::flush).
class AbsentDevice final : public BlockDevice {
 public:
  AbsentDevice(std::uint64_t size, std::uint32_t block) : size_(size), block_(block) {}
  std::uint64_t size_bytes() const override { return size_; }
  std::uint32_t block_size() const override { return block_; }
  int submit(std::span<IoRequest> batch) override {
    for (auto& r : batch) r.result = ENODEV;
    return batch.empty() ? 0 : ENODEV;
  }
  int flush() override { return ENODEV; }

 private:
  std::uint64_t size_;
  std::uint32_t block_;
};

class StripedDevice final : public BlockDevice {
 public:
  // devices.size() == geometry.members() * (raid == 1 ? 2 : 1); `size_bytes`
  // is the volume's byte space (at most the geometry's capacity), each
  // member device holding at least the member LBNs it maps to. `geometry`
  // must outlive the device. `failed`: devices already known failed (RAID 1),
  // never used. Throws std::invalid_argument for a mismatch.
  StripedDevice(std::vector<MemberTarget> devices, const geom::StripedGeometry& geometry, std::uint32_t raid,
                std::uint64_t size_bytes, const std::vector<std::uint32_t>& failed = {});
  ~StripedDevice() override;

  std::uint64_t size_bytes() const override { return size_; }
  std::uint32_t block_size() const override { return block_size_; }
  int submit(std::span<IoRequest> batch) override;
  int flush() override;
  std::uint32_t mirror_sides() const override { return raid_ == 1 ? 2 : 1; }

  std::uint32_t devices() const { return std::uint32_t(devices_.size()); }
  std::uint32_t raid() const { return raid_; }
  BlockDevice& device(std::uint32_t i) { return *devices_[i].target.device; }
  const std::string& target(std::uint32_t i) const { return devices_[i].target.target; }
  bool failed(std::uint32_t i) const { return devices_[i].failed.load(); }
  std::vector<std::uint32_t> failed_devices() const;

  // Called once per device marked failed, from the thread whose I/O found
  // it, after the device is taken out of service. Set before any I/O.
  using FailureListener = std::function<void(std::uint32_t device, const std::string& reason)>;
  // RAID 0: device `d` is lost, as the volume has recorded in the
  // survivors' superblocks. It stays in the request path (its data has no
  // other copy here; what it still serves is served), shows as failed in
  // stats() and failed_devices(), as a member recorded failed at the mount
  // does, and a flush no longer fails for it.
  void record_lost(std::uint32_t d, const std::string& reason);
  // Whether record_lost(d) was called (failed(d) is also true of a member
  // recorded failed at the mount that came back and serves its data).
  bool lost(std::uint32_t d) const { return d < devices_.size() && devices_[d].lost.load(); }
  void set_failure_listener(FailureListener listener) { listener_ = std::move(listener); }

  // Per device: target, state (ok, failed, errors), requests, bytes read and
  // written, errors, and why it failed.
  nlohmann::json stats() const;

 private:
  struct Piece {
    std::size_t request;  // index in the caller's batch
    std::uint32_t member;
    std::uint64_t offset;  // member device byte
    std::uint32_t length;
    std::byte* buffer;
  };
  struct Device {
    MemberTarget target;
    std::atomic<bool> failed{false};
    std::atomic<bool> lost{false};  // RAID 0: record_lost
    std::atomic<std::uint64_t> queued_bytes{0};  // on the device now
    std::atomic<std::uint64_t> requests{0}, bytes_read{0}, bytes_written{0}, errors{0};
    mutable std::mutex mu;  // guards reason
    std::string reason;
  };

  std::vector<Piece> split(std::span<IoRequest> batch) const;
  // Runs each device's requests (on the pool, in parallel); results land in the requests.
  void run(std::vector<std::vector<IoRequest>>& per_device);
  // The healthy copy of `member` with the fewest bytes queued (plus `planned`),
  // or UINT32_MAX when none is healthy.
  std::uint32_t pick_copy(std::uint32_t member, const std::vector<std::uint64_t>& planned) const;
  void mark_failed(std::uint32_t device, int error, const char* op);
  void post(std::function<void()> task);
  void worker();

  const geom::StripedGeometry& geometry_;
  std::uint32_t raid_;
  std::uint64_t size_;
  std::uint32_t block_size_ = 512;
  std::deque<Device> devices_;  // deque: Device holds atomics and a mutex (not movable)
  FailureListener listener_;

  std::mutex pool_mu_;
  std::condition_variable pool_cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> pool_;
};

}  // namespace mmfs::fs
