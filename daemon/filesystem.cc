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

#include "daemon/filesystem_detail.h"
#include "daemon/heap_trim.h"
#include "fs/util/buffer_pool.h"
#include "layouts/default_layout.h"

namespace mmfs::daemon {

using fs::ArrayFile;
using fs::ArraySchema;
using fs::Inode;
using namespace detail;

namespace {

constexpr auto kFlushInterval = std::chrono::seconds(5);
// Free heap kept for reuse at each flusher tick (daemon/heap_trim.h): a
// streaming reader's prefetched chunks and their device buffers.
constexpr std::size_t kFreeHeapReserve = 256u << 20;

std::string geometry_name(const fs::Volume& v) {
  auto j = nlohmann::json::parse(v.superblock().geometry_json, nullptr, false);
  if (j.is_object()) {
    if (j.contains("name") && j["name"].is_string()) return j["name"];
    if (j.contains("profile") && j["profile"].is_string()) return j["profile"];
  }
  return "custom";
}

}  // namespace


Filesystem::Filesystem(std::unique_ptr<fs::Volume> volume, bool read_only)
    : volume_(std::move(volume)), read_only_(read_only), io_(volume_->device(), volume_->geometry()),
      member_sets_(volume_->allocator(), volume_->device(), volume_->geometry()),
      array_ctx_{volume_->metadata(), volume_->allocator(), io_, volume_->geometry(), geometry_name(*volume_)} {
  array_ctx_.member_sets = &member_sets_;
  array_ctx_.read_only = read_only_;
  array_ctx_.on_healed = [this](Ino ino, const std::string& message) {
    ++healed_cells_;
    const auto inode = volume_->metadata().inode(ino);
    errors_.record(EIO, path_of(ino), "self-healed: " + message,
                   inode ? std::optional<std::uint32_t>(inode->uid) : std::nullopt);
  };
  array_ctx_.on_index_healed = [this](Ino ino, const std::string& message) {
    ++healed_indexes_;
    const auto inode = volume_->metadata().inode(ino);
    errors_.record(EIO, path_of(ino), "self-healed: " + message,
                   inode ? std::optional<std::uint32_t>(inode->uid) : std::nullopt);
  };
  array_ctx_.on_served_around = [this](Ino ino, const std::string& message) {
    ++served_around_;
    const auto inode = volume_->metadata().inode(ino);
    errors_.record(EIO, path_of(ino), "served from another copy: " + message,
                   inode ? std::optional<std::uint32_t>(inode->uid) : std::nullopt);
  };
  if (fs::StripedDevice* striped = volume_->striped(); striped && striped->raid() == 0 && !read_only_ &&
                                                       (volume_->superblock().meta_sets ||
                                                        !striped->failed_devices().empty())) {
    // A RAID 0 member is one device. Lost: absent (-o degraded), or lost
    // while the volume runs (StripedDevice::lost; only a volume with its
    // metadata on member sets goes on then), not one recorded failed that
    // came back (its catch-up and writes reach it).
    std::vector<bool> absent(striped->devices());
    for (std::uint32_t m = 0; m < striped->devices(); ++m)
      absent[m] = dynamic_cast<fs::AbsentDevice*>(&striped->device(m)) != nullptr;
    if (std::find(absent.begin(), absent.end(), true) != absent.end() || volume_->superblock().meta_sets)
      array_ctx_.member_lost = [absent, striped](std::uint32_t m) {
        return m < absent.size() && (absent[m] || striped->lost(m));
      };
    array_ctx_.on_promoted = [this](Ino ino, const std::string& message) {
      ++promoted_copies_;
      const auto inode = volume_->metadata().inode(ino);
      errors_.record(ENODEV, path_of(ino), "degraded: " + message,
                     inode ? std::optional<std::uint32_t>(inode->uid) : std::nullopt);
    };
  }
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
    loaded = arrays_.all();
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
    open_.for_each([&](Ino ino, OpenFile& of) {
      if (of.plain && (of.plain->dirty() || of.times_dirty))
        if (int r = commit_open_file(ino, of); r && !first) first = r;
      if (of.array) arrays.push_back({ino, of.array});
    });
    for (auto& a : arrays_.all()) arrays.push_back({a->ino(), a});
  }
  // Each array once: an open array is in both lists, and a second periodic
  // flush right after the first would take it for idle (flush_periodic): its
  // writer's unfinished cells written back, its copies' catch-up started
  // in the middle of the ingest.
  std::sort(arrays.begin(), arrays.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  arrays.erase(std::unique(arrays.begin(), arrays.end(), [](const auto& x, const auto& y) { return x.first == y.first; }),
               arrays.end());
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

void Filesystem::remember(Ino ino, Ino parent, const std::string& name) { names_.remember(ino, parent, name); }

std::string Filesystem::path_of(Ino ino) const {
  if (ino == fs::kRootIno) return "/";
  if (ino & kVirtualBit) {
    VNode v;
    if (!vnodes_.get(ino, &v)) return "<view>";
    std::string p = v.table ? (v.home == fs::kRootIno ? std::string("/@") : path_of(v.home) + "@")
                    : v.array ? path_of(v.array) + "@"
                              : std::string("/.mmfs");
    for (const auto& c : v.components) p += "/" + c;
    return p;
  }
  if (auto p = names_.path_of(ino)) return *p;
  return fmt::format("<inode {}>", ino);
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
    OpenFile* file = open_.find(inode.ino);
    if (file && file->plain) {
      st->st_size = std::int64_t(file->plain->size());
      sectors = file->plain->allocated_bytes() / volume_->geometry().sector_size();
      if (file->times_dirty) st->st_mtim = st->st_ctim = to_timespec(file->mtime_ns);
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
    if (file && file->orphaned) st->st_nlink = 0;
  }
  if (S_ISLNK(inode.mode)) st->st_size = std::int64_t(inode.symlink.size());
  st->st_blocks = std::int64_t(sectors * volume_->geometry().sector_size() / 512);
  return 0;
}

int Filesystem::getattr(Ino ino, const Caller& who, struct stat* st) {
  if (ino & kVirtualBit) {
    std::string content, msg;
    int r = vnode_stat(ino, who, st, &content, &msg);
    if (r == ESTALE) return r;  // a node of a name that is gone: the kernel looks the path up again
    return r ? record(r, ino, msg) : 0;
  }
  auto n = volume_->metadata().inode(ino);
  if (!n) return ENOENT;
  return fill_stat(*n, st);
}

void Filesystem::forget(Ino ino, std::uint64_t nlookup) { vnodes_.forget(ino, nlookup); }

int Filesystem::array_for(Ino ino, std::shared_ptr<ArrayFile>* out, std::string* message) {
  std::lock_guard lock(mu_);
  const std::uint64_t failures = member_failures_.load();
  if (auto a = arrays_.find(ino, failures)) {
    *out = std::move(a);
    return 0;
  }
  auto schema = stored_schema(ino);
  if (!schema || schema->shape.empty()) {
    *message = "not an array file";
    return ENOENT;
  }
  if (int r = ArrayFile::open(array_ctx_, ino, *schema, out, message)) return r;
  arrays_.add(ino, *out, failures);
  return 0;
}

int Filesystem::lookup(Ino parent, const std::string& name, const Caller& who, struct stat* st) {
  if (parent & kVirtualBit) return lookup_virtual(parent, name, who, st);
  if (int r = check_name_length(parent, name, true)) return r;
  fs::Metadata& md = volume_->metadata();
  if (parent == fs::kRootIno && name == ".mmfs") {
    Ino vino = vnodes_.intern(parent, name, VNode::control());
    std::string content, msg;
    int r = vnode_stat(vino, who, st, &content, &msg);
    if (r) vnodes_.forget(vino, 1);
    return r;
  }
  if (parent == fs::kRootIno && name == kOrphanDir) return ENOENT;
  if (name.size() > 1 && name.back() == '@') {
    std::string base = name.substr(0, name.size() - 1);
    if (auto child = md.lookup(parent, base)) {
      auto schema = stored_schema(*child);
      auto child_inode = md.inode(*child);
      if (child_inode && S_ISDIR(child_inode->mode)) {  // D@: the directory's table views
        Ino vino = vnodes_.intern(parent, name, VNode::of_directory(*child));
        std::string content, msg;
        if (int r = vnode_stat(vino, who, st, &content, &msg)) {
          vnodes_.forget(vino, 1);
          return record_at(r, parent, name, msg);
        }
        return 0;
      }
      if (schema && !schema->shape.empty()) {
        remember(*child, parent, base);  // so messages about the array (a view's, a repair's) name its path
        Ino vino = vnodes_.intern(parent, name, VNode::of_array(*child, parent, name));
        std::string content, msg;
        if (int r = vnode_stat(vino, who, st, &content, &msg, QueryCall::Lookup)) {
          vnodes_.forget(vino, 1);
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

struct stat DirEntries::view_entry(Ino dir, const std::string& name) {
  struct stat st;
  std::memset(&st, 0, sizeof st);
  st.st_ino = kVirtualBit | (std::hash<std::string>{}(name) ^ dir) >> 2;
  // Names ending in '@' and every name below a directory level are dirs or
  // files; the type is only a hint to readdir callers.
  st.st_mode = S_IFREG;
  return st;
}

std::pair<std::string, struct stat> DirEntries::entry(std::uint64_t i) const {
  if (i < entries.size()) return entries[i];
  std::string name = std::to_string(i - entries.size());
  struct stat st = view_entry(dir, name);
  return {std::move(name), st};
}

int Filesystem::readdir(Ino ino, const Caller& who, DirEntries* out) {
  out->dir = ino;
  out->entries.clear();
  out->numbered = 0;
  auto* entries = &out->entries;
  struct stat st;
  if (ino & kVirtualBit) {
    VNode v;
    if (int r = vnodes_.find(ino, &v)) return r;
    DirNames listing;
    if (v.table) {
      std::string content, msg;
      struct stat tst;
      if (int r = table_stat(ino, v, who, &tst, &content, &msg, &listing)) return record(r, ino, msg);
    } else if (v.array == 0) {
      auto res = fs::resolve_control(v.components, volume_->geometry());
      if (auto* e = std::get_if<fs::PathError>(&res)) return record(e->error, ino, e->message);
      listing.names = std::get<fs::ControlNode>(res).listing;
    } else {
      std::shared_ptr<ArrayFile> array;
      std::string msg;
      if (int r = array_for(v.array, &array, &msg)) return record(r, ino, msg);
      auto res = resolve_array_view(v.components, *array, true);
      if (auto* e = std::get_if<fs::PathError>(&res)) return record(e->error, ino, e->message);
      fs::ViewNode& node = std::get<fs::ViewNode>(res);
      listing = {std::move(node.listing), node.numbered};
    }
    std::memset(&st, 0, sizeof st);
    st.st_mode = S_IFDIR;
    st.st_ino = ino;
    entries->push_back({".", st});
    entries->push_back({"..", st});
    for (auto& name : listing.names) {
      st = DirEntries::view_entry(ino, name);
      entries->push_back({std::move(name), st});
    }
    out->numbered = listing.numbered;
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
      bool was_open = open_.find(ino) && open_.find(ino)->opens > 0;
      auto plain = plain_for_locked(ino, *n);
      int r = plain->truncate(size);
      if (r == 0) {
        open_.entry(ino).mtime_ns = now_ns();
        open_.entry(ino).times_dirty = true;
        r = commit_open_file(ino, open_.entry(ino));
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
    OpenFile* file = open_.find(ino);
    int r;
    if (file && file->plain) {
      if (to_set & (kSetMtime | kSetMtimeNow)) file->times_dirty = false;
      r = file->plain->commit(edit);
    } else {
      r = md.apply_with_inode(ino, edit, fs::WriteBatch{}, {});
    }
    if (r) return r;
  }
  auto n = md.inode(ino);
  if (!n) return ENOENT;
  return fill_stat(*n, out);
}

}  // namespace mmfs::daemon
