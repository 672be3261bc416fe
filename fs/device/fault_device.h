// A BlockDevice wrapper for crash and corruption tests (MODELS.md: LevelDB's
// fault_injection_test, dm-log-writes).
//
// It forwards to an in-memory copy of the device and records every write
// since the last flush. crash() then produces the device a power cut would
// leave: writes flushed before it survive; of the unflushed ones, each is
// kept, lost, or torn (a prefix of its blocks kept) at random, in a random
// order. Bit flips can be injected on reads.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "fs/device/block_device.h"

namespace mmfs::fs {

class MemoryDevice final : public BlockDevice {
 public:
  MemoryDevice(std::uint64_t size_bytes, std::uint32_t block_size = 4096);
  std::uint64_t size_bytes() const override { return bytes_.size(); }
  std::uint32_t block_size() const override { return block_size_; }
  int submit(std::span<IoRequest> batch) override;
  int flush() override { return 0; }
  std::vector<std::byte>& bytes() { return bytes_; }

 private:
  std::vector<std::byte> bytes_;
  std::uint32_t block_size_;
};

class FaultInjectingDevice final : public BlockDevice {
 public:
  // Wraps a MemoryDevice (owned). `seed` drives every random choice.
  FaultInjectingDevice(std::unique_ptr<MemoryDevice> base, std::uint64_t seed);

  std::uint64_t size_bytes() const override { return base_->size_bytes(); }
  std::uint32_t block_size() const override { return base_->block_size(); }
  int submit(std::span<IoRequest> batch) override;
  int flush() override;

  // Counts every write request and every flush since construction: a "cut
  // point" is an index into that sequence.
  std::uint64_t events() const { return events_; }
  // After this many events every further write and flush fails with EIO
  // (the machine is dead); 0 = never.
  void fail_after(std::uint64_t events) { fail_after_ = events; }
  // The device image a power cut now would leave (see the class comment).
  std::unique_ptr<MemoryDevice> crash_image();
  // Flip one random bit of each read with this probability (0 = never).
  void set_read_bitflip_probability(double p) { bitflip_p_ = p; }

 private:
  struct PendingWrite {
    std::uint64_t offset;
    std::vector<std::byte> data;  // the bytes the write overwrote
  };
  std::unique_ptr<MemoryDevice> base_;     // every write applied (what the OS sees)
  // Writes since the last flush, in order, each with the bytes it
  // overwrote: undoing them newest first gives the durable contents.
  std::vector<PendingWrite> unflushed_;
  std::mt19937_64 rng_;
  std::uint64_t events_ = 0, fail_after_ = 0;
  double bitflip_p_ = 0;
};

}  // namespace mmfs::fs
