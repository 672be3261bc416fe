// Helpers shared by the files that implement Filesystem (daemon/*.cc), not
// part of its interface.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "fs/array/array_schema.h"

namespace mmfs::daemon::detail {

// The directory at the root holding files unlinked while open.
inline constexpr const char* kOrphanDir = ".mmfs-orphans";

// FUSE_SET_ATTR_* (fuse_lowlevel.h); kept numeric so Filesystem stays FUSE-free.
inline constexpr int kSetMode = 1 << 0, kSetUid = 1 << 1, kSetGid = 1 << 2, kSetSize = 1 << 3, kSetAtime = 1 << 4,
                     kSetMtime = 1 << 5, kSetAtimeNow = 1 << 7, kSetMtimeNow = 1 << 8, kSetCtime = 1 << 10;

inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

inline timespec to_timespec(std::int64_t ns) {
  timespec t;
  t.tv_sec = ns / 1000000000;
  t.tv_nsec = ns % 1000000000;
  if (t.tv_nsec < 0) {
    t.tv_nsec += 1000000000;
    t.tv_sec -= 1;
  }
  return t;
}

inline bool is_mmfs_attr(const std::string& name) { return name.rfind(fs::kSchemaPrefix, 0) == 0; }

// An xattr failure's explanation, naming the attribute once (the array's own
// messages about a schema attribute already start with its name).
inline std::string attr_message(const std::string& name, const std::string& msg) {
  if (msg.starts_with(name + ":")) return msg;
  return name + ": " + msg;
}

}  // namespace mmfs::daemon::detail
