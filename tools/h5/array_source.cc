#include "tools/h5/array_source.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <variant>

#include "fs/array/array_schema.h"
#include "fs/paths/view_path.h"
#include "tools/h5/dataset_info.h"
#include "tools/h5/file_io.h"
#include "tools/h5/tool_error.h"
#include "tools/h5/xattr_io.h"

namespace mmfs::h5 {

namespace {

bool is_array_file(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  std::string value;
  return !get_xattr(path, "user.mmfs.shape", &value) && !value.empty();
}

ToolError not_data(const std::string& src, const std::string& what) {
  return ToolError(EINVAL, fmt::format("{}: {}: {}; SRC must be an array file or a data view of one "
                                       "(A@/slice/D/I, A@/box/SEL, A@/plod/K, A@/plod/K@/slice/D/I, "
                                       "A@/plod/K@/box/SEL)",
                                       src, std::strerror(EINVAL), what));
}

}  // namespace

std::optional<ViewPathSplit> split_view_path(const std::string& src,
                                             const std::function<bool(const std::string&)>& is_array) {
  std::vector<std::string> parts;
  for (std::size_t at = 0; at <= src.size();) {
    std::size_t slash = src.find('/', at);
    if (slash == std::string::npos) slash = src.size();
    if (slash > at) parts.push_back(src.substr(at, slash - at));
    at = slash + 1;
  }
  std::string prefix = !src.empty() && src.front() == '/' ? "/" : "";
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string& c = parts[i];
    if (c.size() > 1 && c.back() == '@') {
      std::string candidate = prefix + c.substr(0, c.size() - 1);
      if (is_array(candidate))
        return ViewPathSplit{candidate, std::vector<std::string>(parts.begin() + static_cast<long>(i) + 1, parts.end()),
                             true};
    }
    prefix += c + "/";
  }
  if (is_array(src)) return ViewPathSplit{src, {}, false};
  return std::nullopt;
}

std::string box_view_path(const ArraySource& src, std::span<const std::uint64_t> start,
                          std::span<const std::uint64_t> count) {
  std::vector<layouts::DimRange> dims;
  std::size_t j = 0;  // SRC's dimension: the array's dimensions that are not fixed
  for (const layouts::DimRange& r : src.selection.dims()) {
    if (r.fixed) {
      dims.push_back(r);
      continue;
    }
    layouts::DimRange d = r;
    d.start = r.start + start[j] * r.step;
    d.stop = d.start + (count[j] - 1) * r.step + 1;
    if (count[j] == 1) d.step = 1;  // box_spelling's normal form
    dims.push_back(d);
    ++j;
  }
  std::string sel = fs::box_spelling(layouts::Selection(std::move(dims)));
  return src.plod_bytes ? fmt::format("plod/{}@/box/{}", src.plod_bytes, sel) : "box/" + sel;
}

ArraySource resolve_source(const std::string& src) {
  // The view path is resolved here before SRC is looked at: a malformed one
  // then fails with resolve_view's explanation, not just the errno the
  // daemon's lookup returns.
  struct stat st{};
  auto split = split_view_path(src, is_array_file);
  if (!split) {
    if (::stat(src.c_str(), &st) != 0) {
      int e = errno;
      throw ToolError(e, fmt::format("{}: {}", src, std::strerror(e)));
    }
    if (S_ISDIR(st.st_mode)) throw not_data(src, "a directory is not an array");
    throw not_data(src, "not an array file (it has no user.mmfs.shape)");
  }

  ArraySource out;
  out.path = src;
  out.array = split->array;
  out.is_view = split->through_view;
  std::string shape_value, dtype_text;
  if (auto r = get_xattr(out.array, "user.mmfs.shape", &shape_value)) throw ToolError(r.error, out.array + ": " + r.message);
  if (auto r = get_xattr(out.array, "user.mmfs.dtype", &dtype_text)) throw ToolError(r.error, out.array + ": " + r.message);
  // The daemon shows the values in the syntax it accepts: its own parser reads them back.
  fs::ArraySchema schema;
  for (auto [name, value] : {std::pair{"dtype", &dtype_text}, std::pair{"shape", &shape_value}})
    if (auto r = fs::set_schema_attr(schema, name, *value))
      throw ToolError(r.error, fmt::format("{}: {}", out.array, r.message));
  out.array_shape = schema.shape;
  out.dtype = schema.dtype;

  if (!out.is_view) {
    out.shape = out.array_shape;
    out.selection = layouts::Selection::all(out.array_shape);
  } else {
    auto node = fs::resolve_view(split->components, out.array_shape, out.dtype.itemsize, false);
    if (auto* e = std::get_if<fs::PathError>(&node))
      throw ToolError(e->error, fmt::format("{}: {}: {}", src, std::strerror(e->error), e->message));
    const auto& n = std::get<fs::ViewNode>(node);
    switch (n.kind) {
      case fs::ViewKind::Data: break;
      case fs::ViewKind::Dir: throw not_data(src, "a view directory holds no array data");
      case fs::ViewKind::Info: throw not_data(src, "the info view is JSON, not array data");
      case fs::ViewKind::Lbn: throw not_data(src, "an lbn view is text, not array data");
      case fs::ViewKind::Plan: throw not_data(src, "a plan view is JSON, not array data");
      case fs::ViewKind::Query:
        throw not_data(src, "a query result is exported by reading it (numpy.fromfile), not by mmfs-export");
      case fs::ViewKind::Rows: throw not_data(src, "table rows are a directory's view, not an array's");
      case fs::ViewKind::ZarrMeta: throw not_data(src, "zarr.json is metadata, not array data");
      case fs::ViewKind::ZarrChunk:
        throw not_data(src, "an edge chunk of a Zarr view is padded past the array; export the array or a box");
    }
    out.shape = n.data->selection.result_shape();
    out.selection = n.data->selection;
    out.plod_bytes = n.data->plod_bytes;
  }
  out.bytes = out.dtype.itemsize;
  for (auto s : out.shape) out.bytes *= s;
  if (::stat(src.c_str(), &st) != 0) {
    int e = errno;
    throw ToolError(e, io_error_text(src, "stat", e));
  }
  if (!S_ISREG(st.st_mode)) throw not_data(src, "not a regular file");
  if (static_cast<std::uint64_t>(st.st_size) != out.bytes)
    throw ToolError(EIO, fmt::format("{}: its size is {} bytes but its shape {} of {} needs {}", src, st.st_size,
                                     shape_text(out.shape), out.dtype.name, out.bytes));
  return out;
}

}  // namespace mmfs::h5
