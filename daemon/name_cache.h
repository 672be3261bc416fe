// The names the kernel reached inodes by (lookups, creates, renames), kept
// to write paths into /.mmfs/errors and the audit log: a hard-linked file
// shows the name it was last reached by. Only for messages: no decision
// reads it. Thread-safe; its mutex is a leaf.
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "fs/meta/metadata.h"

namespace mmfs::daemon {

class NameCache {
 public:
  void remember(fs::Ino ino, fs::Ino parent, const std::string& name);
  // The (parent, name) `ino` was last reached by.
  std::optional<std::pair<fs::Ino, std::string>> name_of(fs::Ino ino) const;
  // "/a/b" from the root down to `ino`; nullopt when a step is unknown.
  std::optional<std::string> path_of(fs::Ino ino) const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<fs::Ino, std::pair<fs::Ino, std::string>> names_;
};

}  // namespace mmfs::daemon
