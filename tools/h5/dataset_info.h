// What an HDF5 dataset is, as far as importing it goes: shape, mmfs dtype,
// chunking, filters, and — when it cannot be imported — why not. Used by
// --list and before every import, so both give the same verdict.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fs/array/array_schema.h"

namespace mmfs::h5 {

inline constexpr std::size_t kMaxRank = 16;  // docs/reference.md §4: 1 to 16 dimensions

struct DatasetInfo {
  std::vector<std::uint64_t> shape;   // empty for scalar and null dataspaces
  std::string space;                  // "simple", "scalar" or "null"
  std::string type;                   // the mmfs dtype, or what the HDF5 type is ("compound", ...)
  std::optional<fs::Dtype> dtype;     // when the type maps
  std::string storage;                // "chunked", "contiguous", "compact", "virtual"
  std::vector<std::uint64_t> chunks;  // chunked storage only
  std::vector<std::string> filters;   // "shuffle", "gzip(4)", "lzf (not available)", ...
  std::string refusal;                // empty: importable; else the reason, one line

  bool importable() const { return refusal.empty(); }
  // The chunk shape the transfer aligns to: the chunks, or all ones (C-order slabs).
  std::vector<std::uint64_t> transfer_chunks() const;
  std::uint64_t bytes() const;        // prod(shape) * itemsize; REQUIRES importable()
};

// Inspects an open dataset. Throws H5Error when the library cannot answer.
DatasetInfo inspect_dataset(hid_t dataset);

// "100x200" (shape), "scalar" for rank 0.
std::string shape_text(const std::vector<std::uint64_t>& shape);

}  // namespace mmfs::h5
