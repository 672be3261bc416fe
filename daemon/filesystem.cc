#include "daemon/filesystem.h"

#include <fmt/format.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>

#include "daemon/heap_trim.h"
#include "fs/util/buffer_pool.h"
#include "layouts/default_layout.h"

namespace mmfs::daemon {

using fs::ArrayFile;
using fs::ArraySchema;
using fs::Inode;

namespace {

constexpr const char* kOrphanDir = ".mmfs-orphans";
constexpr auto kFlushInterval = std::chrono::seconds(5);
// Free heap kept for reuse at each flusher tick (daemon/heap_trim.h): a
// streaming reader's prefetched chunks and their device buffers.
constexpr std::size_t kFreeHeapReserve = 256u << 20;

// FUSE_SET_ATTR_* (fuse_lowlevel.h); kept numeric so this file stays FUSE-free.
constexpr int kSetMode = 1 << 0, kSetUid = 1 << 1, kSetGid = 1 << 2, kSetSize = 1 << 3, kSetAtime = 1 << 4,
              kSetMtime = 1 << 5, kSetAtimeNow = 1 << 7, kSetMtimeNow = 1 << 8, kSetCtime = 1 << 10;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

timespec to_timespec(std::int64_t ns) {
  timespec t;
  t.tv_sec = ns / 1000000000;
  t.tv_nsec = ns % 1000000000;
  if (t.tv_nsec < 0) {
    t.tv_nsec += 1000000000;
    t.tv_sec -= 1;
  }
  return t;
}

std::string geometry_name(const fs::Volume& v) {
  auto j = nlohmann::json::parse(v.superblock().geometry_json, nullptr, false);
  if (j.is_object()) {
    if (j.contains("name") && j["name"].is_string()) return j["name"];
    if (j.contains("profile") && j["profile"].is_string()) return j["profile"];
  }
  return "custom";
}

bool is_mmfs_attr(const std::string& name) { return name.rfind(fs::kSchemaPrefix, 0) == 0; }

}  // namespace

Filesystem::Filesystem(std::unique_ptr<fs::Volume> volume, bool read_only)
    : volume_(std::move(volume)), read_only_(read_only), io_(volume_->device(), volume_->geometry()),
      array_ctx_{volume_->metadata(), volume_->allocator(), io_, volume_->geometry(), geometry_name(*volume_)} {
  vnodes_.push_back({});  // index 0 unused: a virtual inode number is never just the top bit
  vnodes_[0].live = false;
  fs::Metadata& md = volume_->metadata();
  if (auto o = md.lookup(fs::kRootIno, kOrphanDir)) {
    orphans_ = *o;
    if (!read_only_) {
      // Files unlinked while open when the daemon stopped: their last close never came.
      std::vector<std::string> names;
      md.readdir(orphans_, [&](std::string_view n, Ino) {
        names.emplace_back(n);
        return true;
      });
      for (const auto& n : names) md.unlink(orphans_, n);
      md.sync();
    }
  } else if (!read_only_) {
    Inode dir;
    if (md.create(fs::kRootIno, kOrphanDir, S_IFDIR | 0700, 0, 0, "", &dir) == 0) {
      orphans_ = dir.ino;
      md.sync();
    }
  }
}

Filesystem::~Filesystem() { shutdown(); }

void Filesystem::start() { flusher_ = std::thread([this] { flusher(); }); }

void Filesystem::flusher() {
  std::unique_lock lock(flusher_mu_);
  while (!stopping_) {
    flusher_cv_.wait_for(lock, kFlushInterval);
    if (stopping_) break;
    lock.unlock();
    flush_all(true, /*periodic=*/true);
    trim_free_heap(kFreeHeapReserve);
    lock.lock();
  }
}

int Filesystem::shutdown() {
  {
    std::lock_guard lock(flusher_mu_);
    if (stopping_) return 0;
    stopping_ = true;
  }
  flusher_cv_.notify_all();
  if (flusher_.joinable()) flusher_.join();
  int r = read_only_ ? 0 : flush_all(true);
  std::vector<std::shared_ptr<ArrayFile>> loaded;
  {
    std::lock_guard lock(mu_);
    for (auto& [ino, weak] : arrays_)
      if (auto a = weak.lock()) loaded.push_back(a);
  }
  // Unmount seals mloc arrays still open for writing.
  if (!read_only_)
    for (auto& a : loaded) {
      std::string msg;
      if (int e = a->settle(&msg)) {
        record(e, a->ino(), msg);
        if (!r) r = e;
      }
    }
  for (auto& a : loaded) a->quiesce();
  return r;
}

int Filesystem::flush_all(bool durable, bool periodic) {
  if (read_only_) return 0;
  std::vector<std::pair<Ino, std::shared_ptr<fs::ArrayFile>>> arrays;
  int first = 0;
  {
    std::lock_guard lock(mu_);
    for (auto& [ino, of] : open_) {
      if (of.plain && (of.plain->dirty() || of.times_dirty))
        if (int r = commit_open_file(ino, of); r && !first) first = r;
      if (of.array) arrays.push_back({ino, of.array});
    }
    for (auto& [ino, weak] : arrays_)
      if (auto a = weak.lock()) arrays.push_back({ino, a});
  }
  for (auto& [ino, a] : arrays) {
    std::string msg;
    if (int r = periodic ? a->flush_periodic(&msg) : a->flush(false, &msg)) {
      record(r, ino, msg);
      if (!first) first = r;
    }
  }
  if (durable)
    if (int r = volume_->metadata().sync(); r && !first) first = r;
  return first;
}

void Filesystem::remember(Ino ino, Ino parent, const std::string& name) {
  std::lock_guard lock(names_mu_);
  names_[ino] = {parent, name};
}

std::string Filesystem::path_of(Ino ino) const {
  if (ino == fs::kRootIno) return "/";
  if (ino & kVirtualBit) {
    VNode v;
    if (!vnode(ino, &v)) return "<view>";
    std::string p = v.table ? (v.home == fs::kRootIno ? std::string("/@") : path_of(v.home) + "@")
                    : v.array ? path_of(v.array) + "@"
                              : std::string("/.mmfs");
    for (const auto& c : v.components) p += "/" + c;
    return p;
  }
  // Names come from the lookups and creates that led the kernel here (a
  // hard-linked file shows the name it was last reached by).
  std::vector<std::string> parts;
  Ino cur = ino;
  {
    std::lock_guard lock(names_mu_);
    for (int depth = 0; cur != fs::kRootIno && depth < 256; ++depth) {
      auto it = names_.find(cur);
      if (it == names_.end()) return fmt::format("<inode {}>", ino);
      parts.push_back(it->second.second);
      cur = it->second.first;
    }
  }
  std::string p;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) p += "/" + *it;
  return p.empty() ? "/" : p;
}

std::string Filesystem::child_path(Ino parent, const std::string& name) const {
  std::string dir = path_of(parent);
  return (dir == "/" ? "" : dir) + "/" + name;
}

int Filesystem::record(int error, Ino ino, const std::string& message) {
  return errors_.record(error, path_of(ino), message, request_owner());
}

int Filesystem::record_at(int error, Ino parent, const std::string& name, const std::string& message) {
  return errors_.record(error, child_path(parent, name), message, request_owner());
}

std::optional<ArraySchema> Filesystem::stored_schema(Ino ino) const {
  auto v = volume_->metadata().xattr(ino, std::string(ArrayFile::kSchemaXattr));
  if (!v) return std::nullopt;
  return fs::decode_schema(*v);
}

int Filesystem::fill_stat(const Inode& inode, struct stat* st) {
  std::memset(st, 0, sizeof *st);
  st->st_ino = inode.ino;
  st->st_mode = inode.mode;
  st->st_nlink = inode.nlink;
  st->st_uid = inode.uid;
  st->st_gid = inode.gid;
  st->st_size = std::int64_t(inode.size);
  st->st_rdev = inode.rdev;
  st->st_atim = to_timespec(inode.atime_ns);
  st->st_mtim = to_timespec(inode.mtime_ns);
  st->st_ctim = to_timespec(inode.ctime_ns);
  st->st_blksize = 1 << 20;
  std::uint64_t sectors = 0;
  {
    std::lock_guard lock(mu_);
    auto it = open_.find(inode.ino);
    if (it != open_.end() && it->second.plain) {
      st->st_size = std::int64_t(it->second.plain->size());
      sectors = it->second.plain->allocated_bytes() / volume_->geometry().sector_size();
      if (it->second.times_dirty) st->st_mtim = st->st_ctim = to_timespec(it->second.mtime_ns);
    } else {
      // Read again under the registry lock: a release may have committed a
      // newer size and mtime since the caller read `inode`.
      if (auto fresh = volume_->metadata().inode(inode.ino)) {
        st->st_size = std::int64_t(fresh->size);
        st->st_mtim = to_timespec(fresh->mtime_ns);
        st->st_ctim = to_timespec(fresh->ctime_ns);
        st->st_atim = to_timespec(fresh->atime_ns);
        st->st_mode = fresh->mode;
        st->st_nlink = fresh->nlink;
        st->st_uid = fresh->uid;
        st->st_gid = fresh->gid;
      }
      for (const auto& e : volume_->metadata().extents(inode.ino)) sectors += e.sectors;
    }
    // Unlinked while open: its last name is gone (it waits in the orphan
    // directory only so that its data outlives the name).
    if (it != open_.end() && it->second.orphaned) st->st_nlink = 0;
  }
  if (S_ISLNK(inode.mode)) st->st_size = std::int64_t(inode.symlink.size());
  st->st_blocks = std::int64_t(sectors * volume_->geometry().sector_size() / 512);
  return 0;
}

int Filesystem::getattr(Ino ino, const Caller& who, struct stat* st) {
  if (ino & kVirtualBit) {
    std::string content, msg;
    int r = vnode_stat(ino, who, st, &content, &msg);
    return r ? record(r, ino, msg) : 0;
  }
  auto n = volume_->metadata().inode(ino);
  if (!n) return ENOENT;
  return fill_stat(*n, st);
}

bool Filesystem::vnode(Ino vino, VNode* out) const {
  std::lock_guard lock(vmu_);
  std::uint64_t i = vino & ~kVirtualBit;
  if (!(vino & kVirtualBit) || i == 0 || i >= vnodes_.size() || !vnodes_[i].live) return false;
  *out = vnodes_[i];
  return true;
}

Ino Filesystem::intern_vnode(Ino parent_vino, const std::string& name, VNode node) {
  std::lock_guard lock(vmu_);
  auto key = std::make_pair(parent_vino, name);
  auto it = vindex_.find(key);
  if (it != vindex_.end()) {
    VNode& v = vnodes_[it->second & ~kVirtualBit];
    if (v.array == node.array && v.components == node.components) {
      v.dir = node.dir;
      ++v.lookups;
      return it->second;
    }
  }
  node.lookups = 1;
  node.live = true;
  node.key = key;
  std::uint64_t slot;
  if (!free_vnodes_.empty()) {
    slot = free_vnodes_.back();
    free_vnodes_.pop_back();
    vnodes_[slot] = std::move(node);
  } else {
    slot = vnodes_.size();
    vnodes_.push_back(std::move(node));
  }
  Ino vino = kVirtualBit | slot;
  vindex_[key] = vino;
  return vino;
}

void Filesystem::forget(Ino ino, std::uint64_t nlookup) {
  if (!(ino & kVirtualBit)) return;
  std::lock_guard lock(vmu_);
  std::uint64_t i = ino & ~kVirtualBit;
  if (i == 0 || i >= vnodes_.size() || !vnodes_[i].live) return;
  VNode& v = vnodes_[i];
  v.lookups -= std::min(v.lookups, nlookup);
  if (v.lookups > 0) return;
  // The kernel holds no reference any more: the slot can serve another path.
  auto it = vindex_.find(v.key);
  if (it != vindex_.end() && it->second == ino) vindex_.erase(it);
  v = VNode{};
  free_vnodes_.push_back(i);
}

void Filesystem::touch_locked(const std::shared_ptr<ArrayFile>& array) {
  auto it = std::find(recent_.begin(), recent_.end(), array);
  if (it != recent_.end()) recent_.erase(it);
  recent_.insert(recent_.begin(), array);
  if (recent_.size() > kRecentArrays) recent_.pop_back();
}

int Filesystem::array_for(Ino ino, std::shared_ptr<ArrayFile>* out, std::string* message) {
  std::lock_guard lock(mu_);
  if (auto it = arrays_.find(ino); it != arrays_.end())
    if (auto a = it->second.lock()) {
      touch_locked(a);
      *out = a;
      return 0;
    }
  auto schema = stored_schema(ino);
  if (!schema || schema->shape.empty()) {
    *message = "not an array file";
    return ENOENT;
  }
  if (int r = ArrayFile::open(array_ctx_, ino, *schema, out, message)) return r;
  arrays_[ino] = *out;
  touch_locked(*out);
  return 0;
}

int Filesystem::check_access(const Caller& who, Ino ino, int mask, const std::string& name, std::string* message) {
  auto n = volume_->metadata().inode(ino);
  if (!n) {
    *message = fmt::format("'{}' is gone", name);
    return ENOENT;
  }
  if (may_access(who, Access{n->mode, n->uid, n->gid}, mask)) return 0;
  *message = mask & W_OK
                 ? fmt::format("'{}' is not writable by uid {} (mode {:04o}, owner {}:{}): it would be moved", name,
                               who.uid, n->mode & 07777, n->uid, n->gid)
                 : fmt::format("'{}' is not readable by uid {} (mode {:04o}, owner {}:{}): a view shows only what "
                               "reading the array itself would",
                               name, who.uid, n->mode & 07777, n->uid, n->gid);
  return EACCES;
}

int Filesystem::check_searchable(const Caller& who, Ino dir, std::string* message) {
  auto n = volume_->metadata().inode(dir);
  if (!n) {
    *message = "the directory is gone";
    return ENOENT;
  }
  if (may_access(who, Access{n->mode, n->uid, n->gid}, X_OK)) return 0;
  *message = fmt::format("the directory is not searchable by uid {} (mode {:04o}, owner {}:{}): its arrays cannot "
                         "be named in a condition",
                         who.uid, n->mode & 07777, n->uid, n->gid);
  return EACCES;
}

int Filesystem::vnode_stat(Ino vino, const Caller& who, struct stat* st, std::string* content, std::string* message,
                           QueryCall call) {
  VNode v;
  if (!vnode(vino, &v)) return ENOENT;
  // The node's owner: A (of A@), D (of D@), or root for /.mmfs. Read before
  // the content, so a view of an array removed meanwhile is ENOENT.
  Access owner{S_IFREG | 0444, 0, 0};
  if (v.table || v.array != 0) {
    auto n = volume_->metadata().inode(v.table ? v.home : v.array);
    if (!n) return ENOENT;
    owner = Access{n->mode, n->uid, n->gid};
  }
  if (int r = vnode_content(vino, v, who, st, content, message, call)) return r;
  st->st_mode = view_mode(owner.mode, S_ISDIR(st->st_mode));
  st->st_uid = owner.uid;
  st->st_gid = owner.gid;
  return 0;
}

int Filesystem::vnode_content(Ino vino, const VNode& v, const Caller& who, struct stat* st, std::string* content,
                              std::string* message, QueryCall call) {
  std::memset(st, 0, sizeof *st);
  st->st_ino = vino;
  st->st_nlink = 1;
  st->st_blksize = 1 << 20;
  auto now = to_timespec(now_ns());
  st->st_atim = st->st_mtim = st->st_ctim = now;
  auto as_dir = [&] {
    st->st_mode = S_IFDIR | 0555;
    st->st_nlink = 2;
    return 0;
  };
  auto as_file = [&](std::uint64_t size) {
    st->st_mode = S_IFREG | 0444;
    st->st_size = std::int64_t(size);
    return 0;
  };
  if (v.table) return table_stat(vino, v, who, st, content, message, nullptr, call);
  if (v.array == 0) {
    auto res = fs::resolve_control(v.components, volume_->geometry());
    if (auto* e = std::get_if<fs::PathError>(&res)) {
      *message = e->message;
      return e->error;
    }
    auto& node = std::get<fs::ControlNode>(res);
    switch (node.kind) {
      case fs::ControlKind::Dir: return as_dir();
      case fs::ControlKind::Stats: {
        nlohmann::json j = io_.stats();
        auto ms = volume_->store().stats();
        j["metadata_batches"] = ms.batches_applied;
        j["metadata_flushes"] = ms.flushes;
        if (transport_stats_) j["fuse"] = transport_stats_();
        if (!daemon_stats_.empty()) j["daemon"] = daemon_stats_;
        const fs::BufferPool::Stats b = fs::BufferPool::shared().stats();
        j["io_buffers"] = {{"limit_bytes", fs::BufferPool::shared().limit()},
                           {"idle_bytes", b.idle_bytes},
                           {"in_use_bytes", b.in_use_bytes},
                           {"takes", b.takes},
                           {"reused", b.reused},
                           {"mapped", b.mapped},
                           {"unmapped", b.unmapped}};
        if (auto* striped = volume_->striped()) {
          j["raid"] = striped->raid();
          j["devices"] = striped->stats();
        }
        *content = j.dump(2) + "\n";
        break;
      }
      case fs::ControlKind::Errors: *content = errors_.text_for(who.uid); break;
      case fs::ControlKind::Audit: *content = audit_.text_for(who.uid); break;
      default: *content = node.content; break;
    }
    return as_file(content->size());
  }
  std::shared_ptr<ArrayFile> array;
  if (int r = array_for(v.array, &array, message)) return r;
  ArraySchema schema = array->schema();
  auto res = fs::resolve_view(v.components, schema.shape, schema.dtype.itemsize, false);
  if (auto* e = std::get_if<fs::PathError>(&res)) {
    *message = e->message;
    return e->error;
  }
  auto& node = std::get<fs::ViewNode>(res);
  switch (node.kind) {
    case fs::ViewKind::Dir: return as_dir();
    case fs::ViewKind::Data: return as_file(node.data->bytes(schema.dtype.itemsize));
    case fs::ViewKind::Info: *content = array->info().dump(2) + "\n"; break;
    case fs::ViewKind::Lbn:
      if (int r = array->lbn_text(node.coords, content, message)) return r;
      break;
    case fs::ViewKind::Plan: {
      if (node.query) {
        std::uint64_t size = 0;
        if (int r = query_content(vino, v.home, array, *node.query, true, who, call, content, &size, message))
          return r;
        return as_file(size);
      }
      nlohmann::json j;
      if (int r = array->plan(*node.data, &j, message)) return r;
      *content = j.dump() + "\n";
      break;
    }
    case fs::ViewKind::Query: {
      std::uint64_t size = 0;
      if (int r = query_content(vino, v.home, array, *node.query, false, who, call, content, &size, message))
        return r;
      return as_file(size);
    }
    case fs::ViewKind::Rows: return ENOENT;  // a directory's view only
  }
  return as_file(content->size());
}

int Filesystem::lookup_virtual(Ino parent, const std::string& name, const Caller& who, struct stat* st) {
  VNode v;
  if (!vnode(parent, &v)) return ENOENT;
  v.components.push_back(name);
  Ino vino = intern_vnode(parent, name, v);
  std::string content, msg;
  int r = vnode_stat(vino, who, st, &content, &msg, QueryCall::Lookup);
  if (r) {
    forget(vino, 1);  // the kernel gets no entry for it
    return record_at(r, parent, name, msg);
  }
  return 0;
}

int Filesystem::lookup(Ino parent, const std::string& name, const Caller& who, struct stat* st) {
  if (parent & kVirtualBit) return lookup_virtual(parent, name, who, st);
  if (int r = check_name_length(parent, name, true)) return r;
  fs::Metadata& md = volume_->metadata();
  if (parent == fs::kRootIno && name == ".mmfs") {
    Ino vino = intern_vnode(parent, name, VNode{0, {}, true, false, 0, {}});
    std::string content, msg;
    int r = vnode_stat(vino, who, st, &content, &msg);
    if (r) forget(vino, 1);
    return r;
  }
  if (parent == fs::kRootIno && name == kOrphanDir) return ENOENT;
  if (name.size() > 1 && name.back() == '@') {
    std::string base = name.substr(0, name.size() - 1);
    if (auto child = md.lookup(parent, base)) {
      auto schema = stored_schema(*child);
      auto child_inode = md.inode(*child);
      if (child_inode && S_ISDIR(child_inode->mode)) {  // D@: the directory's table views
        Ino vino = intern_vnode(parent, name, VNode{0, {}, true, false, 0, {}, *child, true});
        std::string content, msg;
        if (int r = vnode_stat(vino, who, st, &content, &msg)) {
          forget(vino, 1);
          return record_at(r, parent, name, msg);
        }
        return 0;
      }
      if (schema && !schema->shape.empty()) {
        Ino vino = intern_vnode(parent, name, VNode{*child, {}, true, false, 0, {}, parent, false});
        std::string content, msg;
        if (int r = vnode_stat(vino, who, st, &content, &msg)) {
          forget(vino, 1);
          return record_at(r, parent, name, msg);
        }
        return 0;
      }
    }
  }
  auto child = md.lookup(parent, name);
  if (!child) return ENOENT;
  auto n = md.inode(*child);
  if (!n) return ENOENT;
  remember(*child, parent, name);
  return fill_stat(*n, st);
}

int Filesystem::readdir(Ino ino, const Caller& who, std::vector<std::pair<std::string, struct stat>>* entries) {
  struct stat st;
  if (ino & kVirtualBit) {
    VNode v;
    if (!vnode(ino, &v)) return ENOENT;
    std::vector<std::string> listing;
    if (v.table) {
      std::string content, msg;
      struct stat tst;
      if (int r = table_stat(ino, v, who, &tst, &content, &msg, &listing)) return record(r, ino, msg);
    } else if (v.array == 0) {
      auto res = fs::resolve_control(v.components, volume_->geometry());
      if (auto* e = std::get_if<fs::PathError>(&res)) return record(e->error, ino, e->message);
      listing = std::get<fs::ControlNode>(res).listing;
    } else {
      std::shared_ptr<ArrayFile> array;
      std::string msg;
      if (int r = array_for(v.array, &array, &msg)) return record(r, ino, msg);
      ArraySchema schema = array->schema();
      auto res = fs::resolve_view(v.components, schema.shape, schema.dtype.itemsize, true);
      if (auto* e = std::get_if<fs::PathError>(&res)) return record(e->error, ino, e->message);
      listing = std::get<fs::ViewNode>(res).listing;
    }
    std::memset(&st, 0, sizeof st);
    st.st_mode = S_IFDIR;
    st.st_ino = ino;
    entries->push_back({".", st});
    entries->push_back({"..", st});
    for (const auto& name : listing) {
      std::memset(&st, 0, sizeof st);
      // Only a hint for readdir callers: the node gets its number when looked up
      // (interning every listed name would keep all of them alive).
      st.st_ino = kVirtualBit | (std::hash<std::string>{}(name) ^ ino) >> 2;
      // Names ending in '@' and every name below a directory level are dirs
      // or files; the type is only a hint to readdir callers.
      st.st_mode = S_IFREG;
      entries->push_back({name, st});
    }
    return 0;
  }
  fs::Metadata& md = volume_->metadata();
  auto dir = md.inode(ino);
  if (!dir) return ENOENT;
  if (!S_ISDIR(dir->mode)) return ENOTDIR;
  std::memset(&st, 0, sizeof st);
  st.st_mode = S_IFDIR;
  st.st_ino = ino;
  entries->push_back({".", st});
  st.st_ino = dir->parent;
  entries->push_back({"..", st});
  md.readdir(ino, [&](std::string_view name, Ino child) {
    if (ino == fs::kRootIno && name == kOrphanDir) return true;
    std::memset(&st, 0, sizeof st);
    st.st_ino = child;
    if (auto n = md.inode(child)) st.st_mode = n->mode & S_IFMT;
    entries->push_back({std::string(name), st});
    return true;
  });
  return 0;
}

namespace {

// An xattr failure's explanation, naming the attribute once (the array's own
// messages about a schema attribute already start with its name).
std::string attr_message(const std::string& name, const std::string& msg) {
  if (msg.starts_with(name + ":")) return msg;
  return fmt::format("{}: {}", name, msg);
}

}  // namespace

int Filesystem::statfs(struct statvfs* st) {
  std::memset(st, 0, sizeof *st);
  const fs::Allocator& a = volume_->allocator();
  std::uint32_t ss = volume_->geometry().sector_size();
  st->f_bsize = std::max<std::uint32_t>(ss, 4096);
  st->f_frsize = ss;
  st->f_blocks = a.total_sectors();
  st->f_bfree = st->f_bavail = a.free_sectors();
  st->f_files = 1ull << 32;
  st->f_ffree = st->f_favail = (1ull << 32) - 1;
  st->f_namemax = 255;
  return 0;
}

std::shared_ptr<fs::PlainFile> Filesystem::plain_for_locked(Ino ino, const Inode& inode) {
  OpenFile& of = open_[ino];
  if (!of.plain) {
    // The size as of now, under the registry lock: `inode` may predate the
    // commit of a release that ran in between.
    auto fresh = volume_->metadata().inode(ino);
    of.plain = std::make_shared<fs::PlainFile>(volume_->metadata(), volume_->allocator(), io_, volume_->geometry(),
                                               ino, fresh ? fresh->size : inode.size);
  }
  return of.plain;
}

void Filesystem::forget_array_locked(Ino ino) {
  arrays_.erase(ino);
  recent_.erase(std::remove_if(recent_.begin(), recent_.end(), [&](const auto& a) { return a->ino() == ino; }),
                recent_.end());
}

int Filesystem::commit_open_file(Ino ino, OpenFile& of) {
  if (!of.plain || (!of.plain->dirty() && !of.times_dirty)) return 0;
  (void)ino;
  bool times = of.times_dirty;
  std::int64_t mtime = of.mtime_ns;
  int r = of.plain->commit([&](Inode& n) {
    if (times) n.mtime_ns = n.ctime_ns = mtime;
  });
  if (r == ENOENT) r = 0;  // removed meanwhile: nothing left to commit
  if (r == 0) of.times_dirty = false;
  return r;
}

int Filesystem::open(Ino ino, int flags, const Caller& who, std::unique_ptr<Handle>* out) {
  auto h = std::make_unique<Handle>();
  h->ino = ino;
  bool wants_write = (flags & O_ACCMODE) != O_RDONLY;
  if (ino & kVirtualBit) {
    if (wants_write) return record(EROFS, ino, "views and /.mmfs are read-only");
    VNode v;
    if (!vnode(ino, &v)) return ENOENT;
    struct stat st;
    std::string msg;
    std::string text;
    int stat_r = vnode_stat(ino, who, &st, &text, &msg, QueryCall::Open);
    if (stat_r) return record(stat_r, ino, msg);
    if (!text.empty()) h->content = std::make_shared<const std::string>(std::move(text));
    if (S_ISDIR(st.st_mode)) return EISDIR;
    if (v.array != 0) {
      if (int r = array_for(v.array, &h->array, &msg)) return record(r, ino, msg);
      ArraySchema schema = h->array->schema();
      auto res = fs::resolve_view(v.components, schema.shape, schema.dtype.itemsize, false);
      if (auto* node = std::get_if<fs::ViewNode>(&res); node && node->kind == fs::ViewKind::Data)
        h->view = node->data;
    }
    h->is_virtual_text = !h->view;
    *out = std::move(h);
    return 0;
  }
  if (wants_write && read_only_) return EROFS;
  auto n = volume_->metadata().inode(ino);
  if (!n) return ENOENT;
  if (S_ISDIR(n->mode)) return EISDIR;
  if (!S_ISREG(n->mode))  // the kernel opens FIFOs itself and device nodes not at all (nodev)
    return record(ENXIO, ino, "only regular files are opened here: FIFOs, sockets and device nodes are stored, "
                              "not served (the mount is nodev)");
  auto schema = stored_schema(ino);
  std::shared_ptr<ArrayFile> array;
  if (schema && !schema->shape.empty()) {
    std::string msg;
    if (int r = array_for(ino, &array, &msg)) return record(r, ino, msg);
  }
  std::lock_guard lock(mu_);
  // Again under the registry lock: an unlink decides between removing the
  // inode and keeping it as an orphan under this lock, by the open count. An
  // unlink that ran since the check above has removed it, and an open
  // registered now would write to a file that no longer exists (its
  // checksums would outlive the inode).
  n = volume_->metadata().inode(ino);
  if (!n) return ENOENT;
  OpenFile& of = open_[ino];
  if (array) of.array = array;
  else plain_for_locked(ino, *n);
  ++of.opens;
  h->writable = wants_write;
  h->is_array = array != nullptr;
  *out = std::move(h);
  return 0;
}

bool Filesystem::open_data(Ino ino, std::shared_ptr<fs::PlainFile>* plain, std::shared_ptr<ArrayFile>* array,
                           bool modifying) {
  // The registry entry, not the handle, says what the file is now: setting
  // user.mmfs.shape turns an open plain file into an array.
  std::lock_guard lock(mu_);
  auto it = open_.find(ino);
  if (it == open_.end()) return false;
  *plain = it->second.plain;
  *array = it->second.array;
  if (modifying) {
    it->second.mtime_ns = now_ns();
    it->second.times_dirty = *plain != nullptr;
  }
  return true;
}

int Filesystem::read(Handle& h, std::uint64_t offset, std::size_t size, std::byte* out, std::size_t* got_out) {
  std::size_t got = 0;
  std::string msg;
  int r = 0;
  if (h.is_virtual_text) {
    if (h.content && offset < h.content->size()) {
      got = std::min<std::size_t>(size, h.content->size() - offset);
      std::memcpy(out, h.content->data() + offset, got);
    }
  } else if (h.view) {
    r = h.array->read_view(*h.view, offset, size, out, &got, &msg);
  } else {
    std::shared_ptr<fs::PlainFile> plain;
    std::shared_ptr<ArrayFile> array;
    if (!open_data(h.ino, &plain, &array, false)) return EBADF;
    if (array) r = array->read(offset, size, out, &got, &msg);
    else r = plain->read(offset, size, out, &got, &msg);
  }
  if (r) return record(r, h.ino, msg);
  *got_out = got;
  return 0;
}

int Filesystem::read_span(Handle& h, std::uint64_t offset, std::size_t size,
                          std::shared_ptr<const fs::AlignedBuffer>* keep, const std::byte** data, std::size_t* got) {
  *data = nullptr;
  if (h.is_virtual_text) return 0;
  std::shared_ptr<ArrayFile> array = h.array;
  std::optional<fs::DataView> view = h.view;
  if (!view) {
    std::lock_guard lock(mu_);
    auto it = open_.find(h.ino);
    if (it == open_.end() || !it->second.array) return 0;
    array = it->second.array;
  }
  std::string msg;
  int r = view ? array->view_span(*view, offset, size, keep, data, got, &msg)
               : array->view_span(array->whole(), offset, size, keep, data, got, &msg);
  return r ? record(r, h.ino, msg) : 0;
}

int Filesystem::write(Handle& h, std::uint64_t offset, const std::byte* data, std::size_t size) {
  if (h.ino & kVirtualBit) return record(EROFS, h.ino, "views are read-only");
  std::shared_ptr<fs::PlainFile> plain;
  std::shared_ptr<ArrayFile> array;
  if (!open_data(h.ino, &plain, &array, true)) return EBADF;
  std::string msg;
  int r = array ? array->write_behind(offset, data, size, &msg) : plain->write(offset, data, size);
  if (r) return record(r, h.ino, msg.empty() ? fmt::format("write of {} bytes at {} failed", size, offset) : msg);
  return 0;
}

int Filesystem::fallocate(Handle& h, int mode, std::uint64_t offset, std::uint64_t length) {
  std::shared_ptr<fs::PlainFile> plain;
  {
    std::lock_guard lock(mu_);
    auto it = open_.find(h.ino);
    if (it == open_.end()) return EBADF;
    plain = it->second.plain;
    if (it->second.array) return record(EOPNOTSUPP, h.ino, "fallocate: an array file's space is fixed by its shape");
  }
  if (mode & ~FALLOC_FL_KEEP_SIZE)
    return record(EOPNOTSUPP, h.ino,
                  fmt::format("fallocate: mode {:#x} is not supported (0 and FALLOC_FL_KEEP_SIZE are)", mode));
  std::uint64_t before = plain->size();
  if (int r = plain->fallocate(offset, length, mode & FALLOC_FL_KEEP_SIZE))
    return record(r, h.ino, fmt::format("fallocate of {} bytes at {} failed", length, offset));
  if (plain->size() != before) {
    // A change of size marks ctime and mtime (as ftruncate does; POSIX).
    std::lock_guard lock(mu_);
    if (auto it = open_.find(h.ino); it != open_.end()) {
      it->second.mtime_ns = now_ns();
      it->second.times_dirty = true;
    }
  }
  return 0;
}

int Filesystem::fsync(Handle* h, Ino ino) {
  (void)h;
  if (ino & kVirtualBit) return 0;
  std::shared_ptr<ArrayFile> array;
  {
    std::lock_guard lock(mu_);
    auto it = open_.find(ino);
    if (it != open_.end()) {
      if (int r = commit_open_file(ino, it->second)) return r;
      array = it->second.array;
    }
  }
  if (array) {
    std::string msg;
    if (int r = array->settle(&msg)) return record(r, ino, msg);
    return 0;
  }
  return volume_->metadata().sync();
}

int Filesystem::flush(Handle& h) {
  if (h.ino & kVirtualBit) return 0;
  std::shared_ptr<ArrayFile> array;
  {
    std::lock_guard lock(mu_);
    auto it = open_.find(h.ino);
    if (it != open_.end()) array = it->second.array;
  }
  if (!array) return 0;
  std::string msg;
  if (int r = array->take_write_error(&msg)) return record(r, h.ino, msg);
  return 0;
}

int Filesystem::fsyncdir() { return volume_->metadata().sync(); }

int Filesystem::release(std::unique_ptr<Handle> h) {
  if (h->ino & kVirtualBit) {
    std::lock_guard lock(qmu_);
    open_query_sizes_.erase(h->ino);
    return 0;
  }
  std::shared_ptr<ArrayFile> array;
  int r = 0;
  {
    std::lock_guard lock(mu_);
    auto it = open_.find(h->ino);
    if (it == open_.end()) return 0;
    OpenFile& of = it->second;
    if (--of.opens > 0) return 0;
    r = commit_open_file(h->ino, of);
    array = of.array;
    bool orphaned = of.orphaned;
    open_.erase(it);
    if (orphaned) {
      remove_locked(h->ino, [&] { return volume_->metadata().unlink(orphans_, std::to_string(h->ino)); });
      return r;
    }
  }
  if (array) {
    // The last close: an mloc array written since its last seal is encoded now.
    std::string msg;
    if (int e = array->settle(&msg)) r = record(e, h->ino, msg);
  }
  return r;
}

int Filesystem::setattr(Ino ino, const struct stat& attr, int to_set, const Caller& who, Handle* fh,
                        struct stat* out) {
  (void)who;
  (void)fh;
  if (ino & kVirtualBit) return record(EROFS, ino, "views are read-only");
  if (read_only_) return EROFS;
  fs::Metadata& md = volume_->metadata();
  if (to_set & kSetSize) {
    auto n = md.inode(ino);
    if (!n) return ENOENT;
    if (S_ISDIR(n->mode)) return EISDIR;
    std::uint64_t size = std::uint64_t(attr.st_size);
    auto schema = stored_schema(ino);
    if (schema && !schema->shape.empty()) {
      std::shared_ptr<ArrayFile> array;
      std::string msg;
      if (int r = array_for(ino, &array, &msg)) return record(r, ino, msg);
      if (size == 0) {
        if (int r = array->zero(&msg)) return record(r, ino, msg);
      } else if (size != array->size()) {
        return record(EINVAL, ino,
                      fmt::format("truncate to {} bytes: an array's size is fixed by its shape ({} bytes); "
                                  "truncate to 0 zeroes it",
                                  size, array->size()));
      }
    } else {
      std::lock_guard lock(mu_);
      bool was_open = open_.count(ino) && open_[ino].opens > 0;
      auto plain = plain_for_locked(ino, *n);
      int r = plain->truncate(size);
      if (r == 0) {
        open_[ino].mtime_ns = now_ns();
        open_[ino].times_dirty = true;
        r = commit_open_file(ino, open_[ino]);
      }
      if (!was_open) open_.erase(ino);
      if (r) return r;
    }
  }
  std::int64_t now = now_ns();
  auto edit = [&](Inode& n) {
    if (to_set & kSetMode) n.mode = (n.mode & S_IFMT) | (attr.st_mode & 07777);
    if (to_set & kSetUid) n.uid = attr.st_uid;
    if (to_set & kSetGid) n.gid = attr.st_gid;
    if (to_set & kSetAtimeNow) n.atime_ns = now;
    else if (to_set & kSetAtime) n.atime_ns = attr.st_atim.tv_sec * 1000000000ll + attr.st_atim.tv_nsec;
    if (to_set & kSetMtimeNow) n.mtime_ns = now;
    else if (to_set & kSetMtime) n.mtime_ns = attr.st_mtim.tv_sec * 1000000000ll + attr.st_mtim.tv_nsec;
    if (to_set & kSetCtime) n.ctime_ns = attr.st_ctim.tv_sec * 1000000000ll + attr.st_ctim.tv_nsec;
    else n.ctime_ns = now;
  };
  {
    // Under the registry lock: an open plain file commits its size and times
    // through the same edit, so neither can undo the other.
    std::lock_guard lock(mu_);
    auto it = open_.find(ino);
    int r;
    if (it != open_.end() && it->second.plain) {
      if (to_set & (kSetMtime | kSetMtimeNow)) it->second.times_dirty = false;
      r = it->second.plain->commit(edit);
    } else {
      r = md.apply_with_inode(ino, edit, fs::WriteBatch{}, {});
    }
    if (r) return r;
  }
  auto n = md.inode(ino);
  if (!n) return ENOENT;
  return fill_stat(*n, out);
}

void Filesystem::audit_change(const Caller& who, Ino ino, const std::string& what) {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &utc);
  audit_.append(fmt::format("{} uid {} gid {} {}: {}", stamp, who.uid, who.gid, path_of(ino), what), who.uid);
}

int Filesystem::setxattr(Ino ino, const std::string& name, const std::string& value, int flags,
                         const Caller& who) {
  if (!is_mmfs_attr(name)) return set_xattr_unaudited(ino, name, value, flags, who);
  const int r = set_xattr_unaudited(ino, name, value, flags, who);
  if (r == 0) {
    // The value as typed, cut short: an index spec or a cell list fits, a pasted blob does not.
    std::string shown = value.substr(0, 80);
    for (char& c : shown)
      if (!std::isprint(static_cast<unsigned char>(c))) c = '?';
    audit_change(who, ino, fmt::format("set {}={}{}", name, shown, value.size() > 80 ? "..." : ""));
  }
  return r;
}

int Filesystem::set_xattr_unaudited(Ino ino, const std::string& name, const std::string& value, int flags,
                                    const Caller& who) {
  if (ino & kVirtualBit) return record(EROFS, ino, "views are read-only");
  if (read_only_) return EROFS;
  fs::Metadata& md = volume_->metadata();
  auto n = md.inode(ino);
  if (!n) return ENOENT;
  if (!is_mmfs_attr(name)) {
    if (name.rfind("user.", 0) != 0 && name.rfind("trusted.", 0) != 0 && name.rfind("security.", 0) != 0)
      return EOPNOTSUPP;
    bool exists = md.xattr(ino, name).has_value();
    if ((flags & XATTR_CREATE) && exists) return EEXIST;
    if ((flags & XATTR_REPLACE) && !exists) return ENODATA;
    return md.set_xattr(ino, name, value);
  }
  std::string attr = name.substr(fs::kSchemaPrefix.size());
  if (S_ISDIR(n->mode)) return table_setxattr(ino, attr, value, who);
  if (!S_ISREG(n->mode))
    return record(EINVAL, ino, fmt::format("{}: only regular files become arrays", name));
  const layouts::DefaultLayout rule = layouts::default_layout(volume_->geometry());
  ArraySchema fresh;
  fresh.layout = rule.layout;  // the volume's default, stored with the schema
  ArraySchema current = stored_schema(ino).value_or(fresh);
  ArraySchema next = current;
  if (auto res = fs::set_schema_attr(next, attr, value)) return record(res.error, ino, res.message);
  return [&]() -> int {
    std::string msg;
    if (!current.shape.empty()) {
      std::shared_ptr<ArrayFile> array;
      if (int r = array_for(ino, &array, &msg)) return record(r, ino, msg);
      if (int r = array->change_schema(next, &msg)) return record(r, ino, attr_message(name, msg));
      return 0;
    }
    if (next.shape.empty()) {  // an attribute set ahead of the shape
      if (int r = md.set_xattr(ino, std::string(ArrayFile::kSchemaXattr), fs::encode_schema(next))) return r;
      return 0;
    }
    // Setting the shape makes the file an array (and gives it views, A@).
    if (int r = check_may_become_array(ino, name)) return r;
    std::lock_guard lock(mu_);
    n = md.inode(ino);  // again, under the registry lock (a release may have just committed)
    if (!n) return ENOENT;
    auto it = open_.find(ino);
    std::shared_ptr<fs::PlainFile> plain;
    if (it != open_.end() && it->second.plain) plain = it->second.plain;
    else plain = std::make_shared<fs::PlainFile>(md, volume_->allocator(), io_, volume_->geometry(), ino, n->size);
    std::uint64_t need = fs::array_bytes(next);
    if (plain->size() != 0 && plain->size() != need)
      return record(EINVAL, ino,
                    fmt::format("{}: the file holds {} bytes but shape {} of {} needs {} (or an empty file)", name,
                                plain->size(), fs::schema_attr_text(next, "shape"), next.dtype.name, need));
    if (next.cell.empty() && rule.cell_bytes != 0 && next.layout == rule.layout) {
      // The default rule's cell is stored as user.mmfs.cell: a later rule never moves this array.
      const std::vector<std::uint32_t> order =
          next.order.empty() ? layouts::CellGrid::default_order(next.shape.size()) : next.order;
      next.cell = layouts::default_cell(rule, volume_->geometry(), next.shape, next.dtype.itemsize, order);
    }
    if (it != open_.end() && it->second.plain) commit_open_file(ino, it->second);
    auto created = md.inode(ino);
    std::shared_ptr<ArrayFile> array;
    if (int r = ArrayFile::create(array_ctx_, *created, next, plain->size() ? plain.get() : nullptr, &array, &msg))
      return record(r, ino, attr_message(name, msg));
    arrays_[ino] = array;
    if (it != open_.end()) {
      it->second.plain.reset();
      it->second.times_dirty = false;
      it->second.array = array;
    }
    return 0;
  }();
}

int Filesystem::getxattr(Ino ino, const std::string& name, std::string* value) {
  if (ino & kVirtualBit) return ENODATA;
  if (!is_mmfs_attr(name)) {
    auto v = volume_->metadata().xattr(ino, name);
    if (!v) return ENODATA;
    *value = *v;
    return 0;
  }
  std::string attr = name.substr(fs::kSchemaPrefix.size());
  if (!fs::is_schema_attr(attr)) return ENODATA;
  if (auto n = volume_->metadata().inode(ino); n && S_ISDIR(n->mode)) return table_getxattr(ino, attr, value);
  auto schema = stored_schema(ino);
  if (!schema) return ENODATA;
  if (schema->shape.empty()) {
    *value = fs::schema_attr_text(*schema, attr);
    return value->empty() ? ENODATA : 0;
  }
  std::shared_ptr<ArrayFile> array;
  std::string msg;
  if (int r = array_for(ino, &array, &msg)) return record(r, ino, msg);
  *value = array->attr_text(attr);
  return 0;
}

int Filesystem::listxattr(Ino ino, std::vector<std::string>* names) {
  if (ino & kVirtualBit) return 0;
  for (auto& n : volume_->metadata().xattr_names(ino))
    if (n != ArrayFile::kSchemaXattr && n != fs::kTableXattr) names->push_back(n);
  if (table_record(ino))
    for (const char* a : {"layout", "shape"}) names->push_back(std::string(fs::kSchemaPrefix) + a);
  if (auto schema = stored_schema(ino)) {
    for (const auto& a : fs::schema_attr_names()) {
      if (schema->shape.empty() && fs::schema_attr_text(*schema, a).empty()) continue;
      names->push_back(std::string(fs::kSchemaPrefix) + a);
    }
  }
  return 0;
}

int Filesystem::removexattr(Ino ino, const std::string& name, const Caller& who) {
  if (!is_mmfs_attr(name) || (ino & kVirtualBit)) return remove_xattr_unaudited(ino, name, who);
  const int r = remove_xattr_unaudited(ino, name, who);
  if (r == 0) audit_change(who, ino, "removed " + name);
  return r;
}

int Filesystem::remove_xattr_unaudited(Ino ino, const std::string& name, const Caller& who) {
  if (ino & kVirtualBit) return record(EROFS, ino, "views are read-only");
  if (read_only_) return EROFS;
  if (!is_mmfs_attr(name)) return volume_->metadata().remove_xattr(ino, name);
  std::string attr = name.substr(fs::kSchemaPrefix.size());
  if (auto n = volume_->metadata().inode(ino); n && S_ISDIR(n->mode)) {
    // A table leaves its capsules for the volume's default layout.
    if (attr != "layout" || !table_record(ino)) return ENODATA;
    return table_setxattr(ino, attr, layouts::default_layout(volume_->geometry()).layout, who);
  }
  auto current = stored_schema(ino);
  if (!current) return ENODATA;
  ArraySchema next = *current;
  if (auto res = fs::reset_schema_attr(next, attr)) return record(res.error, ino, res.message);
  if (attr == "layout") next.layout = layouts::default_layout(volume_->geometry()).layout;
  if (current->shape.empty())
    return volume_->metadata().set_xattr(ino, std::string(ArrayFile::kSchemaXattr), fs::encode_schema(next));
  std::shared_ptr<ArrayFile> array;
  std::string msg;
  if (int r = array_for(ino, &array, &msg)) return record(r, ino, msg);
  if (int r = array->change_schema(next, &msg)) return record(r, ino, attr_message(name, msg));
  return 0;
}

}  // namespace mmfs::daemon
