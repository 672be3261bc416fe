#include "fs/meta/metadata.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "util/coding.h"

namespace mmfs::fs {
namespace {

std::int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return std::int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

constexpr std::uint8_t kInodeVersion = 1;

}  // namespace

std::string encode_inode(const Inode& n) {
  std::string s;
  s.push_back(char(kInodeVersion));
  for (std::uint64_t v : {n.ino, std::uint64_t(n.mode), std::uint64_t(n.uid), std::uint64_t(n.gid),
                          std::uint64_t(n.nlink), n.size, std::uint64_t(n.atime_ns), std::uint64_t(n.mtime_ns),
                          std::uint64_t(n.ctime_ns), n.rdev, n.generation, n.parent,
                          std::uint64_t(n.symlink.size())})
    util::append_le64(s, v);
  s += n.symlink;
  return s;
}

std::optional<Inode> decode_inode(std::string_view s) {
  if (s.empty() || std::uint8_t(s[0]) != kInodeVersion) return std::nullopt;
  s.remove_prefix(1);
  std::uint64_t f[13];
  for (auto& v : f)
    if (!util::take_le64(s, &v)) return std::nullopt;
  if (f[12] != s.size() || f[1] > 0xffffffffu || f[2] > 0xffffffffu || f[3] > 0xffffffffu || f[4] > 0xffffffffu)
    return std::nullopt;
  Inode n;
  n.ino = f[0];
  n.mode = std::uint32_t(f[1]);
  n.uid = std::uint32_t(f[2]);
  n.gid = std::uint32_t(f[3]);
  n.nlink = std::uint32_t(f[4]);
  n.size = f[5];
  n.atime_ns = std::int64_t(f[6]);
  n.mtime_ns = std::int64_t(f[7]);
  n.ctime_ns = std::int64_t(f[8]);
  n.rdev = f[9];
  n.generation = f[10];
  n.parent = f[11];
  n.symlink.assign(s);
  return n;
}

std::string encode_extents(const std::vector<Extent>& extents) {
  std::string s;
  for (const Extent& e : extents) {
    util::append_le64(s, e.start);
    util::append_le64(s, e.sectors);
  }
  return s;
}

std::optional<std::vector<Extent>> decode_extents(std::string_view s) {
  if (s.size() % 16) return std::nullopt;
  std::vector<Extent> v;
  while (!s.empty()) {
    Extent e;
    util::take_le64(s, &e.start);
    util::take_le64(s, &e.sectors);
    if (e.sectors == 0 || e.start + e.sectors < e.start) return std::nullopt;
    v.push_back(e);
  }
  return v;
}

std::string encode_ino(Ino ino) {
  std::string s;
  util::append_be64(s, ino);
  return s;
}

std::optional<Ino> decode_ino(std::string_view s) {
  if (s.size() != 8) return std::nullopt;
  return util::get_be64(s.data());
}

Metadata::Metadata(MetaStore& store, Allocator& allocator) : store_(store), allocator_(allocator) {
  if (auto v = store_.get(keys::next_ino()))
    if (auto n = decode_ino(*v)) next_ino_ = *n;
}

int Metadata::format(MetaStore& store, std::uint32_t root_mode, std::uint32_t uid, std::uint32_t gid) {
  Inode root;
  root.ino = kRootIno;
  root.mode = S_IFDIR | (root_mode & 07777);
  root.uid = uid;
  root.gid = gid;
  root.nlink = 2;
  root.parent = kRootIno;
  root.atime_ns = root.mtime_ns = root.ctime_ns = now_ns();
  WriteBatch b;
  b.put(keys::inode(kRootIno), encode_inode(root));
  b.put(keys::next_ino(), encode_ino(kRootIno + 1));
  if (int r = store.apply(b)) return r;
  return store.sync();
}

int Metadata::check_name(std::string_view name) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string_view::npos ||
      name.find('\0') != std::string_view::npos)
    return EINVAL;
  if (name.size() > 255) return ENAMETOOLONG;
  return 0;
}

std::optional<Inode> Metadata::inode(Ino ino) const {
  auto v = store_.get(keys::inode(ino));
  if (!v) return std::nullopt;
  return decode_inode(*v);
}

std::optional<Ino> Metadata::lookup(Ino parent, std::string_view name) const {
  auto v = store_.get(keys::dirent(parent, name));
  if (!v) return std::nullopt;
  return decode_ino(*v);
}

void Metadata::readdir(Ino parent, const std::function<bool(std::string_view, Ino)>& visit) const {
  std::string prefix = keys::dirent_prefix(parent);
  store_.scan(prefix, [&](std::string_view k, std::string_view v) {
    const auto child = decode_ino(v);
    if (!child) return true;
    return visit(k.substr(prefix.size()), *child);
  });
}

std::vector<std::pair<Ino, std::string>> Metadata::names_of(Ino ino) const {
  std::vector<std::pair<Ino, std::string>> names;
  store_.scan(keys::scan_prefix(keys::Kind::Dirent), [&](std::string_view k, std::string_view v) {
    const auto key = keys::parse(k);
    if (key && key->kind == keys::Kind::Dirent && decode_ino(v) == ino)
      names.emplace_back(key->ino, std::string(key->name));
    return true;
  });
  return names;
}

Ino Metadata::allocate_ino(WriteBatch& batch) {
  Ino ino = next_ino_++;
  batch.put(keys::next_ino(), encode_ino(next_ino_));
  return ino;
}

int Metadata::commit(const WriteBatch& batch, std::vector<Extent> dropped) {
  if (int r = store_.apply(batch)) return r;
  pending_free_.insert(pending_free_.end(), dropped.begin(), dropped.end());
  return 0;
}

int Metadata::apply(const WriteBatch& batch, std::vector<Extent> dropped) {
  std::lock_guard lock(mu_);
  return commit(batch, std::move(dropped));
}

int Metadata::apply_with_inode(Ino ino, const std::function<void(Inode&)>& edit, WriteBatch batch,
                               std::vector<Extent> dropped) {
  std::lock_guard lock(mu_);
  auto n = inode(ino);
  if (!n) return ENOENT;
  edit(*n);
  batch.put(keys::inode(ino), encode_inode(*n));
  return commit(batch, std::move(dropped));
}

int Metadata::create(Ino parent, std::string_view name, std::uint32_t mode, std::uint32_t uid, std::uint32_t gid,
                     std::string_view symlink_target, Inode* out, std::uint64_t rdev) {
  if (int r = check_name(name)) return r;
  std::lock_guard lock(mu_);
  auto dir = inode(parent);
  if (!dir) return ENOENT;
  if (!S_ISDIR(dir->mode)) return ENOTDIR;
  if (lookup(parent, name)) return EEXIST;
  WriteBatch b;
  Inode n;
  n.ino = allocate_ino(b);
  n.mode = mode;
  n.uid = uid;
  n.gid = gid;
  n.nlink = S_ISDIR(mode) ? 2 : 1;
  n.atime_ns = n.mtime_ns = n.ctime_ns = now_ns();
  n.generation = n.ino;
  if (S_ISCHR(mode) || S_ISBLK(mode)) n.rdev = rdev;
  if (S_ISDIR(mode)) n.parent = parent;
  if (S_ISLNK(mode)) {
    n.symlink = std::string(symlink_target);
    n.size = n.symlink.size();
  }
  b.put(keys::inode(n.ino), encode_inode(n));
  b.put(keys::dirent(parent, name), encode_ino(n.ino));
  dir->mtime_ns = dir->ctime_ns = n.ctime_ns;
  if (S_ISDIR(mode)) ++dir->nlink;
  b.put(keys::inode(parent), encode_inode(*dir));
  if (int r = commit(b, {})) {
    --next_ino_;
    return r;
  }
  if (out) *out = n;
  return 0;
}

int Metadata::link(Ino ino, Ino new_parent, std::string_view new_name, Inode* out) {
  if (int r = check_name(new_name)) return r;
  std::lock_guard lock(mu_);
  auto n = inode(ino);
  auto dir = inode(new_parent);
  if (!n || !dir) return ENOENT;
  if (!S_ISDIR(dir->mode)) return ENOTDIR;
  if (S_ISDIR(n->mode)) return EPERM;
  if (lookup(new_parent, new_name)) return EEXIST;
  WriteBatch b;
  ++n->nlink;
  n->ctime_ns = now_ns();
  dir->mtime_ns = dir->ctime_ns = n->ctime_ns;
  b.put(keys::inode(ino), encode_inode(*n));
  b.put(keys::inode(new_parent), encode_inode(*dir));
  b.put(keys::dirent(new_parent, new_name), encode_ino(ino));
  if (int r = commit(b, {})) return r;
  if (out) *out = *n;
  return 0;
}

int Metadata::remove_inode(Ino ino, WriteBatch& b, std::vector<Extent>& dropped) const {
  b.del(keys::inode(ino));
  b.del(keys::extents(ino));
  for (const Extent& e : extents(ino)) dropped.push_back(e);
  // The array's bitmap index, mloc image and extra copies go with it.
  for (const std::string& key : {keys::index_extents(ino), keys::mloc_extents(ino)})
    if (auto v = store_.get(key)) {
      b.del(key);
      if (auto xs = decode_extents(*v))
        for (const Extent& e : *xs) dropped.push_back(e);
    }
  store_.scan(keys::extents(ino) + "k", [&](std::string_view k, std::string_view v) {
    b.del(std::string(k));
    if (auto xs = decode_extents(v))
      for (const Extent& e : *xs) dropped.push_back(e);
    return true;
  });
  store_.scan(keys::index_prefix(ino), [&](std::string_view k, std::string_view) {
    b.del(std::string(k));
    return true;
  });
  store_.scan(keys::xattr_prefix(ino), [&](std::string_view k, std::string_view) {
    b.del(std::string(k));
    return true;
  });
  for (const std::string& prefix :
       {keys::checksum_prefix(ino), keys::alt_checksum_prefix(ino),
        keys::checksum_prefix(ino, keys::kCopyChecksumTable), keys::checksum_prefix(ino, keys::kCopyAltChecksumTable)})
    store_.scan(prefix, [&](std::string_view k, std::string_view) {
      b.del(std::string(k));
      return true;
    });
  return 0;
}

int Metadata::unlink(Ino parent, std::string_view name) {
  std::lock_guard lock(mu_);
  auto dir = inode(parent);
  if (!dir) return ENOENT;
  if (!S_ISDIR(dir->mode)) return ENOTDIR;
  auto child = lookup(parent, name);
  if (!child) return ENOENT;
  auto n = inode(*child);
  if (!n) return EIO;
  if (S_ISDIR(n->mode)) return EISDIR;
  WriteBatch b;
  std::vector<Extent> dropped;
  b.del(keys::dirent(parent, name));
  std::int64_t t = now_ns();
  dir->mtime_ns = dir->ctime_ns = t;
  b.put(keys::inode(parent), encode_inode(*dir));
  if (n->nlink <= 1) {
    remove_inode(n->ino, b, dropped);
  } else {
    --n->nlink;
    n->ctime_ns = t;
    b.put(keys::inode(n->ino), encode_inode(*n));
  }
  return commit(b, std::move(dropped));
}

int Metadata::rmdir(Ino parent, std::string_view name) {
  std::lock_guard lock(mu_);
  auto dir = inode(parent);
  if (!dir) return ENOENT;
  auto child = lookup(parent, name);
  if (!child) return ENOENT;
  auto n = inode(*child);
  if (!n) return EIO;
  if (!S_ISDIR(n->mode)) return ENOTDIR;
  bool empty = true;
  readdir(*child, [&](std::string_view, Ino) { return empty = false; });
  if (!empty) return ENOTEMPTY;
  WriteBatch b;
  std::vector<Extent> dropped;
  b.del(keys::dirent(parent, name));
  remove_inode(n->ino, b, dropped);
  --dir->nlink;
  dir->mtime_ns = dir->ctime_ns = now_ns();
  b.put(keys::inode(parent), encode_inode(*dir));
  return commit(b, std::move(dropped));
}

int Metadata::rename(Ino parent, std::string_view name, Ino new_parent, std::string_view new_name, unsigned flags) {
  if (int r = check_name(new_name)) return r;
  if ((flags & kNoReplace) && (flags & kExchange)) return EINVAL;
  std::lock_guard lock(mu_);
  auto src_dir = inode(parent), other_dir = inode(new_parent);
  if (!src_dir || !other_dir) return ENOENT;
  // One object when both names are in the same directory, so link-count
  // changes to either side land in the same inode.
  std::optional<Inode>& dst_dir = parent == new_parent ? src_dir : other_dir;
  if (!S_ISDIR(src_dir->mode) || !S_ISDIR(dst_dir->mode)) return ENOTDIR;
  auto src = lookup(parent, name);
  if (!src) return ENOENT;
  auto src_inode = inode(*src);
  if (!src_inode) return EIO;
  auto dst = lookup(new_parent, new_name);
  if ((flags & kNoReplace) && dst) return EEXIST;
  if ((flags & kExchange) && !dst) return ENOENT;
  if (dst && *dst == *src) return 0;  // same file: nothing to do (POSIX)
  // A directory may not move into its own subtree (nor, by exchange, swap with an ancestor).
  auto inside = [&](Ino dir, Ino ancestor) {
    for (Ino p = dir; p != kRootIno;) {
      if (p == ancestor) return true;
      auto up = inode(p);
      if (!up || up->parent == p) break;
      p = up->parent;
    }
    return false;
  };
  if (S_ISDIR(src_inode->mode) && inside(new_parent, *src)) return EINVAL;
  if ((flags & kExchange) && inside(parent, *dst)) return EINVAL;
  WriteBatch b;
  std::vector<Extent> dropped;
  const std::string src_val = encode_ino(*src);
  std::int64_t t = now_ns();
  if (flags & kExchange) {
    b.put(keys::dirent(parent, name), encode_ino(*dst));
    b.put(keys::dirent(new_parent, new_name), src_val);
    auto dst_inode = inode(*dst);
    if (!dst_inode) return EIO;
    if (S_ISDIR(dst_inode->mode)) {
      dst_inode->parent = parent;
      dst_inode->ctime_ns = t;
      b.put(keys::inode(*dst), encode_inode(*dst_inode));
    }
    if (parent != new_parent && S_ISDIR(src_inode->mode) != S_ISDIR(dst_inode->mode)) {
      // A directory changes parent in each direction: fix the parents' link counts.
      if (S_ISDIR(src_inode->mode)) --src_dir->nlink, ++dst_dir->nlink;
      else ++src_dir->nlink, --dst_dir->nlink;
    }
  } else {
    if (dst) {
      auto dst_inode = inode(*dst);
      if (!dst_inode) return EIO;
      if (S_ISDIR(dst_inode->mode)) {
        if (!S_ISDIR(src_inode->mode)) return EISDIR;
        bool empty = true;
        readdir(*dst, [&](std::string_view, Ino) { return empty = false; });
        if (!empty) return ENOTEMPTY;
        remove_inode(*dst, b, dropped);
        --dst_dir->nlink;
      } else {
        if (S_ISDIR(src_inode->mode)) return ENOTDIR;
        if (dst_inode->nlink <= 1) {
          remove_inode(*dst, b, dropped);
        } else {
          --dst_inode->nlink;
          dst_inode->ctime_ns = t;
          b.put(keys::inode(*dst), encode_inode(*dst_inode));
        }
      }
    }
    b.del(keys::dirent(parent, name));
    b.put(keys::dirent(new_parent, new_name), src_val);
    if (S_ISDIR(src_inode->mode) && parent != new_parent) --src_dir->nlink, ++dst_dir->nlink;
  }
  src_inode->ctime_ns = t;
  if (S_ISDIR(src_inode->mode)) src_inode->parent = new_parent;
  b.put(keys::inode(*src), encode_inode(*src_inode));
  src_dir->mtime_ns = src_dir->ctime_ns = t;
  dst_dir->mtime_ns = dst_dir->ctime_ns = t;
  if (parent != new_parent) b.put(keys::inode(new_parent), encode_inode(*dst_dir));
  b.put(keys::inode(parent), encode_inode(*src_dir));
  return commit(b, std::move(dropped));
}

int Metadata::set_inode(const Inode& n) {
  std::lock_guard lock(mu_);
  if (!inode(n.ino)) return ENOENT;
  WriteBatch b;
  b.put(keys::inode(n.ino), encode_inode(n));
  return commit(b, {});
}

int Metadata::set_xattr(Ino ino, std::string_view name, std::string_view value) {
  if (name.empty() || name.size() > 255) return name.empty() ? EINVAL : ERANGE;
  if (value.size() > 65536) return E2BIG;
  std::lock_guard lock(mu_);
  if (!inode(ino)) return ENOENT;
  WriteBatch b;
  b.put(keys::xattr(ino, name), std::string(value));
  return commit(b, {});
}

int Metadata::remove_xattr(Ino ino, std::string_view name) {
  std::lock_guard lock(mu_);
  if (!inode(ino)) return ENOENT;
  if (!store_.get(keys::xattr(ino, name))) return ENODATA;
  WriteBatch b;
  b.del(keys::xattr(ino, name));
  return commit(b, {});
}

std::optional<std::string> Metadata::xattr(Ino ino, std::string_view name) const {
  return store_.get(keys::xattr(ino, name));
}

std::vector<std::string> Metadata::xattr_names(Ino ino) const {
  std::vector<std::string> names;
  std::string prefix = keys::xattr_prefix(ino);
  store_.scan(prefix, [&](std::string_view k, std::string_view) {
    names.emplace_back(k.substr(prefix.size()));
    return true;
  });
  return names;
}

std::vector<Extent> Metadata::extents(Ino ino) const {
  auto v = store_.get(keys::extents(ino));
  if (!v) return {};
  auto e = decode_extents(*v);
  return e ? *e : std::vector<Extent>{};
}

int Metadata::set_extents(Ino ino, std::vector<Extent> extents) {
  std::lock_guard lock(mu_);
  if (!inode(ino)) return ENOENT;
  WriteBatch b;
  std::vector<Extent> dropped = this->extents(ino);
  if (extents.empty()) b.del(keys::extents(ino));
  else b.put(keys::extents(ino), encode_extents(extents));
  return commit(b, std::move(dropped));
}

int Metadata::allocate_extents(Ino ino, const layouts::SpaceRequest& request, std::vector<Extent>* out) {
  if (!inode(ino)) return ENOENT;
  if (int r = allocator_.allocate(request, out)) return r;
  if (int r = set_extents(ino, *out)) {
    for (const Extent& e : *out) allocator_.free(e);
    return r;
  }
  return 0;
}

int Metadata::allocate_small_extents(Ino ino, std::uint64_t sectors, std::vector<Extent>* out) {
  if (!inode(ino)) return ENOENT;
  if (int r = allocator_.allocate_small(sectors, out)) return r;
  if (int r = set_extents(ino, *out)) {
    for (const Extent& e : *out) allocator_.free(e);
    return r;
  }
  return 0;
}

int Metadata::sync() {
  std::vector<Extent> to_free;
  {
    std::lock_guard lock(mu_);
    to_free.swap(pending_free_);
  }
  if (int r = store_.sync()) {
    std::lock_guard lock(mu_);
    pending_free_.insert(pending_free_.end(), to_free.begin(), to_free.end());
    return r;
  }
  for (const Extent& e : to_free) allocator_.free(e);
  return 0;
}

}  // namespace mmfs::fs
