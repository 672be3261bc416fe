// mmfs: the FUSE daemon (docs/reference.md §3).
//
//   mmfs [-f] [-o OPT[,OPT...]] TARGET MOUNTPOINT
//
// The volume is checked before mounting (a bad target is refused with a
// message and exit 1), the session is mounted, the daemon backgrounds unless
// -f, and only then opens the device for good: io_uring rings do not survive
// fork(). SIGTERM/SIGINT and fusermount3 -u end the loop; everything dirty is
// written and synced before exit.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/code_residency.h"
#include "daemon/filesystem.h"
#include "daemon/fuse_ops.h"
#include "daemon/mount_readahead.h"
#include "daemon/read_path_settings.h"
#include "daemon/request_poller.h"
#include "daemon/session_loop.h"
#include "fs/util/buffer_pool.h"
#include "fs/device/nbd_device.h"
#include "fs/device/simulated_device.h"
#include "fs/util/size_text.h"
#include "fs/device/striped_device.h"
#include "geometry/load.h"

namespace {

// Worker threads serving FUSE requests: a long request (a view read, a
// relayout) holds one; metadata requests need one between them.
constexpr unsigned kMaxWorkers = 16;

struct Options {
  bool foreground = false;
  bool simulate = false;
  bool read_only = false;
  bool degraded = false;  // see Volume::MembersOptions
  std::uint32_t iodepth = mmfs::fs::kDefaultIodepth;
  std::chrono::microseconds busy_poll{200};  // see daemon/request_poller.h
  unsigned read_ahead_kb = 1024;             // see daemon/mount_readahead.h; 0 = the kernel's
  bool lock_code = true;                     // see daemon/code_residency.h
  std::uint64_t io_buffers = mmfs::fs::BufferPool::kDefaultLimit;  // see fs/util/buffer_pool.h
  std::vector<std::string> fuse_opts;       // passed to libfuse
};

bool has_option(const Options& o, std::string_view name) {
  return std::find(o.fuse_opts.begin(), o.fuse_opts.end(), name) != o.fuse_opts.end();
}

// The kernel checks permissions against the inodes' modes (default_permissions)
// whenever anyone but root can reach the mount, and whenever asked to. A mount
// root made without allow_other/allow_root is reachable by root alone, whose
// capabilities pass those checks anyway; there the checks are left off, because
// with them on the kernel must fetch a directory's attributes again after every
// entry created or removed in it (a GETATTR round trip per create, a third of
// its cost). The kernel still refuses to execute a file without an x bit.
bool kernel_permission_checks(const Options& o) {
  return has_option(o, "default_permissions") || has_option(o, "allow_other") || has_option(o, "allow_root") ||
         geteuid() != 0;
}

// Splits -o lists; mmfs's own options are consumed, the rest go to libfuse.
bool parse_mount_options(const std::vector<std::string>& lists, Options* o, std::string* error) {
  for (const auto& list : lists) {
    std::size_t start = 0;
    while (start <= list.size()) {
      std::size_t comma = list.find(',', start);
      std::string opt = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      start = comma == std::string::npos ? list.size() + 1 : comma + 1;
      if (opt.empty()) continue;
      if (opt == "simulate") {
        o->simulate = true;
      } else if (opt == "degraded") {
        o->degraded = true;
      } else if (opt.rfind("iodepth=", 0) == 0) {
        try {
          unsigned long v = std::stoul(opt.substr(8));
          if (v < 1 || v > 4096) throw std::out_of_range("iodepth");
          o->iodepth = std::uint32_t(v);
        } catch (const std::exception&) {
          *error = fmt::format("iodepth: '{}' is not a queue depth (1..4096)", opt.substr(8));
          return false;
        }
      } else if (opt.rfind("busy_poll=", 0) == 0) {
        try {
          std::size_t used = 0;
          unsigned long v = std::stoul(opt.substr(10), &used);
          if (used != opt.size() - 10 || v > 100000) throw std::out_of_range("busy_poll");
          o->busy_poll = std::chrono::microseconds(v);
        } catch (const std::exception&) {
          *error = fmt::format("busy_poll: '{}' is not a time in microseconds (0..100000)", opt.substr(10));
          return false;
        }
      } else if (opt.rfind("read_ahead_kb=", 0) == 0) {
        try {
          std::size_t used = 0;
          unsigned long v = std::stoul(opt.substr(14), &used);
          if (used != opt.size() - 14 || v > 65536) throw std::out_of_range("read_ahead_kb");
          o->read_ahead_kb = unsigned(v);
        } catch (const std::exception&) {
          *error = fmt::format("read_ahead_kb: '{}' is not a size in KiB (0..65536)", opt.substr(14));
          return false;
        }
      } else if (opt.rfind("io_buffers=", 0) == 0) {
        const std::string text = opt.substr(11);
        const std::uint64_t v = mmfs::fs::parse_size(text);
        if ((v == 0 && text != "0") || v > (std::uint64_t(64) << 30)) {
          *error = fmt::format("io_buffers: '{}' is not a size (such as 64M; 0 = off, at most 64G)", text);
          return false;
        }
        // The pool is touched before the mount: more than half the memory
        // would bring the OOM killer to the mount instead of an error.
        const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        if (pages > 0 && page > 0 && v > std::uint64_t(pages) * std::uint64_t(page) / 2) {
          *error = fmt::format("io_buffers: '{}' is more than half of this machine's memory ({} MiB)", text,
                               std::uint64_t(pages) * std::uint64_t(page) >> 20);
          return false;
        }
        o->io_buffers = v;
      } else if (opt == "lock_code" || opt == "nolock_code") {
        o->lock_code = opt == "lock_code";
      } else if (opt == "ro") {
        o->read_only = true;
        o->fuse_opts.push_back(opt);
      } else if (opt == "rw" || opt == "dev" || opt == "suid" || opt == "exec" || opt == "auto" || opt == "noauto" ||
                 opt == "user" || opt == "nouser" || opt == "_netdev" || opt == "defaults") {
        // mount(8) generic options that mean nothing to a FUSE filesystem.
      } else {
        o->fuse_opts.push_back(opt);
      }
    }
  }
  return true;
}

// Opens the volume: one device as before (the simulated one wraps the
// volume's geometry around it), several as one volume of members.
std::unique_ptr<mmfs::fs::Volume> open_volume(const std::vector<std::string>& targets, const Options& o,
                                              const mmfs::fs::MetaOpenOptions& meta, bool simulate,
                                              const std::string& geometry_json,
                                              std::unique_ptr<mmfs::geom::Geometry>* sim_geometry, int* err,
                                              std::string* msg);

std::unique_ptr<mmfs::fs::BlockDevice> open_target(const std::string& target, const Options& o, int* err,
                                                   std::string* msg) {
  mmfs::fs::OpenOptions opt;
  opt.read_only = o.read_only;
  opt.iodepth = o.iodepth;
  auto dev = mmfs::fs::open_device(target, opt, err, msg);
  if (!dev && *err == EINVAL) {  // a filesystem without O_DIRECT (tmpfs): buffered I/O
    opt.direct = false;
    dev = mmfs::fs::open_device(target, opt, err, msg);
  }
  return dev;
}

std::unique_ptr<mmfs::fs::Volume> open_volume(const std::vector<std::string>& targets, const Options& o,
                                              const mmfs::fs::MetaOpenOptions& meta, bool simulate,
                                              const std::string& geometry_json,
                                              std::unique_ptr<mmfs::geom::Geometry>* sim_geometry, int* err,
                                              std::string* msg) {
  if (targets.size() == 1) {
    auto dev = open_target(targets[0], o, err, msg);
    if (!dev) return nullptr;
    if (simulate) {
      // The volume's own geometry, as the check before the fork read it.
      *sim_geometry = mmfs::geom::load_geometry(nlohmann::json::parse(geometry_json));
      dev = std::make_unique<mmfs::fs::SimulatedDevice>(std::move(dev), **sim_geometry);
    }
    auto vol = mmfs::fs::Volume::open(std::move(dev), err, msg, false, meta);
    if (!vol) *msg = targets[0] + ": " + *msg;
    return vol;
  }
  mmfs::fs::OpenOptions opt;
  opt.read_only = o.read_only;
  opt.iodepth = o.iodepth;
  std::vector<mmfs::fs::MemberTarget> members;
  mmfs::fs::Volume::MembersOptions mo;
  if (!mmfs::fs::open_targets(targets, opt, &members, err, msg, o.degraded ? &mo.left_out : nullptr)) return nullptr;
  mo.metadata = meta;
  mo.simulate = simulate;
  mo.degraded = o.degraded;
  return mmfs::fs::Volume::open(std::move(members), err, msg, mo);
}

}  // namespace

int main(int argc, char** argv) {
  // Buffers of 2 MiB and more come from the pool of I/O buffers
  // (fs/util/buffer_pool.h). Below that, memory of every size comes and goes with
  // every view read: keep freed memory in the heap for reuse instead of
  // returning it (and faulting it back in); the flusher trims what stays free.
  mallopt(M_MMAP_THRESHOLD, 512 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  // Worker threads would otherwise get their own arenas, each with its own
  // free memory: one arena keeps it for reuse by every worker.
  mallopt(M_ARENA_MAX, 1);
  CLI::App app{"mmfs: mount an mmfs volume (a FUSE daemon; backgrounds unless -f)"};
  Options o;
  std::vector<std::string> option_lists;
  std::vector<std::string> target_args;
  std::string mountpoint;
  app.add_flag("-f,--foreground", o.foreground, "Stay in the foreground");
  app.add_option("-o", option_lists,
                 "Mount options, comma-separated: simulate (delay each request by the geometry model's service "
                 "time), degraded (mount a RAID 1 volume with a member missing, unreadable or blank: it runs on the "
                 "mirror, which the survivors' superblocks record; mmfsck --rebuild restores it; or a RAID 0 volume "
                 "without one member: metadata from its copy on the other members, arrays with copies from the "
                 "copies on other members, other data on it EIO), iodepth=N (device queue depth, default " +
                     std::to_string(mmfs::fs::kDefaultIodepth) +
                     "), busy_poll=USEC (a worker polls for the next "
                 "request this long before sleeping; default 200, 0 = off), read_ahead_kb=N (the kernel's read-ahead "
                 "window for this mount, default 1024, 0 = leave the kernel's), nolock_code (leave the daemon's code "
                 "evictable; by default it is locked in memory), io_buffers=SIZE (memory for device reads and views, "
                 "kept between reads; default 256M, of which up to 128M is mapped and touched at mount; 0 = map each "
                 "buffer afresh), ro, "
                 "allow_other, default_permissions (on unless root mounts without allow_other/allow_root), and the "
                 "other FUSE options")
      ->take_all()
      ->expected(1)
      ->allow_extra_args(false);
  // CLI11 cannot give a list of positionals and then one more: the last one is the mount point.
  std::vector<std::string> positionals;
  app.add_option("TARGET... MOUNTPOINT", positionals,
                 "TARGET: a block device, image file or NBD URI (nbd://HOST[:PORT]/EXPORT, "
                 "nbd+unix:///EXPORT?socket=PATH) formatted by mkfs.mmfs; a volume of several devices: all its "
                 "members, as separate arguments or one comma-separated list. MOUNTPOINT: the directory to mount on")
      ->required();
  app.footer(
      "Unmount with: fusermount3 -u MOUNTPOINT\n"
      "Also: mount -t fuse.mmfs TARGET MOUNTPOINT [-o ...] (fuse3's mount helper runs 'mmfs', which must be\n"
      "installed in a directory of mount's own PATH, e.g. /usr/local/bin)");
  CLI11_PARSE(app, argc, argv);
  if (positionals.size() < 2) {
    fmt::print(stderr, "mmfs: give TARGET... MOUNTPOINT (run with --help for more information)\n");
    return 1;
  }
  mountpoint = positionals.back();
  target_args.assign(positionals.begin(), positionals.end() - 1);
  // The daemon changes directory to / when it backgrounds.
  std::error_code ec;
  // (An NBD URI is not a path: it stays as given.)
  std::vector<std::string> targets = mmfs::fs::split_targets(target_args);
  for (std::string& t : targets)
    if (!mmfs::fs::is_nbd_uri(t))
      if (auto abs = std::filesystem::absolute(t, ec); !ec) t = abs.string();
  std::string target;  // for messages and fsname
  for (const std::string& t : targets) target += (target.empty() ? "" : ",") + t;
  // Canonical, as /proc/self/mountinfo names it (the read-ahead window is found there).
  if (auto abs = std::filesystem::canonical(mountpoint, ec); !ec)
    mountpoint = abs.string();
  else if (auto rel = std::filesystem::absolute(mountpoint, ec); !ec)
    mountpoint = rel.string();
  std::string error;
  if (!parse_mount_options(option_lists, &o, &error)) {
    fmt::print(stderr, "mmfs: {}\n", error);
    return 1;
  }

  // Check the volume before mounting anything, so a bad target fails loudly.
  // The daemon then serves this very open (after the fork, which keeps the
  // device's descriptor, its lock and its io_uring rings: the rings are
  // shared mappings and the child submits as any task may), so mounting
  // reads the metadata once; only a simulated device, which wraps the
  // device in the volume's own geometry, opens again.
  std::string geometry_json;
  mmfs::fs::MetaOpenReport metadata_report;
  std::unique_ptr<mmfs::fs::Volume> checked;
  std::vector<std::string> degraded_notes;
  {
    int err = 0;
    std::string msg;

    // This open compares both copies of the metadata and rewrites a damaged
    // one from its twin; the daemon's own open below need not again.
    mmfs::fs::MetaOpenOptions meta;
    meta.verify_copies = true;
    meta.repair = !o.read_only;
    auto vol = open_volume(targets, o, meta, false, "", nullptr, &err, &msg);
    if (!vol) {
      fmt::print(stderr, "mmfs: {}\n", msg);
      return 1;
    }
    geometry_json = vol->superblock().geometry_json;
    metadata_report = vol->metadata_report();
    for (const auto& p : metadata_report.problems) fmt::print(stderr, "mmfs: {}: {}\n", target, p);
    for (const auto& r : metadata_report.repairs) fmt::print(stderr, "mmfs: {}: {}\n", target, r);
    // As this open found the members: the daemon's own open below finds the
    // failures this one recorded in the survivors' superblocks.
    degraded_notes = vol->degraded_notes();
    for (const auto& note : degraded_notes) fmt::print(stderr, "mmfs: degraded: {}\n", note);
    // A volume of several devices runs its members' I/O on threads, which
    // do not survive the fork: the daemon opens it again after.
    if (!o.simulate && !vol->striped()) checked = std::move(vol);
  }

  // FUSE splits its options at commas; a backslash keeps those of a member list.
  std::string fsname;
  for (char c : target) {
    if (c == ',' || c == '\\') fsname += '\\';
    fsname += c;
  }
  std::vector<std::string> args = {
      argv[0], "-o", fmt::format("fsname={},subtype=mmfs,max_read={}", fsname, mmfs::daemon::kMaxRead)};
  if (kernel_permission_checks(o) && !has_option(o, "default_permissions")) {
    args.push_back("-o");
    args.push_back("default_permissions");
  }
  for (const auto& f : o.fuse_opts) {
    args.push_back("-o");
    args.push_back(f);
  }
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  fuse_args fargs = FUSE_ARGS_INIT(int(cargs.size()), cargs.data());

  // The pool of I/O buffers (fs/util/buffer_pool.h) is filled before the mount
  // appears, so that its first read finds resident memory: touching 128 MiB
  // makes the mount 20-300 ms slower (the more, the more of the pages the
  // host must back again). Filled beside the loop instead, the pool lost the
  // race to a read that came 100 ms after the mount, and the read paid for
  // both. The fork shares the pages with the daemon; once this process has
  // exited, the daemon's first write to a page keeps it (no copy).
  mmfs::fs::BufferPool::shared().set_limit(o.io_buffers);
  mmfs::fs::BufferPool::shared().prefault(std::min<std::uint64_t>(o.io_buffers, mmfs::fs::BufferPool::kDefaultFill));

  // The Filesystem exists only after the fork, but the session takes its
  // userdata now: it gets the slot the Filesystem will be put in.
  std::unique_ptr<mmfs::daemon::Filesystem> filesystem;
  mmfs::daemon::Filesystem* slot = nullptr;
  fuse_session* se = fuse_session_new(&fargs, &mmfs::daemon::fuse_operations(), sizeof(fuse_lowlevel_ops), &slot);
  if (!se) {
    fmt::print(stderr, "mmfs: bad FUSE options\n");
    fuse_opt_free_args(&fargs);
    return 1;
  }
  if (fuse_set_signal_handlers(se) != 0 || fuse_session_mount(se, mountpoint.c_str()) != 0) {
    fmt::print(stderr, "mmfs: cannot mount on {}\n", mountpoint);
    fuse_session_destroy(se);
    fuse_opt_free_args(&fargs);
    return 1;
  }
  if (o.read_ahead_kb != 0) {
    // Not now: the INIT reply would lower the window again to what the
    // kernel offered in INIT (its 128 KiB default).
    mmfs::daemon::run_after_init([mountpoint, kb = o.read_ahead_kb](mmfs::daemon::Filesystem& fs) {
      std::string why;
      if (int e = mmfs::daemon::set_mount_read_ahead(mountpoint, kb, &why))
        fs.errors().record(e, mountpoint, "the read-ahead window stays the kernel's: " + why);
    });
  }
  fuse_daemonize(o.foreground ? 1 : 0);
  // After the fork, which does not keep memory locks.
  mmfs::daemon::CodeLock code_lock;
  if (o.lock_code) {
    code_lock = mmfs::daemon::lock_code_in_memory();
    if (code_lock.unlocked_bytes != 0)
      fmt::print(stderr, "mmfs: {} KiB of the daemon's code could not be locked in memory ({}): requests may wait "
                 "for it to be read back\n", code_lock.unlocked_bytes >> 10, std::strerror(code_lock.first_error));
  }
  // After the fork: the poller's clone of the device belongs to the daemon.
  std::unique_ptr<mmfs::daemon::RequestPoller> poller;
  if (o.busy_poll.count() > 0) {
    std::string why;
    mmfs::daemon::RequestPoller::Options popt;
    popt.window = o.busy_poll;
    poller = mmfs::daemon::RequestPoller::install(se, popt, &why);
    if (!poller) fmt::print(stderr, "mmfs: busy polling is off: {}\n", why);
  }

  int rc = 0;
  {
    int err = 0;
    std::string msg;
    std::unique_ptr<mmfs::geom::Geometry> sim_geometry;
    std::unique_ptr<mmfs::fs::Volume> vol = std::move(checked);
    if (!vol) vol = open_volume(targets, o, {}, o.simulate, geometry_json, &sim_geometry, &err, &msg);
    if (!vol) {
      fmt::print(stderr, "mmfs: {}\n", msg);
      rc = 1;
    } else {
      // A member the volume marks failed (RAID 1; RAID 0 while it runs) is
      // reported in /.mmfs/errors, and arrays loaded before are let go when idle.
      vol->set_failure_hook([&slot](const std::string& member, const std::string& reason) {
        if (!slot) return;
        slot->errors().record(EIO, "/", fmt::format("member {}: {}", member, reason));
        slot->note_member_failure();
      });
      filesystem = std::make_unique<mmfs::daemon::Filesystem>(std::move(vol), o.read_only);
      slot = filesystem.get();
      for (const auto& note : degraded_notes) filesystem->errors().record(ENODEV, "/", "degraded: " + note);
      for (const auto& p : metadata_report.problems)
        filesystem->errors().record(EUCLEAN, "/", "metadata found damaged at mount: " + p);
      for (const auto& r : metadata_report.repairs) filesystem->errors().record(EUCLEAN, "/", "metadata " + r);
      filesystem->set_daemon_stats({{"code_locked_kib", code_lock.locked_bytes >> 10},
                                    {"code_unlocked_kib", code_lock.unlocked_bytes >> 10}});
      if (poller) {
        filesystem->set_transport_stats([p = poller.get()] {
          auto c = p->counters();
          return std::map<std::string, std::uint64_t>{
              {"requests_polled", c.polled},   {"requests_slept", c.slept},
              {"long_requests", c.long_requests}, {"reader_rescues", c.rescued},
              {"interrupts", c.interrupts},   {"replies_owed_on_clone", c.owed}};
        });
      }
      mmfs::daemon::set_notify_session(se);
      filesystem->start();
      int loop = 0;
      if (poller) {
        loop = mmfs::daemon::run_session(se, *poller, kMaxWorkers);
      } else {
        fuse_loop_config config;
        std::memset(&config, 0, sizeof config);
        config.clone_fd = 0;
        config.max_idle_threads = kMaxWorkers;
        // The loop reports the signal that ended it (SIGTERM, SIGINT): a clean exit.
        loop = fuse_session_loop_mt(se, &config);
      }
      // ECONNABORTED: the kernel tore the connection down while a worker read
      // it (an unmount racing a read on recent kernels, or an abort through
      // /sys/fs/fuse/connections): the session is over, as with ENODEV, and
      // everything below still flushes.
      if (loop == -ECONNABORTED) {
        fmt::print(stderr, "mmfs: the kernel ended the FUSE connection (unmount or abort)\n");
        loop = 0;
      }
      if (loop != 0 && loop != SIGTERM && loop != SIGINT && loop != SIGHUP && loop != -EINTR) {
        fmt::print(stderr, "mmfs: the FUSE session ended with error {}\n", loop);
        rc = 1;
      }
      // A running scrub ends first: its thread joins and its hook on the
      // device path goes before anything is flushed or closed.
      filesystem->stop_scrub();
      mmfs::daemon::set_notify_session(nullptr);  // no more notifications: the session is over
      mmfs::daemon::release_open_handles(*filesystem);
      if (filesystem->shutdown() != 0) rc = 1;
    }
  }
  fuse_session_unmount(se);
  fuse_remove_signal_handlers(se);
  fuse_session_destroy(se);
  fuse_opt_free_args(&fargs);  // libfuse may have copied them into its own storage
  poller.reset();              // the session, which wrote through it, is gone
  filesystem.reset();
  return rc;
}
