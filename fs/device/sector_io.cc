#include "fs/device/sector_io.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <exception>

#include "util/align.h"

namespace mmfs::fs {

namespace {
// One submission holds at most this many requests, and a request at most this
// many bytes (IoRequest lengths are 32-bit).
constexpr std::size_t kMaxBatch = 1024;
constexpr std::uint64_t kMaxRequestBytes = 64ull << 20;

std::int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

SectorIo::SectorIo(BlockDevice& device, const geom::Geometry& geometry)
    : device_(device), geometry_(geometry), sector_size_(geometry.sector_size()),
      model_(geometry.make_service_model()) {}

void SectorIo::set_observer(std::shared_ptr<BatchObserver> observer) {
  std::lock_guard lock(observer_mu_);
  observer_ = std::move(observer);
  observed_.store(observer_ != nullptr, std::memory_order_release);
}

std::shared_ptr<BatchObserver> SectorIo::observer() const {
  // The flag keeps the lock off every batch while no scrub runs.
  if (!observed_.load(std::memory_order_acquire)) return nullptr;
  std::lock_guard lock(observer_mu_);
  return observer_;
}

double SectorIo::foreground_idle_ms() const {
  if (foreground_in_flight_.load() > 0) return 0.0;
  const std::int64_t since = steady_now_ns() - foreground_end_ns_.load();
  return since > 0 ? double(since) / 1e6 : 0.0;
}

int SectorIo::issue(std::vector<IoRequest>& batch, std::vector<geom::Request>& modeled, IoRequest::Op op,
                    bool foreground, const BlockDevice::RequestDone& request_done) {
  if (batch.empty()) return 0;
  const std::size_t own = batch.size();
  std::shared_ptr<BatchObserver> watcher = foreground ? observer() : nullptr;
  std::vector<geom::Lbn> extra;
  AlignedBuffer extra_data;
  if (watcher) {
    watcher->before_batch(std::span<const geom::Request>(modeled.data(), own), op, &extra);
    if (!extra.empty()) {
      // One sector each, appended after the foreground: the model groups
      // them with the foreground's row passes (geometry/free_bandwidth.h).
      extra_data = AlignedBuffer(extra.size() * sector_size_, AlignedBuffer::Uninitialized{});
      for (std::size_t i = 0; i < extra.size(); ++i) {
        IoRequest req;
        req.op = IoRequest::Op::Read;
        req.offset = extra[i] * sector_size_;
        req.length = sector_size_;
        req.buffer = extra_data.data() + i * sector_size_;
        batch.push_back(req);
        modeled.push_back({extra[i], 1});
      }
    }
  }
  std::int64_t started_ns = 0;
  if (foreground) {
    started_ns = steady_now_ns();
    device_call_started();
  }
  int r = request_done ? device_.submit_streaming(batch,
                                                  [&](std::size_t i) {
                                                    if (i < own) request_done(i);  // not the scrub's sectors
                                                  })
                       : device_.submit(batch);
  if (foreground) device_call_ended(started_ns);
  if (foreground) {
    requests_ += own;
    batches_ += 1;
  } else {
    background_batches_ += 1;
  }
  ride_along_sectors_ += extra.size();
  {
    std::lock_guard lock(model_mu_);
    try {
      modeled_ms_ += model_->serve(modeled);
    } catch (const std::exception&) {
      // A request past the modeled device cannot happen on a mounted volume;
      // the counters must never take the daemon down if it does.
    }
  }
  if (!extra.empty()) {
    // A failed ride-along read is the scrub's finding, never the foreground's error.
    int own_result = 0, any_result = 0;
    std::vector<int> results(extra.size());
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (i < own && own_result == 0) own_result = batch[i].result;
      if (i >= own) results[i - own] = batch[i].result;
      if (any_result == 0) any_result = batch[i].result;
    }
    r = own_result != 0 || any_result != 0 ? own_result : r;
    watcher->after_batch(std::span<const geom::Request>(modeled.data(), own), op, r, extra, extra_data.data(),
                         results);
  } else if (watcher) {
    watcher->after_batch(std::span<const geom::Request>(modeled.data(), own), op, r, {}, nullptr, {});
  }
  batch.clear();
  modeled.clear();
  return r;
}

void SectorIo::device_call_started() {
  std::lock_guard lock(model_mu_);
  if (device_calls_in_flight_++ == 0) busy_since_ns_ = steady_now_ns();
}

void SectorIo::device_call_ended(std::int64_t started_ns) {
  const std::int64_t now = steady_now_ns();
  std::lock_guard lock(model_mu_);
  device_ms_ += double(now - started_ns) / 1e6;
  if (--device_calls_in_flight_ == 0) device_busy_ms_ += double(now - busy_since_ns_) / 1e6;
}

int SectorIo::submit(std::span<const SectorRun> runs, IoRequest::Op op, bool foreground,
                     const std::function<void(std::size_t run)>* run_done) {
  std::vector<IoRequest> batch;
  std::vector<geom::Request> modeled;
  batch.reserve(std::min(runs.size(), kMaxBatch));
  // With run_done: the run of each request of the batch, and the requests
  // of each run still on the device (a run longer than kMaxRequestBytes is
  // several requests).
  std::vector<std::size_t> run_of;
  std::vector<std::uint32_t> pieces_left;
  BlockDevice::RequestDone request_done;
  if (run_done && *run_done) {
    pieces_left.resize(runs.size());
    const std::uint64_t max_sectors = kMaxRequestBytes / sector_size_;
    for (std::size_t k = 0; k < runs.size(); ++k)
      pieces_left[k] = std::uint32_t(util::div_up(runs[k].sectors, max_sectors));
    request_done = [&](std::size_t i) {
      const std::size_t k = run_of[i];
      if (--pieces_left[k] == 0) (*run_done)(k);
    };
  }
  if (foreground) ++foreground_in_flight_;
  struct Done {
    SectorIo* io;
    bool foreground;
    ~Done() {
      if (!foreground) return;
      io->foreground_end_ns_.store(steady_now_ns());
      --io->foreground_in_flight_;
    }
  } done{this, foreground};
  for (std::size_t k = 0; k < runs.size(); ++k) {
    const SectorRun& run = runs[k];
    if (run.sectors == 0 && request_done) (*run_done)(k);  // nothing to wait for
    std::uint64_t finished = 0;
    while (finished < run.sectors) {
      std::uint64_t n = std::min<std::uint64_t>(run.sectors - finished, kMaxRequestBytes / sector_size_);
      IoRequest req;
      req.op = op;
      req.offset = (run.lbn + finished) * sector_size_;
      req.length = std::uint32_t(n * sector_size_);
      req.buffer = run.buffer + finished * sector_size_;
      batch.push_back(req);
      modeled.push_back({run.lbn + finished, std::uint32_t(n)});
      if (request_done) run_of.push_back(k);
      if (!foreground) background_sectors_ += n;
      else (op == IoRequest::Op::Read ? sectors_read_ : sectors_written_) += n;
      finished += n;
      if (batch.size() == kMaxBatch) {
        if (int r = issue(batch, modeled, op, foreground, request_done)) return r;
        run_of.clear();
      }
    }
  }
  return issue(batch, modeled, op, foreground, request_done);
}

nlohmann::json SectorIo::stats() const {
  nlohmann::json j;
  j["requests"] = requests_.load();
  j["batches"] = batches_.load();
  j["sectors_read"] = sectors_read_.load();
  j["sectors_written"] = sectors_written_.load();
  j["sectors"] = sectors_read_.load() + sectors_written_.load();
  // Reads split by what they serve: bitmap indexes, and everything else
  // (array cells, plain files).
  j["index_sectors_read"] = index_sectors_read_.load();
  j["data_sectors_read"] = sectors_read_.load() - std::min(sectors_read_.load(), index_sectors_read_.load());
  j["flushes"] = flushes_.load();
  // The scrub's reads (docs/daemon.md, "Scrub"), outside the counters above:
  // sectors read in foreground batches for free, and in its own batches.
  j["scrub_ride_along_sectors"] = ride_along_sectors_.load();
  j["scrub_own_sectors"] = background_sectors_.load();
  j["scrub_own_batches"] = background_batches_.load();
  j["sector_size"] = sector_size_;
  std::lock_guard lock(model_mu_);
  j["modeled_ms"] = modeled_ms_;
  j["device_ms"] = device_ms_;
  j["device_busy_ms"] = device_busy_ms_;
  return j;
}

}  // namespace mmfs::fs
