// What both measurement probes (host_probe.h, read_path_probe.h) time
// through: a FUSE filesystem mounted for the measurement alone on a fresh
// directory, configured as the daemon configures its mount (the max_read of
// daemon/read_path_settings.h; the filesystem's init sets the rest, as the
// daemon's does), served on libfuse's multi-threaded loop as `mmfs -o
// busy_poll=0` serves, and a reader's timed read of a file on it.
#pragma once

#include <cstdint>
#include <string>
#include <thread>

struct fuse_lowlevel_ops;
struct fuse_session;

namespace mmfs::probes {

// A mount of its own for one measurement: unmounted (its request threads
// done) and its directory removed on destruction.
class ThrowawayMount {
 public:
  ThrowawayMount() = default;
  ThrowawayMount(const ThrowawayMount&) = delete;
  ThrowawayMount& operator=(const ThrowawayMount&) = delete;
  ~ThrowawayMount();

  // Makes a directory /tmp/<name>.XXXXXX and mounts there a session of `ops`
  // with `userdata` (fsname <name>); `what` names the probe in messages ("the
  // host probe"). 0, or an errno with *message (no /dev/fuse, the mount
  // refused). Nothing is served until serve().
  int mount(const std::string& name, const std::string& what, const fuse_lowlevel_ops& ops, void* userdata,
            std::string* message);
  // Serves the mount's requests in a thread of its own until stop().
  void serve();
  // Ends the session and unmounts, waiting for its requests' threads: after
  // it, nothing the session's userdata holds is used. The destructor stops.
  void stop();

  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  fuse_session* se_ = nullptr;
  bool mounted_ = false;
  std::thread loop_;
};

// Opens `path` and reads its `expect` bytes into a buffer of their size
// mapped for this read, in calls of 8 MiB, then closes it: the milliseconds,
// or -1 with errno set. A fresh buffer, as a reader that makes an array of
// the result (numpy) has: its pages are first touched by the kernel's copy,
// which costs as much again as the copy (docs/measurements.md, "Fresh
// memory").
double timed_fresh_read(const std::string& path, std::uint64_t expect);

}  // namespace mmfs::probes
