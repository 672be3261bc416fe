// The daemon's own permission checks and the view nodes' modes
// (daemon/caller.h). The per-reader filter of /.mmfs/errors is tested with
// its log in tests/unit/fs/util/test_error_log.cc.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <thread>

#include "daemon/caller.h"

using mmfs::daemon::Access;
using mmfs::daemon::Caller;
using mmfs::daemon::may_access;
using mmfs::daemon::request_owner;
using mmfs::daemon::RequestOwnerScope;
using mmfs::daemon::view_mode;

namespace {
constexpr std::uint32_t kFile = S_IFREG, kDir = S_IFDIR;
}

TEST_CASE("may_access: owner, then group, then others, as generic_permission", "[caller]") {
  const Access file{kFile | 0640, 100, 200};
  CHECK(may_access(Caller(100, 1), file, R_OK));
  CHECK(may_access(Caller(100, 1), file, R_OK | W_OK));
  CHECK_FALSE(may_access(Caller(100, 1), file, X_OK));
  CHECK(may_access(Caller(101, 200), file, R_OK));
  CHECK_FALSE(may_access(Caller(101, 200), file, W_OK));
  CHECK_FALSE(may_access(Caller(101, 201), file, R_OK));
  // The owner's bits decide for the owner even when the group's or others' allow more.
  const Access odd{kFile | 0077, 100, 200};
  CHECK_FALSE(may_access(Caller(100, 200), odd, R_OK));
  CHECK(may_access(Caller(101, 200), odd, R_OK | W_OK | X_OK));
  // And the group's for a member, even when others may.
  const Access others_only{kFile | 0604, 100, 200};
  CHECK_FALSE(may_access(Caller(101, 200), others_only, R_OK));
  CHECK(may_access(Caller(101, 300), others_only, R_OK));
}

TEST_CASE("may_access: supplementary groups are asked for only when needed", "[caller]") {
  int asked = 0;
  Caller member(101, 300, [&] {
    ++asked;
    return std::vector<std::uint32_t>{250, 200};
  });
  const Access owned{kFile | 0640, 101, 200};
  CHECK(may_access(member, owned, R_OK));
  CHECK(asked == 0);  // the owner's bits decide
  const Access grp{kFile | 0640, 100, 200};
  CHECK(may_access(member, grp, R_OK));
  CHECK(may_access(member, grp, R_OK));
  CHECK(asked == 1);  // fetched once
  CHECK_FALSE(may_access(member, Access{kFile | 0640, 100, 999}, R_OK));
  CHECK_FALSE(may_access(Caller(101, 300), grp, R_OK));  // no groups known: not a member
}

TEST_CASE("may_access: root reads and writes anything, executes where an x bit is", "[caller]") {
  const Caller root = Caller::daemon();
  CHECK(may_access(root, Access{kFile | 0000, 5, 5}, R_OK | W_OK));
  CHECK_FALSE(may_access(root, Access{kFile | 0600, 5, 5}, X_OK));
  CHECK(may_access(root, Access{kFile | 0010, 5, 5}, X_OK));
  CHECK(may_access(root, Access{kDir | 0000, 5, 5}, X_OK));
}

TEST_CASE("view_mode: the read bits, and x where r on directories", "[caller]") {
  CHECK(view_mode(kFile | 0600, false) == (kFile | 0400));
  CHECK(view_mode(kFile | 0600, true) == (kDir | 0500));
  CHECK(view_mode(kFile | 0644, true) == (kDir | 0555));
  CHECK(view_mode(kFile | 0640, false) == (kFile | 0440));
  CHECK(view_mode(kFile | 0640, true) == (kDir | 0550));
  CHECK(view_mode(kFile | 0755, false) == (kFile | 0444));       // no x on a view file
  CHECK(view_mode(kFile | 04777, false) == (kFile | 0444));      // nor setuid
  CHECK(view_mode(kFile | 0711, true) == (kDir | 0500));         // x without r walks nothing
  CHECK(view_mode(kDir | 01777, true) == (kDir | 0555));         // D@ of a sticky directory
  CHECK(view_mode(kFile | 0222, true) == kDir);                  // write-only: nothing to read
}

TEST_CASE("request_owner: set for the length of a request, per thread", "[caller]") {
  CHECK_FALSE(request_owner());
  {
    RequestOwnerScope scope(42);
    CHECK(request_owner() == 42u);
    std::thread other([] { CHECK_FALSE(request_owner()); });
    other.join();
    {
      RequestOwnerScope inner(7);
      CHECK(request_owner() == 7u);
    }
    CHECK(request_owner() == 42u);
  }
  CHECK_FALSE(request_owner());
}
