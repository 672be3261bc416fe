// The BlockDevice of an image file or a block device (open_device() in
// fs/device/block_device.h returns one). Declared here only so tools and tests can
// ask which I/O path it took; everything else goes through BlockDevice.
//
// I/O path: io_uring (liburing). Each submit() call borrows one ring from a
// per-device pool for its whole batch and keeps up to `iodepth` requests of
// that batch in flight, refilling as completions arrive; submit_streaming()
// hands each completed request to its caller right after each refill. Concurrent submit()
// calls from several threads each get their own ring (created on demand, at
// most kMaxRings; beyond that callers wait for a free one), so they neither
// serialize nor share completion queues. `iodepth` is therefore the queue
// depth of one submit() call, not of the whole device.
//
// When io_uring is unavailable (io_uring_queue_init fails: seccomp filters,
// io_uring_disabled sysctl, kernels older than 5.1) the device falls back to
// synchronous pread/pwrite, one request at a time; uses_io_uring() says which.
//
// Every request is validated before anything is submitted (offset and length
// multiples of block_size(), length > 0, buffer non-null and aligned to
// block_size(), inside the device; writes need a writable device): an
// invalid request fails with EINVAL (EROFS for a write on a read-only device)
// and is not executed at all; the valid requests of the same batch still run.
// Short transfers are resubmitted for the remainder; a transfer that makes no
// progress (end of file: the image shrank under us) is EIO, never zeroes.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fs/device/block_device.h"

namespace mmfs::fs {

class FileDevice final : public BlockDevice {
 public:
  static constexpr unsigned kMaxRings = 16;

  // Takes ownership of `fd` (already opened with the right flags).
  // REQUIRES: size_bytes is a multiple of block_size.
  FileDevice(int fd, std::uint64_t size_bytes, std::uint32_t block_size, std::uint32_t iodepth, bool read_only,
             bool is_block_device);
  ~FileDevice() override;
  FileDevice(const FileDevice&) = delete;
  FileDevice& operator=(const FileDevice&) = delete;

  std::uint64_t size_bytes() const override { return size_; }
  std::uint32_t block_size() const override { return block_size_; }
  int submit(std::span<IoRequest> batch) override;
  int submit_streaming(std::span<IoRequest> batch, const RequestDone& done) override;
  int flush() override;

  // True when requests go through io_uring, false for the pread/pwrite fallback.
  bool uses_io_uring() const { return use_uring_; }
  std::uint32_t iodepth() const { return iodepth_; }

  struct Ring;  // an io_uring instance (defined in block_device.cc)

 private:
  int validate(const IoRequest& r) const;
  int submit_uring(Ring& ring, std::span<IoRequest> batch, std::vector<std::size_t>& todo, const RequestDone& done);
  void submit_sync(std::span<IoRequest> batch, const std::vector<std::size_t>& todo, const RequestDone& done);
  std::unique_ptr<Ring> acquire_ring();
  void release_ring(std::unique_ptr<Ring> ring);

  int fd_;
  std::uint64_t size_;
  std::uint32_t block_size_;
  std::uint32_t iodepth_;
  bool read_only_;
  bool is_block_device_;
  bool use_uring_ = false;

  std::mutex ring_mu_;                             // guards free_rings_ and rings_alive_
  std::condition_variable ring_cv_;                // signalled when a ring is released
  std::vector<std::unique_ptr<Ring>> free_rings_;  // GUARDED_BY(ring_mu_)
  unsigned rings_alive_ = 0;                       // GUARDED_BY(ring_mu_): free + borrowed
};

}  // namespace mmfs::fs
