// Open files of the mounted filesystem: open, read, write, fsync, release of
// plain files, arrays and views, through the open-file registry.
#include "daemon/filesystem.h"

#include <fmt/format.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "daemon/filesystem_detail.h"
#include "fs/util/buffer_pool.h"
#include "layouts/default_layout.h"

namespace mmfs::daemon {

using fs::ArrayFile;
using fs::ArraySchema;
using fs::Inode;
using namespace detail;

std::shared_ptr<fs::PlainFile> Filesystem::plain_for_locked(Ino ino, const Inode& inode) {
  OpenFile& of = open_.entry(ino);
  if (!of.plain) {
    // The size as of now, under the registry lock: `inode` may predate the
    // commit of a release that ran in between.
    auto fresh = volume_->metadata().inode(ino);
    of.plain = std::make_shared<fs::PlainFile>(volume_->metadata(), volume_->allocator(), io_, volume_->geometry(),
                                               ino, fresh ? fresh->size : inode.size);
  }
  return of.plain;
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
    if (int r = vnodes_.find(ino, &v)) return r;
    struct stat st;
    std::string msg;
    std::string text;
    int stat_r = vnode_stat(ino, who, &st, &text, &msg, QueryCall::Open);
    if (stat_r) return record(stat_r, ino, msg);
    if (!text.empty()) h->content = std::make_shared<const std::string>(std::move(text));
    if (S_ISDIR(st.st_mode)) return EISDIR;
    if (v.array != 0) {
      if (int r = array_for(v.array, &h->array, &msg)) return record(r, ino, msg);
      auto res = resolve_array_view(v.components, *h->array, false);
      if (auto* node = std::get_if<fs::ViewNode>(&res); node && node->kind == fs::ViewKind::Data) {
        h->view = node->data;
        h->array->choose_within(&*h->view);
        const auto& c = v.components;
        h->zarr_chunk = (!c.empty() && c[0] == "zarr") || (c.size() > 2 && c[0] == "copy" && c[2] == "zarr");
      }
    }
    h->is_virtual_text = !h->view;
    if (v.array != 0) ++(h->view ? data_view_opens_ : text_view_opens_);
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
  OpenFile& of = open_.entry(ino);
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
  OpenFile* file = open_.find(ino);
  if (!file) return false;
  *plain = file->plain;
  *array = file->array;
  if (modifying) {
    file->mtime_ns = now_ns();
    file->times_dirty = *plain != nullptr;
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
    OpenFile* file = open_.find(h.ino);
    if (!file || !file->array) return 0;
    array = file->array;
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
    OpenFile* file = open_.find(h.ino);
    if (!file) return EBADF;
    plain = file->plain;
    if (file->array) return record(EOPNOTSUPP, h.ino, "fallocate: an array file's space is fixed by its shape");
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
    if (OpenFile* file = open_.find(h.ino)) {
      file->mtime_ns = now_ns();
      file->times_dirty = true;
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
    OpenFile* file = open_.find(ino);
    if (file) {
      if (int r = commit_open_file(ino, *file)) return r;
      array = file->array;
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
    OpenFile* file = open_.find(h.ino);
    if (file) array = file->array;
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
    OpenFile* file = open_.find(h->ino);
    if (!file) return 0;
    OpenFile& of = *file;
    if (--of.opens > 0) return 0;
    r = commit_open_file(h->ino, of);
    array = of.array;
    bool orphaned = of.orphaned;
    open_.erase(h->ino);
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

}  // namespace mmfs::daemon
