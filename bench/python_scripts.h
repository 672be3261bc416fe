// The Python parts of mmfs-bench (the real clock, the plots): where their
// scripts are and how they are run. A build finds them in the source tree it
// was configured from (MMFS_SOURCE_DIR, set by bench/meson.build); an
// installed copy looks in <exe dir>/../share/mmfs/.
#pragma once

#include <string>
#include <vector>

namespace mmfs::bench {

// The script's path: MMFS_SOURCE_DIR/<source_path> if it exists, else
// <exe dir>/../share/mmfs/<file name of source_path> if that exists, else
// "" (and `*looked` lists the places tried).
std::string find_script(const std::string& source_path, std::vector<std::string>* looked = nullptr);

// Replaces this process with `python3 script args...`; returns only on
// failure, with errno's message.
std::string exec_python(const std::string& script, const std::vector<std::string>& args);

// Runs `python3 script args...` with its stdout sent to stderr, and waits: its exit status, or -1 when
// python3 could not be started.
int run_python(const std::string& script, const std::vector<std::string>& args);

}  // namespace mmfs::bench
