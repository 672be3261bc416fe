// Who a request runs for, and the permission checks the daemon makes itself.
//
// The kernel checks every node's mode against the caller (default_permissions)
// before a request reaches the daemon, and the view nodes carry their array's
// owner, group and mode for that (docs/daemon.md, "Permissions"). What the
// kernel cannot see is a view that reads arrays other than the one in its
// path: a query condition naming an array beside A, a directory's table views
// reading every column of D. Those are checked here, against the same rules
// the kernel applies (generic_permission: owner, then group and supplementary
// groups, then others; root passes read and write, and execute where any x
// bit is set or on a directory). mmfs keeps no ACLs, so the mode is the whole
// answer.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace mmfs::daemon {

class Caller {
 public:
  Caller() = default;
  // `groups`: the caller's supplementary groups, asked for only when a check
  // needs them (libfuse reads them from /proc per call).
  Caller(std::uint32_t uid, std::uint32_t gid, std::function<std::vector<std::uint32_t>()> groups = {})
      : uid(uid), gid(gid), load_groups_(std::move(groups)) {}

  // The daemon's own work: root.
  static Caller daemon() { return Caller(0, 0); }

  bool in_group(std::uint32_t group) const;

  std::uint32_t uid = 0, gid = 0;

 private:
  std::function<std::vector<std::uint32_t>()> load_groups_;
  mutable std::optional<std::vector<std::uint32_t>> groups_;
};

// The attributes a permission check reads.
struct Access {
  std::uint32_t mode = 0;  // st_mode, type bits included
  std::uint32_t uid = 0, gid = 0;
};

// Whether `who` may access a node with attributes `node` for every bit of
// `mask` (R_OK, W_OK, X_OK from <unistd.h>), as the kernel's
// generic_permission decides without ACLs.
bool may_access(const Caller& who, const Access& node, int mask);

// The mode of a node under A@ (or D@) given A's (D's) mode: A's read bits;
// a directory also gets x wherever it has r, so whoever may read A may walk
// its views; write, execute, setuid, setgid and sticky bits are cleared.
std::uint32_t view_mode(std::uint32_t array_mode, bool directory);

// The user whose FUSE request the calling thread is serving, for attributing
// lines of /.mmfs/errors (fs/util/error_log.h): set for the length of a request by
// fuse_ops' guard; nullopt on the daemon's own threads (the flusher, the
// scrub), whose lines only root reads. Attribution only: no permission
// decision reads it (those take a Caller explicitly).
std::optional<std::uint32_t> request_owner();

class RequestOwnerScope {
 public:
  explicit RequestOwnerScope(std::uint32_t uid);
  ~RequestOwnerScope();
  RequestOwnerScope(const RequestOwnerScope&) = delete;
  RequestOwnerScope& operator=(const RequestOwnerScope&) = delete;

 private:
  std::optional<std::uint32_t> previous_;
};

}  // namespace mmfs::daemon
