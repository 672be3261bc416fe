// A path as the daemon's lookups hand it to the view and control grammars:
// its components, split on '/' (empty ones kept, as a walk would meet them).
#pragma once

#include <string>
#include <vector>

namespace mmfs::fs::testing {

inline std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> out;
  if (path.empty()) return out;
  std::size_t start = 0;
  for (;;) {
    const auto slash = path.find('/', start);
    out.push_back(path.substr(start, slash - start));
    if (slash == std::string::npos) return out;
    start = slash + 1;
  }
}

}  // namespace mmfs::fs::testing
