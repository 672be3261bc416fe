// Sizes as people write them on command lines: "4G", "512M", "64MiB", "12345".
#pragma once

#include <cstdint>
#include <string_view>

namespace mmfs::fs {

// Bytes, with the binary units K/M/G/T/P (optionally "iB", any case) or B;
// 0 on a malformed or overflowing size.
std::uint64_t parse_size(std::string_view text);

}  // namespace mmfs::fs
