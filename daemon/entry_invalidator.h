// Tells the kernel, off the request path, to drop names it caches.
//
// The kernel may cache an array's views under `A@` (daemon/fuse_ops.cc).
// When A is unlinked or renamed, the name `A@` in A's directory must go too.
// The notification cannot be sent while the UNLINK or RENAME is being
// served: the kernel holds the directory locked until the reply, and
// fuse_lowlevel_notify_inval_entry waits for that lock. A queue and one
// thread send them right after; the window in between only keeps a stale
// name, never stale permissions (the nodes' attributes are invalidated
// before the reply, which takes no lock).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

struct fuse_session;

namespace mmfs::daemon {

class EntryInvalidator {
 public:
  EntryInvalidator() = default;
  EntryInvalidator(const EntryInvalidator&) = delete;
  EntryInvalidator& operator=(const EntryInvalidator&) = delete;
  ~EntryInvalidator() { stop(); }

  // Queues "drop `name` in directory `parent`" for `session`; the thread
  // starts with the first one.
  void push(fuse_session* session, std::uint64_t parent, std::string name);
  // Sends what is queued and ends the thread (before the session goes).
  void stop();

 private:
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::uint64_t, std::string>> queue_;
  fuse_session* session_ = nullptr;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace mmfs::daemon
