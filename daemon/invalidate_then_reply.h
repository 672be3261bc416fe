// Ordering a reply after the kernel has dropped a file's cached pages.
//
// An array truncated to 0 keeps its size (docs/reference.md §4), and the kernel drops a
// file's cached pages after a SETATTR only when the size changes: the daemon
// has to invalidate them itself (fuse_lowlevel_notify_inval_inode). After the
// reply is too late — the caller may read its descriptor before the
// notification arrives, and did so in half the runs of a test. Before the
// reply can deadlock: the truncating caller holds the inode's writes off
// (FUSE_NOWRITE) until the reply, and dropping a page dirtied through a
// shared mapping writes it first and waits for that write.
//
// So the invalidation runs on a helper thread while the request waits for it,
// for at most `patience`: without dirty mapped pages it is done in
// microseconds and the reply follows it; with them the reply goes first
// (after `patience`), the caller's inode is released, and the invalidation
// completes behind it. The call returns when both are done.
#pragma once

#include <chrono>
#include <functional>

namespace mmfs::daemon {

// Runs `invalidate` on a helper thread, `reply` when it has returned or
// `patience` has passed, whichever is first, and returns once both have run.
// True when the invalidation finished before the reply. (If no thread can be
// started, replies first and then invalidates here: false.)
bool invalidate_then_reply(const std::function<void()>& invalidate, const std::function<void()>& reply,
                           std::chrono::milliseconds patience);

}  // namespace mmfs::daemon
