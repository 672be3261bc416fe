// Write-behind for array files (streaming at device speed).
//
// FUSE sends a sequential writer's data one request at a time and waits for
// each reply: without write-behind the writer copies a MiB into the kernel,
// then sleeps while the daemon scatters it into cells (and now and then
// writes 64 MiB of cells back), then copies the next. Two cores, one busy at
// a time. WriteBehind answers a write as soon as a copy of its bytes is
// queued; one worker thread applies the queued writes in order, so the
// writer's next copy overlaps the daemon's scatter.
//
// Ordering. Everything else that touches the array takes its lock through a
// DrainingSharedMutex, which first waits until every write queued before it
// has been applied: a read, a view, fsync or a schema change sees every write
// whose reply went out before it started (it never waits for writes queued
// after it, so a steady writer cannot starve a reader). The worker takes the
// same lock without draining.
//
// Errors. A queued write that fails when applied (ENOSPC or EIO writing cells
// back, a relayout that shrank the array meanwhile) cannot fail its own
// reply any more: the error is kept and returned by the next write, FLUSH
// (close) or fsync of the file, as a page-cache filesystem reports a failed
// write-back. Bytes past the array's end are refused at once (EFBIG).
//
// Memory: at most kMaxQueuedBytes are queued; a writer beyond that waits.
// The worker starts with the first write and stops after a second without
// one, so idle arrays hold no thread.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

namespace mmfs::fs {

class WriteBehind {
 public:
  // Applies one write; returns 0 or an errno with *message set. Called on the
  // worker thread only, one write at a time, in submission order.
  using Apply = std::function<int(std::uint64_t offset, const std::byte* data, std::size_t length,
                                  std::string* message)>;
  static constexpr std::size_t kMaxQueuedBytes = 16u << 20;

  explicit WriteBehind(Apply apply) : apply_(std::move(apply)) {}
  ~WriteBehind();  // applies what is queued, then stops the worker
  WriteBehind(const WriteBehind&) = delete;
  WriteBehind& operator=(const WriteBehind&) = delete;

  // Queues a copy of the bytes. Returns a kept error of an earlier write
  // instead (and forgets it; nothing is queued then).
  int submit(std::uint64_t offset, const std::byte* data, std::size_t length, std::string* message);
  // Waits until every write queued before the call has been applied. A no-op
  // on the worker thread.
  void drain();
  // drain(), then the kept error of a failed write, if any (and forgets it).
  int take_error(std::string* message);
  bool on_worker() const;

 private:
  struct Pending {
    std::uint64_t offset = 0;
    std::vector<std::byte> bytes;
  };
  void run();

  Apply apply_;
  std::mutex mu_;
  std::condition_variable work_;     // the worker: something queued, or stop
  std::condition_variable applied_;  // drainers and writers over the limit
  std::deque<Pending> queue_;
  std::vector<std::vector<std::byte>> spare_;  // buffers of applied writes
  std::size_t queued_bytes_ = 0;
  std::uint64_t submitted_ = 0, done_ = 0;  // writes queued / applied so far
  int error_ = 0;
  std::string error_message_;
  bool stop_ = false;
  bool running_ = false;  // the worker has not decided to stop
  std::thread worker_;
};

// A shared mutex whose lock() and lock_shared() first drain a WriteBehind
// (see above). raw() is the mutex itself, for the worker.
class DrainingSharedMutex {
 public:
  explicit DrainingSharedMutex(WriteBehind* writes = nullptr) : writes_(writes) {}
  void set_write_behind(WriteBehind* writes) { writes_ = writes; }
  void lock() {
    if (writes_) writes_->drain();
    mu_.lock();
  }
  bool try_lock() { return mu_.try_lock(); }
  void unlock() { mu_.unlock(); }
  void lock_shared() {
    if (writes_) writes_->drain();
    mu_.lock_shared();
  }
  bool try_lock_shared() { return mu_.try_lock_shared(); }
  void unlock_shared() { mu_.unlock_shared(); }
  std::shared_mutex& raw() { return mu_; }

 private:
  WriteBehind* writes_;
  std::shared_mutex mu_;
};

}  // namespace mmfs::fs
