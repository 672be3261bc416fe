#include "tools/h5/chunk_choice.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>

#include "fs/paths/view_path.h"
#include "tools/h5/tool_error.h"

namespace mmfs::h5 {

std::vector<std::uint64_t> auto_chunks(std::span<const std::uint64_t> shape, std::uint32_t itemsize,
                                       std::uint64_t target_bytes) {
  std::vector<std::uint64_t> c(shape.begin(), shape.end());
  if (c.empty()) return c;
  // Bytes of the chunk, saturating (a huge dataset's product can overflow).
  auto bytes = [&] {
    unsigned __int128 p = itemsize;
    for (auto x : c) {
      p *= x;
      if (p > target_bytes) return p;
    }
    return p;
  };
  while (bytes() > target_bytes) {
    auto longest = std::max_element(c.begin(), c.end());  // first of equals
    if (*longest == 1) break;
    *longest = (*longest + 1) / 2;
  }
  return c;
}

std::optional<ChunkOption> parse_chunk_option(std::string_view text) {
  if (text == "auto") return ChunkOption{ChunkOption::Auto, {}};
  if (text == "contiguous") return ChunkOption{ChunkOption::Contiguous, {}};
  ChunkOption out{ChunkOption::Explicit, {}};
  for (;;) {
    auto comma = text.find(',');
    std::uint64_t v = 0;
    if (fs::parse_number(text.substr(0, comma), v) != fs::NumberStatus::Ok || v == 0) return std::nullopt;
    out.chunks.push_back(v);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

std::vector<std::uint64_t> choose_chunks(const ChunkOption& option, std::span<const std::uint64_t> shape,
                                         std::uint32_t itemsize) {
  switch (option.kind) {
    case ChunkOption::Contiguous: return {};
    case ChunkOption::Auto: return shape.empty() ? std::vector<std::uint64_t>{} : auto_chunks(shape, itemsize);
    case ChunkOption::Explicit: break;
  }
  const auto& c = option.chunks;
  if (shape.empty())
    throw ToolError(EINVAL, "--chunks: the dataset is a scalar (the view fixes every dimension); it cannot be chunked");
  if (c.size() != shape.size())
    throw ToolError(EINVAL, fmt::format("--chunks {}: {} lengths for a dataset of {} dimensions ({})",
                                        fmt::join(c, ","), c.size(), shape.size(), fmt::join(shape, "x")));
  unsigned __int128 bytes = itemsize;
  for (std::size_t d = 0; d < c.size(); ++d) {
    if (c[d] > shape[d])
      throw ToolError(EINVAL, fmt::format("--chunks {}: length {} of dimension {} exceeds the dataset's {} ({})",
                                          fmt::join(c, ","), c[d], d, shape[d], fmt::join(shape, "x")));
    bytes *= c[d];
  }
  if (bytes >= (static_cast<unsigned __int128>(1) << 32))
    throw ToolError(EINVAL, fmt::format("--chunks {}: a chunk of {} bytes; HDF5 chunks hold less than 4 GiB",
                                        fmt::join(c, ","), static_cast<std::uint64_t>(bytes)));
  return c;
}

}  // namespace mmfs::h5
