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

namespace {

constexpr char kMagic[8] = {'M', 'M', 'F', 'S', 'M', 'L', 'C', '1'};

template <class T>
void put(std::string& s, T v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof v);
}

struct Reader {
  std::string_view s;
  std::size_t at = 0;
  bool ok = true;
  template <class T>
  T get() {
    T v{};
    if (s.size() - at < sizeof v) {
      ok = false;
      return v;
    }
    std::memcpy(&v, s.data() + at, sizeof v);
    at += sizeof v;
    return v;
  }
};

}  // namespace

void MlocDirectory::locate(std::uint32_t sector_size) { locate(sector_size, encoded_bytes()); }

void MlocDirectory::locate(std::uint32_t sector_size, std::uint64_t header) {
  header_bytes = header;
  positions_start = (header_bytes + sector_size - 1) / sector_size * sector_size;
  std::uint64_t at = positions_start;
  auto blocks_of = [&at](const auto& entries, std::vector<std::uint64_t>* blocks) {
    blocks->assign((entries.size() + kOffsetBlock - 1) / kOffsetBlock, 0);
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (i % kOffsetBlock == 0) (*blocks)[i / kOffsetBlock] = at;
      at += entries[i].stored;
    }
  };
  blocks_of(positions, &position_blocks);
  data_start = at;
  blocks_of(units, &unit_blocks);
  image_bytes = at;
}

namespace {

bool is_zero(const MlocPositionEntry& e) { return e.count == 0 && e.raw == 0 && e.stored == 0 && e.checksum == 0; }
bool is_zero(const MlocUnitEntry& e) { return e.stored == 0 && e.checksum == 0; }

// Calls f(bin, group, rank, unit) for every unit of the grid in unit order
// (the priority's): the order of both the unit table and the units on the
// device, so that a walk through either is sequential.
template <class F>
void for_each_unit(const MlocGrid& g, const MlocPriority& priority, F&& f) {
  std::uint64_t n[3], at[3];
  for (int l = 0; l < 3; ++l)
    n[l] = priority[l] == MlocLevel::Value ? g.bins() : priority[l] == MlocLevel::Precision ? g.groups().size() : g.chunks();
  auto level = [&](MlocLevel want) {
    for (int l = 0; l < 3; ++l)
      if (priority[l] == want) return l;
    return 0;
  };
  const int lb = level(MlocLevel::Value), lk = level(MlocLevel::Precision), lc = level(MlocLevel::Space);
  std::uint64_t u = 0;
  for (at[0] = 0; at[0] < n[0]; ++at[0])
    for (at[1] = 0; at[1] < n[1]; ++at[1])
      for (at[2] = 0; at[2] < n[2]; ++at[2]) f(std::uint32_t(at[lb]), std::uint32_t(at[lk]), at[lc], u++);
}

}  // namespace

std::vector<bool> MlocDirectory::present() const {
  // Version 2 stores the entries of a (bin, chunk) only when one of them is
  // not zero: a chunk holds values of a few of the bins, and the images mmfs
  // writes leave every entry of an empty (bin, chunk) zero.
  const MlocGrid g = grid();
  std::vector<bool> out(positions.size(), false);
  const std::uint32_t G = std::uint32_t(g.groups().size());
  for (std::size_t e = 0; e < positions.size(); ++e) {
    bool any = !is_zero(positions[e]);
    const std::uint32_t b = std::uint32_t(e / g.chunks());
    const std::uint64_t c = e % g.chunks();
    for (std::uint32_t k = 0; !any && k < G; ++k) any = !is_zero(units[g.unit(b, k, c)]);
    out[e] = any;
  }
  return out;
}

std::uint64_t MlocDirectory::encoded_bytes() const {
  // As encode() writes them, without building the string.
  std::uint64_t fixed = sizeof kMagic + 3 * 4 + 1 + priority.size() + 3 * 4 + 8 * (shape.size() + chunk.size()) + 8 +
                        8 * bin_lower.size() + 2 * 8;
  if (!dense_tables()) {
    const std::vector<bool> p = present();
    const std::uint64_t n = std::uint64_t(std::count(p.begin(), p.end(), true));
    const std::uint64_t G = positions.empty() ? 0 : units.size() / positions.size();
    return fixed + (positions.size() + 7) / 8 + n * (sizeof(MlocPositionEntry) + G * sizeof(MlocUnitEntry));
  }
  return fixed + positions.size() * sizeof(MlocPositionEntry) + units.size() * sizeof(MlocUnitEntry);
}

bool MlocDirectory::dense_tables() const {
  // Version 1, or tables the grid does not describe (only a test writes
  // those, to see decode() refuse them): both tables whole.
  if (version == 1) return true;
  try {
    const MlocGrid g = grid();
    return positions.size() != std::uint64_t(g.bins()) * g.chunks() || units.size() != g.units();
  } catch (const std::exception&) {
    return true;
  }
}

std::string MlocDirectory::encode() const {
  std::string s(kMagic, sizeof kMagic);
  const bool dense = dense_tables();
  put<std::uint32_t>(s, dense ? 1 : 2);
  put<std::uint32_t>(s, std::uint32_t(shape.size()));
  put<std::uint32_t>(s, itemsize);
  put<std::uint8_t>(s, float64);
  for (MlocLevel l : priority) put<char>(s, char(l));
  put<std::uint32_t>(s, bins);
  put<std::int32_t>(s, zstd_level);
  put<std::uint32_t>(s, value_type);
  for (auto v : shape) put<std::uint64_t>(s, v);
  for (auto v : chunk) put<std::uint64_t>(s, v);
  put<std::uint64_t>(s, bin_lower.size());
  for (auto v : bin_lower) put<std::uint64_t>(s, v);
  put<std::uint64_t>(s, positions.size());
  put<std::uint64_t>(s, units.size());
  if (dense) {
    s.append(reinterpret_cast<const char*>(positions.data()), positions.size() * sizeof(MlocPositionEntry));
    s.append(reinterpret_cast<const char*>(units.data()), units.size() * sizeof(MlocUnitEntry));
    return s;
  }
  // Version 2: which (bin, chunk)s are present, a bit each (entry order,
  // least significant bit first); their position entries; then the unit
  // entries of the present ones, in unit order.
  const std::vector<bool> p = present();
  std::string bits((positions.size() + 7) / 8, '\0');
  for (std::size_t e = 0; e < p.size(); ++e)
    if (p[e]) bits[e / 8] = char(std::uint8_t(bits[e / 8]) | (1u << (e % 8)));
  s += bits;
  for (std::size_t e = 0; e < p.size(); ++e)
    if (p[e]) s.append(reinterpret_cast<const char*>(&positions[e]), sizeof(MlocPositionEntry));
  const MlocGrid g = grid();
  for_each_unit(g, priority, [&](std::uint32_t b, std::uint32_t, std::uint64_t c, std::uint64_t u) {
    if (p[g.position_entry(b, c)]) s.append(reinterpret_cast<const char*>(&units[u]), sizeof(MlocUnitEntry));
  });
  return s;
}

std::optional<MlocDirectory> MlocDirectory::decode(std::string_view bytes, std::uint32_t sector_size) {
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) return std::nullopt;
  Reader r{bytes, sizeof kMagic};
  MlocDirectory d;
  d.version = r.get<std::uint32_t>();
  if (d.version != 1 && d.version != 2) return std::nullopt;
  std::uint32_t dims = r.get<std::uint32_t>();
  d.itemsize = r.get<std::uint32_t>();
  d.float64 = r.get<std::uint8_t>() != 0;
  for (MlocLevel& l : d.priority) l = MlocLevel(r.get<char>());
  d.bins = r.get<std::uint32_t>();
  d.zstd_level = r.get<std::int32_t>();
  d.value_type = r.get<std::uint32_t>();
  if (!r.ok || dims == 0 || dims > 16) return std::nullopt;
  for (std::uint32_t i = 0; i < dims; ++i) d.shape.push_back(r.get<std::uint64_t>());
  for (std::uint32_t i = 0; i < dims; ++i) d.chunk.push_back(r.get<std::uint64_t>());
  std::uint64_t lowers = r.get<std::uint64_t>();
  if (!r.ok || lowers > d.bins || lowers > (bytes.size() - r.at) / 8) return std::nullopt;
  for (std::uint64_t i = 0; i < lowers; ++i) d.bin_lower.push_back(r.get<std::uint64_t>());
  std::uint64_t np = r.get<std::uint64_t>(), nu = r.get<std::uint64_t>();
  if (!r.ok) return std::nullopt;
  // The tables' sizes before the grid that needs them is built: a short or
  // corrupt directory is refused without allocating for it.
  if (d.itemsize == 0 || d.itemsize > 8 || d.bins == 0) return std::nullopt;
  std::uint64_t chunks = 1;
  for (std::uint32_t i = 0; i < dims; ++i) {
    if (d.shape[i] == 0 || d.chunk[i] == 0) return std::nullopt;
    const std::uint64_t c = (d.shape[i] + std::min(d.chunk[i], d.shape[i]) - 1) / std::min(d.chunk[i], d.shape[i]);
    if (c > MlocGrid::kMaxUnits || chunks * c > MlocGrid::kMaxUnits) return std::nullopt;
    chunks *= c;
  }
  const std::uint64_t ngroups = mloc_byte_groups(d.itemsize, d.float64).size();
  if (np != std::uint64_t(d.bins) * chunks || nu != np * ngroups || nu > MlocGrid::kMaxUnits) return std::nullopt;
  const std::uint64_t left = bytes.size() - r.at;
  // Version 2: the presence bits first; the entries of the present ones.
  std::uint64_t present = np;
  const std::byte* bits = nullptr;
  if (d.version == 2) {
    if (left < (np + 7) / 8) return std::nullopt;
    bits = reinterpret_cast<const std::byte*>(bytes.data() + r.at);
    present = 0;
    for (std::uint64_t i = 0; i < (np + 7) / 8; ++i) present += std::popcount(std::uint8_t(bits[i]));
    if (np % 8 != 0 && (std::uint8_t(bits[np / 8]) >> (np % 8)) != 0) return std::nullopt;  // bits past the end
    r.at += (np + 7) / 8;
  }
  if (bytes.size() - r.at != present * (sizeof(MlocPositionEntry) + ngroups * sizeof(MlocUnitEntry)))
    return std::nullopt;
  std::optional<MlocGrid> grid;
  try {
    if (!parse_mloc_priority(mloc_priority_text(d.priority))) return std::nullopt;
    grid.emplace(d.grid());
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (np != std::uint64_t(grid->bins()) * grid->chunks() || nu != grid->units()) return std::nullopt;
  const std::uint64_t C = grid->chunks();
  const std::uint32_t G = std::uint32_t(grid->groups().size());
  d.positions.resize(np);
  d.units.resize(nu);
  const char* at = bytes.data() + r.at;
  if (d.version == 1) {
    std::memcpy(d.positions.data(), at, np * sizeof(MlocPositionEntry));
    std::memcpy(d.units.data(), at + np * sizeof(MlocPositionEntry), nu * sizeof(MlocUnitEntry));
  }
  // Sizes must agree with the grid: counts add up per chunk, stored bytes
  // never exceed raw ones.
  std::vector<std::uint64_t> per_chunk(C, 0);
  if (d.version == 1) {
    // A chunk at a time along each (bin, group): the tables in their order
    // for priorities that put space last, the common case.
    const std::uint64_t rank_stride = C > 1 ? grid->unit(0, 0, 1) : 0;
    for (std::uint32_t b = 0; b < grid->bins(); ++b) {
      const MlocPositionEntry* e = d.positions.data() + grid->position_entry(b, 0);
      for (std::uint64_t c = 0; c < C; ++c) {
        if (e[c].stored > e[c].raw) return std::nullopt;
        per_chunk[c] += e[c].count;
      }
      for (std::uint32_t g = 0; g < G; ++g) {
        const std::uint64_t bytes_per = grid->groups()[g].bytes;
        std::uint64_t u = grid->unit(b, g, 0);
        for (std::uint64_t c = 0; c < C; ++c, u += rank_stride)
          if (d.units[u].stored > e[c].count * bytes_per) return std::nullopt;
      }
    }
  } else {
    // The present entries only, each checked as it is placed (absent ones
    // are zero, so they fit); both walks are sequential in the bytes and
    // the tables.
    auto is_present = [bits](std::uint64_t e) { return (std::uint8_t(bits[e / 8]) >> (e % 8)) & 1; };
    for (std::uint64_t e = 0; e < np; ++e) {
      if (!is_present(e)) continue;
      MlocPositionEntry& pe = d.positions[e];
      std::memcpy(&pe, at, sizeof pe);
      at += sizeof pe;
      if (pe.stored > pe.raw) return std::nullopt;
      per_chunk[e % C] += pe.count;
    }
    bool fits = true;
    for_each_unit(*grid, d.priority, [&](std::uint32_t b, std::uint32_t k, std::uint64_t c, std::uint64_t u) {
      const std::uint64_t e = grid->position_entry(b, c);
      if (!is_present(e)) return;
      MlocUnitEntry& ue = d.units[u];
      std::memcpy(&ue, at, sizeof ue);
      at += sizeof ue;
      fits = fits && ue.stored <= std::uint64_t(d.positions[e].count) * grid->groups()[k].bytes;
    });
    if (!fits) return std::nullopt;
  }
  for (std::uint64_t c = 0; c < C; ++c)
    if (per_chunk[c] != grid->chunk_elements(c)) return std::nullopt;
  d.locate(sector_size, bytes.size());
  return d;
}

}  // namespace mmfs::layouts
