#include "daemon/loaded_arrays.h"

#include <algorithm>

namespace mmfs::daemon {

std::shared_ptr<fs::ArrayFile> LoadedArrays::find(fs::Ino ino) {
  std::shared_ptr<fs::ArrayFile> a = peek(ino);
  if (a) touch(a);
  return a;
}

std::shared_ptr<fs::ArrayFile> LoadedArrays::peek(fs::Ino ino) const {
  auto it = loaded_.find(ino);
  return it == loaded_.end() ? nullptr : it->second.lock();
}

void LoadedArrays::add(fs::Ino ino, std::shared_ptr<fs::ArrayFile> array) {
  loaded_[ino] = array;
  touch(array);
}

void LoadedArrays::forget(fs::Ino ino) {
  loaded_.erase(ino);
  recent_.erase(std::remove_if(recent_.begin(), recent_.end(), [&](const auto& a) { return a->ino() == ino; }),
                recent_.end());
}

std::vector<std::shared_ptr<fs::ArrayFile>> LoadedArrays::all() const {
  std::vector<std::shared_ptr<fs::ArrayFile>> out;
  for (const auto& [ino, weak] : loaded_)
    if (auto a = weak.lock()) out.push_back(std::move(a));
  return out;
}

void LoadedArrays::touch(const std::shared_ptr<fs::ArrayFile>& array) {
  auto it = std::find(recent_.begin(), recent_.end(), array);
  if (it != recent_.end()) recent_.erase(it);
  recent_.insert(recent_.begin(), array);
  if (recent_.size() > limit_) recent_.pop_back();
}

}  // namespace mmfs::daemon
