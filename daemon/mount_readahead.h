// The read-ahead window of a FUSE mount.
//
// The kernel reads ahead of a sequential reader by its mount's backing-device
// window (/sys/class/bdi/MAJOR:MINOR/read_ahead_kb): 128 KiB unless changed,
// and FUSE's INIT lets a daemon only lower it. Each window becomes READ
// requests, so a streaming reader of an array costs a request (and a worker
// wake-up, and a reply) per 128 KiB. A window of max_read (1 MiB) or more
// makes the same stream one request per MiB: less CPU for daemon and reader.
// The window is a property of the mount; root may set it, as the daemon does
// once the kernel has applied INIT (mount option read_ahead_kb).
#pragma once

#include <string>
#include <string_view>

namespace mmfs::daemon {

// "MAJOR:MINOR" of the last (topmost) mount on `mountpoint` in the text of
// /proc/self/mountinfo (whose paths escape space, tab, newline and backslash
// as octal), or "" when nothing is mounted there.
std::string mount_device(std::string_view mountinfo, std::string_view mountpoint);

// Sets the read-ahead window of the mount on `mountpoint` (an absolute,
// canonical path) to `kb` KiB. Returns 0, or an errno with *why saying what failed.
int set_mount_read_ahead(const std::string& mountpoint, unsigned kb, std::string* why);

}  // namespace mmfs::daemon
