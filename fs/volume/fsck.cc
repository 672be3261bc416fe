#include "fs/volume/fsck.h"

#include <fmt/format.h>

#include <algorithm>
#include <sys/stat.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace mmfs::fs {
namespace {

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
  std::set<Ino> xattr_owners, extent_owners, checksum_owners, alt_owners, index_owners, mloc_owners, copy_owners;
  std::uint64_t next_ino = 0;
  store.scan("", [&](std::string_view key, std::string_view value) {
    const std::string k(key);
    const auto parsed = keys::parse(key);
    auto unknown = [&] {
      problem(fmt::format("unknown metadata record '{}'", key.substr(0, 16)), true);
      fix.del(k);
    };
    if (!parsed) {
      unknown();
      return true;
    }
    const Ino ino = parsed->ino;
    switch (parsed->kind) {
      case keys::Kind::Inode:
        if (auto n = decode_inode(value); n && n->ino == ino) {
          inodes[ino] = *n;
        } else {
          problem(fmt::format("inode {} does not decode", ino), true);
          fix.del(k);
        }
        break;
      case keys::Kind::Dirent:
        if (auto child = decode_ino(value)) {
          dirents.push_back({ino, std::string(parsed->name), *child});
        } else {
          problem(fmt::format("directory entry '{}' is malformed", parsed->name), true);
          fix.del(k);
        }
        break;
      case keys::Kind::Xattr: xattr_owners.insert(ino); break;
      case keys::Kind::Extents:
        extent_owners.insert(ino);
        if (!decode_extents(value)) problem(fmt::format("the extent map of inode {} does not decode", ino), false);
        break;
      case keys::Kind::IndexExtents:
        index_owners.insert(ino);
        if (!decode_extents(value))
          problem(fmt::format("the index extent map of inode {} does not decode", ino), false);
        break;
      case keys::Kind::MlocExtents:
        mloc_owners.insert(ino);
        if (!decode_extents(value))
          problem(fmt::format("the mloc image extent map of inode {} does not decode", ino), false);
        break;
      case keys::Kind::CopyExtents:
        copy_owners.insert(ino);
        if (!decode_extents(value))
          problem(fmt::format("the extent map of copy slot {} of inode {} does not decode", parsed->slot, ino), false);
        break;
      case keys::Kind::CopyChecksums:
      case keys::Kind::CopyAltChecksums:
        copy_owners.insert(ino);
        if (value.empty() || value.size() % 4)
          problem(fmt::format("a copy's checksum record of inode {} is malformed", ino), false);
        break;
      case keys::Kind::IndexRecord:
      case keys::Kind::IndexPending: index_owners.insert(ino); break;
      case keys::Kind::AltChecksums:
        alt_owners.insert(ino);
        if (value.empty() || value.size() % 4)
          problem(fmt::format("an alternative-checksum record of inode {} is malformed", ino), false);
        break;
      case keys::Kind::Checksums:
        checksum_owners.insert(ino);
        if (value.empty() || value.size() % 4)
          problem(fmt::format("a checksum record of inode {} is malformed", ino), false);
        break;
      case keys::Kind::NextIno:
        if (auto n = decode_ino(value)) next_ino = *n;
        else unknown();
        break;
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
  std::set<const Dirent*> second_names;  // dropped: they count toward no link
  while (!stack.empty()) {
    Ino dir = stack.back();
    stack.pop_back();
    for (const Dirent* d : children[dir]) {
      if (reached.count(d->child)) {
        if (S_ISDIR(inodes[d->child].mode)) {
          problem(fmt::format("directory {} has a second name '{}'", d->child, d->name), true);
          fix.del(keys::dirent(d->parent, d->name));
          second_names.insert(d);
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
        if (!removed.count(d->child) && !second_names.count(d) && S_ISDIR(inodes[d->child].mode) &&
            dir_parent[d->child] == ino)
          ++expect;
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
  // An array's copies: keys of a slot its schema record does not list are
  // stray (dropped); a listed slot without an extent map is damage.
  for (Ino ino : copy_owners) {
    if (!inodes.count(ino) || removed.count(ino)) continue;
    const auto record = store.get(keys::xattr(ino, "mmfs.schema"));
    if (!record) continue;
    const auto j = nlohmann::json::parse(*record, nullptr, false);
    if (!j.is_object()) continue;  // a schema that does not decode: the array's open says so
    std::set<unsigned> listed;
    if (auto it = j.find("copies"); it != j.end() && it->is_array())
      for (const auto& c : *it)
        if (c.is_object() && c.contains("slot") && c["slot"].is_number_unsigned())
          listed.insert(c["slot"].get<unsigned>());
    std::set<unsigned> stored;
    for (const std::string& prefix : {keys::extents(ino) + "k", keys::checksum_prefix(ino, keys::kCopyChecksumTable),
                                      keys::checksum_prefix(ino, keys::kCopyAltChecksumTable)})
      store.scan(prefix, [&](std::string_view k, std::string_view) {
        const auto parsed = keys::parse(k);
        if (!parsed) return true;
        if (parsed->kind == keys::Kind::CopyExtents) stored.insert(parsed->slot);
        if (!listed.count(parsed->slot)) {
          problem(fmt::format("a record of copy slot {} of inode {}, which lists no such copy", parsed->slot, ino),
                  true);
          fix.del(std::string(k));
        }
        return true;
      });
    for (unsigned slot : listed)
      if (slot != 0 && !stored.count(slot))
        problem(fmt::format("copy slot {} of inode {} has no extent map", slot, ino), false);
    // Copies on member sets (docs/on-disk-format.md): a listed copy with
    // members has its set's extents; a record of a slot not listed is stray.
    // (Whether they name the extent map's sectors, the array's open checks.)
    std::set<unsigned> on_sets;
    if (auto it = j.find("copies"); it != j.end() && it->is_array())
      for (const auto& c : *it)
        if (c.is_object() && c.contains("members") && c.contains("slot") && c["slot"].is_number_unsigned())
          on_sets.insert(c["slot"].get<unsigned>());
    const std::string set_prefix = keys::xattr(ino, "mmfs.set_extents.");
    std::set<unsigned> recorded;
    store.scan(set_prefix, [&](std::string_view k, std::string_view) {
      const std::string_view tail = k.substr(set_prefix.size());
      unsigned slot = 0;
      const bool number = !tail.empty() && tail.size() <= 3 &&
                          std::all_of(tail.begin(), tail.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
      if (number) slot = unsigned(std::stoul(std::string(tail)));
      if (number && on_sets.count(slot)) {
        recorded.insert(slot);
      } else {
        problem(fmt::format("a member-set record '{}' of inode {}, which lists no such copy on a member set",
                            k.substr(keys::xattr_prefix(ino).size()), ino),
                true);
        fix.del(std::string(k));
      }
      return true;
    });
    // An mloc copy's image record (keys::copy_mloc_record) of a slot not listed is stray.
    const std::string image_prefix = keys::xattr(ino, "mmfs.mloc.");
    store.scan(image_prefix, [&](std::string_view k, std::string_view) {
      const std::string_view tail = k.substr(image_prefix.size());
      const bool number = !tail.empty() && tail.size() <= 3 &&
                          std::all_of(tail.begin(), tail.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
      if (!number || !listed.count(unsigned(std::stoul(std::string(tail))))) {
        problem(fmt::format("an mloc copy record '{}' of inode {}, which lists no such copy",
                            k.substr(keys::xattr_prefix(ino).size()), ino),
                true);
        fix.del(std::string(k));
      }
      return true;
    });
    for (unsigned slot : on_sets)
      if (!recorded.count(slot))
        problem(fmt::format("copy slot {} of inode {} lies on a member set but its set's extents are missing", slot,
                            ino),
                false);
  }
  for (Ino ino : copy_owners)
    if (!inodes.count(ino) || removed.count(ino)) {
      problem(fmt::format("extra copies of missing inode {}", ino), true);
      for (const std::string& prefix : {keys::extents(ino) + "k", keys::checksum_prefix(ino, keys::kCopyChecksumTable),
                                        keys::checksum_prefix(ino, keys::kCopyAltChecksumTable)})
        store.scan(prefix, [&](std::string_view k, std::string_view) {
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
    fix.put(keys::next_ino(), encode_ino(max_ino + 1));
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
