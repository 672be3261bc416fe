// daemon/request_poller: who reads which request, and where replies go,
// without a mount. Sequenced-packet socket pairs stand in for /dev/fuse and
// its clone: like the device, they hand out one whole message per read.
#include <fcntl.h>
#include <linux/fuse.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "daemon/request_poller.h"

namespace {

using mmfs::daemon::RequestPoller;
using namespace std::chrono_literals;

struct Pair {
  int daemon = -1;  // the end the poller reads and replies on
  int kernel = -1;  // the end the test writes requests to and reads replies from
  ~Pair() {
    if (daemon >= 0) ::close(daemon);
    if (kernel >= 0) ::close(kernel);
  }
};

void make_pair(Pair* p, bool nonblocking_daemon_end) {
  int fds[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) == 0);
  p->daemon = fds[0];
  p->kernel = fds[1];
  if (nonblocking_daemon_end) REQUIRE(::fcntl(p->daemon, F_SETFL, ::fcntl(p->daemon, F_GETFL) | O_NONBLOCK) == 0);
}

// The device and its clone as socket pairs, and a poller reading them.
struct Rig {
  Pair clone, session;
  std::unique_ptr<RequestPoller> poller;
  explicit Rig(std::chrono::microseconds window,
               std::chrono::microseconds rescue_after = RequestPoller::Options{}.rescue_after) {
    make_pair(&clone, true);
    make_pair(&session, false);
    RequestPoller::Options opt;
    opt.window = window;
    opt.rescue_after = rescue_after;
    poller = std::make_unique<RequestPoller>(::dup(clone.daemon), opt);
  }
};

void send_request(int fd, std::uint32_t opcode, std::uint64_t unique, std::uint64_t nodeid = 1) {
  fuse_in_header in{};
  in.len = sizeof in;
  in.opcode = opcode;
  in.unique = unique;
  in.nodeid = nodeid;
  REQUIRE(::write(fd, &in, sizeof in) == ssize_t(sizeof in));
}

fuse_in_header header(const char* buf) {
  fuse_in_header in;
  std::memcpy(&in, buf, sizeof in);
  return in;
}

ssize_t reply(RequestPoller& p, int session_fd, std::uint64_t unique) {
  fuse_out_header out{};
  out.len = sizeof out;
  out.unique = unique;
  iovec iov{&out, sizeof out};
  return p.write_reply(session_fd, &iov, 1);
}

// The unique of the next reply waiting at `fd`, if there is one.
std::optional<std::uint64_t> pending_reply(int fd) {
  fuse_out_header out{};
  ssize_t n = ::recv(fd, &out, sizeof out, MSG_DONTWAIT);
  if (n != ssize_t(sizeof out)) return std::nullopt;
  return out.unique;
}

// Worker threads calling read_request as libfuse's loop would, logging which
// worker took which request. A request on node kBlockNode (or a READ) keeps
// its worker until the test lets it go; a stopped poller ends them.
constexpr std::uint64_t kBlockNode = 999;

class Workers {
 public:
  Workers(RequestPoller& p, int session_fd, int n) : p_(p), session_fd_(session_fd) {
    for (int i = 0; i < n; ++i) threads_.emplace_back([this, i] { run(i); });
  }
  ~Workers() {
    release();
    p_.stop();  // also when a REQUIRE failed: no worker may be left waiting
    for (auto& t : threads_) t.join();
  }

  struct Entry {
    int worker;
    std::uint64_t unique;
  };
  // Waits until `count` requests are logged; returns the log.
  std::vector<Entry> wait_for(std::size_t count) {
    std::unique_lock lock(mu_);
    bool ok = cv_.wait_for(lock, 10s, [&] { return log_.size() >= count; });
    INFO("waited for " << count << " requests, " << log_.size() << " were taken");
    REQUIRE(ok);
    return log_;
  }
  // Lets every held worker go on.
  void release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  void run(int me) {
    char buf[256];
    for (;;) {
      ssize_t n = p_.read_request(session_fd_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) return;  // stopped
      if (n <= 0) continue;
      fuse_in_header in = header(buf);
      std::unique_lock lock(mu_);
      log_.push_back({me, in.unique});
      cv_.notify_all();
      if (in.opcode == FUSE_READ || in.nodeid == kBlockNode) cv_.wait(lock, [&] { return released_; });
    }
  }

  RequestPoller& p_;
  int session_fd_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Entry> log_;
  bool released_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace

TEST_CASE("one reader serves short requests itself and is rescued when stuck", "[poller]") {
  // Serving a logged request takes far less than the rescue time.
  Rig rig(1s, 200ms);
  auto& [clone, session, owned] = rig;
  RequestPoller& poller = *owned;
  constexpr int kWorkers = 3;
  Workers workers(poller, session.daemon, kWorkers);
  // A stream of lookups, each sent after the last was taken: one worker takes
  // them all.
  std::vector<Workers::Entry> log;
  for (std::uint64_t u = 2; u <= 20; u += 2) {
    send_request(clone.kernel, FUSE_LOOKUP, u);
    log = workers.wait_for(u / 2);
  }
  for (const auto& e : log) CHECK(e.worker == log.front().worker);
  CHECK(poller.counters().polled == 10);

  // A lookup that gets stuck (its worker is held): another worker takes the
  // reader role over after rescue_after and takes the next request.
  send_request(clone.kernel, FUSE_LOOKUP, 22, kBlockNode);
  log = workers.wait_for(11);
  int stuck = log.back().worker;
  CHECK(stuck == log.front().worker);
  send_request(clone.kernel, FUSE_LOOKUP, 24);
  log = workers.wait_for(12);
  CHECK(log.back().worker != stuck);
  CHECK(poller.counters().rescued == 1);
  CHECK(poller.counters().long_requests == 0);
}

TEST_CASE("a long request sends every idle worker to wait on the device", "[poller]") {
  Rig rig(1s, 10s);  // no rescue in this test
  auto& [clone, session, owned] = rig;
  RequestPoller& poller = *owned;
  Workers workers(poller, session.daemon, 3);
  send_request(clone.kernel, FUSE_LOOKUP, 2);
  auto log = workers.wait_for(1);
  int reader = log.back().worker;
  // The READ is taken (and held) by the reader; the next two READs go, in
  // device mode, to the two other workers, while the first is still held.
  send_request(clone.kernel, FUSE_READ, 4);
  log = workers.wait_for(2);
  CHECK(log.back().worker == reader);
  send_request(clone.kernel, FUSE_READ, 6);
  send_request(clone.kernel, FUSE_READ, 8);
  log = workers.wait_for(4);
  CHECK(log[2].worker != reader);
  CHECK(log[3].worker != reader);
  CHECK(log[2].worker != log[3].worker);
  CHECK(poller.counters().long_requests == 3);
  // Once they are let go, a short request switches back to one reader.
  workers.release();
  for (std::uint64_t u = 10; u <= 20; u += 2) {
    send_request(clone.kernel, FUSE_GETATTR, u);
    log = workers.wait_for(log.size() + 1);
  }
  CHECK(poller.counters().polled + poller.counters().slept == 10);
}

TEST_CASE("after its window the reader sleeps in poll(2) until a request comes", "[poller]") {
  Rig rig(1ms);
  auto& [clone, session, owned] = rig;
  RequestPoller& poller = *owned;
  auto got = std::async(std::launch::async, [&] {
    char buf[256];
    ssize_t n = poller.read_request(session.daemon, buf, sizeof buf);
    return n > 0 ? header(buf).unique : 0;
  });
  std::this_thread::sleep_for(20ms);  // far past the window: the reader is asleep
  send_request(clone.kernel, FUSE_GETATTR, 42);
  REQUIRE(got.wait_for(10s) == std::future_status::ready);
  CHECK(got.get() == 42);
  CHECK(poller.counters().slept == 1);
  CHECK(poller.counters().polled == 0);
  CHECK(reply(poller, session.daemon, 42) == ssize_t(sizeof(fuse_out_header)));
  CHECK(pending_reply(clone.kernel) == std::uint64_t(42));
  CHECK_FALSE(pending_reply(session.kernel));
}

TEST_CASE("stop() ends the sleeping reader and every waiting worker with EINTR", "[poller]") {
  Rig rig(1ms);
  auto& [clone, session, owned] = rig;
  RequestPoller& poller = *owned;
  std::vector<std::future<int>> workers;
  for (int i = 0; i < 3; ++i) {
    workers.push_back(std::async(std::launch::async, [&] {
      char buf[256];
      ssize_t n = poller.read_request(session.daemon, buf, sizeof buf);
      return n < 0 ? errno : 0;
    }));
  }
  std::this_thread::sleep_for(20ms);  // one reader asleep in poll(2), two workers waiting
  for (auto& w : workers) CHECK(w.wait_for(0s) == std::future_status::timeout);
  poller.stop();
  for (auto& w : workers) {
    REQUIRE(w.wait_for(10s) == std::future_status::ready);
    CHECK(w.get() == EINTR);
  }
  // And any read after it.
  char buf[256];
  CHECK(poller.read_request(session.daemon, buf, sizeof buf) == -1);
  CHECK(errno == EINTR);
}

TEST_CASE("replies go back to the descriptor their request came from", "[poller]") {
  Rig rig(1s);
  auto& [clone, session, owned] = rig;
  RequestPoller& poller = *owned;
  char buf[256];
  auto take = [&](std::uint32_t opcode, std::uint64_t unique) {
    send_request(clone.kernel, opcode, unique);
    REQUIRE(poller.read_request(session.daemon, buf, sizeof buf) == ssize_t(sizeof(fuse_in_header)));
    REQUIRE(header(buf).unique == unique);
  };

  take(FUSE_LOOKUP, 10);
  CHECK(poller.counters().owed == 1);
  CHECK(reply(poller, session.daemon, 10) > 0);
  CHECK(pending_reply(clone.kernel) == std::uint64_t(10));
  CHECK_FALSE(pending_reply(session.kernel));
  CHECK(poller.counters().owed == 0);

  // An INTERRUPT of request 12 (unique 13) is owed nothing itself; libfuse's
  // EAGAIN for it goes where request 12 lives and leaves 12 owed.
  take(FUSE_READ, 12);
  take(FUSE_INTERRUPT, 13);
  CHECK(poller.counters().interrupts == 1);
  CHECK(poller.counters().owed == 1);
  CHECK(reply(poller, session.daemon, 13) > 0);
  CHECK(pending_reply(clone.kernel) == std::uint64_t(13));
  CHECK(poller.counters().owed == 1);
  CHECK(reply(poller, session.daemon, 12) > 0);
  CHECK(pending_reply(clone.kernel) == std::uint64_t(12));
  CHECK(poller.counters().owed == 0);

  // Forgets get no reply and are owed none.
  take(FUSE_FORGET, 14);
  take(FUSE_BATCH_FORGET, 16);
  CHECK(poller.counters().owed == 0);

  // A request the clone never handed out, and notifications (unique 0), go
  // to the session descriptor.
  CHECK(reply(poller, session.daemon, 18) > 0);
  CHECK(pending_reply(session.kernel) == std::uint64_t(18));
  CHECK(reply(poller, session.daemon, 0) > 0);
  CHECK(pending_reply(session.kernel) == std::uint64_t(0));
  CHECK_FALSE(pending_reply(clone.kernel));
}
