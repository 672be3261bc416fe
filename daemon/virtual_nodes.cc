#include "daemon/virtual_nodes.h"

#include <algorithm>
#include <cerrno>

namespace mmfs::daemon {

VirtualNodes::VirtualNodes() { slots_.emplace_back(); }

int VirtualNodes::find(Ino vino, VirtualNode* out) const {
  std::lock_guard lock(mu_);
  const std::uint64_t i = vino & ~kVirtualBit;
  if (!(vino & kVirtualBit) || i == 0 || i >= slots_.size() || !slots_[i].live) return ENOENT;
  if (slots_[i].retired) return ESTALE;
  *out = slots_[i].node;
  return 0;
}

Ino VirtualNodes::intern(Ino parent_vino, const std::string& name, VirtualNode node) {
  std::lock_guard lock(mu_);
  auto key = std::make_pair(parent_vino, name);
  if (auto it = index_.find(key); it != index_.end()) {
    Slot& s = slots_[it->second & ~kVirtualBit];
    if (!s.retired && s.node.array == node.array && s.node.components == node.components) {
      s.node.dir = node.dir;
      ++s.lookups;
      return it->second;
    }
  }
  const Ino array = node.table ? 0 : node.array;
  Slot slot{std::move(node), true, 1, key, false, false};
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
  // A name of the path may still map to an older node (the kernel holds it
  // and the path now names another array): that node keeps its slot until
  // forgotten, only the name moves.
  index_[key] = vino;
  if (array != 0) by_array_[array].insert(vino);
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
  release_locked(i);
}

void VirtualNodes::release_locked(std::uint64_t i) {
  // The kernel holds no reference any more: the slot can serve another path.
  Slot& s = slots_[i];
  const Ino vino = kVirtualBit | i;
  if (auto it = index_.find(s.key); it != index_.end() && it->second == vino) index_.erase(it);
  if (!s.node.table && s.node.array != 0)
    if (auto it = by_array_.find(s.node.array); it != by_array_.end()) {
      it->second.erase(vino);
      if (it->second.empty()) by_array_.erase(it);
    }
  s = Slot{};
  free_.push_back(i);
}

void VirtualNodes::set_stable(Ino vino, bool stable) {
  std::lock_guard lock(mu_);
  const std::uint64_t i = vino & ~kVirtualBit;
  if ((vino & kVirtualBit) && i != 0 && i < slots_.size() && slots_[i].live) slots_[i].stable = stable;
}

bool VirtualNodes::stable(Ino vino) const {
  std::lock_guard lock(mu_);
  const std::uint64_t i = vino & ~kVirtualBit;
  return (vino & kVirtualBit) && i != 0 && i < slots_.size() && slots_[i].live && slots_[i].stable;
}

std::vector<Ino> VirtualNodes::nodes_of(Ino array) const {
  std::lock_guard lock(mu_);
  auto it = by_array_.find(array);
  if (it == by_array_.end()) return {};
  return std::vector<Ino>(it->second.begin(), it->second.end());
}

std::optional<Ino> VirtualNodes::retire(Ino parent, const std::string& name) {
  std::lock_guard lock(mu_);
  auto it = index_.find({parent, name});
  if (it == index_.end()) return std::nullopt;
  const VirtualNode& root = slots_[it->second & ~kVirtualBit].node;
  if (root.table || root.array == 0) return std::nullopt;
  const Ino array = root.array;
  if (auto nodes = by_array_.find(array); nodes != by_array_.end())
    for (Ino vino : nodes->second) {
      Slot& s = slots_[vino & ~kVirtualBit];
      if (s.node.home != parent || s.node.root != name) continue;  // reached through another name
      s.retired = true;
      if (auto named = index_.find(s.key); named != index_.end() && named->second == vino) index_.erase(named);
    }
  return array;
}

}  // namespace mmfs::daemon
