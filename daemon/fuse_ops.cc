#include "daemon/fuse_ops.h"

#include <fcntl.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_set>
#include <string>
#include <vector>

#include "daemon/invalidate_then_reply.h"
#include "daemon/read_path_settings.h"

namespace mmfs::daemon {

namespace {

// Real nodes: the kernel may cache names and attributes for a second (every
// change goes through this daemon, and the kernel drops a file's cached
// attributes itself after a setxattr, which can change an array's st_size).
// So may it the stable nodes of an array's views (directories, data views,
// Zarr chunks: Filesystem::cacheable_view), whose attributes follow from the
// array's inode and schema: every change of those invalidates them
// (invalidate_views). A Zarr scan opens thousands of chunk files through
// paths 7 names deep; uncached, each open looked every name up again.
// Other virtual nodes (info, plans, query results, /.mmfs, a directory's
// views) change with the data or the caller: never cached.
constexpr double kEntryTimeout = 1.0;
constexpr double kAttrTimeout = 1.0;

fuse_session* notify_session = nullptr;

// Bumped by every invalidation of view nodes. A LOOKUP or GETATTR of a view
// node during which it moved answers with timeouts of 0: the attributes it
// read may predate the change, and a node the kernel meets for the first
// time in that reply was not there to be invalidated (it exists in the
// kernel only once the caller has the reply).
std::atomic<std::uint64_t> view_epoch{0};

// How long a truncate to 0 of an array waits for the kernel to drop the
// array's cached pages before it replies anyway (daemon/invalidate_then_reply.h):
// a truncate that dropped 256 MiB of clean pages took 0.07 s in all; only
// pages dirtied through a shared mapping wait for the reply.
constexpr std::chrono::milliseconds kInvalidatePatience{1000};

// A schema xattr can change st_size (setting the shape, a new dtype): the
// kernel's cached attributes of the file must go. Invalidating attributes
// only (offset < 0) takes no lock the setxattr caller holds, so it is safe
// before the reply.
void invalidate_attributes(fuse_ino_t ino, const char* name) {
  if (notify_session && std::strncmp(name, "user.mmfs.", 10) == 0)
    fuse_lowlevel_notify_inval_inode(notify_session, ino, -1, 0);
}

Filesystem& fsys(fuse_req_t req) { return **static_cast<Filesystem**>(fuse_req_userdata(req)); }

// The attributes of every view node of `array` the kernel holds: its mode,
// owner or schema changed. Attributes only (offset < 0): no lock the caller
// of the change holds is taken, so it runs before the reply, and the next
// path walk or open through a node fetches its attributes again (the
// kernel's permission check refreshes invalidated ones first).
void invalidate_views(Filesystem& fs, fuse_ino_t array) {
  if (array & kVirtualBit) return;
  view_epoch.fetch_add(1);
  if (!notify_session) return;
  for (fs::Ino vino : fs.view_nodes_of(array)) fuse_lowlevel_notify_inval_inode(notify_session, vino, -1, 0);
}

// A table directory's user.mmfs.* changes every array in it: its
// user.mmfs.shape grows them, its layout moves them (and so their natural
// Zarr chunk), a capsule layout takes them in or out.
void invalidate_table_members(Filesystem& fs, fuse_ino_t dir, const char* name) {
  if (!notify_session || std::strncmp(name, "user.mmfs.", 10) != 0) return;
  for (fs::Ino member : fs.table_member_inos(dir)) {
    invalidate_attributes(member, name);
    invalidate_views(fs, member);
  }
}

// After an unlink or rename of `name` in `parent`, before the reply: the
// views the kernel holds as `name@` there name nothing any more (a node
// reached through the name answers ESTALE) and their attributes are
// invalidated, so the next use asks: the permission check of a walk
// through `name@`, or the stat of it, gets ESTALE, and the kernel walks the
// path once more with every name looked up afresh (LOOKUP_REVAL). The name
// `name@` itself is not dropped with fuse_lowlevel_notify_inval_entry: that
// waits, uninterruptibly, for the directory's lock, which a request the
// daemon has not answered may hold; a daemon killed at that moment could
// then never exit, and its mount would hang (the crash campaign met it).
void retire_views(Filesystem& fs, fuse_ino_t parent, const char* name) {
  if (auto array = fs.retire_views(parent, name)) invalidate_views(fs, *array);
}

Caller caller(fuse_req_t req) {
  const fuse_ctx* c = fuse_req_ctx(req);
  // Supplementary groups are read from /proc only when a check needs them.
  return Caller(c->uid, c->gid, [req] {
    std::vector<gid_t> groups(32);
    int n = fuse_req_getgroups(req, int(groups.size()), groups.data());
    if (n > int(groups.size())) {
      groups.resize(std::size_t(n));
      n = fuse_req_getgroups(req, int(groups.size()), groups.data());
    }
    return std::vector<std::uint32_t>(groups.begin(), groups.begin() + std::max(0, std::min(n, int(groups.size()))));
  });
}

// `epoch`: view_epoch before the node's attributes were read.
bool cacheable(fuse_req_t req, const struct stat& st, std::uint64_t epoch) {
  if (!(st.st_ino & kVirtualBit)) return true;
  return fsys(req).cacheable_view(st.st_ino) && view_epoch.load() == epoch;
}

void reply_entry(fuse_req_t req, const struct stat& st, std::uint64_t epoch = view_epoch.load()) {
  fuse_entry_param e;
  std::memset(&e, 0, sizeof e);
  e.ino = st.st_ino;
  e.attr = st;
  const bool cache = cacheable(req, st, epoch);
  e.entry_timeout = cache ? kEntryTimeout : 0;
  e.attr_timeout = cache ? kAttrTimeout : 0;
  fuse_reply_entry(req, &e);
}

void reply_attr(fuse_req_t req, const struct stat& st, std::uint64_t epoch = view_epoch.load()) {
  fuse_reply_attr(req, &st, cacheable(req, st, epoch) ? kAttrTimeout : 0);
}

Handle* handle(fuse_file_info* fi) { return reinterpret_cast<Handle*>(fi->fh); }

struct DirHandle {
  DirEntries entries;
};

// Handles given to the kernel and not yet released.
std::mutex live_mu;
std::unordered_set<Handle*> live_files;
std::unordered_set<DirHandle*> live_dirs;

void track(Handle* h) {
  std::lock_guard lock(live_mu);
  live_files.insert(h);
}
void untrack(Handle* h) {
  std::lock_guard lock(live_mu);
  live_files.erase(h);
}

void op_init(void*, fuse_conn_info* conn) {
  set_read_path(conn);
  if (conn->capable & FUSE_CAP_PARALLEL_DIROPS) conn->want |= FUSE_CAP_PARALLEL_DIROPS;
  conn->want &= ~unsigned(FUSE_CAP_WRITEBACK_CACHE);
  // O_TRUNC arrives as a setattr of the size, the one truncate path there is.
  conn->want &= ~unsigned(FUSE_CAP_ATOMIC_O_TRUNC);
}

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  const std::uint64_t epoch = view_epoch.load();
  struct stat st;
  if (int r = fsys(req).lookup(parent, name, caller(req), &st)) {
    if (r == ENOENT && !(parent & kVirtualBit)) {
      // A negative entry the kernel may cache: every create goes through it.
      // Not for `X@`: it appears without a change to its directory, when X
      // becomes an array (setting user.mmfs.shape) or a directory.
      std::size_t len = std::strlen(name);
      fuse_entry_param e;
      std::memset(&e, 0, sizeof e);
      e.entry_timeout = len > 1 && name[len - 1] == '@' ? 0 : kEntryTimeout;
      fuse_reply_entry(req, &e);
      return;
    }
    fuse_reply_err(req, r);
    return;
  }
  if (st.st_ino & kVirtualBit) fsys(req).scrub_stat(&st);  // /.mmfs/scrub: writable, sized
  reply_entry(req, st, epoch);
}

void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  fsys(req).forget(ino, nlookup);
  fuse_reply_none(req);
}

void op_forget_multi(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
  for (size_t i = 0; i < count; ++i) fsys(req).forget(forgets[i].ino, forgets[i].nlookup);
  fuse_reply_none(req);
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  const std::uint64_t epoch = view_epoch.load();
  struct stat st;
  if (int r = fsys(req).getattr(ino, caller(req), &st)) {
    fuse_reply_err(req, r);
    return;
  }
  if (ino & kVirtualBit) fsys(req).scrub_stat(&st);  // /.mmfs/scrub: writable, sized
  reply_attr(req, st, epoch);
}

void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info* fi) {
  struct stat st;
  if (fsys(req).is_scrub_node(ino)) {  // the truncate of `echo start > /.mmfs/scrub`
    if (int r = fsys(req).scrub_setattr(ino, to_set, &st)) {
      fuse_reply_err(req, r);
      return;
    }
    reply_attr(req, st);
    return;
  }
  if (int r = fsys(req).setattr(ino, *attr, to_set, caller(req), fi ? handle(fi) : nullptr, &st)) {
    fuse_reply_err(req, r);
    return;
  }
  if (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) invalidate_views(fsys(req), ino);
  // A truncate to 0 that leaves a size zeroed an array (docs/reference.md §4): the kernel
  // keeps the pages descriptors opened before cached, unless told.
  if (notify_session && (to_set & FUSE_SET_ATTR_SIZE) && attr->st_size == 0 && st.st_size != 0) {
    invalidate_then_reply([ino] { fuse_lowlevel_notify_inval_inode(notify_session, ino, 0, 0); },
                          [&] { reply_attr(req, st); }, kInvalidatePatience);
    return;
  }
  reply_attr(req, st);
}

void op_readlink(fuse_req_t req, fuse_ino_t ino) {
  std::string target;
  if (int r = fsys(req).readlink(ino, &target)) {
    fuse_reply_err(req, r);
    return;
  }
  fuse_reply_readlink(req, target.c_str());
}

void op_mknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
  struct stat st;
  if (int r = fsys(req).mknod(parent, name, mode, rdev, caller(req), &st)) {
    fuse_reply_err(req, r);
    return;
  }
  reply_entry(req, st);
}

void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  struct stat st;
  if (int r = fsys(req).mkdir(parent, name, mode, caller(req), &st)) {
    fuse_reply_err(req, r);
    return;
  }
  reply_entry(req, st);
}

void op_symlink(fuse_req_t req, const char* target, fuse_ino_t parent, const char* name) {
  struct stat st;
  if (int r = fsys(req).symlink(parent, name, target, caller(req), &st)) {
    fuse_reply_err(req, r);
    return;
  }
  reply_entry(req, st);
}

void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t parent, const char* name) {
  struct stat st;
  if (int r = fsys(req).link(ino, parent, name, &st)) {
    fuse_reply_err(req, r);
    return;
  }
  reply_entry(req, st);
}

void op_unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  int r = fsys(req).unlink(parent, name);
  if (r == 0) retire_views(fsys(req), parent, name);
  fuse_reply_err(req, r);
}

void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  fuse_reply_err(req, fsys(req).rmdir(parent, name));
}

void op_rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent, const char* newname,
               unsigned flags) {
  int r = fsys(req).rename(parent, name, newparent, newname, flags);
  if (r == 0) {
    retire_views(fsys(req), parent, name);
    retire_views(fsys(req), newparent, newname);  // the name replaced, or exchanged
  }
  fuse_reply_err(req, r);
}

void op_statfs(fuse_req_t req, fuse_ino_t) {
  struct statvfs st;
  fsys(req).statfs(&st);
  fuse_reply_statfs(req, &st);
}

void fill_open_flags(const Handle& h, fuse_file_info* fi) {
  fi->noflush = 1;  // close() has nothing to flush: release commits, fsync makes durable
  if (h.is_virtual_text) {
    fi->direct_io = 1;  // generated text: its size may change between stat and read
  } else if (h.view || h.is_array) {
    // A view's bytes change when the array is written; an array's when it is
    // truncated to 0 (its size does not change, so the kernel keeps its pages).
    fi->keep_cache = 0;
    // A writer that can neither read nor map the array (an ingest: cat raw >
    // A) sends its bytes to the daemon straight from its own buffer. Through
    // the page cache, each write was first copied into fresh cache pages,
    // which nobody reads again, and the daemon copied them once more. The
    // kernel drops cached pages of the range after a direct write, so other
    // opens stay coherent.
    if (h.is_array && (fi->flags & O_ACCMODE) == O_WRONLY) fi->direct_io = 1;
    // A Zarr chunk is read whole by read()/pread() (zarr-python, TensorStore),
    // once: through the page cache the daemon's reply was copied into cache
    // pages and from there to the reader; direct, into the reader's buffer
    // (a 2 MiB chunk: about a millisecond less). Nobody maps a chunk file.
    if (h.zarr_chunk) fi->direct_io = 1;
  } else {
    fi->keep_cache = 1;  // every write goes through the kernel: its cache stays coherent
  }
}

void op_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  std::unique_ptr<Handle> h;
  // /.mmfs/scrub is the one control file open for writing (its commands).
  if (int r = fsys(req).is_scrub_node(ino) ? fsys(req).open_scrub(ino, fi->flags, &h)
                                           : fsys(req).open(ino, fi->flags, caller(req), &h)) {
    fuse_reply_err(req, r);
    return;
  }
  fill_open_flags(*h, fi);
  fi->fh = reinterpret_cast<std::uint64_t>(h.get());
  track(h.get());
  if (fuse_reply_open(req, fi) == 0) {
    h.release();
  } else {
    untrack(h.get());
    fsys(req).release(std::move(h));
  }
}

void op_create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi) {
  struct stat st;
  Filesystem& f = fsys(req);
  if (int r = f.mknod(parent, name, S_IFREG | (mode & 07777), 0, caller(req), &st)) {
    fuse_reply_err(req, r);
    return;
  }
  std::unique_ptr<Handle> h;
  if (int r = f.open(st.st_ino, fi->flags, caller(req), &h)) {
    fuse_reply_err(req, r);
    return;
  }
  fill_open_flags(*h, fi);
  fi->fh = reinterpret_cast<std::uint64_t>(h.get());
  fuse_entry_param e;
  std::memset(&e, 0, sizeof e);
  e.ino = st.st_ino;
  e.attr = st;
  e.entry_timeout = kEntryTimeout;
  e.attr_timeout = kAttrTimeout;
  track(h.get());
  if (fuse_reply_create(req, &e, fi) == 0) {
    h.release();
  } else {
    untrack(h.get());
    f.release(std::move(h));
  }
}

void op_read(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) {
  Filesystem& f = fsys(req);
  if (const Handle& h = *handle(fi); h.is_virtual_text) {
    // Fixed at open: straight from the handle's text (a coords query's
    // answer is tens of MB; a copy through the thread's buffer cost 4 % of
    // it), held here until the reply is written.
    const std::shared_ptr<const std::string> text = h.content;
    const std::size_t length = text ? text->size() : 0;
    const std::size_t at = std::min<std::size_t>(std::size_t(off), length);
    fuse_reply_buf(req, text ? text->data() + at : nullptr, std::min(size, length - at));
    return;
  }
  {
    // Arrays and views: straight from the decoded chunk to the kernel.
    std::shared_ptr<const fs::AlignedBuffer> keep;
    const std::byte* data = nullptr;
    std::size_t got = 0;
    if (int r = f.read_span(*handle(fi), std::uint64_t(off), size, &keep, &data, &got)) {
      fuse_reply_err(req, r);
      return;
    }
    if (data != nullptr) {
      fuse_bufvec bv = FUSE_BUFVEC_INIT(got);
      bv.buf[0].mem = const_cast<std::byte*>(data);
      fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE);
      return;
    }
  }
  // One buffer per FUSE worker thread, reused: no allocation or page faults per read.
  thread_local std::unique_ptr<std::byte[]> buf;
  thread_local std::size_t capacity = 0;
  if (capacity < size) {
    buf = std::make_unique_for_overwrite<std::byte[]>(size);
    capacity = size;
  }
  std::size_t got = 0;
  if (int r = f.read(*handle(fi), std::uint64_t(off), size, buf.get(), &got)) {
    fuse_reply_err(req, r);
    return;
  }
  fuse_reply_buf(req, reinterpret_cast<const char*>(buf.get()), got);
}

void op_write(fuse_req_t req, fuse_ino_t, const char* data, size_t size, off_t off, fuse_file_info* fi) {
  if (Handle* h = handle(fi); (h->ino & kVirtualBit) && fsys(req).is_scrub_node(h->ino)) {
    if (int r = fsys(req).scrub_command(*h, reinterpret_cast<const std::byte*>(data), size)) {
      fuse_reply_err(req, r);
      return;
    }
    fuse_reply_write(req, size);
    return;
  }
  if (int r = fsys(req).write(*handle(fi), std::uint64_t(off), reinterpret_cast<const std::byte*>(data), size)) {
    fuse_reply_err(req, r);
    return;
  }
  fuse_reply_write(req, size);
}

void op_flush(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) { fuse_reply_err(req, fsys(req).flush(*handle(fi))); }

void op_release(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  std::unique_ptr<Handle> h(handle(fi));
  untrack(h.get());
  fuse_reply_err(req, fsys(req).release(std::move(h)));
}

void op_fsync(fuse_req_t req, fuse_ino_t ino, int, fuse_file_info* fi) {
  fuse_reply_err(req, fsys(req).fsync(fi ? handle(fi) : nullptr, ino));
}

void op_opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto d = std::make_unique<DirHandle>();
  if (int r = fsys(req).readdir(ino, caller(req), &d->entries)) {
    fuse_reply_err(req, r);
    return;
  }
  fi->fh = reinterpret_cast<std::uint64_t>(d.get());
  {
    std::lock_guard lock(live_mu);
    live_dirs.insert(d.get());
  }
  if (fuse_reply_open(req, fi) == 0) {
    d.release();
  } else {
    std::lock_guard lock(live_mu);
    live_dirs.erase(d.get());
  }
}

void op_readdir(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) {
  auto* d = reinterpret_cast<DirHandle*>(fi->fh);
  std::vector<char> buf(size);
  std::size_t used = 0;
  for (std::uint64_t i = std::uint64_t(off); i < d->entries.size(); ++i) {
    const auto [name, st] = d->entries.entry(i);
    std::size_t need = fuse_add_direntry(req, buf.data() + used, size - used, name.c_str(), &st, off_t(i + 1));
    if (need > size - used) break;
    used += need;
  }
  fuse_reply_buf(req, buf.data(), used);
}

void op_releasedir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  auto* d = reinterpret_cast<DirHandle*>(fi->fh);
  {
    std::lock_guard lock(live_mu);
    live_dirs.erase(d);
  }
  delete d;
  fuse_reply_err(req, 0);
}

void op_fsyncdir(fuse_req_t req, fuse_ino_t, int, fuse_file_info*) { fuse_reply_err(req, fsys(req).fsyncdir()); }

void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size, int flags) {
  int r = fsys(req).setxattr(ino, name, std::string(value, size), flags, caller(req));
  if (r == 0) {
    invalidate_attributes(ino, name);
    invalidate_views(fsys(req), ino);  // a schema, or the attributes of its Zarr view
  }
  if (r == 0) invalidate_table_members(fsys(req), ino, name);
  fuse_reply_err(req, r);
}

void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  std::string value;
  if (int r = fsys(req).getxattr(ino, name, &value)) {
    fuse_reply_err(req, r);
    return;
  }
  if (size == 0) fuse_reply_xattr(req, value.size());
  else if (size < value.size()) fuse_reply_err(req, ERANGE);
  else fuse_reply_buf(req, value.data(), value.size());
}

void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  std::vector<std::string> names;
  if (int r = fsys(req).listxattr(ino, &names)) {
    fuse_reply_err(req, r);
    return;
  }
  std::string list;
  for (const auto& n : names) list.append(n).push_back('\0');
  if (size == 0) fuse_reply_xattr(req, list.size());
  else if (size < list.size()) fuse_reply_err(req, ERANGE);
  else fuse_reply_buf(req, list.data(), list.size());
}

void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  int r = fsys(req).removexattr(ino, name, caller(req));
  if (r == 0) {
    invalidate_attributes(ino, name);
    invalidate_views(fsys(req), ino);
    invalidate_table_members(fsys(req), ino, name);
  }
  fuse_reply_err(req, r);
}

void op_fallocate(fuse_req_t req, fuse_ino_t, int mode, off_t offset, off_t length, fuse_file_info* fi) {
  fuse_reply_err(req, fsys(req).fallocate(*handle(fi), mode, std::uint64_t(offset), std::uint64_t(length)));
}

// Every operation runs inside this guard: an exception (memory exhausted by a
// huge listing, a bug) becomes an errno and a line in /.mmfs/errors instead
// of taking the daemon down. Operations reply last, so none has replied yet.
std::mutex after_init_mu;
std::function<void(Filesystem&)> after_init_task;  // guarded by after_init_mu
std::atomic<bool> after_init_pending{false};

void take_after_init_task(Filesystem& fs) {
  std::function<void(Filesystem&)> task;
  {
    std::lock_guard lock(after_init_mu);
    task.swap(after_init_task);
    after_init_pending.store(false, std::memory_order_release);
  }
  if (task) task(fs);
}

template <auto Op>
struct Guard;
template <class... Args, void (*Op)(fuse_req_t, Args...)>
struct Guard<Op> {
  static void call(fuse_req_t req, Args... args) {
    // The lines the request adds to /.mmfs/errors are its caller's.
    RequestOwnerScope owner(fuse_req_ctx(req)->uid);
    try {
      if (after_init_pending.load(std::memory_order_acquire)) take_after_init_task(fsys(req));
      Op(req, args...);
    } catch (const std::bad_alloc&) {
      fsys(req).errors().record(ENOMEM, "<request>", "out of memory serving the request", request_owner());
      fuse_reply_err(req, ENOMEM);
    } catch (const std::exception& e) {
      fsys(req).errors().record(EIO, "<request>", std::string("internal error: ") + e.what(), request_owner());
      fuse_reply_err(req, EIO);
    }
  }
};

fuse_lowlevel_ops make_ops() {
  fuse_lowlevel_ops o;
  std::memset(&o, 0, sizeof o);
  o.init = op_init;
  o.lookup = &Guard<op_lookup>::call;
  o.getattr = &Guard<op_getattr>::call;
  o.forget = op_forget;  // no reply to fail: unguarded
  o.forget_multi = op_forget_multi;
  o.setattr = &Guard<op_setattr>::call;
  o.readlink = &Guard<op_readlink>::call;
  o.mknod = &Guard<op_mknod>::call;
  o.mkdir = &Guard<op_mkdir>::call;
  o.symlink = &Guard<op_symlink>::call;
  o.link = &Guard<op_link>::call;
  o.unlink = &Guard<op_unlink>::call;
  o.rmdir = &Guard<op_rmdir>::call;
  o.rename = &Guard<op_rename>::call;
  o.statfs = &Guard<op_statfs>::call;
  o.open = &Guard<op_open>::call;
  o.create = &Guard<op_create>::call;
  o.read = &Guard<op_read>::call;
  o.write = &Guard<op_write>::call;
  o.flush = &Guard<op_flush>::call;
  o.release = &Guard<op_release>::call;
  o.fsync = &Guard<op_fsync>::call;
  o.opendir = &Guard<op_opendir>::call;
  o.readdir = &Guard<op_readdir>::call;
  o.releasedir = &Guard<op_releasedir>::call;
  o.fsyncdir = &Guard<op_fsyncdir>::call;
  o.setxattr = &Guard<op_setxattr>::call;
  o.getxattr = &Guard<op_getxattr>::call;
  o.listxattr = &Guard<op_listxattr>::call;
  o.removexattr = &Guard<op_removexattr>::call;
  o.fallocate = &Guard<op_fallocate>::call;
  return o;
}

}  // namespace

void set_notify_session(fuse_session* session) {
  notify_session = session;
}

void run_after_init(std::function<void(Filesystem&)> task) {
  std::lock_guard lock(after_init_mu);
  after_init_task = std::move(task);
  after_init_pending.store(true, std::memory_order_release);
}

void release_open_handles(Filesystem& fs) {
  std::unordered_set<Handle*> files;
  std::unordered_set<DirHandle*> dirs;
  {
    std::lock_guard lock(live_mu);
    files.swap(live_files);
    dirs.swap(live_dirs);
  }
  for (Handle* h : files) fs.release(std::unique_ptr<Handle>(h));
  for (DirHandle* d : dirs) delete d;
}

const fuse_lowlevel_ops& fuse_operations() {
  static const fuse_lowlevel_ops ops = make_ops();
  return ops;
}

}  // namespace mmfs::daemon
