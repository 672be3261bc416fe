// Filesystem: which names may exist. NAME_MAX on every name an operation
// takes, and the `X@` convention: `A@` is the views of an array file A and
// `D@` those of a directory D (docs/reference.md §5), so a real entry named `X@` must
// never sit beside an X that has views — the views would hide it. mmfs
// refuses the second of the two with EEXIST (the name is taken, by X's views
// or by the real X@), whichever way they would meet: creating, linking or
// renaming to `X@` while X exists, making a directory or array X (mkdir,
// link, rename, setting user.mmfs.shape) while a real X@ exists.
#include <fmt/format.h>
#include <sys/stat.h>

#include <cerrno>

#include "daemon/filesystem.h"

namespace mmfs::daemon {

namespace {

constexpr std::size_t kNameMax = 255;  // NAME_MAX; statfs reports it as f_namemax

bool has_stem(const std::string& name) { return name.size() > 1 && name.back() == '@'; }

// A name for a message: long ones are cut (the line says how long they were).
std::string shown(const std::string& name) { return name.size() <= 64 ? name : name.substr(0, 48) + "..."; }

}  // namespace

int Filesystem::check_name_length(Ino parent, const std::string& name, bool existing) {
  // An existing `A@` may be one byte longer than NAME_MAX: the views of a
  // file whose name is NAME_MAX bytes long.
  std::size_t limit = existing && has_stem(name) ? kNameMax + 1 : kNameMax;
  if (name.size() <= limit) return 0;
  return record_at(ENAMETOOLONG, parent, shown(name),
                   fmt::format("the name is {} bytes long; a name is at most {} bytes (NAME_MAX)", name.size(),
                               kNameMax));
}

bool Filesystem::is_array(Ino ino) const {
  auto s = stored_schema(ino);
  return s && !s->shape.empty();
}

bool Filesystem::is_virtual_name(Ino parent, const std::string& name) {
  if (parent == fs::kRootIno && name == ".mmfs") return true;
  if (!has_stem(name)) return false;
  auto base = volume_->metadata().lookup(parent, name.substr(0, name.size() - 1));
  if (!base) return false;
  if (auto n = volume_->metadata().inode(*base); n && S_ISDIR(n->mode)) return true;
  return is_array(*base);
}

int Filesystem::check_new_entry(Ino parent, const std::string& name, bool has_views,
                                const std::optional<std::pair<Ino, std::string>>& leaving) {
  if (is_virtual_name(parent, name)) return record_at(EROFS, parent, name, "views and /.mmfs are read-only");
  fs::Metadata& md = volume_->metadata();
  auto gone = [&](const std::string& n) { return leaving && leaving->first == parent && leaving->second == n; };
  if (has_stem(name)) {
    std::string stem = name.substr(0, name.size() - 1);
    if (!gone(stem) && md.lookup(parent, stem))
      return record_at(EEXIST, parent, name,
                       fmt::format("'{}' exists, and '{}' names its views once it is an array: choose a name that "
                                   "does not end in '@', or another stem",
                                   shown(stem), shown(name)));
  }
  if (has_views && !gone(name + "@") && md.lookup(parent, name + "@"))
    return record_at(EEXIST, parent, name,
                     fmt::format("a real entry '{}@' exists, and the views of a directory or array '{}' would hide "
                                 "it: rename or remove '{}@' first",
                                 shown(name), shown(name), shown(name)));
  return 0;
}

int Filesystem::check_may_become_array(Ino ino, const std::string& attr) {
  fs::Metadata& md = volume_->metadata();
  // Every name of the file: the one it was reached by when that is all
  // (the common case), otherwise a scan of the directories.
  std::vector<std::pair<Ino, std::string>> names;
  if (auto known = names_.name_of(ino)) names.push_back(*known);
  auto n = md.inode(ino);
  if (!n) return ENOENT;
  if (names.empty() || n->nlink != 1 || md.lookup(names[0].first, names[0].second) != ino) names = md.names_of(ino);
  for (const auto& [parent, name] : names) {
    if (!md.lookup(parent, name + "@")) continue;
    return record(EEXIST, ino,
                  fmt::format("{}: a real entry '{}@' exists beside '{}', and the array's views would hide it: "
                              "rename or remove '{}@' first",
                              attr, shown(name), shown(name), shown(name)));
  }
  return 0;
}

}  // namespace mmfs::daemon
