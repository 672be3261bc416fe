// Filesystem: the operations that create, link, rename and remove names —
// files, directories, symlinks, FIFOs, sockets and device nodes. Which names
// may exist at all (NAME_MAX, the views' `X@`, /.mmfs) is daemon/name_rules.cc.
#include <fmt/format.h>
#include <sys/stat.h>

#include <cerrno>

#include "daemon/filesystem.h"

namespace mmfs::daemon {

using fs::Inode;

namespace {

// True for a node that has views (a directory's D@, an array's A@).
bool viewed(const Inode& n, bool array) { return S_ISDIR(n.mode) || (S_ISREG(n.mode) && array); }

}  // namespace

int Filesystem::make_node(Ino parent, const std::string& name, std::uint32_t mode, std::uint64_t rdev,
                          const std::string& target, const Caller& who, struct stat* st) {
  if (parent & kVirtualBit) return record_at(EROFS, parent, name, "views are read-only");
  if (int r = check_name_length(parent, name, false)) return r;
  if (read_only_) return EROFS;
  // A new directory has views (D@); a new file has none until it becomes an array.
  if (int r = check_new_entry(parent, name, S_ISDIR(mode))) return r;
  Inode n;
  if (int r = volume_->metadata().create(parent, name, mode, who.uid, who.gid, target, &n, rdev)) return r;
  remember(n.ino, parent, name);
  return fill_stat(n, st);
}

int Filesystem::mknod(Ino parent, const std::string& name, std::uint32_t mode, std::uint64_t rdev, const Caller& who,
                      struct stat* st) {
  switch (mode & S_IFMT) {
    case S_IFREG:
    case S_IFIFO:
    case S_IFSOCK: rdev = 0; break;
    case S_IFCHR:
    case S_IFBLK: break;  // stored with their device number; the mount is nodev, so the kernel never opens them
    default:
      return record_at(EINVAL, parent, name,
                       fmt::format("mknod: file type {:o} is not a regular file, FIFO, socket or character or block "
                                   "device (mkdir and symlink make the others)",
                                   mode & S_IFMT));
  }
  return make_node(parent, name, mode, rdev, "", who, st);
}

int Filesystem::mkdir(Ino parent, const std::string& name, std::uint32_t mode, const Caller& who, struct stat* st) {
  return make_node(parent, name, S_IFDIR | (mode & 07777), 0, "", who, st);
}

int Filesystem::symlink(Ino parent, const std::string& name, const std::string& target, const Caller& who,
                        struct stat* st) {
  return make_node(parent, name, S_IFLNK | 0777, 0, target, who, st);
}

int Filesystem::readlink(Ino ino, std::string* target) {
  if (ino & kVirtualBit) return EINVAL;
  auto n = volume_->metadata().inode(ino);
  if (!n) return ENOENT;
  if (!S_ISLNK(n->mode)) return EINVAL;
  *target = n->symlink;
  return 0;
}

int Filesystem::link(Ino ino, Ino parent, const std::string& name, struct stat* st) {
  if ((ino | parent) & kVirtualBit) return record_at(EROFS, parent, name, "views are read-only");
  if (int r = check_name_length(parent, name, false)) return r;
  if (read_only_) return EROFS;
  auto target = volume_->metadata().inode(ino);
  if (!target) return ENOENT;
  if (int r = check_new_entry(parent, name, viewed(*target, is_array(ino)))) return r;
  Inode n;
  if (int r = volume_->metadata().link(ino, parent, name, &n)) return r;
  remember(ino, parent, name);
  return fill_stat(n, st);
}

int Filesystem::orphan_if_open(Ino parent, const std::string& name) {
  // Called with mu_ held. A file unlinked while open keeps its data until the
  // last close: it moves to the orphan directory instead of being freed.
  fs::Metadata& md = volume_->metadata();
  auto child = md.lookup(parent, name);
  if (!child) return -1;
  OpenFile* file = open_.find(*child);
  if (!file || file->opens == 0 || orphans_ == 0) return -1;
  auto n = md.inode(*child);
  if (!n || S_ISDIR(n->mode) || n->nlink > 1) return -1;
  if (int r = md.rename(parent, name, orphans_, std::to_string(*child), fs::Metadata::kNoReplace)) return r;
  file->orphaned = true;
  return 0;
}

int Filesystem::unlink(Ino parent, const std::string& name) {
  if (parent & kVirtualBit) return record_at(EROFS, parent, name, "views and /.mmfs are read-only");
  if (int r = check_name_length(parent, name, true)) return r;
  if (is_virtual_name(parent, name)) return record_at(EROFS, parent, name, "views and /.mmfs are read-only");
  if (read_only_) return EROFS;
  std::lock_guard lock(mu_);
  int r = orphan_if_open(parent, name);
  if (r >= 0) return r;
  auto child = volume_->metadata().lookup(parent, name);
  if (!child) return ENOENT;
  return remove_locked(*child, [&] { return volume_->metadata().unlink(parent, name); });
}

int Filesystem::remove_locked(Ino ino, const std::function<int()>& op) {
  // A loaded array may still hold dirty cells (its last handle is closed, but
  // the RELEASE's write-back can run concurrently on another thread, as can the
  // flusher): the removal runs inside the array's retirement so that no
  // write-back lands in the extents it frees.
  std::shared_ptr<fs::ArrayFile> array = arrays_.peek(ino);
  int r = 0;
  auto remove = [&] {
    r = op();
    return r == 0 && !volume_->metadata().inode(ino);
  };
  if (array)
    array->retire_if(remove);
  else
    remove();
  if (r == 0 && !volume_->metadata().inode(ino)) arrays_.forget(ino);
  return r;
}

int Filesystem::rmdir(Ino parent, const std::string& name) {
  if (parent & kVirtualBit) return record_at(EROFS, parent, name, "views and /.mmfs are read-only");
  if (int r = check_name_length(parent, name, true)) return r;
  if (is_virtual_name(parent, name)) return record_at(EROFS, parent, name, "views and /.mmfs are read-only");
  if (read_only_) return EROFS;
  return volume_->metadata().rmdir(parent, name);
}

int Filesystem::rename(Ino parent, const std::string& name, Ino new_parent, const std::string& new_name,
                       unsigned flags) {
  if (parent & kVirtualBit) return record_at(EROFS, parent, name, "views and /.mmfs are read-only");
  if (new_parent & kVirtualBit) return record_at(EROFS, new_parent, new_name, "views and /.mmfs are read-only");
  if (int r = check_name_length(parent, name, true)) return r;
  if (int r = check_name_length(new_parent, new_name, false)) return r;
  if (is_virtual_name(parent, name)) return record_at(EROFS, parent, name, "views and /.mmfs are read-only");
  if (is_virtual_name(new_parent, new_name))
    return record_at(EROFS, new_parent, new_name, "views and /.mmfs are read-only: nothing can be renamed onto them");
  if (read_only_) return EROFS;
  if (flags & ~unsigned(fs::Metadata::kNoReplace | fs::Metadata::kExchange)) return EINVAL;
  std::lock_guard lock(mu_);
  fs::Metadata& md = volume_->metadata();
  {
    // The names each node gets must not hide views or be hidden by them.
    // A plain rename frees the old name (it may be the new one's stem or its
    // `X@`); an exchange keeps both names taken.
    auto src = md.lookup(parent, name), dst = md.lookup(new_parent, new_name);
    bool exchange = flags & fs::Metadata::kExchange;
    if (src && src != dst) {
      std::optional<std::pair<Ino, std::string>> leaving;
      if (!exchange) leaving.emplace(parent, name);
      if (auto n = md.inode(*src))
        if (int r = check_new_entry(new_parent, new_name, viewed(*n, is_array(*src)), leaving)) return r;
      if (dst && exchange)
        if (auto n = md.inode(*dst))
          if (int r = check_new_entry(parent, name, viewed(*n, is_array(*dst)))) return r;
    }
  }
  if (!(flags & (fs::Metadata::kNoReplace | fs::Metadata::kExchange))) {
    auto src = md.lookup(parent, name), dst = md.lookup(new_parent, new_name);
    if (src && dst && *src != *dst) {
      int r = orphan_if_open(new_parent, new_name);
      if (r > 0) return r;
    }
  }
  auto src = md.lookup(parent, name), dst = md.lookup(new_parent, new_name);
  auto do_rename = [&] { return md.rename(parent, name, new_parent, new_name, flags); };
  // A rename over another file may free it.
  int r = dst && src && *dst != *src ? remove_locked(*dst, do_rename) : do_rename();
  if (r == 0 && src) remember(*src, new_parent, new_name);
  if (r == 0 && dst && (flags & fs::Metadata::kExchange)) remember(*dst, parent, name);
  return r;
}

}  // namespace mmfs::daemon
