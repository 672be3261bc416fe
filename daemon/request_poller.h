// How the daemon's workers take requests from /dev/fuse: one reader at a
// time, polling for a short window before it sleeps, serving short requests
// itself.
//
// A FUSE operation is a round trip: the caller queues a request and sleeps, a
// daemon worker wakes, answers, and wakes the caller. With libfuse's own loop
// every idle worker sleeps in read(2) on the device, so every request wakes
// one (sometimes two) of them, and the worker that answers is rarely the one
// that answered the request before. On a VM whose idle vCPUs halt (guest
// halt-polling off, as on this project's 2-vCPU machine) each such wake-up on
// another CPU costs tens of microseconds: more than the daemon's own work on a
// lookup or a create (two synchronous requests, LOOKUP and CREATE, plus an
// asynchronous RELEASE). A create loop spent most of its time in them.
//
// Here, while requests are short, exactly one worker, the reader, takes
// them; the others wait in the poller until they are needed. The reader
// reads a non-blocking clone of the session's device in a loop (with
// sched_yield between tries) for `window` after its last request, then
// sleeps in poll(2) on it; an idle mount burns no CPU. It serves each short
// request itself and comes straight back, so a stream of metadata requests
// is served by one awake thread and nobody is woken. If an inline request
// takes longer than `rescue_after` after all (it waited for a lock held by a
// long operation), a waiting worker takes the role over, so other callers
// wait at most that.
//
// A request that may take long (READ, WRITE, FSYNC, SETXATTR, ...) switches
// to device mode: the reader serves it and gives its role up, and every idle
// worker waits on the device itself, as libfuse's workers do (the kernel
// wakes one per request: EPOLLEXCLUSIVE), so a stream of reads is taken in
// parallel. The next short request switches back.
//
// The clone (FUSE_DEV_IOC_CLONE) is a second device on the same connection:
// it sees every queued request, but the kernel accepts a reply only on the
// device that handed the request out. Every request is read from the clone,
// so replies are routed to it by their unique id; notifications (unique 0)
// go to the session's own descriptor.
//
// Workers are never cancelled inside the poller: stop() wakes every waiting
// worker and the sleeping reader, and read_request then returns EINTR
// (daemon/session_loop.h runs the workers and calls it at shutdown).
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>

struct fuse_session;

namespace mmfs::daemon {

class RequestPoller {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    std::chrono::microseconds window{200};
    std::chrono::microseconds rescue_after{2000};
  };

  // Makes the clone and installs the poller as the session's I/O
  // (fuse_session_custom_io); call after fuse_session_mount (and after
  // fuse_daemonize) and before the loop. One per process. Null with *error
  // set when it cannot be installed; the session is then unchanged.
  static std::unique_ptr<RequestPoller> install(fuse_session* session, Options options, std::string* error);
  // A poller reading requests from `clone_fd` (non-blocking; owned from now
  // on). install() makes one from a clone of the session; tests from socket
  // pairs. Throws std::system_error when it cannot make its eventfd.
  RequestPoller(int clone_fd, Options options);
  ~RequestPoller();

  // Ends every read_request in progress and to come with EINTR. Call once
  // the session has exited; async-signal-unsafe (takes a lock).
  void stop();
  RequestPoller(const RequestPoller&) = delete;
  RequestPoller& operator=(const RequestPoller&) = delete;

  // For tests and /.mmfs/stats.
  struct Counters {
    std::uint64_t polled = 0;      // requests the reader found while polling
    std::uint64_t slept = 0;       // requests a worker slept for (the reader in poll(2), device mode in epoll)
    std::uint64_t long_requests = 0;  // READ, WRITE, ...: each switched to (or kept) device mode
    std::uint64_t rescued = 0;     // times a waiting worker took over from a stuck reader
    std::uint64_t interrupts = 0;  // INTERRUPT requests among them
    std::size_t owed = 0;          // replies still owed on the clone
  };
  Counters counters() const;

  // The hooks libfuse calls (fuse_custom_io); public for the C callbacks.
  // Requests are read from the clone whatever descriptor libfuse names.
  ssize_t read_request(int session_fd, void* buf, std::size_t len);
  ssize_t write_reply(int session_fd, iovec* iov, int count);

 private:
  // What the reader is doing.
  enum class Reader { kNone, kPolling, kSleeping, kServing };
  // What a waiting worker is to do next.
  enum class Turn { kRead, kDevice, kStop };
  static constexpr ssize_t kModeChanged = -2;

  void become_reader(std::unique_lock<std::mutex>& lock);
  Turn wait_for_turn(std::unique_lock<std::mutex>& lock);
  ssize_t wait_on_device(void* buf, std::size_t len);
  int device_epoll();
  ssize_t take_request(void* buf, std::size_t len);
  ssize_t poll_clone(void* buf, std::size_t len);
  ssize_t sleep_on_clone(void* buf, std::size_t len);
  void note_request(const void* request, std::size_t len, bool polled);
  bool owed_on_clone(std::uint64_t unique);

  const std::uint64_t id_;  // tells this poller's per-thread epoll sets from another's
  const int clone_fd_;
  const int stop_fd_;  // an eventfd: readable once stop() was called
  const Options options_;

  std::mutex mu_;
  std::condition_variable waiting_cv_;
  Reader reader_ = Reader::kNone;
  std::uint64_t reader_ticket_ = 0;  // changes whenever a worker becomes the reader
  Clock::time_point serving_since_;
  bool watcher_ = false;  // one waiting worker watches an active reader
  bool stopping_ = false;
  // One-reader mode (true) or device mode: after a long request, until a
  // short one, every idle worker waits on the device (see read_request).
  std::atomic<bool> one_reader_{true};

  std::atomic<std::uint64_t> polled_{0};
  std::atomic<std::uint64_t> slept_{0};
  std::atomic<std::uint64_t> long_requests_{0};
  std::atomic<std::uint64_t> rescued_{0};
  std::atomic<std::uint64_t> interrupts_{0};
  mutable std::mutex owed_mu_;
  std::unordered_set<std::uint64_t> owed_;  // uniques read from the clone, not yet answered
};

}  // namespace mmfs::daemon
