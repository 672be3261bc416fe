// The FUSE low-level adapter: the only code that knows FUSE's types. Each
// operation unpacks the request, calls daemon::Filesystem and replies.
#pragma once

#define FUSE_USE_VERSION 35
#include <fuse_lowlevel.h>

#include <functional>

#include "daemon/filesystem.h"

namespace mmfs::daemon {

// The operations table. The session's userdata is a Filesystem** (the
// Filesystem is created after the session, see daemon/main.cc).
const fuse_lowlevel_ops& fuse_operations();

// Releases the file and directory handles the kernel never released (the
// session ended with files open: SIGTERM), committing what they hold.
void release_open_handles(Filesystem& fs);

// The session the operations may send notifications on (main sets it).
void set_notify_session(fuse_session* session);

// A task the first request after INIT runs, once, before it is served: the
// kernel has applied the INIT reply by then (it holds every other request
// back until it has), so settings INIT would overwrite can be made there.
void run_after_init(std::function<void(Filesystem&)> task);

}  // namespace mmfs::daemon
