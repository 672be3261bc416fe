#include "fs/device/striped_device.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <latch>
#include <stdexcept>

namespace mmfs::fs {

std::vector<std::string> split_targets(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const std::string& a : args) {
    std::error_code ec;
    if (a.find(',') == std::string::npos || std::filesystem::exists(a, ec)) {
      out.push_back(a);
      continue;
    }
    std::size_t at = 0;
    while (at <= a.size()) {
      const std::size_t comma = std::min(a.find(',', at), a.size());
      if (comma > at) out.push_back(a.substr(at, comma - at));
      at = comma + 1;
    }
  }
  return out;
}

bool open_targets(const std::vector<std::string>& targets, OpenOptions options, std::vector<MemberTarget>* out,
                  int* error, std::string* message, std::vector<std::string>* left_out) {
  for (const std::string& t : targets) {
    OpenOptions o = options;
    auto dev = open_device(t, o, error, message);
    if (!dev && *error == EINVAL) {  // a filesystem without O_DIRECT (tmpfs)
      o.direct = false;
      dev = open_device(t, o, error, message);
    }
    if (!dev) {
      if (message->find(t) == std::string::npos) *message = fmt::format("{}: {}", t, *message);
      if (!left_out) return false;
      left_out->push_back(*message + " (left out)");
      continue;
    }
    out->push_back({t, std::move(dev)});
  }
  return !out->empty() || targets.empty();
}

StripedDevice::StripedDevice(std::vector<MemberTarget> devices, const geom::StripedGeometry& geometry,
                             std::uint32_t raid, std::uint64_t size_bytes, const std::vector<std::uint32_t>& failed)
    : geometry_(geometry), raid_(raid), size_(size_bytes) {
  if (raid > 1) throw std::invalid_argument(fmt::format("RAID level {} is not supported (0 or 1)", raid));
  const std::size_t want = std::size_t(geometry.members()) * (raid == 1 ? 2 : 1);
  if (devices.size() != want)
    throw std::invalid_argument(fmt::format("a {}-member RAID {} volume needs {} devices, got {}", geometry.members(),
                                            raid, want, devices.size()));
  if (size_bytes > geometry.capacity_sectors() * geometry.sector_size())
    throw std::invalid_argument("the volume's byte space exceeds its geometry");
  for (auto& d : devices) {
    if (!d.device) throw std::invalid_argument("a member device is missing");
    block_size_ = std::max(block_size_, d.device->block_size());
    devices_.emplace_back().target = std::move(d);
  }
  for (std::uint32_t f : failed) {
    if (f >= devices_.size()) throw std::invalid_argument("a failed device index is out of range");
    devices_[f].failed = true;
    devices_[f].reason = "marked failed in the volume's superblocks";
  }
  const std::size_t threads = std::min<std::size_t>(2 * devices_.size(), 64);
  for (std::size_t i = 0; i + 1 < threads; ++i) pool_.emplace_back([this] { worker(); });
}

StripedDevice::~StripedDevice() {
  {
    std::lock_guard lock(pool_mu_);
    stopping_ = true;
  }
  pool_cv_.notify_all();
  for (auto& t : pool_) t.join();
}

void StripedDevice::post(std::function<void()> task) {
  {
    std::lock_guard lock(pool_mu_);
    tasks_.push_back(std::move(task));
  }
  pool_cv_.notify_one();
}

void StripedDevice::worker() {
  while (true) {
    std::function<void()> task;
    {
      std::unique_lock lock(pool_mu_);
      pool_cv_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

std::vector<std::uint32_t> StripedDevice::failed_devices() const {
  std::vector<std::uint32_t> out;
  for (std::uint32_t i = 0; i < devices_.size(); ++i)
    if (devices_[i].failed) out.push_back(i);
  return out;
}

std::vector<StripedDevice::Piece> StripedDevice::split(std::span<IoRequest> batch) const {
  const std::uint64_t ss = geometry_.sector_size();
  std::vector<Piece> pieces;
  pieces.reserve(batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const IoRequest& r = batch[i];
    if (r.result) continue;  // refused by validation
    std::uint64_t off = r.offset;
    const std::uint64_t end = r.offset + r.length;
    auto* buf = static_cast<std::byte*>(r.buffer);
    while (off < end) {
      const geom::Lbn lbn = off / ss;
      const std::uint64_t track_end = (geometry_.track_boundaries(lbn).high + 1) * ss;
      const auto len = std::uint32_t(std::min(end, track_end) - off);
      const auto at = geometry_.locate(lbn);
      pieces.push_back({i, at.member, at.lbn * ss + off % ss, len, buf});
      buf += len;
      off += len;
    }
  }
  return pieces;
}

std::uint32_t StripedDevice::pick_copy(std::uint32_t member, const std::vector<std::uint64_t>& planned) const {
  std::uint32_t best = UINT32_MAX;
  std::uint64_t best_load = 0;
  for (std::uint32_t d : {2 * member, 2 * member + 1}) {
    if (devices_[d].failed) continue;
    const std::uint64_t load = devices_[d].queued_bytes.load() + planned[d];
    if (best == UINT32_MAX || load < best_load) best = d, best_load = load;
  }
  return best;
}

void StripedDevice::mark_failed(std::uint32_t d, int error, const char* op) {
  Device& dev = devices_[d];
  ++dev.errors;
  std::string reason = fmt::format("{} failed: {}", op, std::strerror(error));
  if (raid_ != 1) {
    std::lock_guard lock(dev.mu);
    dev.reason = reason;  // RAID 0: remembered, not taken out of service
    return;
  }
  {
    // The last healthy copy of a member is never taken out of service: its
    // requests fail instead, and succeed again when it comes back.
    std::scoped_lock lock(devices_[d & ~1u].mu, devices_[d | 1u].mu);
    if (dev.failed || devices_[d ^ 1u].failed) {
      if (!dev.failed) dev.reason = reason;
      return;
    }
    dev.reason = reason;
    dev.failed = true;
  }
  if (listener_) listener_(d, reason);
}

void StripedDevice::record_lost(std::uint32_t d, const std::string& reason) {
  if (raid_ != 0 || d >= devices_.size()) return;
  Device& dev = devices_[d];
  std::lock_guard lock(dev.mu);
  dev.reason = reason;
  dev.failed = true;
  dev.lost = true;
}

void StripedDevice::run(std::vector<std::vector<IoRequest>>& per_device) {
  std::vector<std::uint32_t> busy;
  for (std::uint32_t d = 0; d < per_device.size(); ++d)
    if (!per_device[d].empty()) busy.push_back(d);
  auto execute = [this, &per_device](std::uint32_t d) {
    auto& reqs = per_device[d];
    Device& dev = devices_[d];
    std::uint64_t bytes = 0;
    for (const auto& r : reqs) bytes += r.length;
    dev.queued_bytes += bytes;
    dev.target.device->submit(reqs);
    dev.queued_bytes -= bytes;
    dev.requests += reqs.size();
    for (const auto& r : reqs)
      if (!r.result) (r.op == IoRequest::Op::Read ? dev.bytes_read : dev.bytes_written) += r.length;
  };
  if (busy.empty()) return;  // every request was refused before any I/O
  if (busy.size() == 1) return execute(busy[0]);
  std::latch done(std::ptrdiff_t(busy.size() - 1));
  for (std::size_t i = 1; i < busy.size(); ++i)
    post([&, d = busy[i]] {
      execute(d);
      done.count_down();
    });
  execute(busy[0]);
  done.wait();
}

int StripedDevice::submit(std::span<IoRequest> batch) {
  for (IoRequest& r : batch) {
    r.result = 0;
    if (r.length == 0 || r.offset % block_size_ || r.length % block_size_ ||
        reinterpret_cast<std::uintptr_t>(r.buffer) % block_size_ || r.offset > size_ || size_ - r.offset < r.length)
      r.result = EINVAL;
  }
  std::vector<Piece> pieces = split(batch);
  const bool write = !batch.empty() && batch[0].op == IoRequest::Op::Write;
  const int side = raid_ == 1 && !write ? MirrorSide::current() : -1;  // a repair's reads: that side only
  const std::uint32_t n = devices();
  // Pieces still to serve (indices into `pieces`); a RAID 1 read that fails
  // on one copy comes back for the other, so at most two rounds.
  std::vector<std::size_t> todo(pieces.size());
  for (std::size_t i = 0; i < todo.size(); ++i) todo[i] = i;
  std::vector<int> piece_ok(pieces.size(), 0);  // RAID 1 writes: copies written
  for (int round = 0; round < 2 && !todo.empty(); ++round) {
    std::vector<std::vector<IoRequest>> per(n);
    std::vector<std::vector<std::size_t>> which(n);
    std::vector<std::uint64_t> planned(n, 0);
    auto assign = [&](std::uint32_t d, std::size_t pi) {
      const Piece& p = pieces[pi];
      per[d].push_back({write ? IoRequest::Op::Write : IoRequest::Op::Read, p.offset, p.length, p.buffer, 0});
      which[d].push_back(pi);
      planned[d] += p.length;
    };
    for (std::size_t pi : todo) {
      const Piece& p = pieces[pi];
      if (raid_ == 0) {
        assign(p.member, pi);
      } else if (write) {
        bool any = false;
        for (std::uint32_t d : {2 * p.member, 2 * p.member + 1})
          if (!devices_[d].failed) assign(d, pi), any = true;
        if (!any && !batch[p.request].result) batch[p.request].result = EIO;
      } else if (side >= 0) {
        if (const std::uint32_t d = 2 * p.member + std::uint32_t(side & 1); !devices_[d].failed)
          assign(d, pi);
        else if (!batch[p.request].result)
          batch[p.request].result = EIO;
      } else if (std::uint32_t d = pick_copy(p.member, planned); d != UINT32_MAX) {
        assign(d, pi);
      } else if (!batch[p.request].result) {
        batch[p.request].result = EIO;
      }
    }
    run(per);
    std::vector<std::size_t> again;
    std::vector<int> piece_error(pieces.size(), 0);
    for (std::uint32_t d = 0; d < n; ++d)
      for (std::size_t j = 0; j < per[d].size(); ++j) {
        const std::size_t pi = which[d][j];
        const int e = per[d][j].result;
        if (!e) {
          ++piece_ok[pi];
          continue;
        }
        if (is_device_failure(e)) mark_failed(d, e, write ? "a write" : "a read");
        piece_error[pi] = piece_error[pi] ? piece_error[pi] : e;
        if (raid_ == 1 && !write && side < 0 && is_device_failure(e) && devices_[d].failed && round == 0)
          again.push_back(pi);
      }
    for (std::size_t pi : todo) {
      // A RAID 1 write stands when one copy took it (the other is failed now).
      if (!piece_error[pi] || (write && piece_ok[pi] > 0 && is_device_failure(piece_error[pi]))) continue;
      if (std::find(again.begin(), again.end(), pi) != again.end()) continue;
      IoRequest& r = batch[pieces[pi].request];
      if (!r.result) r.result = piece_error[pi];
    }
    todo = std::move(again);
  }
  for (const IoRequest& r : batch)
    if (r.result) return r.result;
  return 0;
}

int StripedDevice::flush() {
  std::vector<int> results(devices_.size(), 0);
  std::vector<std::uint32_t> live;
  // RAID 0 writes go to a member recorded failed too (one that came back
  // holds data with no other copy): it is flushed as well, and only its
  // absence (ENODEV) is no error, or its failure once the volume recorded
  // it lost while running (record_lost: what it holds is not counted on).
  for (std::uint32_t d = 0; d < devices_.size(); ++d)
    if (!devices_[d].failed || raid_ == 0) live.push_back(d);
  if (live.empty()) return EIO;
  std::latch done(std::ptrdiff_t(live.size() - 1));
  for (std::size_t i = 1; i < live.size(); ++i)
    post([&, d = live[i]] {
      results[d] = devices_[d].target.device->flush();
      done.count_down();
    });
  results[live[0]] = devices_[live[0]].target.device->flush();
  done.wait();
  int first = 0;
  for (std::uint32_t d : live) {
    if (!results[d] || (raid_ == 0 && devices_[d].failed && (results[d] == ENODEV || devices_[d].lost))) continue;
    if (is_device_failure(results[d])) mark_failed(d, results[d], "a flush");
    // A RAID 1 flush stands when the twin flushed (the failed copy is out).
    if (raid_ == 1 && devices_[d].failed && !devices_[d ^ 1u].failed && !results[d ^ 1u]) continue;
    if (!first) first = results[d];
  }
  return first;
}

nlohmann::json StripedDevice::stats() const {
  nlohmann::json out = nlohmann::json::array();
  for (std::uint32_t d = 0; d < devices_.size(); ++d) {
    const Device& dev = devices_[d];
    std::string reason;
    {
      std::lock_guard lock(dev.mu);
      reason = dev.reason;
    }
    out.push_back({{"device", d},
                   {"target", dev.target.target},
                   {"state", dev.failed ? "failed" : dev.errors ? "errors" : "ok"},
                   {"requests", dev.requests.load()},
                   {"bytes_read", dev.bytes_read.load()},
                   {"bytes_written", dev.bytes_written.load()},
                   {"errors", dev.errors.load()},
                   {"reason", reason}});
  }
  return out;
}

}  // namespace mmfs::fs
