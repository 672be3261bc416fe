// The mounted filesystem without FUSE types: inode-number operations that
// return errnos, the open-file registry (plain files and arrays), the virtual
// view and control nodes, the error log and the periodic flusher.
// daemon/fuse_ops.cc translates FUSE requests into these calls. The
// implementation is split by concern: filesystem.cc (start, flush, names,
// attributes, lookup, readdir), view_nodes.cc (A@, D@ and /.mmfs nodes and
// their permission checks), file_ops.cc (open to release), xattr_ops.cc,
// namespace_ops.cc, name_rules.cc, query_views.cc, table_ops.cc,
// scrub_control.cc; the virtual node table and the name cache are classes
// of their own (virtual_nodes.h, name_cache.h).
#pragma once

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <variant>
#include <vector>

#include "daemon/caller.h"
#include "daemon/loaded_arrays.h"
#include "daemon/name_cache.h"
#include "daemon/open_files.h"
#include "daemon/virtual_nodes.h"
#include "fs/array/array_file.h"
#include "fs/table/capsule_table.h"
#include "fs/paths/control_path.h"
#include "fs/util/error_log.h"
#include "fs/file/plain_file.h"
#include "fs/device/sector_io.h"
#include "fs/paths/view_path.h"
#include "fs/volume/volume.h"

namespace mmfs::fs {
class ScrubRunner;  // the scrub (fs/scrub/scrub_runner.h; daemon/scrub_control.cc)
}  // namespace mmfs::fs

namespace mmfs::daemon {

using fs::Ino;

// One open file (a FUSE file handle).
struct Handle {
  Ino ino = 0;
  std::shared_ptr<fs::PlainFile> plain;
  std::shared_ptr<fs::ArrayFile> array;
  std::optional<fs::DataView> view;  // a data view of `array`
  // Text/JSON virtual files: fixed at open, null when empty. Shared, so that
  // a read's reply keeps it alive even if the file is released (a
  // readahead's reply may still be written when the kernel lets the RELEASE
  // through).
  std::shared_ptr<const std::string> content;
  bool is_virtual_text = false;
  bool zarr_chunk = false;  // a chunk file of a Zarr view (`zarr/...`, `copy/K@/zarr/...`)
  bool is_array = false;
  bool writable = false;
};

// A view directory's names: `names`, then "0" .. "numbered - 1"
// (fs::ViewNode::numbered: a dimension's indices are not spelled ahead).
struct DirNames {
  std::vector<std::string> names;
  std::uint64_t numbered = 0;
};

// What a readdir lists, in order: `entries`, then the numbered names of a
// view directory, each made when its offset is read (entry()), so that
// opening `A@/slice/0` of a dimension of 2^40 costs nothing.
struct DirEntries {
  Ino dir = 0;
  std::vector<std::pair<std::string, struct stat>> entries;
  std::uint64_t numbered = 0;

  std::uint64_t size() const { return entries.size() + numbered; }
  // Entry i < size().
  std::pair<std::string, struct stat> entry(std::uint64_t i) const;
  // The stat a view directory lists a name with: a hint only, the node gets
  // its number when looked up (interning every listed name would keep all
  // of them alive).
  static struct stat view_entry(Ino dir, const std::string& name);
};

class Filesystem {
 public:
  Filesystem(std::unique_ptr<fs::Volume> volume, bool read_only);
  ~Filesystem();
  // Starts the periodic flusher (after the daemon has forked).
  void start();
  // Unmount: everything dirty to the device, metadata synced.
  int shutdown();

  fs::ErrorLog& errors() { return errors_; }
  // Schema changes (user.mmfs.* set or removed: relayouts, index builds,
  // tables into or out of capsules), one line each with the uid that asked:
  // the work runs with the daemon's rights, on that user's behalf.
  // `/.mmfs/audit` shows it, filtered per reader as errors are.
  fs::ErrorLog& audit() { return audit_; }
  bool read_only() const { return read_only_; }
  // A member of the volume failed (the volume's failure hook). Each array
  // loaded before it is loaded afresh at its first use once nothing else
  // holds it (LoadedArrays::find), so an array whose primary lay on a member
  // lost while the volume runs has its copy promoted then
  // (fs/array/copy_promotion.h); an array in use is promoted in place at its
  // next write (ArrayFile::promote_in_place_locked). Safe from any thread,
  // under any lock: it only counts.
  void note_member_failure() { ++member_failures_; }
  // Figures of the daemon process itself (daemon/code_residency.h), shown
  // under "daemon" in /.mmfs/stats. Set once, before the session loop starts.
  void set_daemon_stats(std::map<std::string, std::uint64_t> stats) { daemon_stats_ = std::move(stats); }
  // Counters of the FUSE transport (see daemon/request_poller.h), shown under
  // "fuse" in /.mmfs/stats. Set once, before the session loop starts.
  void set_transport_stats(std::function<std::map<std::string, std::uint64_t>()> stats) {
    transport_stats_ = std::move(stats);
  }

  // Namespace. `path` arguments are only for error messages. `who` is the
  // request's caller: the kernel has checked the nodes' modes already
  // (default_permissions); the daemon checks what the kernel cannot see, the
  // arrays a view reads besides the one in its path (daemon/caller.h).
  int lookup(Ino parent, const std::string& name, const Caller& who, struct stat* st);
  int getattr(Ino ino, const Caller& who, struct stat* st);
  int setattr(Ino ino, const struct stat& attr, int to_set, const Caller& who, Handle* fh, struct stat* out);
  int readdir(Ino ino, const Caller& who, DirEntries* out);
  // Regular files, FIFOs, sockets, and character and block devices (kept with
  // their `rdev`; the mount is nodev, so the kernel never opens them).
  int mknod(Ino parent, const std::string& name, std::uint32_t mode, std::uint64_t rdev, const Caller& who,
            struct stat* st);
  int mkdir(Ino parent, const std::string& name, std::uint32_t mode, const Caller& who, struct stat* st);
  int symlink(Ino parent, const std::string& name, const std::string& target, const Caller& who, struct stat* st);
  int readlink(Ino ino, std::string* target);
  int link(Ino ino, Ino parent, const std::string& name, struct stat* st);
  int unlink(Ino parent, const std::string& name);
  int rmdir(Ino parent, const std::string& name);
  int rename(Ino parent, const std::string& name, Ino new_parent, const std::string& new_name, unsigned flags);
  int statfs(struct statvfs* st);
  // The kernel dropped `nlookup` references to an inode (virtual nodes are
  // freed when none is left).
  void forget(Ino ino, std::uint64_t nlookup);
  // What the kernel may cache of the views (daemon/fuse_ops.cc): whether
  // `ino` is a view node that follows from its array's inode and schema
  // alone; the nodes the kernel holds of array `array`'s views. After
  // `name` in directory `parent` was unlinked or renamed: the views reached
  // as `name@` name nothing any more; the array, if the kernel held them.
  bool cacheable_view(Ino ino) const { return vnodes_.stable(ino); }
  std::vector<Ino> view_nodes_of(Ino array) const { return vnodes_.nodes_of(array); }
  std::optional<Ino> retire_views(Ino parent, const std::string& name) { return vnodes_.retire(parent, name + "@"); }

  // Files.
  int open(Ino ino, int flags, const Caller& who, std::unique_ptr<Handle>* out);
  int read(Handle& h, std::uint64_t offset, std::size_t size, std::byte* out, std::size_t* got);
  // Array files and data views: the bytes without a copy when they lie in one
  // decoded chunk (*data null otherwise: use read()).
  int read_span(Handle& h, std::uint64_t offset, std::size_t size, std::shared_ptr<const fs::AlignedBuffer>* keep,
                const std::byte** data, std::size_t* got);
  int write(Handle& h, std::uint64_t offset, const std::byte* data, std::size_t size);
  int fallocate(Handle& h, int mode, std::uint64_t offset, std::uint64_t length);
  int fsync(Handle* h, Ino ino);
  // FLUSH (every close of a descriptor): the error of a queued array write
  // that failed since the last write, FLUSH or fsync reported one.
  int flush(Handle& h);
  int release(std::unique_ptr<Handle> h);
  int fsyncdir();

  // Extended attributes (user.mmfs.* is the array schema).
  int setxattr(Ino ino, const std::string& name, const std::string& value, int flags, const Caller& who);
  int getxattr(Ino ino, const std::string& name, std::string* value);
  int listxattr(Ino ino, std::vector<std::string>* names);
  int removexattr(Ino ino, const std::string& name, const Caller& who);
  // The arrays of directory `dir`'s table (empty when it has none): a
  // setxattr on the directory may change their sizes, and the kernel's
  // cached attributes of each must go.
  std::vector<Ino> table_member_inos(Ino dir);

 private:
  using VNode = VirtualNode;

  std::string path_of(Ino ino) const;
  void remember(Ino ino, Ino parent, const std::string& name);
  bool is_virtual_name(Ino parent, const std::string& name);
  std::string child_path(Ino parent, const std::string& name) const;
  int fill_stat(const fs::Inode& inode, struct stat* st);
  // Which request asks for a view's content (a query is computed by the
  // LOOKUP that sizes it and handed to the OPEN that follows; a GETATTR of
  // an open one reuses the open's size; nothing else keeps a result).
  enum class QueryCall { Getattr, Lookup, Open };
  // A virtual node's attributes (and content, for a text file). Every node
  // under A@ (D@) carries A's (D's) owner, group and view_mode; /.mmfs is
  // root's and readable by all but scrub (root's only).
  int vnode_stat(Ino vino, const Caller& who, struct stat* st, std::string* content, std::string* message,
                 QueryCall call = QueryCall::Getattr);
  int vnode_content(Ino vino, const VNode& v, const Caller& who, struct stat* st, std::string* content,
                    std::string* message, QueryCall call);
  // EACCES (with *message) unless `who` may access array `ino` (`name`, for
  // the message) for `mask` (R_OK, W_OK), or search directory `dir`.
  int check_access(const Caller& who, Ino ino, int mask, const std::string& name, std::string* message);
  int check_searchable(const Caller& who, Ino dir, std::string* message);
  // Query views (daemon/query_views.cc): the content of a query's file (or
  // its plan's JSON), computed once for the lookup and the open that follows.
  // `vino` is the view's node: a GETATTR of a query file that is open is
  // answered with the size its open computed. *size is the content's size;
  // *content is filled for an OPEN only (a result can be hundreds of MiB:
  // a lookup keeps it for the open, a stat needs only its size).
  int query_content(Ino vino, Ino dir, const std::shared_ptr<fs::ArrayFile>& self, const fs::QueryView& view,
                    bool plan, const Caller& who, QueryCall call, std::string* content, std::uint64_t* size,
                    std::string* message);
  // A directory's views D@ (daemon/table_ops.cc): info, rows, plan and query.
  int table_stat(Ino vino, const VNode& v, const Caller& who, struct stat* st, std::string* content,
                 std::string* message, DirNames* listing, QueryCall call = QueryCall::Getattr);
  // A directory's table (fs/table/capsule_table.h): its 1-D arrays in readdir
  // order, its stored record, and its user.mmfs.layout / user.mmfs.shape.
  int table_attributes(Ino dir, std::vector<fs::TableAttribute>* out, std::string* message);
  std::optional<fs::TableRecord> table_record(Ino dir) const;
  // Moves every 1-D array of `dir`: `who` must be allowed to write each.
  int table_setxattr(Ino dir, const std::string& attr, const std::string& value, const Caller& who);
  int table_getxattr(Ino dir, const std::string& attr, std::string* value);
  // EACCES unless `who` may write every one of `attributes`.
  int table_writable(const Caller& who, const std::vector<fs::TableAttribute>& attributes, std::string* message);
  int table_move_apart(Ino dir, const std::string& layout, std::vector<fs::TableAttribute>& attributes);
  int lookup_virtual(Ino parent, const std::string& name, const Caller& who, struct stat* st);
  // The Zarr v3 view (daemon/zarr_views.cc): an array's views resolved with
  // its natural chunk (the layout's cell or mloc chunk), the attributes of
  // its zarr.json (user.* xattrs but user.mmfs.*), and an edge chunk's bytes
  // (its box padded with zeros to the chunk shape).
  std::vector<std::uint64_t> natural_chunk(const fs::ArrayFile& array) const;
  std::variant<fs::ViewNode, fs::PathError> resolve_array_view(const std::vector<std::string>& components,
                                                               const fs::ArrayFile& array, bool listing) const;
  nlohmann::json zarr_attributes(Ino ino) const;
  // An array's zarr.json: its schema's, its attributes, and its dimension
  // names from fs::kHdf5DimsXattr when user.mmfs.dims is not set.
  std::string zarr_array_json(Ino ino, const fs::ArraySchema& schema, std::span<const std::uint64_t> chunk) const;
  int zarr_edge_chunk(fs::ArrayFile& array, const fs::DataView& box, std::span<const std::uint64_t> chunk,
                      std::string* content, std::string* message);
  // D@/zarr/: a Zarr v3 group of the directory's arrays (each child NAME/ is
  // NAME@/zarr/, needing NAME's read permission); chunk files are read at
  // their open.
  int table_zarr_stat(const VNode& v, const Caller& who, struct stat* st, std::string* content,
                      std::string* message, DirNames* listing, QueryCall call);
  std::optional<fs::ArraySchema> stored_schema(Ino ino) const;
  int array_for(Ino ino, std::shared_ptr<fs::ArrayFile>* out, std::string* message);
  std::shared_ptr<fs::PlainFile> plain_for_locked(Ino ino, const fs::Inode& inode);
  // What an open file is now (plain or array); `modifying` stamps its mtime.
  bool open_data(Ino ino, std::shared_ptr<fs::PlainFile>* plain, std::shared_ptr<fs::ArrayFile>* array,
                 bool modifying);
  int commit_open_file(Ino ino, OpenFile& of);
  // periodic: the flusher's tick (ArrayFile::flush_periodic), else everything.
  int flush_all(bool durable, bool periodic = false);
  int orphan_if_open(Ino parent, const std::string& name);
  // Namespace changes (daemon/namespace_ops.cc): every node is made here.
  int make_node(Ino parent, const std::string& name, std::uint32_t mode, std::uint64_t rdev, const std::string& target,
                const Caller& who, struct stat* st);
  // Name rules (daemon/name_rules.cc); each returns 0 or an errno it has
  // recorded in /.mmfs/errors. NAME_MAX (`existing`: a name looked up, which
  // may be a view's `A@` one byte longer).
  int check_name_length(Ino parent, const std::string& name, bool existing);
  // A new real entry `name` in `parent` (`has_views`: a directory or an
  // array) must not be a view's name, hide a real `name@`, or be hidden as
  // the `X@` of an existing X. `leaving`: an entry the same operation removes
  // (a rename's source).
  int check_new_entry(Ino parent, const std::string& name, bool has_views,
                      const std::optional<std::pair<Ino, std::string>>& leaving = std::nullopt);
  // Setting the shape makes `ino` an array: refused while a real `X@` sits
  // beside any of its names X.
  int check_may_become_array(Ino ino, const std::string& attr);
  bool is_array(Ino ino) const;
  int record(int error, Ino ino, const std::string& message);
  // A line of the audit log: `who` changed `ino`'s schema (what it did).
  void audit_change(const Caller& who, Ino ino, const std::string& what);
  int set_xattr_unaudited(Ino ino, const std::string& name, const std::string& value, int flags, const Caller& who);
  int remove_xattr_unaudited(Ino ino, const std::string& name, const Caller& who);
  // The layout (and, unless `keep_cell` or the cell is set, the cell) the
  // volume's model prices best for the schema's shape, with its reason
  // (layouts/model_default.h). REQUIRES a shape.
  void choose_layout_by_model(fs::ArraySchema& schema, bool keep_cell = false) const;
  int record_at(int error, Ino parent, const std::string& name, const std::string& message);
  void flusher();

  std::unique_ptr<fs::Volume> volume_;
  bool read_only_;
  fs::SectorIo io_;
  fs::MemberSets member_sets_;  // before array_ctx_, which points at it
  fs::ArrayContext array_ctx_;
  fs::ErrorLog errors_;
  fs::ErrorLog audit_;
  std::function<std::map<std::string, std::uint64_t>()> transport_stats_;
  std::map<std::string, std::uint64_t> daemon_stats_;
  // Opens of views since the mount (/.mmfs/stats "views"): of data views
  // (slices, boxes, PLoD copies: one per read of a view) and of the others
  // (info, plan, query results, lbn).
  std::atomic<std::uint64_t> data_view_opens_{0};
  // Cells that failed their checksum in one copy, served from another and rewritten in place.
  std::atomic<std::uint64_t> healed_cells_{0};
  std::atomic<std::uint64_t> healed_indexes_{0};  // bitmap indexes built anew after one was met broken
  std::atomic<std::uint64_t> served_around_{0};  // reads another copy served after a device error or a bad cell
  std::atomic<std::uint64_t> promoted_copies_{0};  // copies made primary over a primary on a lost member
  std::atomic<std::uint64_t> member_failures_{0};  // see note_member_failure
  std::atomic<std::uint64_t> text_view_opens_{0};
  // LOOKUPs and GETATTRs of an array's view nodes that reached the daemon:
  // what the kernel's cache of stable view nodes saves shows here.
  std::atomic<std::uint64_t> view_lookups_{0};
  std::atomic<std::uint64_t> view_getattrs_{0};
  Ino orphans_ = 0;

  // Locks, in the order they are taken: a thread holding one takes only
  // locks below it in this list, never one above.
  //   scrub_mu_       the scrub's slot (start and stop of the runner)
  //   mu_             the registry below (open files, loaded arrays) and
  //                   namespace changes that must not race an open or a release
  //   fs/ locks       an ArrayFile's placement and cache locks, the metadata
  //                   store's, the devices': fs/ never calls back into the daemon
  //   leaves          qmu_, flusher_mu_ (released before the flusher works),
  //                   and the internal locks of vnodes_, names_, errors_ and
  //                   audit_: nothing is locked under them
  std::mutex mu_;  // the registry and namespace changes
  OpenFiles open_;  // open regular files (daemon/open_files.h)
  LoadedArrays arrays_;  // loaded arrays (views keep them alive), and the 16 most recently used
  // Runs `op` (a metadata change that may drop the last link of `ino`) with
  // mu_ held; when the inode is gone, its loaded array is retired and forgotten.
  int remove_locked(Ino ino, const std::function<int()>& op);

  NameCache names_;  // for messages only

  // Query results between the stat that sizes a view and the open that reads
  // it (keyed by directory, path and the arrays' generations); an entry is
  // taken by the next use and lives at most kQueryResultMs.
  struct QueryResult {
    std::string content;
    std::int64_t at_ns = 0;
  };
  std::mutex qmu_;
  std::map<std::string, QueryResult> query_results_;
  std::map<Ino, std::uint64_t> open_query_sizes_;  // query files open now: the size their open computed
  static constexpr std::int64_t kQueryResultMs = 250;

  VirtualNodes vnodes_;

  std::mutex flusher_mu_;
  std::condition_variable flusher_cv_;
  bool stopping_ = false;
  std::thread flusher_;

  // ---- the scrub: /.mmfs/scrub, daemon/scrub_control.cc -------
  // Last among the members, so it is destroyed first: the scrub's thread is
  // joined and its hook removed while the volume and io_ still exist.
 public:
  // Whether `ino` is /.mmfs/scrub (the one writable control file).
  bool is_scrub_node(Ino ino) const;
  // Its content: the scrub's status as JSON.
  std::string scrub_status_text();
  // Its attributes: a regular file, 0644, the size of its status now.
  void scrub_stat(struct stat* st);
  // An open for reading the status or writing commands.
  int open_scrub(Ino ino, int flags, std::unique_ptr<Handle>* out);
  // A write: one command per line (start, start idle-time, start
  // free-bandwidth, stop, recheck). EINVAL and a line in /.mmfs/errors for others.
  int scrub_command(Handle& h, const std::byte* data, std::size_t size);
  // A setattr of it: only the truncate of an open for writing (O_TRUNC) is taken.
  int scrub_setattr(Ino ino, int to_set, struct stat* out);
  // Stops a running scrub and waits for its thread (unmount).
  void stop_scrub();

 private:
  int start_scrub(Ino ino, const std::string& how);
  // `recheck`: the last finished scrub's open findings read again (after a
  // user rewrote or removed what they name), in the repairs' thread.
  int start_recheck(Ino ino);
  struct ScrubSlot {
    std::shared_ptr<fs::ScrubRunner> runner;
    // Beside the device scrub, in one thread: every array with copies read
    // whole through each placement, bad cells rewritten from another
    // (ArrayFile::repair_placements); then every bitmap index read whole and
    // checked, a broken one built anew from its data (ArrayFile::verify_index);
    // then, once the device scrub is done too, its findings read again
    // (ScrubRunner::recheck_findings): what the repairs mended is resolved.
    std::thread repairs;
    std::atomic<bool> repairs_stop{false};
    std::atomic<bool> copies_running{false}, indexes_running{false}, recheck_running{false};
    std::atomic<std::uint64_t> copies_arrays{0}, copies_repaired{0};
    std::atomic<std::uint64_t> indexes_checked{0}, indexes_rebuilt{0}, indexes_bytes_read{0};
    ~ScrubSlot();  // stops the runner and the repairs
  };
  // The repairs of a scrub (its thread): the copies', then the indexes'.
  void repair_copies();
  void verify_indexes();
  void recheck_findings(fs::ScrubRunner& runner);
  // visit(ino, array) for each array with a record of one of `kinds`,
  // until the repairs are stopped; one that does not open is an error line.
  void for_each_scrubbed_array(const std::vector<fs::keys::Kind>& kinds,
                               const std::function<void(Ino, fs::ArrayFile&)>& visit);
  std::mutex scrub_mu_;
  ScrubSlot scrub_;
  // ---- end of the scrub ---------------------------------------------------
};

}  // namespace mmfs::daemon
