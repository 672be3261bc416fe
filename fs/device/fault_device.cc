// MemoryDevice and FaultInjectingDevice (fs/device/fault_device.h).
//
// How FaultInjectingDevice keeps the durable state cheaply: rather than a
// second full image, each entry of `unflushed_`
// holds the bytes its write OVERWROTE in the base device. The state of the
// last flush is then the base with the pending writes undone newest first,
// which is correct when pending writes overlap; flush() only drops the list,
// so the cost of a write or flush is O(bytes written), never O(device).
#include "fs/device/fault_device.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <numeric>

namespace mmfs::fs {

namespace {

// The checks of FileDevice (fs/device/file_device.h), so code tested on memory
// devices also runs on real ones.
int validate(const IoRequest& r, std::uint64_t size, std::uint32_t block_size) {
  if (r.length == 0 || r.buffer == nullptr) return EINVAL;
  if (r.offset % block_size != 0 || r.length % block_size != 0) return EINVAL;
  if (reinterpret_cast<std::uintptr_t>(r.buffer) % block_size != 0) return EINVAL;
  if (r.offset > size || r.length > size - r.offset) return EINVAL;
  return 0;
}

int first_error(std::span<IoRequest> batch) {
  for (const IoRequest& r : batch) {
    if (r.result != 0) return r.result;
  }
  return 0;
}

}  // namespace

// ---------------------------------------------------------------------------
// MemoryDevice

MemoryDevice::MemoryDevice(std::uint64_t size_bytes, std::uint32_t block_size)
    : bytes_(size_bytes - size_bytes % (block_size == 0 ? 1 : block_size)), block_size_(block_size) {}

int MemoryDevice::submit(std::span<IoRequest> batch) {
  for (IoRequest& r : batch) {
    r.result = validate(r, bytes_.size(), block_size_);
    if (r.result != 0) continue;
    if (r.op == IoRequest::Op::Read) {
      std::memcpy(r.buffer, bytes_.data() + r.offset, r.length);
    } else {
      std::memcpy(bytes_.data() + r.offset, r.buffer, r.length);
    }
  }
  return first_error(batch);
}

// ---------------------------------------------------------------------------
// FaultInjectingDevice

FaultInjectingDevice::FaultInjectingDevice(std::unique_ptr<MemoryDevice> base, std::uint64_t seed)
    : base_(std::move(base)), rng_(seed) {}

int FaultInjectingDevice::submit(std::span<IoRequest> batch) {
  std::vector<std::byte>& bytes = base_->bytes();
  for (IoRequest& r : batch) {
    r.result = validate(r, bytes.size(), base_->block_size());
    if (r.result != 0) continue;  // never reaches the device: not an event
    std::byte* at = bytes.data() + r.offset;
    if (r.op == IoRequest::Op::Read) {
      std::memcpy(r.buffer, at, r.length);
      if (bitflip_p_ > 0 && std::bernoulli_distribution(std::min(bitflip_p_, 1.0))(rng_)) {
        const std::uint64_t bit = std::uniform_int_distribution<std::uint64_t>(0, std::uint64_t{r.length} * 8 - 1)(rng_);
        static_cast<unsigned char*>(r.buffer)[bit / 8] ^= static_cast<unsigned char>(1u << (bit % 8));
      }
      continue;
    }
    ++events_;
    if (fail_after_ != 0 && events_ > fail_after_) {
      r.result = EIO;
      continue;
    }
    PendingWrite w{r.offset, std::vector<std::byte>(at, at + r.length)};  // the bytes it overwrites
    std::memcpy(at, r.buffer, r.length);
    unflushed_.push_back(std::move(w));
  }
  return first_error(batch);
}

int FaultInjectingDevice::flush() {
  ++events_;
  if (fail_after_ != 0 && events_ > fail_after_) return EIO;
  unflushed_.clear();  // everything in the base is durable now
  return 0;
}

std::unique_ptr<MemoryDevice> FaultInjectingDevice::crash_image() {
  const std::uint32_t bs = base_->block_size();
  auto image = std::make_unique<MemoryDevice>(base_->size_bytes(), bs);
  std::vector<std::byte>& out = image->bytes();
  out = base_->bytes();

  // Walk back from the current state to the durable one, recovering the data
  // each pending write put there (later writes may have overwritten it since).
  std::vector<std::vector<std::byte>> written(unflushed_.size());
  for (std::size_t k = unflushed_.size(); k-- > 0;) {
    const PendingWrite& w = unflushed_[k];
    std::byte* at = out.data() + w.offset;
    written[k].assign(at, at + w.data.size());
    std::memcpy(at, w.data.data(), w.data.size());
  }

  // The power cut: the pending writes reach the media in any order, each
  // whole (1/2), not at all (1/4) or torn: a prefix of its blocks (1/4; at
  // least one block and not all when it has two or more, else lost).
  std::vector<std::size_t> order(unflushed_.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::shuffle(order.begin(), order.end(), rng_);
  std::uniform_int_distribution<int> fate(0, 3);
  for (std::size_t k : order) {
    const std::size_t len = written[k].size();
    std::size_t keep = len;
    switch (fate(rng_)) {
      case 0:
      case 1:
        break;
      case 2:
        keep = 0;
        break;
      default: {
        const std::size_t blocks = len / bs;
        keep = blocks >= 2 ? bs * std::uniform_int_distribution<std::size_t>(1, blocks - 1)(rng_) : 0;
        break;
      }
    }
    std::memcpy(out.data() + unflushed_[k].offset, written[k].data(), keep);
  }
  return image;
}

}  // namespace mmfs::fs
