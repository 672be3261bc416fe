#include "layouts/mloc_codec.h"

#include <xxhash.h>
#include <zstd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <memory>
#include <new>
#include <roaring/roaring.h>
#include <stdexcept>

#include "util/roaring_portable.h"

namespace mmfs::layouts {

void mloc_split_chunk(const MlocGrid& grid, const std::byte* elements, std::uint64_t count,
                      const std::uint32_t* bins, MlocChunkSplit* out) {
  const std::uint32_t B = grid.bins(), item = grid.itemsize();
  const auto& groups = grid.groups();
  const std::size_t G = groups.size();
  // Vectors are cleared, not freed: a caller that splits chunk after chunk
  // into one MlocChunkSplit reuses their storage.
  out->positions.resize(B);
  out->planes.resize(std::size_t(B) * G);
  std::vector<std::uint32_t> n(B, 0);
  for (std::uint64_t i = 0; i < count; ++i) {
    if (bins[i] == kMlocNoBin) continue;
    if (bins[i] >= B) throw std::invalid_argument("mloc_split_chunk: bin out of range");
    ++n[bins[i]];
  }
  // Where byte r (significance: 0 the most) of a bin's next element goes.
  std::vector<std::byte*> dst(std::size_t(B) * item);
  std::array<std::uint32_t, 8> shift{};
  for (std::uint32_t b = 0; b < B; ++b) {
    out->positions[b].resize(n[b]);
    for (std::size_t g = 0; g < G; ++g) {
      auto& plane = out->planes[b * G + g];
      plane.resize(std::size_t(n[b]) * groups[g].bytes);
      for (std::uint32_t j = 0; j < groups[g].bytes; ++j)
        dst[std::size_t(b) * item + groups[g].first_rank + j] = plane.data() + std::size_t(j) * n[b];
    }
  }
  for (std::uint32_t r = 0; r < item && r < 8; ++r) shift[r] = 8 * (item - 1 - r);
  static_assert(std::endian::native == std::endian::little, "elements are little-endian in memory");
  // Positions first (one stream per bin), then each bin's elements gathered
  // into a dense run and cut into its byte planes one plane at a time:
  // writing every element's bytes straight to its bin's planes kept a
  // stream per (bin, byte) open, hundreds, more than the cache holds.
  std::vector<std::uint32_t> at(B, 0);
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::uint32_t b = bins[i];
    if (b != kMlocNoBin) out->positions[b][at[b]++] = std::uint32_t(i);
  }
  auto split = [&]<typename Word>(Word) {
    std::vector<Word> dense;
    for (std::uint32_t b = 0; b < B; ++b) {
      const std::vector<std::uint32_t>& pos = out->positions[b];
      dense.resize(pos.size());
      for (std::size_t k = 0; k < pos.size(); ++k)
        std::memcpy(&dense[k], elements + std::size_t(pos[k]) * sizeof(Word), sizeof(Word));
      for (std::uint32_t r = 0; r < sizeof(Word); ++r) {
        std::byte* d = dst[std::size_t(b) * sizeof(Word) + r];
        const std::uint32_t sh = shift[r];
        for (std::size_t k = 0; k < dense.size(); ++k) d[k] = std::byte(dense[k] >> sh);
      }
    }
  };
  switch (item) {  // whole words for the usual item sizes
    case 8: return split(std::uint64_t{});
    case 4: return split(std::uint32_t{});
    case 2: return split(std::uint16_t{});
    case 1: return split(std::uint8_t{});
  }
  for (std::uint32_t b = 0; b < B; ++b)
    for (std::size_t k = 0; k < out->positions[b].size(); ++k)
      for (std::uint32_t r = 0; r < item; ++r)
        dst[std::size_t(b) * item + r][k] = elements[std::size_t(out->positions[b][k]) * item + item - 1 - r];
}

void mloc_mark_padding(const MlocGrid& grid, std::uint64_t rank, std::uint32_t* bins) {
  const std::size_t n = grid.dims();
  std::vector<std::uint64_t> lo(n), ext(n);
  grid.chunk_box(rank, lo.data(), ext.data());
  const auto& C = grid.chunk();
  bool clipped = false;
  for (std::size_t d = 0; d < n; ++d) clipped |= ext[d] < C[d];
  if (!clipped) return;
  std::uint64_t total = 1;
  for (auto c : C) total *= c;
  std::vector<std::uint64_t> x(n, 0);
  for (std::uint64_t i = 0; i < total; ++i) {
    bool inside = true;
    for (std::size_t d = 0; d < n; ++d) inside &= x[d] < ext[d];
    if (!inside) bins[i] = kMlocNoBin;
    for (std::size_t d = n; d-- > 0;) {
      if (++x[d] < C[d]) break;
      x[d] = 0;
    }
  }
}

void mloc_scatter(const MlocGrid& grid, std::span<const std::uint32_t> positions, std::uint32_t groups,
                  const std::byte* const* planes, std::byte* elements) {
  // One pass writing whole elements: a pass per byte plane would touch
  // every cache line of the brick once per byte.
  const std::uint32_t* pos = positions.data();
  mloc_place_elements(MlocElementReader(grid, positions.size(), groups, planes), positions.size(),
                      [pos](std::size_t k) { return std::uint64_t(pos[k]); }, elements);
}

MlocElementReader::MlocElementReader(const MlocGrid& grid, std::uint64_t count, std::uint32_t groups,
                                     const std::byte* const* planes)
    : item_(grid.itemsize()) {
  static_assert(std::endian::native == std::endian::little, "elements are little-endian in memory");
  for (std::uint32_t k = 0; k < groups; ++k) {
    const MlocByteGroup& g = grid.groups().at(k);
    for (std::uint32_t j = 0; j < g.bytes; ++j, ++kept_) {
      src_[kept_] = planes[k] + j * count;
      shift_[kept_] = 8 * (item_ - 1 - (g.first_rank + j));
    }
  }
}

void mloc_assemble(const MlocGrid& grid, std::uint64_t count, std::uint32_t groups, const std::byte* const* planes,
                   std::byte* elements) {
  const std::uint32_t item = grid.itemsize();
  for (std::uint32_t k = 0; k < groups; ++k) {
    const MlocByteGroup& g = grid.groups().at(k);
    for (std::uint32_t j = 0; j < g.bytes; ++j) {
      const std::size_t byte = item - 1 - (g.first_rank + j);
      const std::byte* p = planes[k] + j * count;
      for (std::uint64_t i = 0; i < count; ++i) elements[i * item + byte] = p[i];
    }
  }
}

namespace {

// One zstd context per thread, kept: ZSTD_compress and ZSTD_decompress
// create and free a context on every call, and units are small (a few KiB),
// so that setup (a level-3 compression context is over a MiB of tables)
// cost more than the coding itself.
struct ZstdContexts {
  std::unique_ptr<ZSTD_CCtx, decltype(&ZSTD_freeCCtx)> c{ZSTD_createCCtx(), &ZSTD_freeCCtx};
  std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)> d{ZSTD_createDCtx(), &ZSTD_freeDCtx};
};

ZstdContexts& zstd_contexts() {
  thread_local ZstdContexts contexts;
  if (!contexts.c || !contexts.d) throw std::bad_alloc();
  return contexts;
}

}  // namespace

std::vector<std::byte> mloc_pack(std::span<const std::byte> raw, int level) {
  if (level > 0 && raw.size() > 64) {
    // Into a scratch buffer, then copied at its size: an encoder holds every
    // unit until the image is written, and a vector cut down by resize()
    // would keep the whole bound allocated.
    thread_local std::vector<std::byte> scratch;
    scratch.resize(ZSTD_compressBound(raw.size()));
    std::size_t n =
        ZSTD_compressCCtx(zstd_contexts().c.get(), scratch.data(), scratch.size(), raw.data(), raw.size(), level);
    // A unit that shrinks by less than an eighth is stored raw: every read
    // of it would pay a decompression (about 1 GB/s a core) to save less
    // device time than that costs.
    if (!ZSTD_isError(n) && n <= raw.size() - raw.size() / 8)
      return std::vector<std::byte>(scratch.begin(), scratch.begin() + std::ptrdiff_t(n));
  }
  return std::vector<std::byte>(raw.begin(), raw.end());
}

bool mloc_unpack(std::span<const std::byte> stored, std::size_t raw_bytes, std::byte* out) {
  if (stored.size() > raw_bytes) return false;
  if (stored.size() == raw_bytes) {
    if (raw_bytes) std::memcpy(out, stored.data(), raw_bytes);
    return true;
  }
  std::size_t n = ZSTD_decompressDCtx(zstd_contexts().d.get(), out, raw_bytes, stored.data(), stored.size());
  return !ZSTD_isError(n) && n == raw_bytes;
}

std::vector<std::byte> mloc_encode_positions(std::span<const std::uint32_t> positions) {
  roaring_bitmap_t* r = roaring_bitmap_of_ptr(positions.size(), positions.data());
  roaring_bitmap_run_optimize(r);
  std::vector<std::byte> out(roaring_bitmap_portable_size_in_bytes(r));
  roaring_bitmap_portable_serialize(r, reinterpret_cast<char*>(out.data()));
  roaring_bitmap_free(r);
  return out;
}

bool mloc_decode_positions(std::span<const std::byte> bytes, std::uint64_t count, std::uint64_t limit,
                           std::vector<std::uint32_t>* out) {
  // Checked before CRoaring sees it (util/roaring_portable.h): the list is
  // exactly one well-formed serialization.
  if (util::check_portable32(bytes) != bytes.size()) return false;
  roaring_bitmap_t* r =
      roaring_bitmap_portable_deserialize_safe(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (r == nullptr) return false;
  // The bytes were checksummed before this; the checks below keep a bitmap
  // this library version parses differently from escaping as positions.
  bool ok = roaring_bitmap_get_cardinality(r) == count && roaring_bitmap_portable_size_in_bytes(r) == bytes.size();
  if (ok) {
    out->resize(count);
    roaring_bitmap_to_uint32_array(r, out->data());
    for (std::size_t i = 0; ok && i < out->size(); ++i)
      ok = (*out)[i] < limit && (i == 0 || (*out)[i - 1] < (*out)[i]);
  }
  roaring_bitmap_free(r);
  return ok;
}

std::uint32_t mloc_checksum(std::span<const std::byte> bytes) {
  return std::uint32_t(XXH3_64bits(bytes.data(), bytes.size()));
}

}  // namespace mmfs::layouts
