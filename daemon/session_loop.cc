#include "daemon/session_loop.h"

#define FUSE_USE_VERSION 35
#include <fuse_lowlevel.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "daemon/request_poller.h"

namespace mmfs::daemon {
namespace {

// The running loop, for the signal handler: one per daemon.
std::atomic<fuse_session*> signalled_session{nullptr};
std::atomic<int> wake_fd{-1};

void poke(int fd) {
  std::uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(fd, &one, sizeof one);
}

// Async-signal-safe: fuse_session_exit only sets a flag, and write(2) is.
void on_exit_signal(int) {
  int saved = errno;
  if (fuse_session* se = signalled_session.load()) fuse_session_exit(se);
  if (int fd = wake_fd.load(); fd >= 0) poke(fd);
  errno = saved;
}

constexpr int kExitSignals[] = {SIGHUP, SIGINT, SIGTERM};

class Loop {
 public:
  Loop(fuse_session* se, RequestPoller& poller, unsigned max_workers)
      : se_(se), poller_(poller), max_workers_(max_workers == 0 ? 1 : max_workers) {}

  int run() {
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC);
    if (wake_fd_ < 0) return -errno;
    signalled_session = se_;
    wake_fd = wake_fd_;
    struct sigaction sa = {};
    sa.sa_handler = &on_exit_signal;
    sigemptyset(&sa.sa_mask);
    for (std::size_t i = 0; i < std::size(kExitSignals); ++i) sigaction(kExitSignals[i], &sa, &saved_[i]);

    // Two from the start (one reads, one stands by), and more made here, on
    // the main thread, when a worker finds nobody else receiving: making a
    // thread (an 8 MiB stack mapped, a clone) took 0.1-1 ms, which the
    // request that asked for it used to wait for.
    spawn();
    spawn();
    while (!fuse_session_exited(se_)) {
      std::uint64_t v;
      if (::read(wake_fd_, &v, sizeof v) < 0 && errno != EINTR) break;
      if (spawn_wanted_.exchange(false)) spawn();
    }
    fuse_session_exit(se_);  // when the loop ended on a read error of the eventfd
    poller_.stop();
    std::vector<std::thread> workers;
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      workers.swap(workers_);
    }
    for (auto& t : workers) t.join();

    for (std::size_t i = 0; i < std::size(kExitSignals); ++i) sigaction(kExitSignals[i], &saved_[i], nullptr);
    wake_fd = -1;
    signalled_session = nullptr;
    ::close(wake_fd_);
    return error_.load();
  }

 private:
  void spawn() {
    std::lock_guard lock(mu_);
    if (stopping_ || workers_.size() >= max_workers_) return;
    workers_.emplace_back([this] { work(); });
  }

  void work() {
    fuse_buf buf = {};
    while (!fuse_session_exited(se_)) {
      receiving_.fetch_add(1);
      int r = fuse_session_receive_buf(se_, &buf);
      int others_receiving = receiving_.fetch_sub(1) - 1;
      if (r == -EINTR) continue;  // the loop checks whether the session exited
      if (r <= 0) {
        // 0: the session exited (unmounted, or stopped); < 0: the device failed.
        if (r < 0) {
          int none = 0;
          error_.compare_exchange_strong(none, r);
          fuse_session_exit(se_);
        }
        break;
      }
      if (others_receiving == 0) {  // someone must take the next request
        spawn_wanted_.store(true);
        poke(wake_fd_);
      }
      fuse_session_process_buf(se_, &buf);
    }
    std::free(buf.mem);
    poke(wake_fd_);  // the main thread may be waiting for an unmount to be noticed
  }

  fuse_session* se_;
  RequestPoller& poller_;
  const unsigned max_workers_;
  int wake_fd_ = -1;
  struct sigaction saved_[std::size(kExitSignals)] = {};
  std::atomic<int> receiving_{0};
  std::atomic<int> error_{0};
  std::atomic<bool> spawn_wanted_{false};
  std::mutex mu_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace

int run_session(fuse_session* session, RequestPoller& poller, unsigned max_workers) {
  return Loop(session, poller, max_workers).run();
}

}  // namespace mmfs::daemon
