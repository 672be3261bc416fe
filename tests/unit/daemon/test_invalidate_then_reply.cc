// The order of a truncate's page invalidation and its reply
// (daemon/invalidate_then_reply.h).
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "daemon/invalidate_then_reply.h"

using mmfs::daemon::invalidate_then_reply;
using namespace std::chrono_literals;

namespace {

// What happened, in order, from any thread.
struct Events {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> seen;
  void add(const std::string& e) {
    std::lock_guard lock(mu);
    seen.push_back(e);
    cv.notify_all();
  }
  // Waits (at most `limit`) until `e` has happened.
  bool wait_for(const std::string& e, std::chrono::milliseconds limit) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, limit, [&] { return std::find(seen.begin(), seen.end(), e) != seen.end(); });
  }
};

}  // namespace

TEST_CASE("invalidate_then_reply: the reply follows a prompt invalidation", "[invalidate]") {
  Events ev;
  auto start = std::chrono::steady_clock::now();
  bool in_time = invalidate_then_reply(
      [&] {
        std::this_thread::sleep_for(20ms);  // the reply must wait for this
        ev.add("invalidated");
      },
      [&] { ev.add("replied"); }, 5000ms);
  CHECK(in_time);
  CHECK(ev.seen == std::vector<std::string>{"invalidated", "replied"});
  CHECK(std::chrono::steady_clock::now() - start < 4000ms);  // not the patience
}

TEST_CASE("invalidate_then_reply: an invalidation that waits for the reply does not deadlock", "[invalidate]") {
  // Dirty mapped pages: the kernel's invalidation waits for a write the
  // truncating caller holds off until it has its reply.
  Events ev;
  std::atomic<bool> saw_reply{false};
  auto start = std::chrono::steady_clock::now();
  bool in_time = invalidate_then_reply(
      [&] {
        saw_reply = ev.wait_for("replied", 10000ms);
        ev.add("invalidated");
      },
      [&] { ev.add("replied"); }, 100ms);
  auto took = std::chrono::steady_clock::now() - start;
  CHECK_FALSE(in_time);
  CHECK(saw_reply);
  // Both ran before the call returned, the reply first, after the patience.
  CHECK(ev.seen == std::vector<std::string>{"replied", "invalidated"});
  CHECK(took >= 100ms);
  CHECK(took < 5000ms);
}
