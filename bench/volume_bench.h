// mmfs-bench volume: the speed figures of the volume layer on a real image
// file — formatting, batched and isolated metadata commits, and extent
// allocation for a large MultiMap array.
#pragma once

#include <string>

namespace mmfs::bench {

struct VolumeBenchOptions {
  std::string dir = "/var/tmp";   // where the image files go (a real disk, not tmpfs)
  unsigned operations = 100000;   // metadata operations
  unsigned batch = 1000;          // operations per durable commit
  unsigned isolated = 200;        // isolated commits to average
};

// Markdown lines with the figures; throws std::runtime_error on failure.
std::string run_volume_bench(const VolumeBenchOptions& options);

}  // namespace mmfs::bench
