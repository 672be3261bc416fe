// The virtual nodes of the mounted filesystem: the attributes and content of
// every node under A@, D@ and /.mmfs, and the daemon's own permission checks
// of what a view reads besides its array (docs/daemon.md, "Permissions").
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
#include "fs/paths/zarr_metadata.h"
#include "fs/util/buffer_pool.h"
#include "layouts/default_layout.h"

namespace mmfs::daemon {

using fs::ArrayFile;
using fs::ArraySchema;
using fs::Inode;
using namespace detail;

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
  if (int r = vnodes_.find(vino, &v)) return r;
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
        member_sets_.add_stats(&j);
        auto ms = volume_->store().stats();
        j["metadata_batches"] = ms.batches_applied;
        j["metadata_flushes"] = ms.flushes;
        if (transport_stats_) j["fuse"] = transport_stats_();
        if (!daemon_stats_.empty()) j["daemon"] = daemon_stats_;
        j["views"] = {{"data_opens", data_view_opens_.load()},
                      {"text_opens", text_view_opens_.load()},
                      {"lookups", view_lookups_.load()},
                      {"getattrs", view_getattrs_.load()}};
        j["copies"] = {{"self_healed_cells", healed_cells_.load()},
                       {"reads_served_by_another_copy", served_around_.load()},
                       {"promoted_over_a_lost_member", promoted_copies_.load()}};
        j["indexes"] = {{"self_healed", healed_indexes_.load()}};
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
          // Running without a member: every byte served comes from its mirror alone.
          j["degraded"] = !striped->failed_devices().empty();
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
  if (call == QueryCall::Lookup) ++view_lookups_;
  if (call == QueryCall::Getattr) ++view_getattrs_;
  std::shared_ptr<ArrayFile> array;
  if (int r = array_for(v.array, &array, message)) return r;
  ArraySchema schema = array->schema();
  auto res = resolve_array_view(v.components, *array, false);
  if (auto* e = std::get_if<fs::PathError>(&res)) {
    *message = e->message;
    return e->error;
  }
  auto& node = std::get<fs::ViewNode>(res);
  // Sized by the schema alone: the kernel may cache these (VirtualNodes, "stable").
  vnodes_.set_stable(vino, node.kind == fs::ViewKind::Dir || node.kind == fs::ViewKind::Data ||
                               node.kind == fs::ViewKind::ZarrChunk);
  switch (node.kind) {
    case fs::ViewKind::Dir: return as_dir();
    case fs::ViewKind::Data: return as_file(node.data->bytes(schema.dtype.itemsize));
    case fs::ViewKind::Info: *content = array->info().dump(2) + "\n"; break;
    case fs::ViewKind::Lbn:
      if (int r = array->lbn_text(node.coords, content, message, std::max(node.copy, 0))) return r;
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
    case fs::ViewKind::ZarrMeta:
      *content = zarr_array_json(v.array, schema, node.chunk_shape);
      break;
    case fs::ViewKind::ZarrChunk: {
      std::uint64_t size = schema.dtype.itemsize;
      for (std::uint64_t c : node.chunk_shape) size *= c;
      if (call != QueryCall::Open) return as_file(size);  // read at the open, not at every stat
      if (int r = zarr_edge_chunk(*array, *node.data, node.chunk_shape, content, message)) return r;
      return as_file(size);
    }
  }
  return as_file(content->size());
}

int Filesystem::lookup_virtual(Ino parent, const std::string& name, const Caller& who, struct stat* st) {
  VNode v;
  if (int r = vnodes_.find(parent, &v)) return r;
  v.components.push_back(name);
  Ino vino = vnodes_.intern(parent, name, v);
  std::string content, msg;
  int r = vnode_stat(vino, who, st, &content, &msg, QueryCall::Lookup);
  if (r) {
    vnodes_.forget(vino, 1);  // the kernel gets no entry for it
    return record_at(r, parent, name, msg);
  }
  return 0;
}

}  // namespace mmfs::daemon
