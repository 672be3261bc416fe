#include "daemon/virtual_nodes.h"

#include <algorithm>

namespace mmfs::daemon {

VirtualNodes::VirtualNodes() { slots_.emplace_back(); }

bool VirtualNodes::get(Ino vino, VirtualNode* out) const {
  std::lock_guard lock(mu_);
  const std::uint64_t i = vino & ~kVirtualBit;
  if (!(vino & kVirtualBit) || i == 0 || i >= slots_.size() || !slots_[i].live) return false;
  *out = slots_[i].node;
  return true;
}

Ino VirtualNodes::intern(Ino parent_vino, const std::string& name, VirtualNode node) {
  std::lock_guard lock(mu_);
  auto key = std::make_pair(parent_vino, name);
  if (auto it = index_.find(key); it != index_.end()) {
    Slot& s = slots_[it->second & ~kVirtualBit];
    if (s.node.array == node.array && s.node.components == node.components) {
      s.node.dir = node.dir;
      ++s.lookups;
      return it->second;
    }
  }
  Slot slot{std::move(node), true, 1, key};
  std::uint64_t i;
  if (!free_.empty()) {
    i = free_.back();
    free_.pop_back();
    slots_[i] = std::move(slot);
  } else {
    i = slots_.size();
    slots_.push_back(std::move(slot));
  }
  const Ino vino = kVirtualBit | i;
  index_[key] = vino;
  return vino;
}

void VirtualNodes::forget(Ino vino, std::uint64_t nlookup) {
  if (!(vino & kVirtualBit)) return;
  std::lock_guard lock(mu_);
  const std::uint64_t i = vino & ~kVirtualBit;
  if (i == 0 || i >= slots_.size() || !slots_[i].live) return;
  Slot& s = slots_[i];
  s.lookups -= std::min(s.lookups, nlookup);
  if (s.lookups > 0) return;
  // The kernel holds no reference any more: the slot can serve another path.
  if (auto it = index_.find(s.key); it != index_.end() && it->second == vino) index_.erase(it);
  s = Slot{};
  free_.push_back(i);
}

}  // namespace mmfs::daemon
