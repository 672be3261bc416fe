// The chunk shape of an exported dataset (--chunks auto|contiguous|C0,C1,...).
// Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mmfs::h5 {

inline constexpr std::uint64_t kAutoChunkBytes = 1 << 20;

// --chunks auto: start from the whole dataset and halve (rounding up) its
// longest dimension — the first of equals, so the fast trailing dimensions
// stay whole longest and a chunk is a few long C-order runs of the view —
// until the chunk holds at most `target_bytes` (or is one element). Each
// length is thus between 1 and its dimension, and the chunk keeps the
// dataset's proportions within a factor of two. Rank 0: empty.
std::vector<std::uint64_t> auto_chunks(std::span<const std::uint64_t> shape, std::uint32_t itemsize,
                                       std::uint64_t target_bytes = kAutoChunkBytes);

struct ChunkOption {
  enum Kind { Auto, Contiguous, Explicit } kind = Auto;
  std::vector<std::uint64_t> chunks;  // Explicit
};

// Parses the option's text; nullopt when it is neither "auto",
// "contiguous" nor a comma-separated list of positive integers.
std::optional<ChunkOption> parse_chunk_option(std::string_view text);

// The chunk shape to create for a dataset of `shape`: empty for contiguous
// storage. Throws ToolError(EINVAL) with an explanation when an explicit
// chunk does not fit the dataset (rank, a length 0 or beyond its dimension,
// HDF5's limit of 4 GiB per chunk and 2^32-1 per length). A scalar (rank 0)
// dataset cannot be chunked: contiguous, whatever the option, except an
// explicit one, which is refused.
std::vector<std::uint64_t> choose_chunks(const ChunkOption& option, std::span<const std::uint64_t> shape,
                                         std::uint32_t itemsize);

}  // namespace mmfs::h5
