// The daemon's loaded arrays: an ArrayFile per array inode while anything
// holds it (open handles, views, queries) and the most recently used ones
// besides, so a view read again soon after does not load the array anew
// (loading reads its checksum table and rebuilds its layout).
//
// Not thread-safe: the Filesystem guards it with its registry lock (mu_,
// daemon/filesystem.h), which also orders it against namespace changes.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "fs/array/array_file.h"

namespace mmfs::daemon {

class LoadedArrays {
 public:
  explicit LoadedArrays(std::size_t recent = 16) : limit_(recent) {}

  // The loaded array of `ino` (now the most recently used), or null.
  std::shared_ptr<fs::ArrayFile> find(fs::Ino ino);
  // The same without counting as a use (a removal looking for it).
  std::shared_ptr<fs::ArrayFile> peek(fs::Ino ino) const;
  // `array` is the loaded array of `ino` (the most recently used).
  void add(fs::Ino ino, std::shared_ptr<fs::ArrayFile> array);
  // `ino` is gone: nothing keeps its array loaded any more.
  void forget(fs::Ino ino);
  // Every array still loaded.
  std::vector<std::shared_ptr<fs::ArrayFile>> all() const;
  // Lets go of the recently used ones: an array nothing else holds unloads.
  void forget_recent() { recent_.clear(); }
  std::size_t recent_count() const { return recent_.size(); }

 private:
  void touch(const std::shared_ptr<fs::ArrayFile>& array);

  std::size_t limit_;
  std::unordered_map<fs::Ino, std::weak_ptr<fs::ArrayFile>> loaded_;
  std::vector<std::shared_ptr<fs::ArrayFile>> recent_;  // most recent first, at most limit_
};

}  // namespace mmfs::daemon
