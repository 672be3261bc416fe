#include "daemon/request_poller.h"

#define FUSE_USE_VERSION 35
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <poll.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

namespace mmfs::daemon {
namespace {

// The kernel marks an INTERRUPT's unique with the low bit of the request it
// interrupts (FUSE_INT_REQ_BIT in fs/fuse/dev.c, not in the uapi header).
constexpr std::uint64_t kInterruptBit = 1;

// libfuse passes the session's userdata to the hooks, not ours; there is one
// session per daemon, so one poller.
RequestPoller* installed = nullptr;

// Tickets are unique across pollers (tests make several in one process); a
// worker thread remembers the one it last held (see reader_ticket_).
std::atomic<std::uint64_t> next_ticket{0};
std::atomic<std::uint64_t> next_poller_id{0};
thread_local std::uint64_t my_ticket = 0;

ssize_t read_hook(int fd, void* buf, std::size_t len, void*) { return installed->read_request(fd, buf, len); }

ssize_t writev_hook(int fd, iovec* iov, int count, void*) { return installed->write_reply(fd, iov, count); }

// Requests whose handling may block for long (device I/O, a relayout): the
// reader passes its role on before serving them.
bool may_take_long(std::uint32_t opcode) {
  switch (opcode) {
    case FUSE_READ:
    case FUSE_WRITE:
    case FUSE_FSYNC:
    case FUSE_FSYNCDIR:
    case FUSE_SETXATTR:
    case FUSE_REMOVEXATTR:
    case FUSE_FALLOCATE:
    case FUSE_COPY_FILE_RANGE:
    case FUSE_LSEEK:
    case FUSE_IOCTL:
    case FUSE_POLL:
      return true;
    default:
      return false;
  }
}

bool header_of(const void* request, std::size_t len, fuse_in_header* in) {
  if (len < sizeof *in) return false;  // libfuse rejects a short read itself
  std::memcpy(in, request, sizeof *in);
  return true;
}

}  // namespace

std::unique_ptr<RequestPoller> RequestPoller::install(fuse_session* session, Options options, std::string* error) {
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
  std::unique_ptr<RequestPoller> poller;
  try {
    poller = std::make_unique<RequestPoller>(clone_fd, options);
  } catch (const std::system_error& e) {
    *error = e.what();
    return nullptr;
  }
  installed = poller.get();
  fuse_custom_io io{};
  io.read = &read_hook;
  io.writev = &writev_hook;
  // No splice hooks: libfuse then never splices replies (it offers
  // FUSE_CAP_SPLICE_WRITE only with a splice_send hook), and the daemon wants
  // no FUSE_CAP_SPLICE_READ, so every request and reply passes the hooks.
  if (int r = fuse_session_custom_io(session, &io, session_fd); r != 0) {
    *error = std::string("fuse_session_custom_io: ") + std::strerror(-r);
    installed = nullptr;
    return nullptr;
  }
  return poller;
}

namespace {
int make_stop_fd(int clone_fd) {
  int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) {
    int err = errno;
    ::close(clone_fd);
    throw std::system_error(err, std::generic_category(), "eventfd");
  }
  return fd;
}
}  // namespace

RequestPoller::RequestPoller(int clone_fd, Options options)
    : id_(++next_poller_id), clone_fd_(clone_fd), stop_fd_(make_stop_fd(clone_fd)), options_(options) {}

RequestPoller::~RequestPoller() {
  if (installed == this) installed = nullptr;
  ::close(clone_fd_);
  ::close(stop_fd_);
}

void RequestPoller::stop() {
  std::lock_guard lock(mu_);
  stopping_ = true;
  waiting_cv_.notify_all();
  std::uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(stop_fd_, &one, sizeof one);  // wakes the reader's poll
}

RequestPoller::Counters RequestPoller::counters() const {
  Counters c;
  c.polled = polled_.load(std::memory_order_relaxed);
  c.slept = slept_.load(std::memory_order_relaxed);
  c.long_requests = long_requests_.load(std::memory_order_relaxed);
  c.rescued = rescued_.load(std::memory_order_relaxed);
  c.interrupts = interrupts_.load(std::memory_order_relaxed);
  std::lock_guard lock(owed_mu_);
  c.owed = owed_.size();
  return c;
}

void RequestPoller::become_reader(std::unique_lock<std::mutex>&) {
  reader_ = Reader::kPolling;
  reader_ticket_ = my_ticket = ++next_ticket;
  // This worker may have been the watcher: another waiting one takes over.
  waiting_cv_.notify_one();
}

// Waits, in one-reader mode, until this worker may be the reader (kRead):
// when there is none, or when the reader has been serving one request for
// longer than rescue_after. One waiting worker (the watcher) wakes on that
// deadline while the reader is active; while it sleeps on the device, all
// wait without a timeout. kDevice when the poller switches to device mode,
// kStop once it stops.
RequestPoller::Turn RequestPoller::wait_for_turn(std::unique_lock<std::mutex>& lock) {
  for (;;) {
    if (stopping_) return Turn::kStop;
    if (!one_reader_.load(std::memory_order_relaxed)) return Turn::kDevice;
    if (reader_ == Reader::kNone) {
      become_reader(lock);
      return Turn::kRead;
    }
    if (reader_ == Reader::kServing && Clock::now() - serving_since_ >= options_.rescue_after) {
      rescued_.fetch_add(1, std::memory_order_relaxed);
      become_reader(lock);
      return Turn::kRead;
    }
    if (!watcher_ && reader_ != Reader::kSleeping) {
      watcher_ = true;
      auto from = reader_ == Reader::kServing ? serving_since_ : Clock::now();
      waiting_cv_.wait_until(lock, from + options_.rescue_after);
      watcher_ = false;
    } else {
      waiting_cv_.wait(lock);
    }
  }
}

ssize_t RequestPoller::read_request(int, void* buf, std::size_t len) {
  std::unique_lock lock(mu_);
  for (;;) {
    if (stopping_) {
      errno = EINTR;
      return -1;
    }
    if (reader_ == Reader::kServing && reader_ticket_ == my_ticket) {
      // A reader that served its last request itself stays the reader.
      reader_ = Reader::kPolling;
    } else if (!one_reader_.load(std::memory_order_relaxed)) {
      lock.unlock();
      ssize_t n = wait_on_device(buf, len);
      if (n == kModeChanged) {
        lock.lock();
        continue;
      }
      return n;
    } else {
      Turn turn = wait_for_turn(lock);
      if (turn == Turn::kStop) {
        errno = EINTR;
        return -1;
      }
      if (turn == Turn::kDevice) continue;
    }

    lock.unlock();
    ssize_t n = take_request(buf, len);
    int err = errno;
    fuse_in_header in;
    bool request = n > 0 && header_of(buf, std::size_t(n), &in);
    lock.lock();
    if (request && !may_take_long(in.opcode)) {
      // Serve it here and come back; wake a watcher if there was none while
      // this reader slept on the device.
      if (reader_ == Reader::kSleeping) waiting_cv_.notify_one();
      reader_ = Reader::kServing;
      serving_since_ = Clock::now();
      return n;
    }
    // A long request, or an error for libfuse to handle (EINTR, ENOENT:
    // retry; ENODEV: unmounted): the role is given up. After a long request
    // every waiting worker goes to wait on the device itself, as libfuse's
    // workers do, so that a stream of long requests (a large read) is taken
    // in parallel, each request by the worker the kernel wakes for it.
    if (request) {
      long_requests_.fetch_add(1, std::memory_order_relaxed);
      one_reader_.store(false, std::memory_order_relaxed);
      waiting_cv_.notify_all();
    } else {
      waiting_cv_.notify_one();
    }
    reader_ = Reader::kNone;
    errno = err;
    return n;
  }
}

// Device mode: wait on the clone with every other idle worker (the kernel
// wakes one per request: EPOLLEXCLUSIVE) and take what comes. A short
// request switches back to one-reader mode; a worker that finds nothing to
// read once that happened returns kModeChanged to wait for its turn instead.
ssize_t RequestPoller::wait_on_device(void* buf, std::size_t len) {
  int ep = device_epoll();
  if (ep < 0) return -1;
  for (;;) {
    epoll_event events[2];
    int k = ::epoll_wait(ep, events, 2, -1);
    if (k < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    for (int i = 0; i < k; ++i) {
      if (events[i].data.fd == stop_fd_) {
        errno = EINTR;
        return -1;
      }
    }
    ssize_t n = ::read(clone_fd_, buf, len);
    if (n > 0) {
      note_request(buf, std::size_t(n), false);
      fuse_in_header in;
      if (header_of(buf, std::size_t(n), &in)) {
        if (may_take_long(in.opcode)) {
          long_requests_.fetch_add(1, std::memory_order_relaxed);
        } else {
          one_reader_.store(true, std::memory_order_relaxed);
        }
      }
      return n;
    }
    if (n == 0 || errno != EAGAIN) return n;
    if (one_reader_.load(std::memory_order_relaxed)) return kModeChanged;
  }
}

// This thread's epoll set for device mode: the clone (exclusive wake-ups)
// and the stop eventfd. Kept per thread, made again for another poller.
int RequestPoller::device_epoll() {
  struct EpollSet {
    std::uint64_t owner = 0;
    int fd = -1;
    ~EpollSet() {
      if (fd >= 0) ::close(fd);
    }
  };
  thread_local EpollSet set;
  if (set.owner == id_ && set.fd >= 0) return set.fd;
  if (set.fd >= 0) ::close(set.fd);
  set.owner = 0;
  set.fd = ::epoll_create1(EPOLL_CLOEXEC);
  if (set.fd < 0) return -1;
  epoll_event clone_event = {};
  clone_event.events = EPOLLIN | EPOLLEXCLUSIVE;
  clone_event.data.fd = clone_fd_;
  epoll_event stop_event = {};
  stop_event.events = EPOLLIN;
  stop_event.data.fd = stop_fd_;
  if (::epoll_ctl(set.fd, EPOLL_CTL_ADD, clone_fd_, &clone_event) != 0 ||
      ::epoll_ctl(set.fd, EPOLL_CTL_ADD, stop_fd_, &stop_event) != 0) {
    int err = errno;
    ::close(set.fd);
    set.fd = -1;
    errno = err;
    return -1;
  }
  set.owner = id_;
  return set.fd;
}

// The reader's read: poll the clone for the window, then sleep in poll(2).
ssize_t RequestPoller::take_request(void* buf, std::size_t len) {
  if (options_.window.count() > 0) {
    ssize_t n = poll_clone(buf, len);
    if (n > 0) note_request(buf, std::size_t(n), true);
    if (n >= 0 || errno != EAGAIN) return n;
  }
  {
    std::lock_guard lock(mu_);
    if (reader_ticket_ == my_ticket) reader_ = Reader::kSleeping;
  }
  ssize_t n = sleep_on_clone(buf, len);
  if (n > 0) note_request(buf, std::size_t(n), false);
  return n;
}

// Sleeps until the clone has a request (or an error: ENODEV at unmount) or
// the poller stops (EINTR).
ssize_t RequestPoller::sleep_on_clone(void* buf, std::size_t len) {
  for (;;) {
    pollfd fds[2] = {{clone_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (fds[1].revents) {
      errno = EINTR;
      return -1;
    }
    ssize_t n = ::read(clone_fd_, buf, len);
    if (n >= 0 || errno != EAGAIN) return n;
  }
}

// EAGAIN when the window passed with nothing to read. Anything else the
// device says (ENODEV at unmount, ENOENT for a request interrupted while
// being read, EINTR) goes back to libfuse as a read of the session would.
ssize_t RequestPoller::poll_clone(void* buf, std::size_t len) {
  const auto deadline = Clock::now() + options_.window;
  for (;;) {
    ssize_t n = ::read(clone_fd_, buf, len);
    if (n >= 0 || errno != EAGAIN) return n;
    if (Clock::now() >= deadline) {
      errno = EAGAIN;
      return -1;
    }
    // Let the caller run if the scheduler put it on this CPU.
    sched_yield();
  }
}

void RequestPoller::note_request(const void* request, std::size_t len, bool polled) {
  (polled ? polled_ : slept_).fetch_add(1, std::memory_order_relaxed);
  fuse_in_header in;
  if (!header_of(request, len, &in)) return;
  if (in.opcode == FUSE_INTERRUPT) interrupts_.fetch_add(1, std::memory_order_relaxed);
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
