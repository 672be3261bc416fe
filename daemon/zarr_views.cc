// The Zarr v3 view of an array, A@/zarr/ (docs/reference.md §5): the
// array's views resolved with its natural chunk (the layout's brick), the
// zarr.json document with the array's user.* xattrs as attributes, and the
// edge chunks, whose box is padded with the fill value to the chunk shape.
// Interior chunks are data views (the box of the chunk) and are read like
// any other view.
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "daemon/filesystem.h"
#include "fs/paths/zarr_metadata.h"

namespace mmfs::daemon {

using fs::ArrayFile;

std::vector<std::uint64_t> Filesystem::natural_chunk(const ArrayFile& array) const {
  // getfattr's text of the cell (the layout's choice filled in), read with the
  // path grammar's own strict number parser; anything else (never expected)
  // gives no natural chunk, so zarr/ serves the whole array as one chunk
  // rather than throwing in the daemon.
  std::vector<std::uint64_t> chunk;
  const std::string text = array.attr_text("cell");
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    std::uint64_t v = 0;
    if (fs::parse_number(std::string_view(text).substr(at, comma - at), v) != fs::NumberStatus::Ok || v == 0)
      return {};
    chunk.push_back(v);
    at = comma + 1;
  }
  return chunk;
}

std::variant<fs::ViewNode, fs::PathError> Filesystem::resolve_array_view(const std::vector<std::string>& components,
                                                                         const ArrayFile& array, bool listing) const {
  const fs::ArraySchema schema = array.schema();
  // Only a Zarr view needs the natural chunk (it takes the array's lock again).
  const bool zarr = !components.empty() &&
                    (components[0] == "zarr" || (components[0] == "plan" && components.size() > 1 &&
                                                 components[1] == "zarr"));
  const std::vector<std::uint64_t> chunk = zarr ? natural_chunk(array) : std::vector<std::uint64_t>{};
  return fs::resolve_view(components, schema.shape, schema.dtype.itemsize, listing, chunk, schema.copies.size());
}

nlohmann::json Filesystem::zarr_attributes(Ino ino) const {
  nlohmann::json attributes = nlohmann::json::object();
  for (const std::string& name : volume_->metadata().xattr_names(ino)) {
    if (name.rfind("user.", 0) != 0 || name.rfind(fs::kSchemaPrefix, 0) == 0 || name == "user.hdf5.types" ||
        name == fs::kHdf5DimsXattr)
      continue;
    if (auto value = volume_->metadata().xattr(ino, name))
      attributes[name.substr(5)] = fs::zarr_attribute_value(*value);
  }
  return attributes;
}

std::string Filesystem::zarr_array_json(Ino ino, const fs::ArraySchema& schema,
                                        std::span<const std::uint64_t> chunk) const {
  std::optional<std::vector<std::string>> names;
  if (schema.dims.empty())
    if (auto text = volume_->metadata().xattr(ino, std::string(fs::kHdf5DimsXattr)))
      names = fs::decode_hdf5_dims(*text, schema.shape.size());
  return fs::zarr_array_metadata(schema, chunk, zarr_attributes(ino), names ? &*names : nullptr)
             .dump(2, ' ', false, nlohmann::json::error_handler_t::replace) +
         "\n";
}

int Filesystem::zarr_edge_chunk(ArrayFile& array, const fs::DataView& box, std::span<const std::uint64_t> chunk,
                                std::string* content, std::string* message) {
  const std::uint32_t item = array.schema().dtype.itemsize;
  const std::vector<std::uint64_t> counts = box.selection.result_shape();
  const std::size_t rank = chunk.size();
  std::uint64_t chunk_bytes = item;
  for (std::uint64_t c : chunk) chunk_bytes *= c;
  const std::uint64_t box_bytes = box.bytes(item);
  std::string data;
  try {
    content->assign(chunk_bytes, '\0');
    data.resize(box_bytes);
  } catch (const std::bad_alloc&) {
    *message = fmt::format("a Zarr chunk of {} bytes does not fit in memory; read smaller chunks", chunk_bytes);
    return ENOMEM;
  }
  std::size_t got = 0;
  fs::DataView view = box;
  array.choose_within(&view);
  if (int r = array.read_view(view, 0, box_bytes, reinterpret_cast<std::byte*>(data.data()), &got, message)) return r;
  if (got != box_bytes) {
    *message = fmt::format("the chunk's box read {} of {} bytes", got, box_bytes);
    return EIO;
  }
  if (box_bytes == 0) return 0;
  // Row by row of the last dimension: the box's rows land at their places in
  // the chunk, the rest stays the fill value (zeros).
  const std::uint64_t row = counts[rank - 1] * item;
  std::vector<std::uint64_t> idx(rank, 0);
  for (std::uint64_t src = 0; src < box_bytes; src += row) {
    std::uint64_t dst = 0;
    for (std::size_t d = 0; d < rank; ++d) dst = dst * chunk[d] + idx[d];
    std::memcpy(content->data() + dst * item, data.data() + src, row);
    for (std::size_t d = rank - 1; d-- > 0;) {
      if (++idx[d] < counts[d]) break;
      idx[d] = 0;
    }
  }
  return 0;
}

int Filesystem::table_zarr_stat(const VNode& v, const Caller& who, struct stat* st, std::string* content,
                                std::string* message, DirNames* listing, QueryCall call) {
  const std::vector<std::string>& c = v.components;  // c[0] == "zarr"
  auto as_dir = [&](std::vector<std::string> names, std::uint64_t numbered = 0) {
    if (listing) *listing = {std::move(names), numbered};
    st->st_mode = S_IFDIR | 0555;
    st->st_nlink = 2;
    return 0;
  };
  auto as_file = [&](std::uint64_t size) {
    st->st_mode = S_IFREG | 0444;
    st->st_size = std::int64_t(size);
    return 0;
  };
  if (c.size() == 1) {
    std::vector<std::string> names{"zarr.json"};
    if (listing)
      volume_->metadata().readdir(v.home, [&](std::string_view name, Ino ino) {
        if (auto schema = stored_schema(ino); schema && !schema->shape.empty()) names.emplace_back(name);
        return true;
      });
    return as_dir(std::move(names));
  }
  if (c[1] == "zarr.json") {
    if (c.size() > 2) {
      *message = "'zarr/zarr.json' is a file, not a directory";
      return ENOTDIR;
    }
    *content = fs::zarr_group_metadata(zarr_attributes(v.home)).dump(2, ' ', false,
                                                                     nlohmann::json::error_handler_t::replace) +
               "\n";
    return as_file(content->size());
  }
  // zarr/NAME/...: the Zarr view of the array NAME of the directory.
  const std::optional<Ino> ino = volume_->metadata().lookup(v.home, c[1]);
  auto schema = ino ? stored_schema(*ino) : std::nullopt;
  if (!schema || schema->shape.empty()) {
    *message = fmt::format("'zarr/{}': not an array file of the directory; its arrays are listed in zarr/", c[1]);
    return ENOENT;
  }
  // D's mode let the caller this far; the array's own bytes need its read permission.
  if (int r = check_access(who, *ino, R_OK, c[1], message)) return r;
  std::shared_ptr<ArrayFile> array;
  if (int r = array_for(*ino, &array, message)) return r;
  std::vector<std::string> rest{"zarr"};
  rest.insert(rest.end(), c.begin() + 2, c.end());
  auto res = resolve_array_view(rest, *array, listing != nullptr);
  if (auto* e = std::get_if<fs::PathError>(&res)) {
    *message = fmt::format("'zarr/{}': {}", c[1], e->message);
    return e->error;
  }
  fs::ViewNode& node = std::get<fs::ViewNode>(res);
  const fs::ArraySchema s = array->schema();
  switch (node.kind) {
    case fs::ViewKind::Dir: return as_dir(std::move(node.listing), node.numbered);
    case fs::ViewKind::ZarrMeta:
      *content = zarr_array_json(*ino, s, node.chunk_shape);
      return as_file(content->size());
    case fs::ViewKind::Data: {
      // Served as the chunk's bytes read at the open (a directory's views
      // name no array of their own to read a data view from).
      const std::uint64_t size = node.data->bytes(s.dtype.itemsize);
      if (call != QueryCall::Open) return as_file(size);
      try {
        content->resize(size);
      } catch (const std::bad_alloc&) {
        *message = fmt::format("a Zarr chunk of {} bytes does not fit in memory; read smaller chunks", size);
        return ENOMEM;
      }
      std::size_t got = 0;
      array->choose_within(&*node.data);
      if (int r = array->read_view(*node.data, 0, size, reinterpret_cast<std::byte*>(content->data()), &got, message))
        return r;
      return as_file(got);
    }
    case fs::ViewKind::ZarrChunk: {
      std::uint64_t size = s.dtype.itemsize;
      for (std::uint64_t d : node.chunk_shape) size *= d;
      if (call != QueryCall::Open) return as_file(size);
      if (int r = zarr_edge_chunk(*array, *node.data, node.chunk_shape, content, message)) return r;
      return as_file(size);
    }
    default:
      *message = fmt::format("'zarr/{}': only the Zarr view of an array is under a directory's zarr/", c[1]);
      return ENOENT;
  }
}

}  // namespace mmfs::daemon
