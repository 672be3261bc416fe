#include "fs/array/behind_record.h"

#include <exception>
#include <span>

#include "indexes/bitmap.h"
#include "util/coding.h"

namespace mmfs::fs {

namespace {

// CRoaring 0.2.66's readSafe only bounds its reads: it takes containers that
// break its invariants (an unsorted array, overlapping runs, a bitset whose
// count lies), after which maximum() and contains() answer wrongly. The
// index's decoder checks every container: `bytes` goes to it as the one
// bucket (key 0) of a 64-bit serialization.
bool well_formed(std::string_view bytes) {
  std::string wrapped(12, '\0');  // u64 bucket count 1, u32 key 0 (little-endian)
  wrapped[0] = 1;
  wrapped.append(bytes);
  indexes::Bitmap checked;
  return indexes::deserialize(std::as_bytes(std::span(wrapped.data(), wrapped.size())), &checked);
}

}  // namespace

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
    if (!well_formed(v.substr(5, size))) return false;
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
  if (!well_formed(v)) return false;
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
