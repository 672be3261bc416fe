// The virtual nodes the kernel holds: every view path under A@ or D@ and
// every /.mmfs path it has looked up, by inode number (the top bit set), with
// the kernel's lookup count. A node lives while the kernel holds it; its
// slot then serves another path, so the table stays as large as the kernel's
// working set of view paths, not the number ever looked up.
//
// Thread-safe; its mutex is a leaf (nothing else is locked under it).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
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

  static VirtualNode control() { return VirtualNode{}; }
  static VirtualNode of_array(Ino array, Ino home) { return VirtualNode{array, {}, true, home, false}; }
  static VirtualNode of_directory(Ino dir) { return VirtualNode{0, {}, true, dir, true}; }
};

class VirtualNodes {
 public:
  VirtualNodes();
  // The node of `vino`; false for a number that names none (now).
  bool get(Ino vino, VirtualNode* out) const;
  // The number of `name` under `parent_vino` (a virtual node, or the real
  // directory of A@/D@/.mmfs), one more lookup of it: the same number while
  // the kernel holds the same path, a fresh one otherwise.
  Ino intern(Ino parent_vino, const std::string& name, VirtualNode node);
  // The kernel dropped `nlookup` references; at none the slot is freed.
  void forget(Ino vino, std::uint64_t nlookup);

 private:
  struct Slot {
    VirtualNode node;
    bool live = false;
    std::uint64_t lookups = 0;        // entries given to the kernel, not yet forgotten
    std::pair<Ino, std::string> key;  // (parent, name) in index_
  };
  mutable std::mutex mu_;
  std::vector<Slot> slots_;  // slot 0 unused: a virtual number is never just the top bit
  std::map<std::pair<Ino, std::string>, Ino> index_;
  std::vector<std::uint64_t> free_;
};

}  // namespace mmfs::daemon
