#include "layouts/plod.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace mmfs::layouts {

namespace {

// Keeps the high bytes of each little-endian word and ORs in the fill of the
// `dropped` low bytes (host byte order is little-endian, as the array bytes).
template <class Word>
void plod_words(std::span<std::byte> elements, std::uint32_t dropped, const std::vector<std::byte>& fill) {
  static_assert(std::endian::native == std::endian::little, "array bytes are little-endian");
  Word fill_word = 0;
  std::memcpy(&fill_word, fill.data(), dropped);
  const Word keep_mask = Word(~Word(0) << (8 * dropped));
  std::byte* p = elements.data();
  const std::size_t n = elements.size() / sizeof(Word);
  for (std::size_t i = 0; i < n; ++i) {
    Word w;
    std::memcpy(&w, p + i * sizeof(Word), sizeof w);
    w = Word((w & keep_mask) | fill_word);
    std::memcpy(p + i * sizeof(Word), &w, sizeof w);
  }
}

}  // namespace

void apply_plod(std::span<std::byte> elements, std::uint32_t itemsize, bool is_float64, std::uint32_t keep_bytes) {
  if (itemsize == 0) throw std::invalid_argument("apply_plod: itemsize 0");
  if (keep_bytes > itemsize)
    throw std::invalid_argument(fmt::format("apply_plod: keep {} bytes of {}-byte elements", keep_bytes, itemsize));
  if (elements.size() % itemsize != 0)
    throw std::invalid_argument(
        fmt::format("apply_plod: {} bytes are not whole {}-byte elements", elements.size(), itemsize));
  if (keep_bytes == 0 || keep_bytes == itemsize) return;
  const std::uint32_t dropped = itemsize - keep_bytes;  // the low (first, little-endian) bytes
  // One element's worth of fill for the dropped bytes.
  std::vector<std::byte> fill(dropped, std::byte{0});
  if (is_float64) {
    std::fill(fill.begin(), fill.end(), std::byte{0xFF});
    fill[dropped - 1] = std::byte{0x7F};
  }
  switch (itemsize) {  // whole words: a mask and an OR per element, which vectorizes
    case 2: return plod_words<std::uint16_t>(elements, dropped, fill);
    case 4: return plod_words<std::uint32_t>(elements, dropped, fill);
    case 8: return plod_words<std::uint64_t>(elements, dropped, fill);
    default:
      for (std::size_t off = 0; off < elements.size(); off += itemsize)
        std::memcpy(elements.data() + off, fill.data(), dropped);
  }
}

}  // namespace mmfs::layouts
