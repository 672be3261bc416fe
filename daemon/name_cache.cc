#include "daemon/name_cache.h"

#include <vector>

namespace mmfs::daemon {

void NameCache::remember(fs::Ino ino, fs::Ino parent, const std::string& name) {
  std::lock_guard lock(mu_);
  names_[ino] = {parent, name};
}

std::optional<std::pair<fs::Ino, std::string>> NameCache::name_of(fs::Ino ino) const {
  std::lock_guard lock(mu_);
  if (auto it = names_.find(ino); it != names_.end()) return it->second;
  return std::nullopt;
}

std::optional<std::string> NameCache::path_of(fs::Ino ino) const {
  if (ino == fs::kRootIno) return "/";
  std::vector<std::string> parts;
  {
    std::lock_guard lock(mu_);
    fs::Ino cur = ino;
    // Bounded: a cycle left by renames the cache never saw cannot loop.
    for (int depth = 0; cur != fs::kRootIno && depth < 256; ++depth) {
      auto it = names_.find(cur);
      if (it == names_.end()) return std::nullopt;
      parts.push_back(it->second.second);
      cur = it->second.first;
    }
  }
  std::string p;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) p += "/" + *it;
  return p.empty() ? "/" : p;
}

}  // namespace mmfs::daemon
