// Byte models of arrays for the write-path unit tests (fs/array/write_behind.h,
// fs/array/array_state.h): the bytes of a model as written, and how many
// bytes of a read differ from it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mmfs::fs::testing::writes {

using Bytes = std::vector<std::uint8_t>;

inline const std::byte* as_bytes(const Bytes& b) { return reinterpret_cast<const std::byte*>(b.data()); }

// The number of bytes that differ (Catch would print both vectors whole).
inline std::size_t differing(const Bytes& got, const Bytes& want) {
  if (got.size() != want.size()) return std::max(got.size(), want.size());
  std::size_t n = 0;
  for (std::size_t i = 0; i < got.size(); ++i) n += got[i] != want[i];
  return n;
}

}  // namespace mmfs::fs::testing::writes
