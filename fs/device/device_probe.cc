// Device measurement with O_DIRECT io_uring reads (see device_probe.h).
#include "fs/device/device_probe.h"

#include <fcntl.h>
#include <liburing.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "fs/device/block_device.h"
#include "util/align.h"

namespace mmfs::fs {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

int fail(std::string* message, int err, std::string text) {
  if (message) *message = std::move(text);
  return err;
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

struct Ring {
  io_uring ring{};
  bool live = false;
  ~Ring() {
    if (live) io_uring_queue_exit(&ring);
  }
};

struct Extent {
  std::uint64_t offset, length;
};

// The file's data extents (SEEK_DATA/SEEK_HOLE), aligned inward to `align`.
std::vector<Extent> data_extents(int fd, std::uint64_t size, std::uint64_t align) {
  std::vector<Extent> out;
  off_t pos = 0;
  while (std::uint64_t(pos) < size) {
    const off_t data = ::lseek(fd, pos, SEEK_DATA);
    if (data < 0) break;
    off_t hole = ::lseek(fd, data, SEEK_HOLE);
    if (hole < 0) hole = off_t(size);
    const std::uint64_t lo = util::align_up(std::uint64_t(data), align);
    const std::uint64_t hi = std::uint64_t(hole) / align * align;
    if (hi > lo) out.push_back({lo, hi - lo});
    pos = hole;
  }
  return out;
}

// Uniform random offsets (multiples of `align`) at which `bytes` fit inside one extent.
class OffsetPicker {
 public:
  OffsetPicker(const std::vector<Extent>& extents, std::uint64_t bytes, std::uint64_t align, std::uint64_t seed)
      : rng_(seed), align_(align) {
    std::uint64_t total = 0;
    for (const Extent& e : extents) {
      if (e.length < bytes) continue;
      const std::uint64_t slots = (e.length - bytes) / align + 1;
      usable_.push_back({e.offset, slots});
      total += slots;
      cumulative_.push_back(total);
    }
    total_ = total;
  }
  bool empty() const { return total_ == 0; }
  std::uint64_t next() {
    const std::uint64_t k = std::uniform_int_distribution<std::uint64_t>(0, total_ - 1)(rng_);
    const std::size_t i = std::upper_bound(cumulative_.begin(), cumulative_.end(), k) - cumulative_.begin();
    const std::uint64_t before = i ? cumulative_[i - 1] : 0;
    return usable_[i].offset + (k - before) * align_;
  }

 private:
  std::mt19937_64 rng_;
  std::uint64_t align_;
  std::vector<Extent> usable_;  // offset, slots
  std::vector<std::uint64_t> cumulative_;
  std::uint64_t total_ = 0;
};

}  // namespace

int probe_device(const std::string& path, const ProbeOptions& opt, ProbeResult* out, std::string* message) {
  const auto t_start = Clock::now();
  *out = ProbeResult{};
  out->target = path;
  Fd file;
  file.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file.fd < 0) return fail(message, errno, fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(file.fd, &st) != 0) return fail(message, errno, fmt::format("{}: {}", path, std::strerror(errno)));
  std::vector<Extent> extents;
  Fd direct;
  std::uint64_t align = 4096;
  if (S_ISBLK(st.st_mode)) {
    std::uint64_t size = 0;
    int lbs = 512;
    if (::ioctl(file.fd, BLKGETSIZE64, &size) != 0 || ::ioctl(file.fd, BLKSSZGET, &lbs) != 0)
      return fail(message, errno, fmt::format("{}: cannot read the device size: {}", path, std::strerror(errno)));
    out->device_bytes = size;
    out->logical_block = std::uint32_t(lbs);
    align = std::max<std::uint64_t>(align, std::uint64_t(lbs));
    extents.push_back({0, size / align * align});
    direct.fd = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  } else if (S_ISREG(st.st_mode)) {
    out->device_bytes = std::uint64_t(st.st_size);
    out->logical_block = 4096;
    extents = data_extents(file.fd, out->device_bytes, align);
    std::uint64_t data = 0;
    for (const Extent& e : extents) data += e.length;
    if (data >= opt.min_data_bytes) {
      direct.fd = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
    } else {
      // Too little data to time the device by: write a scratch file beside it.
      const std::string dir = std::filesystem::path(path).parent_path().string();
      std::string tmpl = (dir.empty() ? std::string(".") : dir) + "/.mmfs-measure-XXXXXX";
      int fd = ::mkostemp(tmpl.data(), O_CLOEXEC);
      if (fd < 0)
        return fail(message, errno,
                    fmt::format("{} holds {} MiB of data, and a scratch file beside it cannot be made: {}", path,
                                data >> 20, std::strerror(errno)));
      ::close(fd);
      direct.fd = ::open(tmpl.c_str(), O_RDWR | O_DIRECT | O_CLOEXEC);
      const int open_errno = errno;
      ::unlink(tmpl.c_str());  // nothing is left behind, whatever happens next
      if (direct.fd < 0)
        return fail(message, open_errno == EINVAL ? EINVAL : open_errno,
                    fmt::format("cannot open a scratch file in {} with O_DIRECT: {}", dir, std::strerror(open_errno)));
      AlignedBuffer chunk(4u << 20, AlignedBuffer::Uninitialized{});
      std::mt19937_64 rng(42);
      for (std::size_t i = 0; i < chunk.size() / 8; ++i) {
        const std::uint64_t v = rng();
        std::memcpy(chunk.data() + i * 8, &v, 8);
      }
      for (std::uint64_t at = 0; at < opt.scratch_bytes; at += chunk.size()) {
        if (::pwrite(direct.fd, chunk.data(), chunk.size(), off_t(at)) != ssize_t(chunk.size()))
          return fail(message, errno ? errno : EIO,
                      fmt::format("writing the scratch file in {}: {}", dir, std::strerror(errno)));
      }
      if (::fdatasync(direct.fd) != 0)
        return fail(message, errno, fmt::format("syncing the scratch file: {}", std::strerror(errno)));
      extents = {{0, opt.scratch_bytes}};
      out->scratch = true;
    }
  } else {
    return fail(message, ENOTBLK, fmt::format("{} is neither a block device nor a regular file", path));
  }
  if (direct.fd < 0)
    return fail(message, errno, fmt::format("cannot open {} with O_DIRECT ({}): measuring needs uncached reads", path,
                                            std::strerror(errno)));
  for (const Extent& e : extents) out->probed_bytes += e.length;

  std::vector<std::uint32_t> sizes = opt.sizes, depths = opt.depths;
  if (sizes.empty())
    for (std::uint32_t s = 4u << 20; s >= 512; s /= 4) sizes.insert(sizes.begin(), s);
  if (depths.empty()) depths = {1, 4, 16, 64};
  std::erase_if(sizes, [&](std::uint32_t s) { return s % out->logical_block != 0; });
  if (sizes.empty()) return fail(message, EINVAL, "no request size is a multiple of the device's logical block");
  const std::uint32_t max_depth = *std::max_element(depths.begin(), depths.end());

  Ring ring;
  if (int r = io_uring_queue_init(std::max({max_depth, opt.burst_depth, 8u}), &ring.ring, 0); r < 0)
    return fail(message, -r, fmt::format("io_uring is not available: {}", std::strerror(-r)));
  ring.live = true;
  const std::uint64_t max_size = *std::max_element(sizes.begin(), sizes.end());
  const std::uint64_t arena_bytes = std::min<std::uint64_t>(opt.max_inflight_bytes, max_size * max_depth);
  AlignedBuffer arena(std::max<std::uint64_t>(arena_bytes, max_size), AlignedBuffer::ForIo{});

  // The idle reads take their gaps whatever the budget; the cells share the rest.
  const std::uint32_t idle_reads =
      std::min(opt.idle_reads, std::max<std::uint32_t>(3, std::uint32_t(opt.seconds * 50.0 / opt.idle_gap_ms)));
  const double idle_seconds = idle_reads * opt.idle_gap_ms / 1e3;
  // The bursts: every size 1, 32 and up to 1,024 reads of at most burst_bytes.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> bursts;  // (bytes, reads)
  std::vector<std::uint32_t> burst_sizes = opt.burst_sizes;
  if (burst_sizes.empty()) burst_sizes = {4u << 10, 32u << 10, 256u << 10, 4u << 20};
  std::erase_if(burst_sizes, [&](std::uint32_t b) { return b == 0 || b % out->logical_block != 0; });
  if (opt.burst_repeats > 0)
    for (std::uint32_t bytes : burst_sizes)
      for (std::uint64_t reads : {std::uint64_t(1), std::uint64_t(32), std::uint64_t(1024)}) {
        const auto n = std::uint32_t(std::max<std::uint64_t>(1, std::min(reads, opt.burst_bytes / bytes)));
        if (bursts.empty() || bursts.back() != std::pair(bytes, n)) bursts.push_back({bytes, n});
      }
  // Budgeted at the gap plus 40 ms a burst (32 MiB took 17-34 ms on the virtio disk).
  const double burst_seconds = double(bursts.size()) * opt.burst_repeats * (opt.burst_gap_ms + 40.0) / 1e3;
  const double left = std::max(0.5, opt.seconds - since(t_start) - idle_seconds - burst_seconds);
  const double per_cell = left * 0.9 / double(sizes.size() * depths.size());
  constexpr std::uint64_t kMaxRequestsPerCell = 200000;

  // One cell: keep `depth` random reads of `bytes` in flight for its budget.
  struct Slot {
    std::byte* buffer;
    Clock::time_point submitted;
  };
  // `max_reads` > 0: exactly that many reads (a burst), whatever the budget.
  auto run_cell = [&](std::uint32_t bytes, std::uint32_t depth, double budget, bool sequential,
                      geom::ProbeSample* sample, std::uint64_t salt = 0, std::uint64_t max_reads = 0) -> int {
    OffsetPicker picker(extents, bytes, align, 0x5eed ^ (std::uint64_t(bytes) << 8) ^ depth ^ (salt << 32));
    if (picker.empty()) return 0;
    // Sequential reads walk the largest extent from its start.
    const Extent largest = *std::max_element(extents.begin(), extents.end(),
                                             [](const Extent& a, const Extent& b) { return a.length < b.length; });
    std::uint64_t seq_at = largest.offset;
    std::vector<Slot> slots(depth);
    for (std::uint32_t i = 0; i < depth; ++i)  // depth * bytes fits in the arena (the caller caps depth)
      slots[i].buffer = arena.data() + std::uint64_t(i) * bytes;
    std::vector<double> latencies;
    std::uint64_t submitted = 0, done = 0;
    const auto t0 = Clock::now();
    auto submit = [&](std::uint32_t slot) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring.ring);
      std::uint64_t offset;
      if (sequential) {
        if (seq_at + bytes > largest.offset + largest.length) seq_at = largest.offset;
        offset = seq_at;
        seq_at += bytes;
      } else {
        offset = picker.next();
      }
      io_uring_prep_read(sqe, direct.fd, slots[slot].buffer, bytes, offset);
      io_uring_sqe_set_data64(sqe, slot);
      slots[slot].submitted = Clock::now();
      ++submitted;
    };
    if (max_reads > 0) depth = std::uint32_t(std::min<std::uint64_t>(depth, max_reads));
    for (std::uint32_t i = 0; i < depth; ++i) submit(i);
    io_uring_submit(&ring.ring);
    Clock::time_point last = t0;
    while (done < submitted) {
      io_uring_cqe* cqe = nullptr;
      if (int r = io_uring_wait_cqe(&ring.ring, &cqe); r < 0) {
        if (r == -EINTR) continue;
        return fail(message, -r, fmt::format("io_uring wait: {}", std::strerror(-r)));
      }
      bool refill = false;
      unsigned head;
      unsigned seen = 0;
      io_uring_for_each_cqe(&ring.ring, head, cqe) {
        ++seen;
        const std::uint32_t slot = std::uint32_t(io_uring_cqe_get_data64(cqe));
        if (cqe->res < 0) {
          io_uring_cq_advance(&ring.ring, seen);
          // Drain what is still in flight before giving up.
          for (std::uint64_t k = done + 1; k < submitted; ++k) {
            io_uring_cqe* c = nullptr;
            if (io_uring_wait_cqe(&ring.ring, &c) == 0) io_uring_cqe_seen(&ring.ring, c);
          }
          return fail(message, -cqe->res,
                      fmt::format("reading {} bytes of {}: {}", bytes, path, std::strerror(-cqe->res)));
        }
        last = Clock::now();
        latencies.push_back(std::chrono::duration<double, std::milli>(last - slots[slot].submitted).count());
        ++done;
        if (max_reads > 0 ? submitted < max_reads : since(t0) < budget && submitted < kMaxRequestsPerCell) {
          submit(slot);
          refill = true;
        }
      }
      io_uring_cq_advance(&ring.ring, seen);
      if (refill) io_uring_submit(&ring.ring);
    }
    std::nth_element(latencies.begin(), latencies.begin() + latencies.size() / 2, latencies.end());
    sample->bytes = bytes;
    sample->depth = depth;
    sample->requests = done;
    sample->seconds = std::chrono::duration<double>(last - t0).count();
    sample->latency_ms = latencies.empty() ? 0.0 : latencies[latencies.size() / 2];
    return 0;
  };

  for (std::uint32_t depth : depths)
    for (std::uint32_t bytes : sizes) {
      const std::uint32_t d = std::uint32_t(std::clamp<std::uint64_t>(arena.size() / bytes, 1, depth));
      geom::ProbeSample s;
      if (int r = run_cell(bytes, d, per_cell, false, &s)) return r;
      if (s.requests == 0) continue;
      // Several sizes capped to the same depth would repeat a cell.
      if (std::any_of(out->samples.begin(), out->samples.end(),
                      [&](const geom::ProbeSample& o) { return o.bytes == s.bytes && o.depth == s.depth; }))
        continue;
      out->samples.push_back(s);
      if (opt.verbose)
        fmt::print(stderr, "  {:>8} B  depth {:>2}: {:>7} reads, {:8.4f} ms each, median latency {:8.4f} ms\n", bytes,
                   d, s.requests, s.ms_per_request(), s.latency_ms);
    }
  // Waking the device: one read at a time, each after idle_gap_ms, against
  // the same read back to back (the depth-1 cell of the smallest size).
  const std::uint32_t small = *std::min_element(sizes.begin(), sizes.end());
  const auto busy = std::find_if(out->samples.begin(), out->samples.end(),
                                 [&](const geom::ProbeSample& s) { return s.bytes == small && s.depth == 1; });
  if (busy != out->samples.end() && idle_reads > 0) {
    std::vector<double> idle;
    for (std::uint32_t i = 0; i < idle_reads; ++i) {
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(opt.idle_gap_ms));
      geom::ProbeSample one;
      // A zero budget: exactly one read, at an offset of its own.
      if (int r = run_cell(small, 1, 0.0, false, &one, i + 1)) return r;
      if (one.requests == 1) idle.push_back(one.latency_ms);
    }
    if (!idle.empty()) {
      std::nth_element(idle.begin(), idle.begin() + idle.size() / 2, idle.end());
      out->idle_latency_ms = idle[idle.size() / 2];
      out->busy_latency_ms = busy->latency_ms;
      if (opt.verbose)
        fmt::print(stderr, "  {} B after {} ms idle: {:.4f} ms (back to back {:.4f} ms)\n", small, opt.idle_gap_ms,
                   out->idle_latency_ms, out->busy_latency_ms);
    }
  }
  for (const auto& [bytes, reads] : bursts) {
    const std::uint32_t depth =
        std::uint32_t(std::clamp<std::uint64_t>(arena.size() / bytes, 1, std::max(1u, opt.burst_depth)));
    std::vector<double> seconds;
    geom::ProbeSample one;
    for (std::uint32_t k = 0; k < opt.burst_repeats; ++k) {
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(opt.burst_gap_ms));
      one = geom::ProbeSample{};  // no extent holds `bytes`: run_cell leaves it so
      if (int r = run_cell(bytes, depth, 0.0, false, &one, 1000 + k, reads)) return r;
      if (one.requests == reads) seconds.push_back(one.seconds);
    }
    if (seconds.empty()) continue;
    std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
    one.seconds = seconds[seconds.size() / 2];
    one.latency_ms = 0;
    out->bursts.push_back(one);
    if (opt.verbose)
      fmt::print(stderr, "  {:>4} reads of {:>8} B from idle, depth {:>2}: {:8.3f} ms\n", reads, bytes, one.depth,
                 one.seconds * 1e3);
  }
  const std::uint32_t seq_bytes = std::uint32_t(std::min<std::uint64_t>(4u << 20, max_size));
  geom::ProbeSample seq;
  const double seq_budget = std::max(0.2, opt.seconds - since(t_start));
  if (int r = run_cell(seq_bytes, std::uint32_t(std::clamp<std::uint64_t>(arena.size() / seq_bytes, 1, 8)),
                       std::min(seq_budget, left * 0.1), true, &seq))
    return r;
  if (seq.seconds > 0) out->sequential_mb_s = double(seq.bytes) * double(seq.requests) / seq.seconds / 1e6;
  if (opt.verbose) fmt::print(stderr, "  sequential {} B reads: {:.1f} MB/s\n", seq_bytes, out->sequential_mb_s);
  out->seconds = since(t_start);
  if (out->samples.empty()) return fail(message, EIO, fmt::format("{}: no read completed", path));
  return 0;
}

nlohmann::json measured_geometry(const ProbeResult& probe, std::string* summary) {
  const std::uint32_t sector = std::max<std::uint32_t>(4096, probe.logical_block);
  const std::uint64_t capacity = std::max<std::uint64_t>(1, probe.device_bytes / sector);
  const geom::FlashFit fit = geom::fit_flash(probe.samples, sector, capacity, probe.bursts, probe.wake_ms());
  nlohmann::json measured = geom::measured_json(fit, probe.samples, probe.sequential_mb_s, probe.bursts);
  measured["target"] = probe.target;
  measured["scratch_file"] = probe.scratch;
  measured["probed_bytes"] = probe.probed_bytes;
  measured["seconds"] = std::round(probe.seconds * 10) / 10;
  auto round6 = [](double v) { return std::round(v * 1e6) / 1e6; };
  if (probe.idle_latency_ms > 0)
    measured["idle_read"] = {{"median_latency_ms", round6(probe.idle_latency_ms)},
                             {"back_to_back_latency_ms", round6(probe.busy_latency_ms)}};
  const geom::FlashParams& p = fit.params;
  nlohmann::json j = {{"kind", "flash"},
                      {"name", "measured"},
                      {"sector_size", p.sector_size},
                      {"capacity_sectors", p.capacity_sectors},
                      {"track_sectors", p.track_sectors},
                      {"queues", p.queues},
                      {"latency_ms", std::round(p.latency_ms * 1e6) / 1e6},
                      {"bandwidth_mb_s", std::round(p.bandwidth_mb_s * 10) / 10},
                      {"depth", p.depth},
                      {"measured", measured}};
  if (probe.wake_ms() > 0) j["wake_ms"] = round6(probe.wake_ms());
  if (summary) {
    std::string s = fmt::format(
        "measured {} in {:.1f} s ({} MiB of {}): latency {:.3f} ms, {:.0f} MB/s, {} channels, "
        "optimal request {} KiB; the model is within {:.0f} % of the steady random reads (median; worst {:.0f} %)\n",
        probe.target, probe.seconds, probe.probed_bytes >> 20, probe.scratch ? "a scratch file beside it" : "data",
        p.latency_ms, p.bandwidth_mb_s, p.queues, std::uint64_t(p.track_sectors) * p.sector_size / 1024,
        fit.median_error_pct, fit.max_error_pct);
    if (!probe.bursts.empty())
      s += fmt::format("  fitted to {} bursts of reads from idle (as a cold view reads): within {:.0f} % (median; worst "
                       "{:.0f} %)\n",
                       probe.bursts.size(), fit.burst_median_error_pct, fit.burst_max_error_pct);
    if (probe.idle_latency_ms > 0)
      s += fmt::format("  an idle device: the first read takes {:.3f} ms more ({:.3f} against {:.3f} back to back)\n",
                       probe.wake_ms(), probe.idle_latency_ms, probe.busy_latency_ms);
    for (const geom::DepthLine& l : fit.lines)
      s += fmt::format("  depth {:>2}: t = {:.4f} ms/request + {:.4f} ms/MB; a gap under {} KiB is cheaper to read\n",
                       l.depth, l.beta_ms, l.gamma_ms_per_mb, std::llround(l.break_even_gap_bytes() / 1024));
    *summary = s;
  }
  return j;
}

}  // namespace mmfs::fs
