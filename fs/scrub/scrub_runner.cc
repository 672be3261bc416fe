// The scrub in motion (fs/scrub/scrub_runner.h).
#include "fs/scrub/scrub_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <exception>

#include "geometry/memstore.h"

namespace mmfs::fs {

namespace {

// An idle-time read at most this many bytes (and at most one track): long
// enough to stream, short enough that a foreground request arriving behind
// it hardly waits.
constexpr std::uint64_t kMaxRunBytes = 1u << 20;

std::string utc_text(std::chrono::system_clock::time_point t) {
  const std::time_t s = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&s, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

const char* to_string(ScrubMode mode) { return mode == ScrubMode::FreeBandwidth ? "free-bandwidth" : "idle-time"; }

const char* to_string(ScrubState state) {
  switch (state) {
    case ScrubState::Running: return "running";
    case ScrubState::Done: return "done";
    case ScrubState::Stopped: return "stopped";
  }
  return "?";
}

ScrubMode default_scrub_mode(const geom::Geometry& geometry) {
  return geometry.kind() == geom::DeviceKind::Mems ? ScrubMode::FreeBandwidth : ScrubMode::IdleTime;
}

std::string scrub_how(ScrubMode mode, const geom::Geometry& geometry) {
  if (mode == ScrubMode::FreeBandwidth)
    return "reads only the free LBNs of each foreground access's equivalence class, in the same device call "
           "(MEMS free bandwidth: the batch's service time is unchanged); its own requests are the re-read of a "
           "suspect and the completion pass, in idle time";
  if (geometry.kind() == geom::DeviceKind::Mems)
    return "reads in idle time, a track at a time (asked for with 'start idle-time')";
  return fmt::format("reads in idle time, a track at a time: the device ({}) has no free bandwidth",
                     geom::to_string(geometry.kind()));
}

ScrubRunner::ScrubRunner(SectorIo& io, const geom::Geometry& geometry, ScrubMode mode,
                         std::unique_ptr<ScrubEngine> engine, ScrubRunnerOptions options)
    : io_(io), geometry_(geometry), mode_(mode), engine_(std::move(engine)), options_(options),
      started_(std::chrono::system_clock::now()), started_steady_(std::chrono::steady_clock::now()) {}

int ScrubRunner::start(SectorIo& io, const geom::Geometry& geometry, ScrubMode mode,
                       std::unique_ptr<ScrubEngine> engine, ScrubRunnerOptions options,
                       std::shared_ptr<ScrubRunner>* out, std::string* message) {
  const auto* mems = dynamic_cast<const geom::MemStore*>(&geometry);
  if (mode == ScrubMode::FreeBandwidth && mems == nullptr) {
    *message = fmt::format("free-bandwidth needs a MEMS volume (equivalence classes); this volume's geometry '{}' "
                           "is a {}: use 'start' or 'start idle-time'",
                           geometry.name(), geom::to_string(geometry.kind()));
    return ENOTSUP;
  }
  std::shared_ptr<ScrubRunner> runner(new ScrubRunner(io, geometry, mode, std::move(engine), options));
  if (mode == ScrubMode::FreeBandwidth) {
    runner->scan_ = std::make_unique<geom::FreeBandwidthScan>(*mems);
    runner->reachable_ = std::min<std::uint64_t>(runner->engine_->sectors(), mems->capacity_sectors());
    io.set_observer(runner);
  }
  runner->thread_ = std::thread([r = runner.get()] { r->run(); });
  *out = std::move(runner);
  return 0;
}

ScrubRunner::~ScrubRunner() { stop(); }

void ScrubRunner::stop() {
  {
    std::lock_guard lock(queue_mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  queue_cv_.notify_all();
  if (mode_ == ScrubMode::FreeBandwidth) io_.set_observer(nullptr);
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  ScrubState running = ScrubState::Running;
  if (state_.compare_exchange_strong(running, ScrubState::Stopped))
    finished_ms_ = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                         started_steady_)
                       .count();
}

void ScrubRunner::recheck_findings(const std::atomic<bool>& stop) {
  const std::uint32_t ss = io_.sector_size();
  for (const ScrubEngine::RecheckJob& job : engine_->recheck_jobs()) {
    if (stop.load() || state_.load() == ScrubState::Stopped) return;
    std::uint64_t sectors = 0;
    for (const auto& r : job.runs) sectors += r.sectors;
    AlignedBuffer buf(std::max<std::uint64_t>(sectors, 1) * ss, AlignedBuffer::ForIo{});
    std::vector<SectorRun> runs;
    std::byte* p = buf.data();
    for (const auto& r : job.runs) {
      runs.push_back({r.lbn, r.sectors, p});
      p += std::uint64_t(r.sectors) * ss;
    }
    const int result = runs.empty() ? 0 : io_.read_background(runs);
    if (!runs.empty()) ++own_reads_;
    engine_->finish_recheck(job, buf.data(), result);
  }
}

void ScrubRunner::before_batch(std::span<const geom::Request> foreground, IoRequest::Op op,
                               std::vector<geom::Lbn>* extra) {
  (void)op;  // writes position the sled too: their free slots are as good as a read's
  if (state_.load() != ScrubState::Running) return;
  std::lock_guard lock(scan_mu_);
  if (!scan_) return;
  std::vector<geom::Lbn> picks;
  const std::uint64_t before = scan_->touched_count();
  try {
    scan_->pick(foreground, &picks);
  } catch (const std::exception&) {
    return;  // a request past the modeled device (cannot happen on a mounted volume): no ride-along
  }
  const std::uint64_t fresh = scan_->touched_count() - before;
  const std::uint64_t total = engine_->sectors();
  std::uint64_t past = 0;
  for (geom::Lbn l : picks) {
    // The modeled device may be larger than the volume (mkfs -s): those LBNs are not ours to read.
    if (l < total) extra->push_back(l);
    else ++past;
  }
  picked_ += picks.size() - past;
  picked_past_volume_ += past;
  touched_in_volume_ += fresh - past;
}

void ScrubRunner::after_batch(std::span<const geom::Request> foreground, IoRequest::Op op, int foreground_result,
                              std::span<const geom::Lbn> extra, const std::byte* data,
                              std::span<const int> extra_results) {
  if (state_.load() != ScrubState::Running) return;
  // As in the paper's scan, what the foreground read counts as read; its
  // read path verified it (a mismatch there is an EIO and a line in
  // /.mmfs/errors).
  if (op == IoRequest::Op::Read && foreground_result == 0)
    for (const geom::Request& r : foreground) engine_->foreground_read(r.lbn, r.sectors);
  if (extra.empty()) return;
  const std::uint32_t ss = io_.sector_size();
  Delivery d;
  d.lbns.assign(extra.begin(), extra.end());
  d.results.assign(extra_results.begin(), extra_results.end());
  {
    std::lock_guard lock(queue_mu_);
    if (stopping_) return;
    if (queue_bytes_ + extra.size() * ss > options_.queue_bytes) {
      dropped_ += extra.size();  // uncovered still: the completion pass reads them
      return;
    }
    queue_bytes_ += extra.size() * ss;
  }
  // The copy outside the lock: the foreground thread pays for it, not the others.
  d.data.assign(data, data + extra.size() * ss);
  {
    std::lock_guard lock(queue_mu_);
    queue_.push_back(std::move(d));
  }
  queue_cv_.notify_one();
}

void ScrubRunner::drain() {
  for (;;) {
    Delivery d;
    {
      std::lock_guard lock(queue_mu_);
      if (queue_.empty() || stopping_) return;
      d = std::move(queue_.front());
      queue_.pop_front();
      queue_bytes_ -= d.data.size();
    }
    engine_->deliver(d.lbns, d.data.data(), d.results, ReadPath::FreeBandwidth);
    delivered_ += d.lbns.size();
  }
}

bool ScrubRunner::free_scan_over() const {
  if (mode_ != ScrubMode::FreeBandwidth) return true;
  std::lock_guard lock(scan_mu_);
  return touched_in_volume_ >= reachable_;
}

bool ScrubRunner::idle_work() {
  const std::uint32_t ss = io_.sector_size();
  if (auto job = engine_->next_unit_job()) {
    // A suspect's second read, or a unit the completion pass reads whole.
    std::uint64_t sectors = 0;
    for (const auto& r : job->runs) sectors += r.sectors;
    AlignedBuffer buf(sectors * ss, AlignedBuffer::ForIo{});
    std::vector<SectorRun> runs;
    std::byte* p = buf.data();
    for (const auto& r : job->runs) {
      runs.push_back({r.lbn, r.sectors, p});
      p += std::uint64_t(r.sectors) * ss;
    }
    const int result = io_.read_background(runs);
    ++own_reads_;
    engine_->finish_unit_job(*job, buf.data(), result);
    return true;
  }
  if (!free_scan_over()) return false;
  const std::uint64_t limit = std::max<std::uint64_t>(1, std::min(options_.max_run_sectors, kMaxRunBytes / ss));
  auto next = engine_->next_uncovered(cursor_, limit);
  if (!next) return false;
  auto [lbn, count] = *next;
  if (lbn < geometry_.capacity_sectors()) {
    try {
      const geom::TrackBounds track = geometry_.track_boundaries(lbn);  // a track-sized run
      count = std::min<std::uint64_t>(count, track.high + 1 - lbn);
    } catch (const std::exception&) {
    }
  }
  count = std::max<std::uint64_t>(count, 1);
  AlignedBuffer buf(count * ss, AlignedBuffer::ForIo{});
  const ReadPath how = mode_ == ScrubMode::IdleTime ? ReadPath::IdleTime : ReadPath::Completion;
  int result = io_.read_background(std::vector<SectorRun>{{lbn, count, buf.data()}});
  ++own_reads_;
  if (result != 0 && count > 1) {
    // Which sectors failed: one at a time.
    for (std::uint64_t i = 0; i < count; ++i) {
      const int r = io_.read_background(std::vector<SectorRun>{{lbn + i, 1, buf.data() + i * ss}});
      engine_->deliver_run(lbn + i, 1, buf.data() + i * ss, r, how);
    }
  } else {
    engine_->deliver_run(lbn, count, buf.data(), result, how);
  }
  cursor_ = lbn + count;
  return true;
}

void ScrubRunner::run() {
  const auto poll = std::chrono::milliseconds(std::max<std::int64_t>(1, std::int64_t(options_.idle_ms / 5)));
  for (;;) {
    {
      std::unique_lock lock(queue_mu_);
      queue_cv_.wait_for(lock, poll, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
    }
    try {
      drain();
      if (engine_->complete()) {
        finished_ms_ = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                             started_steady_)
                           .count();
        ScrubState running = ScrubState::Running;
        state_.compare_exchange_strong(running, ScrubState::Done);
        return;
      }
      // Idle: no foreground batch for idle_ms. One piece of work at a time,
      // looking again before the next, so the foreground waits behind one run.
      while (io_.foreground_idle_ms() >= options_.idle_ms) {
        {
          std::lock_guard lock(queue_mu_);
          if (stopping_) return;
        }
        if (!idle_work()) break;
        drain();
      }
    } catch (const std::exception&) {
      // Out of memory for a buffer, a bug: the scrub stops, the daemon does not.
      ScrubState running = ScrubState::Running;
      state_.compare_exchange_strong(running, ScrubState::Stopped);
      return;
    }
  }
}

nlohmann::json ScrubRunner::status() const {
  nlohmann::json j;
  j["state"] = to_string(state_.load());
  j["mode"] = to_string(mode_);
  j["how"] = scrub_how(mode_, geometry_);
  j["started"] = utc_text(started_);
  const std::int64_t finished = finished_ms_.load();
  const std::int64_t elapsed =
      finished >= 0 ? finished
                    : std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                            started_steady_)
                          .count();
  j["elapsed_s"] = double(elapsed) / 1000.0;
  j.update(engine_->status());
  j["idle_ms"] = options_.idle_ms;
  j["own_reads"] = own_reads_.load();
  if (mode_ == ScrubMode::FreeBandwidth) {
    std::lock_guard lock(scan_mu_);
    std::uint64_t dropped = 0;
    {
      std::lock_guard qlock(queue_mu_);
      dropped = dropped_;
    }
    j["free_bandwidth"] = {{"reachable", reachable_},
                           {"touched", touched_in_volume_},
                           {"picked", picked_},
                           {"picked_past_volume", picked_past_volume_},
                           {"delivered", delivered_.load()},
                           {"dropped", dropped},
                           {"phase", touched_in_volume_ >= reachable_ ? "completion" : "riding along"}};
  }
  return j;
}

}  // namespace mmfs::fs
