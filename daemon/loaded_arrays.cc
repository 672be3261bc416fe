#include "daemon/loaded_arrays.h"

#include <algorithm>

namespace mmfs::daemon {

std::shared_ptr<fs::ArrayFile> LoadedArrays::find(fs::Ino ino, std::uint64_t failures) {
  auto it = loaded_.find(ino);
  if (it == loaded_.end()) return nullptr;
  std::shared_ptr<fs::ArrayFile> a = it->second.array.lock();
  if (!a) return nullptr;
  if (it->second.failures < failures) {
    // Nobody but `a` here and the recent list holds it: no other thread has
    // it, nor can take it but through this registry, under the caller's lock.
    const bool recent = std::find(recent_.begin(), recent_.end(), a) != recent_.end();
    if (a.use_count() == 1 + long{recent}) {
      forget(ino);
      return nullptr;  // unloaded here, as `a` goes
    }
  }
  touch(a);
  return a;
}

std::shared_ptr<fs::ArrayFile> LoadedArrays::peek(fs::Ino ino) const {
  auto it = loaded_.find(ino);
  return it == loaded_.end() ? nullptr : it->second.array.lock();
}

void LoadedArrays::add(fs::Ino ino, std::shared_ptr<fs::ArrayFile> array, std::uint64_t failures) {
  loaded_[ino] = Loaded{array, failures};
  touch(array);
}

void LoadedArrays::forget(fs::Ino ino) {
  loaded_.erase(ino);
  recent_.erase(std::remove_if(recent_.begin(), recent_.end(), [&](const auto& a) { return a->ino() == ino; }),
                recent_.end());
}

std::vector<std::shared_ptr<fs::ArrayFile>> LoadedArrays::all() const {
  std::vector<std::shared_ptr<fs::ArrayFile>> out;
  for (const auto& [ino, entry] : loaded_)
    if (auto a = entry.array.lock()) out.push_back(std::move(a));
  return out;
}

void LoadedArrays::touch(const std::shared_ptr<fs::ArrayFile>& array) {
  auto it = std::find(recent_.begin(), recent_.end(), array);
  if (it != recent_.end()) recent_.erase(it);
  recent_.insert(recent_.begin(), array);
  if (recent_.size() > limit_) recent_.pop_back();
}

}  // namespace mmfs::daemon
