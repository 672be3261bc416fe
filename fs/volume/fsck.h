// mmfsck's checks and repairs (docs/reference.md §3): superblock copies, the metadata
// tree (every entry's inode exists, every inode is reachable from the root,
// link counts, directory parents), extent maps (inside the data area, no
// sector owned twice, free space = the complement), and stray records.
#pragma once

#include <string>
#include <vector>

#include "fs/volume/volume.h"

namespace mmfs::fs {

struct FsckReport {
  std::vector<std::string> problems;  // found (one line each)
  std::vector<std::string> repairs;   // done (with repair)
  int uncorrected = 0;
  // e2fsck exit codes: 0 clean, 1 corrected, 4 left uncorrected, 8 operational error.
  int exit_code() const { return uncorrected ? 4 : !repairs.empty() ? 1 : problems.empty() ? 0 : 4; }
};

// Checks (and with `repair`, repairs and syncs) an opened volume.
FsckReport check_volume(Volume& volume, bool repair);

}  // namespace mmfs::fs
