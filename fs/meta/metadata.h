// The filesystem's metadata as typed records over the MetaStore: inodes,
// directory entries, xattrs and extent maps (docs/on-disk-format.md, "keys").
// Every operation is one WriteBatch, so it is atomic; durability comes from
// sync(). Extents dropped by an operation return to the allocator only after
// the sync that makes the drop durable, so a crash can never leave a file
// pointing at sectors another file has since been given.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "fs/meta/allocator.h"
#include "fs/meta/keys.h"  // the keys of every record (keys::inode, ...)
#include "fs/meta/meta_store.h"

namespace mmfs::fs {

constexpr Ino kRootIno = 1;  // Ino: fs/meta/keys.h

struct Inode {
  Ino ino = 0;
  std::uint32_t mode = 0;  // type and permission bits (S_IFREG | 0644 ...)
  std::uint32_t uid = 0, gid = 0;
  std::uint32_t nlink = 0;
  std::uint64_t size = 0;
  std::int64_t atime_ns = 0, mtime_ns = 0, ctime_ns = 0;
  std::uint64_t rdev = 0;
  std::uint64_t generation = 0;
  Ino parent = 0;       // directories: the directory holding it (the root: itself)
  std::string symlink;  // target, for symlinks
  bool operator==(const Inode&) const = default;
};

std::string encode_inode(const Inode& inode);
std::optional<Inode> decode_inode(std::string_view bytes);
std::string encode_extents(const std::vector<Extent>& extents);
std::optional<std::vector<Extent>> decode_extents(std::string_view bytes);
// An inode number as a value (a directory entry's child, the inode counter):
// 8 bytes, big-endian; nullopt unless exactly 8 bytes.
std::string encode_ino(Ino ino);
std::optional<Ino> decode_ino(std::string_view bytes);

class Metadata {
 public:
  Metadata(MetaStore& store, Allocator& allocator);

  // Writes the root directory into an empty store (mkfs).
  static int format(MetaStore& store, std::uint32_t root_mode, std::uint32_t uid, std::uint32_t gid);

  std::optional<Inode> inode(Ino ino) const;
  std::optional<Ino> lookup(Ino parent, std::string_view name) const;
  // Visits (name, child) in name order; return false to stop.
  void readdir(Ino parent, const std::function<bool(std::string_view, Ino)>& visit) const;
  // Every (directory, name) that links to `ino`: a scan of all directories.
  std::vector<std::pair<Ino, std::string>> names_of(Ino ino) const;

  // Each returns 0 or an errno (ENOENT, ENOTDIR, EEXIST, ENOTEMPTY, EISDIR,
  // EINVAL, ENAMETOOLONG, ENOSPC, EIO).
  // `rdev`: the device number of a character or block device node.
  int create(Ino parent, std::string_view name, std::uint32_t mode, std::uint32_t uid, std::uint32_t gid,
             std::string_view symlink_target, Inode* out, std::uint64_t rdev = 0);
  int link(Ino ino, Ino new_parent, std::string_view new_name, Inode* out);
  int unlink(Ino parent, std::string_view name);  // files, symlinks; frees the inode at nlink 0
  int rmdir(Ino parent, std::string_view name);
  enum RenameFlags : unsigned { kNoReplace = 1, kExchange = 2 };
  int rename(Ino parent, std::string_view name, Ino new_parent, std::string_view new_name, unsigned flags);
  int set_inode(const Inode& inode);  // attributes (size, mode, times, owner)

  int set_xattr(Ino ino, std::string_view name, std::string_view value);
  int remove_xattr(Ino ino, std::string_view name);  // ENODATA when absent
  std::optional<std::string> xattr(Ino ino, std::string_view name) const;
  std::vector<std::string> xattr_names(Ino ino) const;

  std::vector<Extent> extents(Ino ino) const;
  // Allocates extents for a layout's request and records them for `ino`,
  // replacing (and later freeing) what it had.
  int allocate_extents(Ino ino, const layouts::SpaceRequest& request, std::vector<Extent>* out);
  int allocate_small_extents(Ino ino, std::uint64_t sectors, std::vector<Extent>* out);
  int set_extents(Ino ino, std::vector<Extent> extents);

  // A composite change built by the caller (an array's new placement: extents,
  // schema and checksums in one batch), atomic like every other operation.
  // `dropped` extents return to the allocator after the next sync.
  int apply(const WriteBatch& batch, std::vector<Extent> dropped);
  // The same with `ino`'s inode read, edited and written inside the
  // namespace lock, so a concurrent link/rename/unlink cannot be undone by a
  // stale copy (ENOENT when the inode is gone).
  int apply_with_inode(Ino ino, const std::function<void(Inode&)>& edit, WriteBatch batch,
                       std::vector<Extent> dropped);
  MetaStore& store() { return store_; }

  // Durability point: every operation before it is durable afterwards, and
  // extents they dropped go back to the allocator.
  int sync();

 private:
  int commit(const WriteBatch& batch, std::vector<Extent> dropped);
  int remove_inode(Ino ino, WriteBatch& batch, std::vector<Extent>& dropped) const;
  Ino allocate_ino(WriteBatch& batch);
  static int check_name(std::string_view name);

  MetaStore& store_;
  Allocator& allocator_;
  mutable std::mutex mu_;        // serialises read-modify-write of the namespace
  Ino next_ino_ = 2;
  std::vector<Extent> pending_free_;  // dropped by applied, not yet synced, operations
};

}  // namespace mmfs::fs
