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
  // `failures`: how many members the volume has lost so far
  // (Filesystem::note_member_failure). An array loaded before the last of
  // them that nothing but this registry holds is let go instead (null), so
  // the caller loads it afresh and sees the volume as it is now: a copy is
  // promoted over a primary that lay on the lost member
  // (fs/array/copy_promotion.h). An array held elsewhere (an open file, a
  // view being read, a prefetch) is returned as it is, and let go at a later
  // find once it is idle: so at most once per array per failure.
  std::shared_ptr<fs::ArrayFile> find(fs::Ino ino, std::uint64_t failures = 0);
  // The same without counting as a use (a removal looking for it).
  std::shared_ptr<fs::ArrayFile> peek(fs::Ino ino) const;
  // `array` is the loaded array of `ino` (the most recently used), loaded
  // with the volume's `failures` members lost (see find).
  void add(fs::Ino ino, std::shared_ptr<fs::ArrayFile> array, std::uint64_t failures = 0);
  // `ino` is gone: nothing keeps its array loaded any more.
  void forget(fs::Ino ino);
  // Every array still loaded.
  std::vector<std::shared_ptr<fs::ArrayFile>> all() const;
  std::size_t recent_count() const { return recent_.size(); }

 private:
  void touch(const std::shared_ptr<fs::ArrayFile>& array);

  std::size_t limit_;
  struct Loaded {
    std::weak_ptr<fs::ArrayFile> array;
    std::uint64_t failures = 0;  // members lost when it was loaded
  };
  std::unordered_map<fs::Ino, Loaded> loaded_;
  std::vector<std::shared_ptr<fs::ArrayFile>> recent_;  // most recent first, at most limit_
};

}  // namespace mmfs::daemon
