// Inode numbers and their big-endian bytes, as the metadata key and value
// sites wrote them out by hand before fs/meta/keys.h (the on-disk format the
// key and metadata tests pin).
#pragma once

#include <cstdint>
#include <string>

namespace mmfs::fs::testing {

// The constructions the key sites wrote out (metadata.cc's put_be64,
// cell_checksums.cc's key()).
inline std::string be64(std::uint64_t v) {
  std::string s;
  for (int i = 7; i >= 0; --i) s.push_back(char((v >> (8 * i)) & 0xff));
  return s;
}

inline constexpr std::uint64_t kInos[] = {0, 1, 2, 255, 256, 0x0102030405060708ull, 0xff00ff00ff00ff00ull,
                                          ~std::uint64_t(0)};

}  // namespace mmfs::fs::testing
