#include "daemon/invalidate_then_reply.h"

#include <condition_variable>
#include <mutex>
#include <system_error>
#include <thread>

namespace mmfs::daemon {

bool invalidate_then_reply(const std::function<void()>& invalidate, const std::function<void()>& reply,
                           std::chrono::milliseconds patience) {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread helper;
  try {
    helper = std::thread([&] {
      invalidate();
      std::lock_guard lock(mu);
      done = true;
      cv.notify_all();
    });
  } catch (const std::system_error&) {
    reply();
    invalidate();
    return false;
  }
  bool in_time;
  {
    std::unique_lock lock(mu);
    in_time = cv.wait_for(lock, patience, [&] { return done; });
  }
  reply();
  helper.join();  // the locals it uses live until it has finished
  return in_time;
}

}  // namespace mmfs::daemon
