// Device reads into heap pages against pool buffers (transparent huge pages):
// why every short-lived I/O buffer is an AlignedBuffer(n, ForIo)
// (fs/device/block_device.h). A batch of 16 random O_DIRECT reads of one size through
// FileDevice, each into its own buffer, the same offsets for both kinds.
//
// Run (alone: it times the disk): build/bench/mmfs-read-path-bench "[dma]" --benchmark-samples 30
// It reads a 512 MiB scratch file written in /var/tmp and removed at exit, or
// MMFS_BENCH_FILE=PATH (read only, at least 64 MiB).
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "fs/device/block_device.h"

namespace {

using mmfs::fs::AlignedBuffer;

constexpr std::uint64_t kScratchBytes = 512ull << 20;

// The file read: MMFS_BENCH_FILE, else a scratch file of random bytes.
class BenchFile {
 public:
  BenchFile() {
    if (const char* given = std::getenv("MMFS_BENCH_FILE")) {
      path_ = given;
      return;
    }
    path_ = "/var/tmp/mmfs-bench-dma-XXXXXX";
    const int fd = ::mkstemp(path_.data());
    REQUIRE(fd >= 0);
    ::close(fd);
    owned_ = true;
    mmfs::fs::OpenOptions o;
    o.lock = false;
    o.create = true;
    o.create_size = kScratchBytes;
    int err = 0;
    std::string message;
    auto dev = mmfs::fs::open_device(path_, o, &err, &message);
    REQUIRE(dev);
    AlignedBuffer chunk(8u << 20, AlignedBuffer::Uninitialized{});
    std::mt19937_64 rng(5);
    for (std::size_t i = 0; i < chunk.size(); i += 8) *reinterpret_cast<std::uint64_t*>(chunk.data() + i) = rng();
    for (std::uint64_t at = 0; at < kScratchBytes; at += chunk.size())
      REQUIRE(dev->write(at, chunk.data(), std::uint32_t(chunk.size())) == 0);
    REQUIRE(dev->flush() == 0);
  }
  ~BenchFile() {
    if (owned_) ::unlink(path_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool owned_ = false;
};

const BenchFile& bench_file() {
  static BenchFile file;
  return file;
}

}  // namespace

TEST_CASE("O_DIRECT reads into heap pages against pool buffers", "[dma][!benchmark]") {
  mmfs::fs::OpenOptions o;
  o.read_only = true;
  o.lock = false;
  int err = 0;
  std::string message;
  auto dev = mmfs::fs::open_device(bench_file().path(), o, &err, &message);
  REQUIRE(dev);
  REQUIRE(dev->size_bytes() >= (64ull << 20));
  constexpr std::size_t kBatch = 16;
  std::mt19937_64 rng(11);
  for (std::uint32_t bytes : {16u << 10, 256u << 10, 1u << 20}) {
    // Heap buffers: an Uninitialized buffer under 2 MiB comes from aligned_alloc.
    std::vector<AlignedBuffer> heap, pool;
    for (std::size_t i = 0; i < kBatch; ++i) {
      heap.emplace_back(bytes, AlignedBuffer::Uninitialized{});
      pool.emplace_back(bytes, AlignedBuffer::ForIo{});
    }
    const std::uint64_t slots = (dev->size_bytes() - bytes) / 4096;
    auto batch_into = [&](std::vector<AlignedBuffer>& buffers) {
      std::vector<mmfs::fs::IoRequest> batch(kBatch);
      for (std::size_t i = 0; i < kBatch; ++i) {
        batch[i].offset = (rng() % slots) * 4096;
        batch[i].length = bytes;
        batch[i].buffer = buffers[i].data();
      }
      return dev->submit(batch);
    };
    REQUIRE(batch_into(heap) == 0);  // every page faulted in before timing
    REQUIRE(batch_into(pool) == 0);
    const std::string size = std::to_string(bytes >> 10) + " KiB";
    BENCHMARK("16 reads of " + size + " into heap pages") { return batch_into(heap); };
    BENCHMARK("16 reads of " + size + " into pool buffers") { return batch_into(pool); };
  }
}
