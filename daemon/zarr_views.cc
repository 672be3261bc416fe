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
  std::vector<std::uint64_t> chunk;
  const std::string text = array.attr_text("cell");
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    chunk.push_back(std::stoull(text.substr(at, comma - at)));
    at = comma + 1;
  }
  return chunk;
}

std::variant<fs::ViewNode, fs::PathError> Filesystem::resolve_array_view(const std::vector<std::string>& components,
                                                                         const ArrayFile& array, bool listing) const {
  const fs::ArraySchema schema = array.schema();
  const std::vector<std::uint64_t> chunk = natural_chunk(array);
  return fs::resolve_view(components, schema.shape, schema.dtype.itemsize, listing, chunk);
}

nlohmann::json Filesystem::zarr_attributes(Ino ino) const {
  nlohmann::json attributes = nlohmann::json::object();
  for (const std::string& name : volume_->metadata().xattr_names(ino)) {
    if (name.rfind("user.", 0) != 0 || name.rfind(fs::kSchemaPrefix, 0) == 0 || name == "user.hdf5.types") continue;
    if (auto value = volume_->metadata().xattr(ino, name))
      attributes[name.substr(5)] = fs::zarr_attribute_value(*value);
  }
  return attributes;
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
  if (int r = array.read_view(box, 0, box_bytes, reinterpret_cast<std::byte*>(data.data()), &got, message)) return r;
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

}  // namespace mmfs::daemon
