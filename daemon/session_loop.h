// Runs the FUSE session on worker threads that take their requests through a
// RequestPoller (daemon/request_poller.h).
//
// libfuse's fuse_session_loop_mt ends by cancelling its workers wherever they
// wait; with the poller they wait inside this daemon's C++ code, which must
// not be unwound by pthread_cancel. This loop is the same thread pool —
// workers started as requests need them, each receiving and processing with
// libfuse's own fuse_session_receive_buf/fuse_session_process_buf — with an
// ending that cancels nothing: the request in hand is finished, the poller is
// stopped, and every worker returns.
#pragma once

struct fuse_session;

namespace mmfs::daemon {

class RequestPoller;

// Serves `session` until it exits: unmounted (the device says ENODEV), a
// SIGTERM, SIGINT or SIGHUP (handled here while it runs), or a failed read of
// the device. Starts a worker whenever every other one is busy, up to
// `max_workers`. Returns 0, or the negative errno of the failed read.
int run_session(fuse_session* session, RequestPoller& poller, unsigned max_workers);

}  // namespace mmfs::daemon
