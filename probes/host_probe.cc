#include "probes/host_probe.h"

#define FUSE_USE_VERSION 35
#include <fmt/format.h>
#include <fuse_lowlevel.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include "daemon/read_path_settings.h"
#include "probes/read_path_client.h"
#include "probes/throwaway_mount.h"
#include "util/stats.h"

namespace mmfs::probes {
namespace {

// The throwaway filesystem: under the root, for every k, a directory `d<k>`
// holding a directory `v` holding an 8-byte file `f` (a view three names
// below the mount, as A@/box/SEL), and a file `s<k>` of stream_bytes.
// Inodes: kind << 32 | k.
enum Kind : std::uint64_t { kRootKind = 0, kOuter = 1, kInner = 2, kTiny = 3, kStream = 4 };
constexpr std::uint64_t kTinyBytes = 8;

struct ProbeFs {
  std::uint64_t stream_bytes = 0;
  std::unique_ptr<std::byte[]> data;  // what every read returns, stream_bytes of it
};

fuse_ino_t ino_of(Kind kind, std::uint64_t k) { return kind == kRootKind ? FUSE_ROOT_ID : (kind << 32 | k); }
Kind kind_of(fuse_ino_t ino) { return ino == FUSE_ROOT_ID ? kRootKind : Kind(ino >> 32); }

bool fill_stat(const ProbeFs& fs, fuse_ino_t ino, struct stat* st) {
  std::memset(st, 0, sizeof *st);
  st->st_ino = ino;
  st->st_nlink = 1;
  switch (kind_of(ino)) {
    case kRootKind:
    case kOuter:
    case kInner:
      st->st_mode = S_IFDIR | 0555;
      return true;
    case kTiny:
      st->st_mode = S_IFREG | 0444;
      st->st_size = kTinyBytes;
      return true;
    case kStream:
      st->st_mode = S_IFREG | 0444;
      st->st_size = off_t(fs.stream_bytes);
      return true;
  }
  return false;
}

ProbeFs& fs_of(fuse_req_t req) { return *static_cast<ProbeFs*>(fuse_req_userdata(req)); }

void probe_init(void*, fuse_conn_info* conn) { daemon::set_read_path(conn); }

bool number_after(const char* name, char prefix, std::uint64_t* k) {
  if (name[0] != prefix || name[1] == '\0') return false;
  char* end = nullptr;
  errno = 0;
  *k = std::strtoull(name + 1, &end, 10);
  return errno == 0 && *end == '\0' && *k < (1ull << 32);
}

void probe_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  std::uint64_t k = 0;
  fuse_ino_t ino = 0;
  switch (kind_of(parent)) {
    case kRootKind:
      if (number_after(name, 'd', &k)) ino = ino_of(kOuter, k);
      else if (number_after(name, 's', &k)) ino = ino_of(kStream, k);
      break;
    case kOuter:
      if (std::strcmp(name, "v") == 0) ino = ino_of(kInner, parent & 0xffffffffu);
      break;
    case kInner:
      if (std::strcmp(name, "f") == 0) ino = ino_of(kTiny, parent & 0xffffffffu);
      break;
    default:
      fuse_reply_err(req, ENOTDIR);
      return;
  }
  if (ino == 0) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  fuse_entry_param e;
  std::memset(&e, 0, sizeof e);
  fill_stat(fs_of(req), ino, &e.attr);
  e.ino = ino;
  e.generation = 1;
  // Views are looked up afresh each time (the daemon gives them no entry timeout).
  e.entry_timeout = 0;
  e.attr_timeout = 0;
  fuse_reply_entry(req, &e);
}

void probe_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  struct stat st;
  if (!fill_stat(fs_of(req), ino, &st)) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  fuse_reply_attr(req, &st, 0);
}

void probe_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  const Kind kind = kind_of(ino);
  if (kind != kTiny && kind != kStream) {
    fuse_reply_err(req, EISDIR);
    return;
  }
  fi->keep_cache = 0;  // as a view's open
  fi->noflush = 1;
  fuse_reply_open(req, fi);
}

void probe_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  const ProbeFs& fs = fs_of(req);
  const std::uint64_t length = kind_of(ino) == kTiny ? kTinyBytes : fs.stream_bytes;
  if (std::uint64_t(off) >= length) {
    fuse_reply_buf(req, nullptr, 0);
    return;
  }
  const std::size_t n = std::size_t(std::min<std::uint64_t>(size, length - std::uint64_t(off)));
  fuse_reply_buf(req, reinterpret_cast<const char*>(fs.data.get() + off), n);
}

void probe_release(fuse_req_t req, fuse_ino_t, fuse_file_info*) { fuse_reply_err(req, 0); }

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// The throwaway filesystem's operations: those a reader's lookups, open,
// read and close need.
const fuse_lowlevel_ops& probe_operations() {
  static const fuse_lowlevel_ops ops = [] {
    fuse_lowlevel_ops o;
    std::memset(&o, 0, sizeof o);
    o.init = probe_init;
    o.lookup = probe_lookup;
    o.getattr = probe_getattr;
    o.open = probe_open;
    o.read = probe_read;
    o.release = probe_release;
    return o;
  }();
  return ops;
}

}  // namespace

int probe_host(const HostProbeOptions& opt, HostProbeResult* out, std::string* message) {
  *out = HostProbeResult{};
  const auto t_start = std::chrono::steady_clock::now();
  ProbeFs fs;
  fs.stream_bytes = std::max<std::uint64_t>(opt.stream_bytes, 1 << 20);
  fs.data = std::make_unique<std::byte[]>(fs.stream_bytes);
  for (std::uint64_t i = 0; i < fs.stream_bytes; i += 8) fs.data[i] = std::byte(i >> 3);  // resident, not zero pages
  auto failed = [&](const std::string& path) {
    const int e = errno;
    *message = fmt::format("the host probe could not read {}: {}", path, std::strerror(e));
    return e;
  };
  // Each cold read on a mount of its own, as a cold view after a fresh
  // mount: a mount's first requests cost more than its later ones.
  for (int k = 0; k < opt.cold_reads; ++k) {
    ThrowawayMount mount;
    if (int r = mount.mount("mmfs-host-probe", "the host probe", probe_operations(), &fs, message)) return r;
    mount.serve();
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(opt.idle_gap_ms));
    const std::string path = fmt::format("{}/d{}/v/f", mount.dir(), k);
    const double ms = timed_fresh_read(path, kTinyBytes);
    if (ms < 0) return failed(path);
    out->cold_read_ms.push_back(ms);
  }
  {
    ThrowawayMount mount;
    if (int r = mount.mount("mmfs-host-probe", "the host probe", probe_operations(), &fs, message)) return r;
    mount.serve();
    for (int k = 0; k < opt.streams; ++k) {
      const std::string path = fmt::format("{}/s{}", mount.dir(), k);
      const double ms = timed_fresh_read(path, fs.stream_bytes);
      if (ms < 0) return failed(path);
      out->stream_ms.push_back(ms);
    }
  }
  out->stream_bytes = fs.stream_bytes;
  out->cost.request_ms = util::median(out->cold_read_ms);
  const double mib = double(fs.stream_bytes) / double(1 << 20);
  out->cost.ms_per_mib = std::max(0.0, util::median(out->stream_ms) - out->cost.request_ms) / mib;
  out->seconds = ms_since(t_start) / 1e3;
  if (opt.verbose)
    fmt::print(stderr, "  host: a cold read through FUSE {:.3f} ms, a result handed over at {:.3f} ms per MiB\n",
               out->cost.request_ms, out->cost.ms_per_mib);
  return 0;
}

void add_host_cost(const HostProbeResult& result, const ReadPathProbeResult* read_path, nlohmann::json* geometry,
                   std::string* summary) {
  auto round6 = [](double v) { return std::round(v * 1e6) / 1e6; };
  // The daemon's cold view includes the FUSE requests the throwaway filesystem timed.
  const double request_ms = read_path ? read_path->cold_view_ms : result.cost.request_ms;
  nlohmann::json host = {{"request_ms", round6(request_ms)},
                         {"ms_per_mib", round6(result.cost.ms_per_mib)}};
  if (read_path) {
    host["verify_ms_per_mib"] = round6(read_path->verify_ms_per_mib);
    host["gather_ms_per_mib"] = round6(read_path->gather_ms_per_mib);
  }
  (*geometry)["host"] = host;
  nlohmann::json samples = {{"cold_read_ms", nlohmann::json::array()},
                            {"stream_ms", nlohmann::json::array()},
                            {"stream_bytes", result.stream_bytes},
                            {"seconds", std::round(result.seconds * 10) / 10}};
  for (double v : result.cold_read_ms) samples["cold_read_ms"].push_back(round6(v));
  for (double v : result.stream_ms) samples["stream_ms"].push_back(round6(v));
  if (read_path) {
    const ReadPathProbeResult& r = *read_path;
    auto list = [&](const std::vector<double>& xs) {
      nlohmann::json a = nlohmann::json::array();
      for (double v : xs) a.push_back(round6(v));
      return a;
    };
    samples["read_path"] = {{"view_ms", list(r.view_ms)},
                            {"open_ms", list(r.open_ms)},
                            {"point_ms", list(r.point_ms)},
                            {"cube_ms", list(r.cube_ms)},
                            {"beam_ms", list(r.beam_ms)},
                            {"point_bytes", {r.point_read, r.point_useful}},
                            {"cube_bytes", {r.cube_read, r.cube_useful}},
                            {"beam_bytes", {r.beam_read, r.beam_useful}},
                            {"seconds", std::round(r.seconds * 10) / 10}};
  }
  (*geometry)["measured"]["host"] = samples;
  if (!summary) return;
  *summary += fmt::format(
      "  the machine: a cold read through FUSE costs {:.3f} ms, handing a result to its reader {:.3f} ms per MiB "
      "({:.0f} MB/s)\n",
      result.cost.request_ms, result.cost.ms_per_mib,
      result.cost.ms_per_mib > 0 ? double(1 << 20) / 1e3 / result.cost.ms_per_mib : 0.0);
  if (read_path)
    *summary += fmt::format(
        "  the daemon: a cold one-element view {:.3f} ms, cells verified at {:.3f} ms per MiB read and gathered at "
        "{:.3f} ms per MiB of the result\n",
        read_path->cold_view_ms, read_path->verify_ms_per_mib, read_path->gather_ms_per_mib);
}

void measure_host_into(nlohmann::json* geometry, std::string* summary, bool verbose) {
  HostProbeOptions opt;
  opt.verbose = verbose;
  HostProbeResult result;
  std::string message;
  if (probe_host(opt, &result, &message) != 0) {
    if (summary) *summary += fmt::format("  the machine's costs were not measured: {}\n", message);
    return;
  }
  ReadPathProbeOptions read_opt;
  read_opt.verbose = verbose;
  ReadPathProbeResult read_path;
  std::string read_message;
  const bool timed = run_read_path_probe(*geometry, read_opt, &read_path, &read_message) == 0;
  if (!timed && summary) *summary += fmt::format("  the daemon's read path was not timed: {}\n", read_message);
  add_host_cost(result, timed ? &read_path : nullptr, geometry, summary);
}

}  // namespace mmfs::probes
