#include "fs/array/behind_record.h"

#include <exception>

#include "util/coding.h"

namespace mmfs::fs {


std::string encode_behind(const std::map<std::uint8_t, Roaring>& behind) {
  std::string out;
  for (const auto& [slot, cells] : behind) {
    if (cells.isEmpty()) continue;
    Roaring b = cells;
    b.runOptimize();
    const std::size_t size = b.getSizeInBytes(true);
    const std::size_t at = out.size();
    out.resize(at + 5 + size);
    out[at] = char(slot);
    util::put_le32(out.data() + at + 1, std::uint32_t(size));
    b.write(out.data() + at + 5, true);
  }
  return out;
}

bool decode_behind(std::string_view v, std::map<std::uint8_t, Roaring>* out) {
  out->clear();
  while (!v.empty()) {
    if (v.size() < 5) return false;
    const std::uint8_t slot = std::uint8_t(v[0]);
    const std::uint32_t size = util::get_le32(v.data() + 1);
    if (slot == 0 || v.size() - 5 < size || out->count(slot)) return false;
    try {
      Roaring b = Roaring::readSafe(v.data() + 5, size);
      if (b.getSizeInBytes(true) != size) return false;
      (*out)[slot] = std::move(b);
    } catch (const std::exception&) {
      return false;
    }
    v.remove_prefix(5 + size);
  }
  return true;
}

std::string encode_lost(const Roaring& cells) {
  if (cells.isEmpty()) return {};
  Roaring b = cells;
  b.runOptimize();
  std::string out(b.getSizeInBytes(true), '\0');
  b.write(out.data(), true);
  return out;
}

bool decode_lost(std::string_view v, Roaring* out) {
  *out = Roaring();
  if (v.empty()) return true;
  try {
    Roaring b = Roaring::readSafe(v.data(), v.size());
    if (b.getSizeInBytes(true) != v.size()) return false;
    *out = std::move(b);
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

}  // namespace mmfs::fs
