#include "daemon/entry_invalidator.h"

#define FUSE_USE_VERSION 35
#include <fuse_lowlevel.h>

namespace mmfs::daemon {

void EntryInvalidator::push(fuse_session* session, std::uint64_t parent, std::string name) {
  std::lock_guard lock(mu_);
  if (stopping_ || !session) return;
  session_ = session;
  queue_.emplace_back(parent, std::move(name));
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  cv_.notify_one();
}

void EntryInvalidator::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void EntryInvalidator::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything sent
    auto [parent, name] = std::move(queue_.front());
    queue_.pop_front();
    fuse_session* session = session_;
    lock.unlock();
    // ENOENT (the kernel holds no such name) and ENOTCONN (unmounted) are fine.
    (void)fuse_lowlevel_notify_inval_entry(session, parent, name.c_str(), name.size());
    lock.lock();
  }
}

}  // namespace mmfs::daemon
