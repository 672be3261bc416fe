// mmfs-bench amplification: what a cell shape costs each slice of an array —
// bytes read per byte useful and modeled time — for every layout. This is
// the measured trade-off behind the default cell shape (docs/layouts.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mmfs::bench {

struct AmplificationOptions {
  std::string profile = "atlas10k3";
  std::vector<std::uint64_t> shape = {1024, 1024, 256};
  std::uint32_t itemsize = 8;
  std::vector<std::string> layouts = {"naive", "zorder", "hilbert", "multimap"};
};

// Markdown table: one row per (cell shape, layout), one column pair per slice dimension.
std::string run_amplification(const AmplificationOptions& options);

}  // namespace mmfs::bench
