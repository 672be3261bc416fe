// A directory's table (fs/table/capsule_table.h) in the mounted filesystem: the
// directory's user.mmfs.layout and user.mmfs.shape, and its record views
// `D@/info`, `D@/rows/SEL` and `D@/plan/rows/SEL`. Query views of a
// directory are in daemon/query_views.cc.
#include <fmt/format.h>

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "daemon/filesystem.h"
#include "daemon/filesystem_detail.h"
#include "fs/table/capsule_table.h"
#include "layouts/default_layout.h"

namespace mmfs::daemon {

using fs::ArraySchema;
using detail::attr_message;

namespace {

constexpr std::string_view kDirectoryAttrs =
    "a directory takes user.mmfs.layout (capsule: its 1-D arrays become a table in capsules; another layout "
    "moves them out again) and, once in capsules, user.mmfs.shape (the table's record count, to grow it)";

}  // namespace

int Filesystem::table_attributes(Ino dir, std::vector<fs::TableAttribute>* out, std::string* message) {
  std::vector<std::pair<std::string, Ino>> entries;
  volume_->metadata().readdir(dir, [&](std::string_view name, Ino ino) {
    entries.emplace_back(std::string(name), ino);
    return true;
  });
  out->clear();
  for (auto& [name, ino] : entries) {
    auto schema = stored_schema(ino);
    if (!schema || schema->shape.size() != 1) continue;
    std::shared_ptr<fs::ArrayFile> array;
    if (int r = array_for(ino, &array, message)) {
      *message = fmt::format("'{}': {}", name, *message);
      return r;
    }
    out->push_back(fs::TableAttribute{name, ino, std::move(array)});
  }
  return 0;
}

std::vector<Ino> Filesystem::table_member_inos(Ino dir) {
  std::vector<Ino> inos;
  if (!table_record(dir)) return inos;
  volume_->metadata().readdir(dir, [&](std::string_view, Ino ino) {
    inos.push_back(ino);
    return true;
  });
  return inos;
}

std::optional<fs::TableRecord> Filesystem::table_record(Ino dir) const {
  auto text = volume_->metadata().xattr(dir, fs::kTableXattr);
  if (!text) return std::nullopt;
  return fs::decode_table_record(*text);
}

int Filesystem::table_writable(const Caller& who, const std::vector<fs::TableAttribute>& attributes,
                               std::string* message) {
  for (const fs::TableAttribute& a : attributes)
    if (int r = check_access(who, a.ino, W_OK, a.name, message)) return r;
  return 0;
}

int Filesystem::table_setxattr(Ino dir, const std::string& attr, const std::string& value, const Caller& who) {
  const std::string name = std::string(fs::kSchemaPrefix) + attr;
  std::string text = value;
  if (!text.empty() && text.back() == '\n') text.pop_back();
  std::vector<fs::TableAttribute> attributes;
  std::string msg;
  if (attr == "layout") {
    if (!fs::is_layout_name(text))
      return record(EINVAL, dir, fmt::format("{}: '{}' is not a layout; accepted: capsule, or (to move a table out "
                                             "of capsules) naive zorder hilbert multimap quadrangle mloc",
                                             name, text));
    if (int r = table_attributes(dir, &attributes, &msg)) return record(r, dir, attr_message(name, msg));
    // The kernel let the caller change D's attributes; moving the arrays in
    // it is a change to each of them.
    if (int r = table_writable(who, attributes, &msg)) return record(r, dir, attr_message(name, msg));
    if (text == "capsule") {
      if (int r = fs::place_table_in_capsules(array_ctx_, dir, attributes, &msg))
        return record(r, dir, attr_message(name, msg));
      return 0;
    }
    return table_move_apart(dir, text, attributes);
  }
  if (attr == "shape") {
    std::optional<fs::TableRecord> rec = table_record(dir);
    if (!rec)
      return record(EINVAL, dir, fmt::format("{}: the directory is not a table in capsules (set "
                                             "user.mmfs.layout=capsule on it first)",
                                             name));
    std::uint64_t records = 0;
    if (fs::parse_number(text, records) != fs::NumberStatus::Ok || records == 0)
      return record(EINVAL, dir, fmt::format("{}: '{}' is not a record count (one positive decimal number)", name,
                                             text));
    if (int r = table_attributes(dir, &attributes, &msg)) return record(r, dir, attr_message(name, msg));
    if (int r = table_writable(who, attributes, &msg)) return record(r, dir, attr_message(name, msg));
    if (int r = fs::grow_table(array_ctx_, dir, attributes, records, &msg))
      return record(r, dir, attr_message(name, msg));
    return 0;
  }
  if (!fs::is_schema_attr(attr)) return record(EINVAL, dir, fmt::format("{}: unknown attribute; {}", name, kDirectoryAttrs));
  return record(EINVAL, dir, fmt::format("{}: not a directory attribute; {}", name, kDirectoryAttrs));
}

int Filesystem::table_move_apart(Ino dir, const std::string& layout, std::vector<fs::TableAttribute>& attributes) {
  const std::string name = std::string(fs::kSchemaPrefix) + "layout";
  if (!table_record(dir))
    return record(EINVAL, dir, fmt::format("{}: '{}': the directory is not a table in capsules; {}", name, layout,
                                           kDirectoryAttrs));
  // The attributes in this directory's capsules move; the others keep their placement.
  std::vector<fs::TableAttribute> moving;
  std::vector<ArraySchema> next;
  const layouts::DefaultLayout rule = layouts::default_layout(volume_->geometry());
  for (fs::TableAttribute& a : attributes) {
    ArraySchema s = a.array->schema();
    if (!s.table_part || s.table_part->table != dir) continue;
    s.table_part.reset();
    s.layout = layout;
    s.cell.clear();
    if (rule.cell_bytes != 0 && s.layout == rule.layout)
      s.cell = layouts::default_cell(rule, volume_->geometry(), s.shape, s.dtype.itemsize,
                                     layouts::CellGrid::default_order(s.shape.size()));
    moving.push_back(a);
    next.push_back(std::move(s));
  }
  std::string msg;
  if (int r = fs::place_table_apart(array_ctx_, dir, moving, next, &msg))
    return record(r, dir, attr_message(name, msg));
  return 0;
}

int Filesystem::table_getxattr(Ino dir, const std::string& attr, std::string* value) {
  std::optional<fs::TableRecord> rec = table_record(dir);
  if (!rec) return ENODATA;
  if (attr == "layout") {
    *value = rec->layout;
    return 0;
  }
  if (attr == "shape") {
    std::vector<fs::TableAttribute> attributes;
    std::string msg;
    if (int r = table_attributes(dir, &attributes, &msg)) return record(r, dir, msg);
    for (const fs::TableAttribute& a : attributes) {
      const ArraySchema s = a.array->schema();
      if (s.table_part && s.table_part->table == dir) {
        *value = std::to_string(s.shape.at(0));
        return 0;
      }
    }
    return ENODATA;
  }
  return ENODATA;
}

int Filesystem::table_stat(Ino vino, const VNode& v, const Caller& who, struct stat* st, std::string* content,
                           std::string* message, DirNames* listing, QueryCall call) {
  if (!v.components.empty() && v.components[0] == "zarr")
    return table_zarr_stat(v, who, st, content, message, listing, call);
  // Only the record views need the table itself (a query names its arrays).
  const bool records_view = !v.components.empty() && v.components[0] != "query";
  std::vector<fs::TableAttribute> attributes;
  std::uint64_t records = 0;
  if (records_view) {
    if (int r = table_attributes(v.home, &attributes, message)) return r;
    // D's mode let the caller this far; the records show every column.
    for (const fs::TableAttribute& a : attributes)
      if (int r = check_access(who, a.ino, R_OK, a.name, message)) return r;
    const bool needs_table = v.components[0] == "info" || v.components.size() >= 2;
    if (needs_table && !attributes.empty())
      if (int r = fs::check_table(attributes, &records, message)) return r;
  }
  auto res = fs::resolve_table_view(v.components, records, listing != nullptr);
  if (auto* e = std::get_if<fs::PathError>(&res)) {
    *message = e->message;
    return e->error;
  }
  auto& node = std::get<fs::ViewNode>(res);
  if (listing) *listing = {node.listing, node.numbered};
  auto as_file = [&](std::uint64_t size) {
    st->st_mode = S_IFREG | 0444;
    st->st_size = std::int64_t(size);
    return 0;
  };
  switch (node.kind) {
    case fs::ViewKind::Dir:
      st->st_mode = S_IFDIR | 0555;
      st->st_nlink = 2;
      return 0;
    case fs::ViewKind::Info:
      *content = fs::table_info(attributes, v.home, table_record(v.home)).dump(2) + "\n";
      return as_file(content->size());
    case fs::ViewKind::Plan: {
      layouts::IoPlan plan;
      if (int r = fs::table_rows_plan(array_ctx_, attributes, node.row_first, node.row_count, &plan, message))
        return r;
      *content = plan.to_json().dump() + "\n";
      return as_file(content->size());
    }
    case fs::ViewKind::Rows: {
      std::uint64_t record_bytes = 0;
      for (const fs::TableAttribute& a : attributes) record_bytes += a.array->schema().dtype.itemsize;
      const std::uint64_t size = node.row_count * record_bytes;
      if (call != QueryCall::Open) return as_file(size);  // read at the open, not at every stat
      try {
        content->assign(size, '\0');
      } catch (const std::bad_alloc&) {
        *message = fmt::format("rows: {} records of {} bytes do not fit in memory; read a smaller range",
                               node.row_count, record_bytes);
        return ENOMEM;
      }
      if (int r = fs::read_table_rows(array_ctx_, attributes, node.row_first, node.row_count,
                                      reinterpret_cast<std::byte*>(content->data()), message))
        return r;
      return as_file(size);
    }
    default:
      break;
  }
  // A query: every array the condition names must be a 1-D array of the directory.
  std::uint64_t size = 0;
  if (int r = query_content(vino, v.home, nullptr, *node.query, false, who, call, content, &size, message)) return r;
  return as_file(size);
}

}  // namespace mmfs::daemon
