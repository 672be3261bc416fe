// Busy-polls /dev/fuse for a short window before a libfuse worker sleeps.
//
// A FUSE operation is a round trip: the caller queues a request and sleeps,
// a daemon worker wakes, answers, and wakes the caller. When the worker sleeps
// in read(2) between requests, each request also pays that worker's wake-up,
// and on a VM whose idle vCPUs halt (guest halt-polling off, as on this
// project's 2-vCPU machine) waking a thread on the other CPU costs tens of
// microseconds: more than the daemon's own work on a lookup or a create. A
// create is three synchronous requests (GETATTR of the directory, LOOKUP,
// CREATE), so a create loop spent most of its time in those wake-ups.
//
// With the poller installed, one worker at a time keeps reading a
// non-blocking clone of the session's device for `window` after it last
// looked, so a stream of requests finds the daemon awake. The other workers
// sleep in read(2) exactly as libfuse's loop has them, and once the window
// passes without a request the poller sleeps too: an idle mount burns no CPU,
// a busy one at most one CPU for the window after each request.
//
// The clone (FUSE_DEV_IOC_CLONE) is a second device on the same connection:
// it sees every queued request, but the kernel accepts a reply only on the
// device that handed the request out. Replies to requests read from the clone
// are therefore routed back to it by their unique id.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>

struct fuse_session;

namespace mmfs::daemon {

class RequestPoller {
 public:
  // Makes the clone and installs the poller as the session's I/O
  // (fuse_session_custom_io); call after fuse_session_mount (and after
  // fuse_daemonize) and before the loop. One per process. Null with *error
  // set when it cannot be installed; the session is then unchanged.
  static std::unique_ptr<RequestPoller> install(fuse_session* session, std::chrono::microseconds window,
                                                std::string* error);
  ~RequestPoller();
  RequestPoller(const RequestPoller&) = delete;
  RequestPoller& operator=(const RequestPoller&) = delete;

  // Requests found by polling and requests a worker slept for, INTERRUPTs
  // among them, replies still owed on the clone. For tests and /.mmfs/stats.
  struct Counters {
    std::uint64_t polled = 0;
    std::uint64_t slept = 0;
    std::uint64_t interrupts = 0;
    std::size_t owed = 0;
  };
  Counters counters() const;

  // The hooks libfuse calls (fuse_custom_io); public for the C callbacks.
  ssize_t read_request(int session_fd, void* buf, std::size_t len);
  ssize_t write_reply(int session_fd, iovec* iov, int count);

 private:
  RequestPoller(int clone_fd, std::chrono::microseconds window);
  ssize_t poll_clone(void* buf, std::size_t len);
  void count_interrupt(const void* request, std::size_t len);
  void owe_reply(const void* request, std::size_t len);
  bool owed_on_clone(std::uint64_t unique);

  const int clone_fd_;
  const std::chrono::microseconds window_;
  std::atomic<bool> polling_{false};  // one poller at a time
  std::atomic<std::uint64_t> polled_{0};
  std::atomic<std::uint64_t> slept_{0};
  std::atomic<std::uint64_t> interrupts_{0};
  mutable std::mutex owed_mu_;
  std::unordered_set<std::uint64_t> owed_;  // uniques read from the clone, not yet answered
};

}  // namespace mmfs::daemon
