// BlockDevice helpers, AlignedBuffer, open_device() and FileDevice (see
// fs/device/file_device.h for the I/O path and its threading).
#include "fs/device/block_device.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <liburing.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <new>

#include <fmt/format.h>

#include "fs/util/buffer_pool.h"
#include "fs/device/file_device.h"
#include "fs/device/nbd_device.h"
#include "util/align.h"

namespace mmfs::fs {

thread_local int MirrorSide::current_ = -1;

bool is_device_failure(int e) {
  switch (e) {
    case EIO: case ENODEV: case ENXIO: case ENOTCONN: case ESHUTDOWN: case ECONNRESET: case ECONNREFUSED:
    case EPIPE: case ETIMEDOUT: case EHOSTUNREACH: case ENETUNREACH: case ENOMEDIUM: case EBADF:
      return true;
    default:
      return false;
  }
}

// ---------------------------------------------------------------------------
// BlockDevice convenience wrappers

int BlockDevice::read(std::uint64_t offset, void* buffer, std::uint32_t length) {
  IoRequest r;
  r.op = IoRequest::Op::Read;
  r.offset = offset;
  r.length = length;
  r.buffer = buffer;
  submit(std::span<IoRequest>(&r, 1));
  return r.result;
}

int BlockDevice::submit_streaming(std::span<IoRequest> batch, const RequestDone& done) {
  const int rc = submit(batch);
  if (done)
    for (std::size_t i = 0; i < batch.size(); ++i)
      if (batch[i].result == 0) done(i);
  return rc;
}

int BlockDevice::write(std::uint64_t offset, const void* buffer, std::uint32_t length) {
  IoRequest r;
  r.op = IoRequest::Op::Write;
  r.offset = offset;
  r.length = length;
  r.buffer = const_cast<void*>(buffer);  // never written through
  submit(std::span<IoRequest>(&r, 1));
  return r.result;
}

// ---------------------------------------------------------------------------
// AlignedBuffer

AlignedBuffer::AlignedBuffer(std::size_t size) : AlignedBuffer(size, Uninitialized{}) {
  if (size == 0) return;
  // The tail up to the alignment is never exposed, but cleared all the same
  // (a pool buffer may hold an earlier user's bytes; past that tail, no one
  // reads them).
  std::memset(data_, 0, util::align_up(size, kBufferAlignment));
}

AlignedBuffer::AlignedBuffer(std::size_t size, Uninitialized) : size_(size) {
  // Large buffers (decoded chunks, device reads of a view) come from the
  // pool: mapped once, on transparent huge pages, and kept resident between
  // uses (fs/util/buffer_pool.h says what a fresh mapping costs). Huge pages also
  // matter for the gathers, which walk these buffers at strides of kilobytes
  // to megabytes: on 4 KiB pages nearly every access would miss the TLB.
  allocate(size >= BufferPool::kGranule);
}

AlignedBuffer::AlignedBuffer(std::size_t size, ForIo) : size_(size) {
  // One page is one DMA segment either way: it need not hold a granule.
  allocate(size > kOnePage);
}

void AlignedBuffer::allocate(bool pooled) {
  if (size_ == 0) return;
  if (pooled) {
    data_ = BufferPool::shared().take(size_, &pooled_);
    return;
  }
  // aligned_alloc wants a multiple of the alignment; the tail is never exposed.
  const std::size_t alloc = util::align_up(size_, kBufferAlignment);
  data_ = static_cast<std::byte*>(std::aligned_alloc(kBufferAlignment, alloc));
  if (data_ == nullptr) throw std::bad_alloc();
}

void AlignedBuffer::release() {
  if (pooled_) BufferPool::shared().give(data_, pooled_);
  else std::free(data_);
  data_ = nullptr;
  size_ = pooled_ = 0;
}

AlignedBuffer::~AlignedBuffer() { release(); }

AlignedBuffer::AlignedBuffer(AlignedBuffer&& o) noexcept : data_(o.data_), size_(o.size_), pooled_(o.pooled_) {
  o.data_ = nullptr;
  o.size_ = o.pooled_ = 0;
}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& o) noexcept {
  if (this != &o) {
    release();
    data_ = o.data_;
    size_ = o.size_;
    pooled_ = o.pooled_;
    o.data_ = nullptr;
    o.size_ = o.pooled_ = 0;
  }
  return *this;
}

// ---------------------------------------------------------------------------
// FileDevice

struct FileDevice::Ring {
  io_uring ring{};
  bool valid = false;  // io_uring_queue_init succeeded
  ~Ring() {
    if (valid) io_uring_queue_exit(&ring);
  }
};

namespace {

// A fresh ring of `entries` SQEs; nullptr (and the errno) on failure.
std::unique_ptr<FileDevice::Ring> make_ring(std::uint32_t entries, int* err) {
  auto ring = std::make_unique<FileDevice::Ring>();
  // CLAMP: a huge iodepth is clamped, not refused. COOP_TASKRUN (Linux
  // 5.19+): completions do not interrupt the thread with an IPI, they are
  // run when it next enters the kernel, which submit() does to wait anyway.
  io_uring_params params{};
  params.flags = IORING_SETUP_CLAMP | IORING_SETUP_COOP_TASKRUN;
  int rc = io_uring_queue_init_params(entries, &ring->ring, &params);
  if (rc == -EINVAL) {  // older kernel: without COOP_TASKRUN
    params = io_uring_params{};
    params.flags = IORING_SETUP_CLAMP;
    rc = io_uring_queue_init_params(entries, &ring->ring, &params);
  }
  if (rc < 0) {
    *err = -rc;
    return nullptr;
  }
  ring->valid = true;
  return ring;
}

}  // namespace

FileDevice::FileDevice(int fd, std::uint64_t size_bytes, std::uint32_t block_size, std::uint32_t iodepth,
                       bool read_only, bool is_block_device)
    : fd_(fd),
      size_(size_bytes),
      block_size_(block_size),
      iodepth_(iodepth == 0 ? 1 : iodepth),
      read_only_(read_only),
      is_block_device_(is_block_device) {
  // The first ring is created now, so a device knows from the start which
  // path it uses; if io_uring is unavailable (seccomp, the io_uring_disabled
  // sysctl, kernel < 5.1) every request goes through pread/pwrite instead.
  int err = 0;
  if (auto ring = make_ring(iodepth_, &err)) {
    use_uring_ = true;
    free_rings_.push_back(std::move(ring));
    rings_alive_ = 1;
  }
}

FileDevice::~FileDevice() {
  free_rings_.clear();  // every ring is back: submit() calls have returned
  ::close(fd_);
}

int FileDevice::validate(const IoRequest& r) const {
  if (r.op == IoRequest::Op::Write && read_only_) return EROFS;
  if (r.length == 0 || r.buffer == nullptr) return EINVAL;
  if (r.offset % block_size_ != 0 || r.length % block_size_ != 0) return EINVAL;
  if (reinterpret_cast<std::uintptr_t>(r.buffer) % block_size_ != 0) return EINVAL;
  if (r.offset > size_ || r.length > size_ - r.offset) return EINVAL;
  return 0;
}

std::unique_ptr<FileDevice::Ring> FileDevice::acquire_ring() {
  std::unique_lock lock(ring_mu_);
  for (;;) {
    if (!free_rings_.empty()) {
      auto ring = std::move(free_rings_.back());
      free_rings_.pop_back();
      return ring;
    }
    if (rings_alive_ < kMaxRings) {
      ++rings_alive_;  // reserve the slot, create outside the lock
      lock.unlock();
      int err = 0;
      if (auto ring = make_ring(iodepth_, &err)) return ring;
      lock.lock();
      --rings_alive_;
      // No ring can be made now (e.g. out of memory or locked-memory limit):
      // wait for one in use, or go synchronous if there is none at all.
      if (rings_alive_ == 0) return nullptr;
    }
    ring_cv_.wait(lock);
  }
}

void FileDevice::release_ring(std::unique_ptr<Ring> ring) {
  {
    std::lock_guard lock(ring_mu_);
    if (ring) {
      free_rings_.push_back(std::move(ring));
    } else {
      --rings_alive_;  // a broken ring was destroyed by its user
    }
  }
  ring_cv_.notify_one();
}

int FileDevice::submit(std::span<IoRequest> batch) { return submit_streaming(batch, nullptr); }

int FileDevice::submit_streaming(std::span<IoRequest> batch, const RequestDone& done) {
  std::vector<std::size_t> todo;
  todo.reserve(batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) {
    batch[i].result = validate(batch[i]);
    if (batch[i].result == 0) todo.push_back(i);
  }
  if (!todo.empty()) {
    std::unique_ptr<Ring> ring = use_uring_ ? acquire_ring() : nullptr;
    if (ring) {
      if (submit_uring(*ring, batch, todo, done) != 0) {
        ring.reset();  // unusable: destroyed here, its slot freed
      }
      release_ring(std::move(ring));
      if (!todo.empty()) submit_sync(batch, todo, done);  // left over by a broken ring
    } else {
      submit_sync(batch, todo, done);
    }
  }
  for (const IoRequest& r : batch) {
    if (r.result != 0) return r.result;
  }
  return 0;
}

// Runs the requests `todo` (indices into batch) on `ring`, up to iodepth at a
// time. Returns 0 when the ring is still healthy, with `todo` emptied.
// Otherwise (io_uring_enter keeps failing: should not happen) returns that
// errno once every request that reached the kernel has completed, with the
// unfinished requests in `todo`: the caller runs them synchronously (from
// their start: a partial transfer rewrites the same bytes) and discards the ring.
int FileDevice::submit_uring(Ring& r, std::span<IoRequest> batch, std::vector<std::size_t>& todo,
                             const RequestDone& request_done) {
  io_uring* ring = &r.ring;
  constexpr std::uint32_t kMaxRetries = 64;  // EAGAIN/EINTR completions of one request
  constexpr int kMaxEnterFailures = 1000;    // consecutive transient io_uring_enter errors

  std::vector<std::uint32_t> done(batch.size(), 0);     // bytes transferred so far
  std::vector<std::uint32_t> retries(batch.size(), 0);
  std::deque<std::size_t> queue(todo.begin(), todo.end());  // to (re)submit
  std::size_t prepared = 0;   // SQEs filled but not yet taken by the kernel
  std::size_t in_kernel = 0;  // SQEs taken by the kernel, completion pending
  int enter_failures = 0;
  // Requests complete in full, not yet told to `request_done`: told after the
  // ring is refilled, so the device works while the caller uses them.
  std::vector<std::size_t> arrived;
  auto tell_arrived = [&] {
    if (request_done)
      for (std::size_t i : arrived) request_done(i);
    arrived.clear();
  };

  // Accounts one completion; `resubmit` = false when the ring is being abandoned.
  auto complete = [&](std::size_t i, int res, bool resubmit) {
    IoRequest& q = batch[i];
    if (res > 0) {
      done[i] += static_cast<std::uint32_t>(res);
      if (done[i] < q.length && resubmit) queue.push_back(i);  // short transfer: the rest
      if (done[i] == q.length) arrived.push_back(i);
    } else if (res == 0) {
      q.result = EIO;  // end of file (the image shrank) or no progress: never zero-fill
    } else if ((res == -EAGAIN || res == -EINTR) && ++retries[i] <= kMaxRetries) {
      if (resubmit) queue.push_back(i);
    } else {
      q.result = -res;
    }
  };

  auto give_up = [&](int err) {
    for (int waits = 0; in_kernel > 0 && waits < kMaxEnterFailures;) {
      io_uring_cqe* cqe = nullptr;
      const int w = io_uring_wait_cqe(ring, &cqe);
      if (w < 0) {
        ++waits;
        continue;
      }
      complete(static_cast<std::size_t>(io_uring_cqe_get_data64(cqe)), cqe->res, false);
      io_uring_cqe_seen(ring, cqe);
      --in_kernel;
    }
    // Prepared SQEs die with the ring unsubmitted; re-run everything unfinished.
    std::vector<std::size_t> rest;
    for (std::size_t i : todo) {
      if (batch[i].result == 0 && done[i] < batch[i].length) rest.push_back(i);
    }
    todo = std::move(rest);
    tell_arrived();
    return err;
  };

  while (!queue.empty() || prepared > 0 || in_kernel > 0) {
    while (!queue.empty() && prepared + in_kernel < iodepth_ && io_uring_sq_space_left(ring) > 0) {
      const std::size_t i = queue.front();
      queue.pop_front();
      IoRequest& q = batch[i];
      io_uring_sqe* sqe = io_uring_get_sqe(ring);
      auto* buf = static_cast<char*>(q.buffer) + done[i];
      if (q.op == IoRequest::Op::Read) {
        io_uring_prep_read(sqe, fd_, buf, q.length - done[i], q.offset + done[i]);
      } else {
        io_uring_prep_write(sqe, fd_, buf, q.length - done[i], q.offset + done[i]);
      }
      io_uring_sqe_set_data64(sqe, i);
      ++prepared;
    }
    if (prepared > 0) {
      // SQEs the kernel does not take stay in the SQ and go with the next call.
      const int rc = io_uring_submit(ring);
      if (rc >= 0) {
        prepared -= std::min<std::size_t>(prepared, static_cast<std::size_t>(rc));
        in_kernel += static_cast<std::size_t>(rc);
        enter_failures = 0;
      } else if (rc == -EINTR || rc == -EAGAIN || rc == -EBUSY) {
        // Transient (EBUSY: completions to reap first): reap, then retry.
        if (++enter_failures >= kMaxEnterFailures) return give_up(-rc);
        if (in_kernel == 0) {
          sched_yield();
          continue;
        }
      } else {
        return give_up(-rc);
      }
    }
    tell_arrived();
    if (in_kernel == 0) continue;

    io_uring_cqe* cqe = nullptr;
    const int w = io_uring_wait_cqe(ring, &cqe);
    if (w < 0) {
      if ((w == -EINTR || w == -EAGAIN) && ++enter_failures < kMaxEnterFailures) continue;
      return give_up(-w);
    }
    unsigned head = 0;
    unsigned seen = 0;
    io_uring_for_each_cqe(ring, head, cqe) {
      ++seen;
      complete(static_cast<std::size_t>(io_uring_cqe_get_data64(cqe)), cqe->res, true);
    }
    io_uring_cq_advance(ring, seen);
    in_kernel -= seen;
  }
  tell_arrived();
  todo.clear();
  return 0;
}

// The fallback path: pread/pwrite, one request after the other.
void FileDevice::submit_sync(std::span<IoRequest> batch, const std::vector<std::size_t>& todo,
                             const RequestDone& request_done) {
  for (std::size_t i : todo) {
    IoRequest& q = batch[i];
    std::uint32_t done = 0;
    int result = 0;
    while (done < q.length) {
      char* buf = static_cast<char*>(q.buffer) + done;
      const auto off = static_cast<off_t>(q.offset + done);
      const ssize_t n = q.op == IoRequest::Op::Read ? ::pread(fd_, buf, q.length - done, off)
                                                    : ::pwrite(fd_, buf, q.length - done, off);
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        result = errno;
        break;
      }
      if (n == 0) {
        result = EIO;
        break;
      }
      done += static_cast<std::uint32_t>(n);
    }
    q.result = result;
    if (result == 0 && request_done) request_done(i);
  }
}

int FileDevice::flush() {
  if (read_only_) return 0;
  for (;;) {
    // Block devices: fsync (fdatasync is the same there). Images: fdatasync,
    // which also persists the size after a growing ftruncate.
    const int rc = is_block_device_ ? ::fsync(fd_) : ::fdatasync(fd_);
    if (rc == 0) return 0;
    if (errno != EINTR) return errno;
  }
}

// ---------------------------------------------------------------------------
// open_device

namespace {

// Closes the fd, and removes the image if open_device() created it, unless released.
struct OpenGuard {
  int fd = -1;
  std::string created_path;
  ~OpenGuard() {
    if (fd >= 0) ::close(fd);
    if (!created_path.empty()) ::unlink(created_path.c_str());
  }
};

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// The logical block size of the block device under a filesystem, from sysfs
// (/sys/dev/block/MAJ:MIN/queue, or the parent disk's for a partition); 0 if unknown
// (network and pseudo filesystems have no such device).
std::uint32_t sysfs_logical_block_size(dev_t dev) {
  for (const char* rel : {"queue/logical_block_size", "../queue/logical_block_size"}) {
    std::ifstream in(fmt::format("/sys/dev/block/{}:{}/{}", major(dev), minor(dev), rel));
    std::uint32_t v = 0;
    if (in >> v && v >= 512 && (v & (v - 1)) == 0) return v;
  }
  return 0;
}

// Last resort for the direct-I/O granularity of an image: an O_DIRECT read of
// 512 bytes at 0 is refused with EINVAL when the device needs more (4096).
// Not conclusive over a hole on some filesystems, hence after statx and sysfs.
std::uint32_t probe_direct_block_size(int fd) {
  AlignedBuffer buf(kBufferAlignment);
  for (;;) {
    if (::pread(fd, buf.data(), 512, 0) >= 0) return 512;
    if (errno == EINTR) continue;
    return errno == EINVAL ? 4096 : 512;
  }
}

}  // namespace

std::unique_ptr<BlockDevice> open_device(const std::string& path, const OpenOptions& options, int* error,
                                         std::string* message) {
  auto fail = [&](int err, std::string msg) -> std::unique_ptr<BlockDevice> {
    if (error) *error = err;
    if (message) *message = std::move(msg);
    return nullptr;
  };
  if (error) *error = 0;
  if (message) message->clear();
  // An NBD URI: no path, no flock, no O_DIRECT, no creating (fs/device/nbd_device.h).
  if (is_nbd_uri(path)) return NbdDevice::open(path, options, error, message);

  struct stat st {};
  bool exists = ::stat(path.c_str(), &st) == 0;
  if (!exists) {
    const int e = errno;
    if (e != ENOENT) return fail(e, fmt::format("{}: {}", path, std::strerror(e)));
    if (!options.create) return fail(ENOENT, fmt::format("{}: No such file (an image file must be created with a size)", path));
    if (options.read_only) return fail(EINVAL, fmt::format("{}: No such file (cannot create an image read-only)", path));
  } else if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
    return fail(S_ISDIR(st.st_mode) ? EISDIR : ENODEV,
                fmt::format("{}: is {}, not an image file or a block device", path, file_kind(st.st_mode)));
  }

  OpenGuard guard;
  int flags = (options.read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC;
  if (options.direct) flags |= O_DIRECT;
  for (;;) {
    const bool creating = !exists;  // only when options.create (checked above)
    guard.fd = ::open(path.c_str(), creating ? flags | O_CREAT | O_EXCL : flags, mode_t(options.create_mode & 07777));
    if (guard.fd >= 0) {
      if (creating) guard.created_path = path;
      break;
    }
    const int e = errno;
    if (creating && e == EEXIST) {  // appeared meanwhile: open what is there
      exists = true;
      continue;
    }
    if (!creating && e == ENOENT && options.create) {  // vanished meanwhile
      exists = false;
      continue;
    }
    switch (e) {
      case ENOENT:
        return fail(e, fmt::format("{}: No such file", path));
      case EACCES:
      case EPERM:
        return fail(e, fmt::format("{}: Permission denied (need read{} access{})", path,
                                   options.read_only ? "" : " and write", creating ? " to its directory" : ""));
      case EROFS:
        return fail(e, fmt::format("{}: on a read-only filesystem (open it read-only)", path));
      case EINVAL:
        if (options.direct) {
          // open() may have created the file before refusing O_DIRECT.
          if (creating) ::unlink(path.c_str());
          return fail(e, fmt::format("{}: the filesystem does not support O_DIRECT (direct I/O); "
                                     "put the image on a filesystem that does (ext4, xfs, btrfs) or disable direct I/O",
                                     path));
        }
        [[fallthrough]];
      default:
        return fail(e, fmt::format("{}: cannot open: {}", path, std::strerror(e)));
    }
  }

  // One writer at a time: two daemons (or a daemon and mkfs.mmfs) on one
  // volume would each trust their own metadata and overwrite the other's.
  // Readers (mmfsck -n) share the lock with each other, not with a writer.
  if (options.lock && ::flock(guard.fd, (options.read_only ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0) {
    const int e = errno;
    if (e == EWOULDBLOCK) {
      return fail(EBUSY, fmt::format("{}: in use by another process (mounted, or being formatted or checked); "
                                     "unmount it first",
                                     path));
    }
    return fail(e, fmt::format("{}: flock: {}", path, std::strerror(e)));
  }
  if (::fstat(guard.fd, &st) != 0) return fail(errno, fmt::format("{}: fstat: {}", path, std::strerror(errno)));
  const bool is_blk = S_ISBLK(st.st_mode);
  if (!is_blk && !S_ISREG(st.st_mode)) {  // replaced between stat and open
    return fail(ENODEV, fmt::format("{}: is {}, not an image file or a block device", path, file_kind(st.st_mode)));
  }

  std::uint64_t size = 0;
  std::uint32_t block = 0;
  if (is_blk) {
    // A block device cannot grow: create_size does not apply to it.
    if (::ioctl(guard.fd, BLKGETSIZE64, &size) != 0) {
      return fail(errno, fmt::format("{}: BLKGETSIZE64: {}", path, std::strerror(errno)));
    }
    int lbs = 0;
    if (::ioctl(guard.fd, BLKSSZGET, &lbs) != 0) {
      return fail(errno, fmt::format("{}: BLKSSZGET: {}", path, std::strerror(errno)));
    }
    block = static_cast<std::uint32_t>(lbs);
  } else {
    size = static_cast<std::uint64_t>(st.st_size);
    if (options.create_size > size) {
      if (options.read_only) {
        return fail(EINVAL, fmt::format("{}: cannot grow a read-only image to {} bytes", path, options.create_size));
      }
      if (::ftruncate(guard.fd, static_cast<off_t>(options.create_size)) != 0) {
        const int e = errno;
        return fail(e, fmt::format("{}: cannot grow the image to {} bytes: {}", path, options.create_size,
                                   std::strerror(e)));
      }
      size = options.create_size;
    }
    // The direct-I/O granularity: statx(STATX_DIOALIGN) (Linux 6.1+), else the
    // logical block size of the filesystem's device, else a probe.
    bool dio_known = false;
#ifdef STATX_DIOALIGN
    struct statx sx {};
    if (::statx(guard.fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN)) {
      dio_known = true;
      if (sx.stx_dio_offset_align == 0) {
        // The filesystem reports no direct I/O for this file.
        if (options.direct) {
          return fail(EINVAL, fmt::format("{}: the filesystem does not support O_DIRECT (direct I/O) for this file; "
                                          "put the image on a filesystem that does (ext4, xfs, btrfs) or disable direct I/O",
                                          path));
        }
        block = 512;
      } else {
        // Buffers are aligned to block_size() (fs/device/block_device.h), so the
        // block covers the memory alignment direct I/O needs too.
        block = std::max(sx.stx_dio_offset_align, sx.stx_dio_mem_align);
      }
    }
#endif
    if (!dio_known) {
      block = sysfs_logical_block_size(st.st_dev);
      if (block == 0) block = options.direct ? probe_direct_block_size(guard.fd) : 512;
    }
  }
  if (block < 512) block = 512;
  if (block > kBufferAlignment || (block & (block - 1)) != 0) {
    return fail(EINVAL, fmt::format("{}: unsupported logical block size {} (need a power of two from 512 to {})", path,
                                    block, kBufferAlignment));
  }
  size -= size % block;  // a partial last block is not addressable

  auto dev = std::make_unique<FileDevice>(guard.fd, size, block, options.iodepth, options.read_only, is_blk);
  guard.fd = -1;  // owned by the device now
  guard.created_path.clear();
  return dev;
}

}  // namespace mmfs::fs
