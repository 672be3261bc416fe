#include "fs/array/write_behind.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <system_error>
#include <utility>

namespace mmfs::fs {

namespace {
// The WriteBehind whose worker runs on this thread (drain() must not wait for itself).
thread_local const WriteBehind* current = nullptr;
constexpr auto kIdleStop = std::chrono::seconds(1);
}  // namespace

bool WriteBehind::on_worker() const { return current == this; }

WriteBehind::~WriteBehind() {
  {
    std::unique_lock lock(mu_);
    stop_ = true;
  }
  work_.notify_all();
  if (worker_.joinable()) worker_.join();
  // A worker that stopped while idle left nothing; one stopped by stop_
  // drained the queue first (run()).
}

int WriteBehind::submit(std::uint64_t offset, const std::byte* data, std::size_t length, std::string* message) {
  std::unique_lock lock(mu_);
  if (error_) {
    *message = std::move(error_message_);
    return std::exchange(error_, 0);
  }
  // One write larger than the limit still goes (alone).
  applied_.wait(lock, [&] { return queued_bytes_ == 0 || queued_bytes_ + length <= kMaxQueuedBytes; });
  Pending p;
  p.offset = offset;
  if (!spare_.empty()) {
    p.bytes = std::move(spare_.back());
    spare_.pop_back();
  }
  p.bytes.resize(length);
  std::memcpy(p.bytes.data(), data, length);
  queue_.push_back(std::move(p));
  queued_bytes_ += length;
  ++submitted_;
  if (!running_) {
    if (worker_.joinable()) worker_.join();  // it decided to stop: it is leaving run() without the lock
    try {
      worker_ = std::thread([this] { run(); });  // it waits for the lock we hold
    } catch (const std::system_error&) {
      // No thread to spare: the write is not queued (a queue without a
      // worker would leave every reader of the array waiting).
      queue_.pop_back();
      queued_bytes_ -= length;
      --submitted_;
      *message = "no thread to spare for the array's queued writes";
      return EAGAIN;
    }
    running_ = true;
  } else {
    work_.notify_one();
  }
  return 0;
}

void WriteBehind::drain() {
  if (on_worker()) return;
  std::unique_lock lock(mu_);
  const std::uint64_t target = submitted_;
  applied_.wait(lock, [&] { return done_ >= target; });
}

int WriteBehind::take_error(std::string* message) {
  drain();
  std::unique_lock lock(mu_);
  if (!error_) return 0;
  *message = std::move(error_message_);
  return std::exchange(error_, 0);
}

void WriteBehind::run() {
  current = this;
  std::unique_lock lock(mu_);
  for (;;) {
    if (queue_.empty()) {
      if (stop_ || !work_.wait_for(lock, kIdleStop, [&] { return stop_ || !queue_.empty(); }) || queue_.empty()) {
        running_ = false;
        return;
      }
    }
    Pending p = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    std::string message;
    int r = 0;
    try {
      r = apply_(p.offset, p.bytes.data(), p.bytes.size(), &message);
    } catch (const std::exception& e) {
      r = EIO;
      message = std::string("write failed: ") + e.what();
    }
    lock.lock();
    if (r && !error_) {
      error_ = r;
      error_message_ = std::move(message);
    }
    queued_bytes_ -= p.bytes.size();
    if (spare_.size() < 4) spare_.push_back(std::move(p.bytes));
    ++done_;
    applied_.notify_all();
  }
}

}  // namespace mmfs::fs
