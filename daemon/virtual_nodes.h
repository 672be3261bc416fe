// The virtual nodes the kernel holds: every view path under A@ or D@ and
// every /.mmfs path it has looked up, by inode number (the top bit set), with
// the kernel's lookup count. A node lives while the kernel holds it; its
// slot then serves another path, so the table stays as large as the kernel's
// working set of view paths, not the number ever looked up.
//
// A node of an array's views whose attributes follow from the array's inode
// and schema alone (a directory, a data view, a Zarr chunk) is marked
// `stable`: the kernel may cache it (daemon/fuse_ops.cc), and every change of
// the array that could change it invalidates the array's nodes (nodes_of).
//
// Thread-safe; its mutex is a leaf (nothing else is locked under it).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "fs/meta/metadata.h"

namespace mmfs::daemon {

using fs::Ino;

// Virtual nodes (views, /.mmfs) have the top bit set in their inode number.
constexpr Ino kVirtualBit = 1ull << 63;

// What a virtual inode number names.
struct VirtualNode {
  Ino array = 0;                        // A of A@; 0 for /.mmfs and for D@
  std::vector<std::string> components;  // after A@, D@ or /.mmfs
  bool dir = true;
  Ino home = 0;                         // the directory holding A (of A@), or D itself (of D@)
  bool table = false;                   // D@: a directory's views
  std::string root;                     // the name `A@` in `home` the array's views were reached by

  static VirtualNode control() { return VirtualNode{}; }
  static VirtualNode of_array(Ino array, Ino home, std::string root) {
    return VirtualNode{array, {}, true, home, false, std::move(root)};
  }
  static VirtualNode of_directory(Ino dir) { return VirtualNode{0, {}, true, dir, true, {}}; }
};

class VirtualNodes {
 public:
  VirtualNodes();
  // The node of `vino`: 0; ENOENT for a number that names none (now);
  // ESTALE for a node reached through a name that is gone (retire), so that
  // the kernel walks the path again, looking every name up afresh.
  int find(Ino vino, VirtualNode* out) const;
  bool get(Ino vino, VirtualNode* out) const { return find(vino, out) == 0; }
  // The number of `name` under `parent_vino` (a virtual node, or the real
  // directory of A@/D@/.mmfs), one more lookup of it: the same number while
  // the kernel holds the same path, a fresh one otherwise.
  Ino intern(Ino parent_vino, const std::string& name, VirtualNode node);
  // The kernel dropped `nlookup` references; at none the slot is freed.
  void forget(Ino vino, std::uint64_t nlookup);

  // Whether the kernel may cache `vino`'s entry and attributes (see above).
  void set_stable(Ino vino, bool stable);
  bool stable(Ino vino) const;
  // Every node the kernel holds under A@ (all its names) for array `array`.
  std::vector<Ino> nodes_of(Ino array) const;
  // A's name `name` (an `A@`) in real directory `parent` is gone (A was
  // unlinked or renamed): every node reached through it names nothing from
  // now on (get() is false), though the kernel may hold it until told to
  // drop the name. The array, when the kernel held its views there.
  std::optional<Ino> retire(Ino parent, const std::string& name);

 private:
  struct Slot {
    VirtualNode node;
    bool live = false;
    std::uint64_t lookups = 0;        // entries given to the kernel, not yet forgotten
    std::pair<Ino, std::string> key;  // (parent, name) in index_
    bool stable = false;
    bool retired = false;  // reached through a name that is gone (retire)
  };
  void release_locked(std::uint64_t i);
  mutable std::mutex mu_;
  std::vector<Slot> slots_;  // slot 0 unused: a virtual number is never just the top bit
  std::map<std::pair<Ino, std::string>, Ino> index_;
  std::vector<std::uint64_t> free_;
  std::unordered_map<Ino, std::unordered_set<Ino>> by_array_;  // array -> its live view nodes
};

}  // namespace mmfs::daemon
