#include "daemon/caller.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

namespace mmfs::daemon {

namespace {
thread_local std::optional<std::uint32_t> current_owner;
}  // namespace

bool Caller::in_group(std::uint32_t group) const {
  if (group == gid) return true;
  if (!groups_) groups_ = load_groups_ ? load_groups_() : std::vector<std::uint32_t>{};
  return std::find(groups_->begin(), groups_->end(), group) != groups_->end();
}

bool may_access(const Caller& who, const Access& node, int mask) {
  mask &= R_OK | W_OK | X_OK;
  if (who.uid == 0) {
    // CAP_DAC_OVERRIDE: reads and writes pass; execute needs a directory or some x bit.
    if (!(mask & X_OK)) return true;
    return S_ISDIR(node.mode) || (node.mode & 0111) != 0;
  }
  std::uint32_t bits;
  if (who.uid == node.uid) bits = (node.mode >> 6) & 7;
  else if (who.in_group(node.gid)) bits = (node.mode >> 3) & 7;
  else bits = node.mode & 7;
  // R_OK, W_OK and X_OK are 4, 2 and 1: the rwx bits' own values.
  return (bits & std::uint32_t(mask)) == std::uint32_t(mask);
}

std::uint32_t view_mode(std::uint32_t array_mode, bool directory) {
  const std::uint32_t read = array_mode & 0444;
  return directory ? (S_IFDIR | read | (read >> 2)) : (S_IFREG | read);
}

std::optional<std::uint32_t> request_owner() { return current_owner; }

RequestOwnerScope::RequestOwnerScope(std::uint32_t uid) : previous_(current_owner) { current_owner = uid; }

RequestOwnerScope::~RequestOwnerScope() { current_owner = previous_; }

}  // namespace mmfs::daemon
