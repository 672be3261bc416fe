#include "daemon/request_poller.h"

#define FUSE_USE_VERSION 35
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mmfs::daemon {
namespace {

// The kernel marks an INTERRUPT's unique with the low bit of the request it
// interrupts (FUSE_INT_REQ_BIT in fs/fuse/dev.c, not in the uapi header).
constexpr std::uint64_t kInterruptBit = 1;

// libfuse passes the session's userdata to the hooks, not ours; there is one
// session per daemon, so one poller.
RequestPoller* installed = nullptr;

ssize_t read_hook(int fd, void* buf, std::size_t len, void*) { return installed->read_request(fd, buf, len); }

ssize_t writev_hook(int fd, iovec* iov, int count, void*) { return installed->write_reply(fd, iov, count); }

}  // namespace

std::unique_ptr<RequestPoller> RequestPoller::install(fuse_session* session, std::chrono::microseconds window,
                                                      std::string* error) {
  if (installed) {
    *error = "a request poller is already installed";
    return nullptr;
  }
  int session_fd = fuse_session_fd(session);
  int clone_fd = ::open("/dev/fuse", O_RDWR | O_CLOEXEC | O_NONBLOCK);
  if (clone_fd < 0) {
    *error = std::string("cannot open /dev/fuse: ") + std::strerror(errno);
    return nullptr;
  }
  std::uint32_t master = std::uint32_t(session_fd);
  if (::ioctl(clone_fd, FUSE_DEV_IOC_CLONE, &master) != 0) {
    *error = std::string("cannot clone the FUSE device: ") + std::strerror(errno);
    ::close(clone_fd);
    return nullptr;
  }
  std::unique_ptr<RequestPoller> poller(new RequestPoller(clone_fd, window));
  installed = poller.get();
  fuse_custom_io io{};
  io.read = &read_hook;
  io.writev = &writev_hook;
  // No splice hooks: libfuse then neither splices replies (it only offers
  // FUSE_CAP_SPLICE_WRITE with a splice_send hook) nor, as the daemon wants no
  // FUSE_CAP_SPLICE_READ, requests, so every byte passes through the hooks.
  if (int r = fuse_session_custom_io(session, &io, session_fd); r != 0) {
    *error = std::string("fuse_session_custom_io: ") + std::strerror(-r);
    installed = nullptr;
    return nullptr;
  }
  return poller;
}

RequestPoller::RequestPoller(int clone_fd, std::chrono::microseconds window) : clone_fd_(clone_fd), window_(window) {}

RequestPoller::~RequestPoller() {
  if (installed == this) installed = nullptr;
  ::close(clone_fd_);
}

RequestPoller::Counters RequestPoller::counters() const {
  Counters c;
  c.polled = polled_.load(std::memory_order_relaxed);
  c.slept = slept_.load(std::memory_order_relaxed);
  c.interrupts = interrupts_.load(std::memory_order_relaxed);
  std::lock_guard lock(owed_mu_);
  c.owed = owed_.size();
  return c;
}

ssize_t RequestPoller::read_request(int session_fd, void* buf, std::size_t len) {
  if (window_.count() > 0 && !polling_.exchange(true, std::memory_order_acquire)) {
    ssize_t n = poll_clone(buf, len);
    int err = errno;
    polling_.store(false, std::memory_order_release);
    if (n >= 0 || err != EAGAIN) {
      errno = err;
      return n;
    }
  }
  ssize_t n = ::read(session_fd, buf, len);
  if (n > 0) {
    slept_.fetch_add(1, std::memory_order_relaxed);
    count_interrupt(buf, std::size_t(n));
  }
  return n;
}

// EAGAIN when the window passed with nothing to read. Anything else the
// device says (ENODEV at unmount, ENOENT for a request interrupted while
// being read, EINTR) goes back to libfuse as a read of the session would.
ssize_t RequestPoller::poll_clone(void* buf, std::size_t len) {
  const auto deadline = std::chrono::steady_clock::now() + window_;
  for (;;) {
    ssize_t n = ::read(clone_fd_, buf, len);
    if (n > 0) {
      count_interrupt(buf, std::size_t(n));
      owe_reply(buf, std::size_t(n));
      polled_.fetch_add(1, std::memory_order_relaxed);
      return n;
    }
    if (n == 0 || errno != EAGAIN) return n;
    if (std::chrono::steady_clock::now() >= deadline) {
      errno = EAGAIN;
      return -1;
    }
    // Let the caller run if the scheduler put it on this CPU.
    sched_yield();
  }
}

void RequestPoller::count_interrupt(const void* request, std::size_t len) {
  fuse_in_header in;
  if (len < sizeof in) return;
  std::memcpy(&in, request, sizeof in);
  if (in.opcode == FUSE_INTERRUPT) interrupts_.fetch_add(1, std::memory_order_relaxed);
}

void RequestPoller::owe_reply(const void* request, std::size_t len) {
  fuse_in_header in;
  if (len < sizeof in) return;  // libfuse rejects a short read itself
  std::memcpy(&in, request, sizeof in);
  // Interrupts, forgets and retrieve answers get no reply of their own.
  if (in.unique & kInterruptBit) return;
  if (in.opcode == FUSE_FORGET || in.opcode == FUSE_BATCH_FORGET || in.opcode == FUSE_NOTIFY_REPLY) return;
  std::lock_guard lock(owed_mu_);
  owed_.insert(in.unique);
}

// An answer to an interrupt (odd unique) belongs where the interrupted
// request lives, and does not settle that request's own reply.
bool RequestPoller::owed_on_clone(std::uint64_t unique) {
  std::lock_guard lock(owed_mu_);
  if (unique & kInterruptBit) return owed_.count(unique & ~kInterruptBit) != 0;
  return owed_.erase(unique) != 0;
}

ssize_t RequestPoller::write_reply(int session_fd, iovec* iov, int count) {
  int fd = session_fd;
  fuse_out_header out;
  // Notifications (unique 0) may go on either device.
  if (count > 0 && iov[0].iov_len >= sizeof out) {
    std::memcpy(&out, iov[0].iov_base, sizeof out);
    if (out.unique != 0 && owed_on_clone(out.unique)) fd = clone_fd_;
  }
  return ::writev(fd, iov, count);
}

}  // namespace mmfs::daemon
