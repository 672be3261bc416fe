// Buffers and requests for the block device unit tests (fs/device/): 4 KiB
// blocks, random or constant fill, byte comparison, one request by hand, and
// a device that can be switched off.
#pragma once

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>

#include "fs/device/block_device.h"
#include "fs/device/fault_device.h"

namespace mmfs::fs::testing::devices {

constexpr std::uint32_t kBlock = 4096;

inline void fill_random(std::span<std::byte> s, std::mt19937_64& rng) {
  for (auto& b : s) b = static_cast<std::byte>(rng());
}

inline void fill(std::span<std::byte> s, unsigned char v) { std::memset(s.data(), v, s.size()); }

inline bool equal(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
}

inline IoRequest req(IoRequest::Op op, std::uint64_t offset, void* buffer, std::uint32_t length) {
  IoRequest r;
  r.op = op;
  r.offset = offset;
  r.buffer = buffer;
  r.length = length;
  return r;
}

// A member device that can be switched off (every request fails with EIO) and on.
class SwitchableDevice final : public BlockDevice {
 public:
  explicit SwitchableDevice(MemoryDevice* base) : base_(base) {}
  std::uint64_t size_bytes() const override { return base_->size_bytes(); }
  std::uint32_t block_size() const override { return base_->block_size(); }
  int submit(std::span<IoRequest> batch) override {
    if (off_) {
      for (auto& r : batch) r.result = EIO;
      return batch.empty() ? 0 : EIO;
    }
    ++calls_;
    return base_->submit(batch);
  }
  int flush() override { return off_ ? EIO : 0; }
  std::atomic<bool> off_{false};
  std::atomic<int> calls_{0};

 private:
  MemoryDevice* base_;
};

}  // namespace mmfs::fs::testing::devices
