// How the daemon's FUSE connection carries reads: 1 MiB requests, 4 MiB of
// read-ahead, asynchronous reads, replies copied by writev (no splicing).
// The daemon's init sets these, and so does the host probe's throwaway
// filesystem (probes/host_probe.cc), so what the probe times is what the
// daemon's readers get. Include after <fuse_lowlevel.h>.
#pragma once

#include <algorithm>

namespace mmfs::daemon {

// The mount's max_read option (main.cc, probes/throwaway_mount.cc) must say the same.
constexpr unsigned kMaxRead = 1u << 20;

inline void set_read_path(fuse_conn_info* conn) {
  conn->max_write = kMaxRead;
  conn->max_read = kMaxRead;
  conn->max_readahead = std::min<unsigned>(conn->max_readahead, 4u << 20);
  conn->max_background = 64;
  conn->congestion_threshold = 48;
  if (conn->capable & FUSE_CAP_ASYNC_READ) conn->want |= FUSE_CAP_ASYNC_READ;
  // Requests and replies pass through read()/writev(), where the daemon's
  // request poller routes them (daemon/request_poller.h); no splicing around it.
  conn->want &= ~unsigned(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
}

}  // namespace mmfs::daemon
