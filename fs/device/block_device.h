// Every device access of mmfs goes through this interface (MODELS.md:
// LevelDB's Env), so tests can swap in a fault-injecting device.
//
// Offsets and lengths are in bytes and must be multiples of block_size()
// (the device's logical block size, 512..4096), and so must buffer addresses
// (AlignedBuffer allocates at kBufferAlignment, which satisfies every block
// size): the file and block-device backends use O_DIRECT.
// Errors are returned, never thrown: short reads/writes, EIO and alignment
// errors surface as a non-zero errno, never as wrong bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace mmfs::fs {

constexpr std::size_t kBufferAlignment = 4096;

// One request of a batch: read or write `length` bytes at `offset` into/from `buffer`.
struct IoRequest {
  enum class Op { Read, Write } op = Op::Read;
  std::uint64_t offset = 0;
  std::uint32_t length = 0;
  void* buffer = nullptr;
  int result = 0;  // filled by submit(): 0 or a positive errno
};

class BlockDevice {
 public:
  virtual ~BlockDevice() = default;

  virtual std::uint64_t size_bytes() const = 0;
  virtual std::uint32_t block_size() const = 0;  // logical block size (alignment unit)

  // Executes every request of the batch, up to the device's queue depth at a
  // time, and waits for all of them. Returns 0 when every request succeeded,
  // else the first failing request's errno (each request's `result` says
  // which). Requests of one batch may complete in any order.
  virtual int submit(std::span<IoRequest> batch) = 0;

  // Told that request `index` of a batch has completed in full.
  using RequestDone = std::function<void(std::size_t index)>;
  // As submit(), and calls `done(i)` for every request i that succeeded, on
  // the calling thread, in completion order, while the rest of the batch may
  // still be on the device: a reader verifies and copies what has arrived
  // while the device serves the rest. Never for a failed request. This
  // default calls it once the whole batch is done; FileDevice as each
  // request completes.
  virtual int submit_streaming(std::span<IoRequest> batch, const RequestDone& done);

  // Makes every completed write durable (fdatasync / FLUSH).
  virtual int flush() = 0;

  // How many copies of every byte a read can be steered to (MirrorSide):
  // 2 for a RAID 1 volume, else 1.
  virtual std::uint32_t mirror_sides() const { return 1; }

  // Convenience wrappers over submit() for one request.
  int read(std::uint64_t offset, void* buffer, std::uint32_t length);
  int write(std::uint64_t offset, const void* buffer, std::uint32_t length);
};

// The device queue depth a mount keeps by default (`-o iodepth=N`): the
// requests of one batch in flight at once. A cold view of an array is often a
// thousand reads of a few KiB (a slice across cells, a thin Zarr chunk), which
// only a deep queue overlaps: on this project's virtio disk (128 tags) 128
// reads those up to a quarter faster than 32 did, and large sequential writes are the
// same at both (docs/benchmarks/iodepth.md). `mmfs-geom measure` fits its
// bursts at this depth, so the model prices reads as the daemon issues them.
inline constexpr std::uint32_t kDefaultIodepth = 128;

struct OpenOptions {
  bool read_only = false;
  bool direct = true;          // O_DIRECT; tests may turn it off on filesystems without it
  std::uint32_t iodepth = kDefaultIodepth;  // io_uring queue depth
  bool create = false;         // image files: create if missing
  std::uint64_t create_size = 0;  // image files: grow (sparse) to at least this size
  // image files: the mode of one created (less the umask). The image holds
  // every array of the volume whatever their modes: its owner's alone by
  // default, as a disk's device node is root's (docs/daemon.md, "Permissions").
  std::uint32_t create_mode = 0600;
  // flock(2) the target: exclusive for writers, shared for readers, so two
  // processes never write one volume. Only tests that open an image twice
  // on purpose (to look behind a device's back) turn it off.
  bool lock = true;
};

// Opens an image file or a block device (size and logical block size from the
// kernel). Returns nullptr and sets *error (errno) and *message on failure.
std::unique_ptr<BlockDevice> open_device(const std::string& path, const OpenOptions& options, int* error,
                                         std::string* message);

// An aligned buffer for O_DIRECT I/O, zero-filled. Buffers of 2 MiB and more
// come from BufferPool::shared() (fs/util/buffer_pool.h) and go back to it.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(std::size_t size);
  // Without the zero fill: for buffers every byte of which is about to be
  // overwritten (device reads, gathered views), where clearing would cost as
  // much as the copy.
  struct Uninitialized {};
  AlignedBuffer(std::size_t size, Uninitialized);
  // A short-lived buffer the device reads into or writes from, of any size:
  // from the pool (at least one 2 MiB granule of huge pages), not zero-filled.
  // DMA costs per page, so reads into huge pages are faster
  // (docs/measurements.md, "Buffers in pages or huge pages"; docs/daemon.md,
  // "I/O buffers"). Not for buffers kept for long or held by the thousand (caches,
  // catalogs, an array's write-back staging, a merge's windows): each holds a
  // whole granule. One page or less is allocated as an Uninitialized buffer:
  // a single page is a single segment anyway.
  struct ForIo {};
  AlignedBuffer(std::size_t size, ForIo);
  static constexpr std::size_t kOnePage = 4096;
  ~AlignedBuffer();
  AlignedBuffer(AlignedBuffer&& o) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::span<std::byte> span() { return {data_, size_}; }

 private:
  // data_ for size_ bytes: from the pool, or from aligned_alloc.
  void allocate(bool pooled);
  void release();

  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t pooled_ = 0;  // the pool buffer's size; 0: from aligned_alloc
};

// True for the errnos that say a device failed (as opposed to a request
// the caller got wrong, such as EINVAL).
bool is_device_failure(int error);

// Which side of a mirrored device the reads of this thread go to while one
// is alive (RAID 1: device 2k + side of stripe member k; a failed side's
// reads fail, with no retry on its twin). A repair reads the other side of
// bytes one side holds damaged; without one the device chooses.
class MirrorSide {
 public:
  explicit MirrorSide(int side) : saved_(current_) { current_ = side; }
  ~MirrorSide() { current_ = saved_; }
  MirrorSide(const MirrorSide&) = delete;
  MirrorSide& operator=(const MirrorSide&) = delete;
  // The side asked for, or -1.
  static int current() { return current_; }

 private:
  int saved_;
  static thread_local int current_;
};

}  // namespace mmfs::fs
