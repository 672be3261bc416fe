// The daemon's table of open regular files: per inode, what it is now (a
// plain file with its unwritten size and times, or an array), how many
// handles hold it, and whether it was unlinked while open. Setting
// user.mmfs.shape turns an open plain file into an array here, so a
// handle asks the table, not itself, what it reads and writes.
//
// Not thread-safe: the Filesystem guards it with its registry lock (mu_,
// daemon/filesystem.h), which also orders it against namespace changes.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>

#include "fs/array/array_file.h"
#include "fs/file/plain_file.h"

namespace mmfs::daemon {

struct OpenFile {
  std::shared_ptr<fs::PlainFile> plain;
  std::shared_ptr<fs::ArrayFile> array;
  int opens = 0;
  bool orphaned = false;  // unlinked while open: in the orphan directory until the last close
  std::int64_t mtime_ns = 0;
  bool times_dirty = false;  // mtime_ns (and the size) not yet committed
};

class OpenFiles {
 public:
  // The entry of `ino`, or null when it is not in the table.
  OpenFile* find(fs::Ino ino) {
    auto it = files_.find(ino);
    return it == files_.end() ? nullptr : &it->second;
  }
  // The entry of `ino`, made (empty, no opens) when there is none.
  OpenFile& entry(fs::Ino ino) { return files_[ino]; }
  void erase(fs::Ino ino) { files_.erase(ino); }
  // visit(ino, entry) for every entry.
  template <class Visit>
  void for_each(Visit visit) {
    for (auto& [ino, file] : files_) visit(ino, file);
  }

 private:
  std::unordered_map<fs::Ino, OpenFile> files_;
};

}  // namespace mmfs::daemon
