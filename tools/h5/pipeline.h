// Double-buffered producer/consumer: while one thread fills buffer A with
// item i+1, the other drains buffer B holding item i. Import reads HDF5
// (decompressing) while the previous box is written to mmfs; export reads mmfs
// while the previous box is compressed into HDF5. Either side can be the
// slow one; overlapping them makes the transfer run at the slower one's speed
// instead of the sum of both.
//
// The serial HDF5 library is not thread-safe, so the caller picks which side
// runs on the calling thread (the HDF5 side); the other side runs on one
// worker thread and must not call HDF5.
//
// An exception thrown by either side stops both (the other side notices at
// its next hand-over) and is rethrown from run_pipeline() on the calling
// thread once the worker has finished; the first one wins.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <span>
#include <thread>

namespace mmfs::h5 {

enum class CallerRuns { Producer, Consumer };

// Thrown into a side that is waiting when the other side has failed; never
// escapes run_pipeline (the other side's exception does).
struct PipelineStopped {};

// produce(i, buffer) fills `buffer` with item i; consume(i, buffer) uses it.
// Items are handed over in order 0..items-1, each buffer holding every other
// item.
template <class Produce, class Consume>
void run_pipeline(std::uint64_t items, std::span<std::byte> buffer0, std::span<std::byte> buffer1,
                  Produce&& produce, Consume&& consume, CallerRuns caller) {
  std::mutex mu;
  std::condition_variable cv;
  bool full[2] = {false, false};
  bool stopped = false;
  std::exception_ptr error;
  std::span<std::byte> buffers[2] = {buffer0, buffer1};

  auto fail = [&](std::exception_ptr e) {
    std::lock_guard lock(mu);
    if (!error) error = e;
    stopped = true;
    cv.notify_all();
  };
  // Waits until slot `s` is `want_full`; throws PipelineStopped once the
  // other side failed.
  auto wait_for = [&](int s, bool want_full) {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return stopped || full[s] == want_full; });
    if (stopped) throw PipelineStopped{};
  };
  auto hand_over = [&](int s, bool now_full) {
    std::lock_guard lock(mu);
    full[s] = now_full;
    cv.notify_all();
  };

  auto producer = [&] {
    try {
      for (std::uint64_t i = 0; i < items; ++i) {
        const int s = static_cast<int>(i & 1);
        wait_for(s, false);
        produce(i, buffers[s]);
        hand_over(s, true);
      }
    } catch (const PipelineStopped&) {
    } catch (...) {
      fail(std::current_exception());
    }
  };
  auto consumer = [&] {
    try {
      for (std::uint64_t i = 0; i < items; ++i) {
        const int s = static_cast<int>(i & 1);
        wait_for(s, true);
        consume(i, buffers[s]);
        hand_over(s, false);
      }
    } catch (const PipelineStopped&) {
    } catch (...) {
      fail(std::current_exception());
    }
  };

  {
    std::jthread worker(caller == CallerRuns::Producer ? std::function<void()>(consumer)
                                                       : std::function<void()>(producer));
    if (caller == CallerRuns::Producer) producer();
    else consumer();
  }  // joins the worker
  if (error) std::rethrow_exception(error);
}

}  // namespace mmfs::h5
