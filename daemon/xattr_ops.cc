// Extended attributes of the mounted filesystem: user.mmfs.* is the array
// schema (a change may relayout or build an index, and is audited); other
// user.*, trusted.* and security.* attributes are stored as they are.
#include "daemon/filesystem.h"

#include <fmt/format.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "daemon/filesystem_detail.h"
#include "fs/util/buffer_pool.h"
#include "layouts/default_layout.h"
#include "layouts/model_default.h"

namespace mmfs::daemon {

using fs::ArrayFile;
using fs::ArraySchema;
using fs::Inode;
using namespace detail;

void Filesystem::audit_change(const Caller& who, Ino ino, const std::string& what) {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &utc);
  audit_.append(fmt::format("{} uid {} gid {} {}: {}", stamp, who.uid, who.gid, path_of(ino), what), who.uid);
}

int Filesystem::setxattr(Ino ino, const std::string& name, const std::string& value, int flags,
                         const Caller& who) {
  if (!is_mmfs_attr(name)) return set_xattr_unaudited(ino, name, value, flags, who);
  const int r = set_xattr_unaudited(ino, name, value, flags, who);
  if (r == 0) {
    // The value as typed, cut short: an index spec or a cell list fits, a pasted blob does not.
    std::string shown = value.substr(0, 80);
    for (char& c : shown)
      if (!std::isprint(static_cast<unsigned char>(c))) c = '?';
    audit_change(who, ino, fmt::format("set {}={}{}", name, shown, value.size() > 80 ? "..." : ""));
  }
  return r;
}

int Filesystem::set_xattr_unaudited(Ino ino, const std::string& name, const std::string& value, int flags,
                                    const Caller& who) {
  if (ino & kVirtualBit) return record(EROFS, ino, "views are read-only");
  if (read_only_) return EROFS;
  fs::Metadata& md = volume_->metadata();
  auto n = md.inode(ino);
  if (!n) return ENOENT;
  if (!is_mmfs_attr(name)) {
    if (name.rfind("user.", 0) != 0 && name.rfind("trusted.", 0) != 0 && name.rfind("security.", 0) != 0)
      return EOPNOTSUPP;
    bool exists = md.xattr(ino, name).has_value();
    if ((flags & XATTR_CREATE) && exists) return EEXIST;
    if ((flags & XATTR_REPLACE) && !exists) return ENODATA;
    return md.set_xattr(ino, name, value);
  }
  std::string attr = name.substr(fs::kSchemaPrefix.size());
  if (S_ISDIR(n->mode)) return table_setxattr(ino, attr, value, who);
  if (!S_ISREG(n->mode))
    return record(EINVAL, ino, fmt::format("{}: only regular files become arrays", name));
  const layouts::DefaultLayout rule = layouts::default_layout(volume_->geometry());
  ArraySchema fresh;
  fresh.layout = rule.layout;  // the volume's default, stored with the schema
  ArraySchema current = stored_schema(ino).value_or(fresh);
  ArraySchema next = current;
  // A new shape or dtype (allowed until the array holds data) is chosen for
  // again, when the model chose the layout and cell for the old one.
  const bool rechoose = !current.shape.empty() && (attr == "shape" || attr == "dtype") &&
                        layouts::cell_chosen_by_model(current.layout_rule) && !current.layout_set;
  if (rechoose) next.cell.clear();
  if (auto res = fs::set_schema_attr(next, attr, value)) return record(res.error, ino, res.message);
  if (rechoose) choose_layout_by_model(next);
  return [&]() -> int {
    std::string msg;
    if (!current.shape.empty()) {
      std::shared_ptr<ArrayFile> array;
      if (int r = array_for(ino, &array, &msg)) return record(r, ino, msg);
      if (int r = array->change_schema(next, &msg)) return record(r, ino, attr_message(name, msg));
      return 0;
    }
    if (next.shape.empty()) {  // an attribute set ahead of the shape
      if (int r = md.set_xattr(ino, std::string(ArrayFile::kSchemaXattr), fs::encode_schema(next))) return r;
      return 0;
    }
    // Setting the shape makes the file an array (and gives it views, A@).
    if (int r = check_may_become_array(ino, name)) return r;
    // The model's choice takes milliseconds: made before the registry lock.
    if (!next.layout_set) choose_layout_by_model(next);
    std::lock_guard lock(mu_);
    n = md.inode(ino);  // again, under the registry lock (a release may have just committed)
    if (!n) return ENOENT;
    OpenFile* file = open_.find(ino);
    std::shared_ptr<fs::PlainFile> plain;
    if (file && file->plain) plain = file->plain;
    else plain = std::make_shared<fs::PlainFile>(md, volume_->allocator(), io_, volume_->geometry(), ino, n->size);
    std::uint64_t need = fs::array_bytes(next);
    if (plain->size() != 0 && plain->size() != need)
      return record(EINVAL, ino,
                    fmt::format("{}: the file holds {} bytes but shape {} of {} needs {} (or an empty file)", name,
                                plain->size(), fs::schema_attr_text(next, "shape"), next.dtype.name, need));
    if (file && file->plain) commit_open_file(ino, *file);
    auto created = md.inode(ino);
    std::shared_ptr<ArrayFile> array;
    if (int r = ArrayFile::create(array_ctx_, *created, next, plain->size() ? plain.get() : nullptr, &array, &msg))
      return record(r, ino, attr_message(name, msg));
    arrays_.add(ino, array, member_failures_.load());
    if (file) {
      file->plain.reset();
      file->times_dirty = false;
      file->array = array;
    }
    return 0;
  }();
}

void Filesystem::choose_layout_by_model(fs::ArraySchema& schema, bool keep_cell) const {
  const std::vector<std::uint32_t> order =
      schema.order.empty() ? layouts::CellGrid::default_order(schema.shape.size()) : schema.order;
  std::vector<std::uint64_t> cell = schema.cell;
  if (keep_cell && cell.empty())  // the default cell the array has now (fs/array/array_layout.cc)
    cell = layouts::CellGrid::default_cell(schema.shape, schema.dtype.itemsize,
                                           layouts::CellGrid::default_cell_bytes(volume_->geometry().sector_size()),
                                           order);
  const layouts::ModelChoice choice =
      layouts::choose_by_model(volume_->geometry(), schema.shape, schema.dtype.itemsize, order, cell);
  schema.layout = choice.layout;
  // Stored as user.mmfs.cell: a later rule never moves this array.
  if (schema.cell.empty()) schema.cell = choice.cell;
  schema.layout_rule = choice.rule.substr(0, fs::kMaxLayoutRule);
}

int Filesystem::getxattr(Ino ino, const std::string& name, std::string* value) {
  if (ino & kVirtualBit) return ENODATA;
  if (!is_mmfs_attr(name)) {
    auto v = volume_->metadata().xattr(ino, name);
    if (!v) return ENODATA;
    *value = *v;
    return 0;
  }
  std::string attr = name.substr(fs::kSchemaPrefix.size());
  if (!fs::is_schema_attr(attr)) return ENODATA;
  {
    // A loaded array answers from its schema in memory: decoding the stored
    // record (JSON) took longer than the FUSE round trip, and an opener
    // (mmfs.open, xarray) asks for five of these.
    std::shared_ptr<ArrayFile> loaded;
    {
      std::lock_guard lock(mu_);
      loaded = arrays_.find(ino, member_failures_.load());
    }
    if (loaded) {
      *value = loaded->attr_text(attr);
      return 0;
    }
  }
  if (auto n = volume_->metadata().inode(ino); n && S_ISDIR(n->mode)) return table_getxattr(ino, attr, value);
  auto schema = stored_schema(ino);
  if (!schema) return ENODATA;
  if (schema->shape.empty()) {
    *value = fs::schema_attr_text(*schema, attr);
    return value->empty() ? ENODATA : 0;
  }
  std::shared_ptr<ArrayFile> array;
  std::string msg;
  if (int r = array_for(ino, &array, &msg)) return record(r, ino, msg);
  *value = array->attr_text(attr);
  return 0;
}

int Filesystem::listxattr(Ino ino, std::vector<std::string>* names) {
  if (ino & kVirtualBit) return 0;
  for (auto& n : volume_->metadata().xattr_names(ino))
    if (n != ArrayFile::kSchemaXattr && n != fs::kTableXattr) names->push_back(n);
  if (table_record(ino))
    for (const char* a : {"layout", "shape"}) names->push_back(std::string(fs::kSchemaPrefix) + a);
  if (auto schema = stored_schema(ino)) {
    for (const auto& a : fs::schema_attr_names()) {
      if (schema->shape.empty() && fs::schema_attr_text(*schema, a).empty()) continue;
      names->push_back(std::string(fs::kSchemaPrefix) + a);
    }
  }
  return 0;
}

int Filesystem::removexattr(Ino ino, const std::string& name, const Caller& who) {
  if (!is_mmfs_attr(name) || (ino & kVirtualBit)) return remove_xattr_unaudited(ino, name, who);
  const int r = remove_xattr_unaudited(ino, name, who);
  if (r == 0) audit_change(who, ino, "removed " + name);
  return r;
}

int Filesystem::remove_xattr_unaudited(Ino ino, const std::string& name, const Caller& who) {
  if (ino & kVirtualBit) return record(EROFS, ino, "views are read-only");
  if (read_only_) return EROFS;
  if (!is_mmfs_attr(name)) return volume_->metadata().remove_xattr(ino, name);
  std::string attr = name.substr(fs::kSchemaPrefix.size());
  if (auto n = volume_->metadata().inode(ino); n && S_ISDIR(n->mode)) {
    // A table leaves its capsules for the volume's default layout.
    if (attr != "layout" || !table_record(ino)) return ENODATA;
    return table_setxattr(ino, attr, layouts::default_layout(volume_->geometry()).layout, who);
  }
  auto current = stored_schema(ino);
  if (!current) return ENODATA;
  ArraySchema next = *current;
  if (auto res = fs::reset_schema_attr(next, attr)) return record(res.error, ino, res.message);
  if (attr == "layout") {
    next.layout = layouts::default_layout(volume_->geometry()).layout;
    // An array goes back to the model's choice for its shape (its cell kept: only the layout was removed).
    if (!next.shape.empty()) choose_layout_by_model(next, /*keep_cell=*/true);
  }
  if (current->shape.empty())
    return volume_->metadata().set_xattr(ino, std::string(ArrayFile::kSchemaXattr), fs::encode_schema(next));
  std::shared_ptr<ArrayFile> array;
  std::string msg;
  if (int r = array_for(ino, &array, &msg)) return record(r, ino, msg);
  if (int r = array->change_schema(next, &msg)) return record(r, ino, attr_message(name, msg));
  return 0;
}

}  // namespace mmfs::daemon
