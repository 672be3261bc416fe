#include "fs/volume/fsck.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <map>
#include <set>

namespace mmfs::fs {
namespace {

std::uint64_t be64(std::string_view s) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | std::uint8_t(s[i]);
  return v;
}

struct Dirent {
  Ino parent;
  std::string name;
  Ino child;
};

}  // namespace

FsckReport check_volume(Volume& vol, bool repair) {
  FsckReport rep;
  MetaStore& store = vol.store();
  WriteBatch fix;
  auto problem = [&](std::string what, bool fixable) {
    rep.problems.push_back(what);
    if (repair && fixable) rep.repairs.push_back("fixed: " + what);
    else if (repair || !fixable) ++rep.uncorrected;
  };

  // 1. Superblock copies.
  if (!vol.primary_valid() || !vol.backup_valid()) {
    problem(fmt::format("{} superblock is damaged or differs from the other copy",
                        vol.primary_valid() ? "the backup" : "the primary"),
            true);
    if (repair) vol.rewrite_superblocks();
  }
  // 2. What the open found: damaged metadata copies (rewritten from their
  // twins, or a salvaged prefix, with repair), extents used twice or outside
  // the data area, no root.
  const MetaOpenReport& meta = vol.metadata_report();
  for (const std::string& p : meta.problems) {
    rep.problems.push_back(p);
    if (!repair) ++rep.uncorrected;
  }
  for (const std::string& r : meta.repairs) rep.repairs.push_back(r);
  for (const std::string& p : vol.problems()) problem(p, false);

  // 3. Every record.
  std::map<Ino, Inode> inodes;
  std::vector<Dirent> dirents;
  std::set<Ino> xattr_owners, extent_owners, checksum_owners, alt_owners, index_owners, mloc_owners;
  std::uint64_t next_ino = 0;
  store.scan("", [&](std::string_view key, std::string_view value) {
    std::string k(key);
    if (key.size() == 10 && key.substr(0, 2) == "i/") {
      Ino ino = be64(key.substr(2));
      auto n = decode_inode(value);
      if (!n || n->ino != ino) {
        problem(fmt::format("inode {} does not decode", ino), true);
        fix.del(k);
      } else {
        inodes[ino] = *n;
      }
    } else if (key.size() > 10 && key.substr(0, 2) == "d/") {
      if (value.size() != 8) {
        problem(fmt::format("directory entry '{}' is malformed", key.substr(10)), true);
        fix.del(k);
      } else {
        dirents.push_back({be64(key.substr(2)), std::string(key.substr(10)), be64(value)});
      }
    } else if (key.size() > 10 && key.substr(0, 2) == "x/") {
      xattr_owners.insert(be64(key.substr(2)));
    } else if (key.size() == 10 && key.substr(0, 2) == "e/") {
      extent_owners.insert(be64(key.substr(2)));
      if (!decode_extents(value)) {
        problem(fmt::format("the extent map of inode {} does not decode", be64(key.substr(2))), false);
      }
    } else if (key.size() == 11 && key.substr(0, 2) == "e/" && key[10] == 'i') {
      index_owners.insert(be64(key.substr(2)));
      if (!decode_extents(value))
        problem(fmt::format("the index extent map of inode {} does not decode", be64(key.substr(2))), false);
    } else if (key.size() == 11 && key.substr(0, 2) == "e/" && key[10] == 'm') {
      mloc_owners.insert(be64(key.substr(2)));
      if (!decode_extents(value))
        problem(fmt::format("the mloc image extent map of inode {} does not decode", be64(key.substr(2))), false);
    } else if ((key.size() == 10 || (key.size() == 11 && key[10] == 'p')) && key.substr(0, 2) == "q/") {
      index_owners.insert(be64(key.substr(2)));
    } else if (key.size() == 18 && key.substr(0, 2) == "a/") {
      alt_owners.insert(be64(key.substr(2)));
      if (value.empty() || value.size() % 4) problem(fmt::format("an alternative-checksum record of inode {} is malformed", be64(key.substr(2))), false);
    } else if (key.size() == 18 && key.substr(0, 2) == "c/") {
      checksum_owners.insert(be64(key.substr(2)));
      if (value.empty() || value.size() % 4) problem(fmt::format("a checksum record of inode {} is malformed", be64(key.substr(2))), false);
    } else if (key == keys::next_ino() && value.size() == 8) {
      next_ino = be64(value);
    } else {
      problem(fmt::format("unknown metadata record '{}'", key.substr(0, 16)), true);
      fix.del(k);
    }
    return true;
  });

  auto root = inodes.find(kRootIno);
  if (root == inodes.end() || !S_ISDIR(root->second.mode)) {
    problem("the root directory is missing or not a directory", false);
    return rep;
  }

  // 4. Directory entries: both ends exist, the parent is a directory.
  std::map<Ino, std::vector<const Dirent*>> children;
  std::map<Ino, std::vector<const Dirent*>> names_of;
  for (const Dirent& d : dirents) {
    auto p = inodes.find(d.parent);
    if (p == inodes.end() || !S_ISDIR(p->second.mode) || !inodes.count(d.child) || d.child == kRootIno) {
      problem(fmt::format("directory entry '{}' in {} points nowhere valid (inode {})", d.name, d.parent, d.child),
              true);
      fix.del(keys::dirent(d.parent, d.name));
      continue;
    }
    children[d.parent].push_back(&d);
    names_of[d.child].push_back(&d);
  }

  // 5. Reachability from the root, one name per directory.
  std::set<Ino> reached = {kRootIno};
  std::vector<Ino> stack = {kRootIno};
  std::map<Ino, Ino> dir_parent = {{kRootIno, kRootIno}};
  while (!stack.empty()) {
    Ino dir = stack.back();
    stack.pop_back();
    for (const Dirent* d : children[dir]) {
      if (reached.count(d->child)) {
        if (S_ISDIR(inodes[d->child].mode)) {
          problem(fmt::format("directory {} has a second name '{}'", d->child, d->name), true);
          fix.del(keys::dirent(d->parent, d->name));
        }
        continue;
      }
      reached.insert(d->child);
      if (S_ISDIR(inodes[d->child].mode)) {
        dir_parent[d->child] = dir;
        stack.push_back(d->child);
      }
    }
  }
  std::set<Ino> removed;
  for (auto& [ino, n] : inodes) {
    if (reached.count(ino)) continue;
    problem(fmt::format("inode {} is not reachable from the root", ino), true);
    fix.del(keys::inode(ino));
    fix.del(keys::extents(ino));
    removed.insert(ino);
    for (const Dirent* d : children[ino]) fix.del(keys::dirent(d->parent, d->name));
  }

  // 6. Link counts and directory parents.
  for (auto& [ino, n] : inodes) {
    if (removed.count(ino)) continue;
    std::uint32_t expect = 0;
    if (S_ISDIR(n.mode)) {
      expect = 2;
      for (const Dirent* d : children[ino])
        if (!removed.count(d->child) && S_ISDIR(inodes[d->child].mode) && dir_parent[d->child] == ino) ++expect;
    } else {
      for (const Dirent* d : names_of[ino])
        if (reached.count(d->parent) && !removed.count(d->parent)) ++expect;
    }
    Inode fixed = n;
    bool changed = false;
    if (n.nlink != expect) {
      problem(fmt::format("inode {} has link count {}, should be {}", ino, n.nlink, expect), true);
      fixed.nlink = expect;
      changed = true;
    }
    if (S_ISDIR(n.mode) && n.parent != dir_parent[ino]) {
      problem(fmt::format("directory {} records parent {}, its entry is in {}", ino, n.parent, dir_parent[ino]), true);
      fixed.parent = dir_parent[ino];
      changed = true;
    }
    if (changed) fix.put(keys::inode(ino), encode_inode(fixed));
  }

  // 7. Stray xattrs and extent maps, and the inode counter.
  // Records keyed under an inode that no longer exists (or was just removed).
  auto drop_stray = [&](const std::set<Ino>& owners, std::string (*prefix)(Ino), const char* what) {
    for (Ino ino : owners) {
      if (inodes.count(ino) && !removed.count(ino)) continue;
      problem(fmt::format("{} of missing inode {}", what, ino), true);
      store.scan(prefix(ino), [&](std::string_view k, std::string_view) {
        fix.del(std::string(k));
        return true;
      });
    }
  };
  drop_stray(xattr_owners, keys::xattr_prefix, "extended attributes");
  drop_stray(checksum_owners, keys::checksum_prefix, "cell checksums");
  drop_stray(alt_owners, keys::alt_checksum_prefix, "alternative cell checksums");
  for (Ino ino : index_owners)
    if (!inodes.count(ino) || removed.count(ino)) {
      problem(fmt::format("bitmap index of missing inode {}", ino), true);
      fix.del(keys::index_extents(ino));
      store.scan(keys::index_prefix(ino), [&](std::string_view k, std::string_view) {
        fix.del(std::string(k));
        return true;
      });
    }
  for (Ino ino : mloc_owners)
    if (!inodes.count(ino) || removed.count(ino)) {
      problem(fmt::format("mloc image of missing inode {}", ino), true);
      fix.del(keys::mloc_extents(ino));
    }
  for (Ino ino : extent_owners)
    if (!inodes.count(ino) && !removed.count(ino)) {
      problem(fmt::format("extent map of missing inode {}", ino), true);
      fix.del(keys::extents(ino));
    }
  Ino max_ino = inodes.empty() ? kRootIno : inodes.rbegin()->first;
  if (next_ino <= max_ino) {
    problem(fmt::format("the next inode number {} is not above the largest inode {}", next_ino, max_ino), true);
    std::string v;
    for (int i = 7; i >= 0; --i) v.push_back(char(((max_ino + 1) >> (8 * i)) & 0xff));
    fix.put(keys::next_ino(), v);
  }

  if (repair && !fix.empty()) {
    if (store.apply(fix) || store.sync()) {
      rep.repairs.clear();
      ++rep.uncorrected;
      rep.problems.push_back("writing the repairs failed");
    }
  }
  return rep;
}

}  // namespace mmfs::fs
