// The stored header of an index: its byte layout, and a decoder that trusts
// nothing it reads.
//
//   prefix (64 bytes)  magic "MMFS.IDX", version u32, dtype u8, encoding u8,
//                      2 zero bytes, rows u64, header length u64, object
//                      bytes u64, value bins u32, coarse bins u32, directory
//                      entries u32, 4 zero bytes, packed bytes u64 (v2; 0 in v1)
//   version 2 (written): one zstd frame of packed bytes holding seven
//                      columns, each a width byte w (1, 2, 4 or 8: the
//                      narrowest that holds its largest value) and then its
//                      values in w bytes each:
//                        lower edges     delta from the previous edge
//                        bin rows        per bin, NaN last
//                        smallest keys   minus the bin's lower edge (value bins)
//                        largest keys    minus the bin's smallest key (value bins)
//                        coarse groups   per coarse bin: its first fine bin
//                        bitmap lengths  per directory entry (the bitmaps follow
//                                        the header back to back, so offsets
//                                        are their running sum)
//                        bitmap XXH3-64  per directory entry
//                      An index of 500,000 exact bins had a 28 MB header in
//                      version 1 (every query's first touch read it whole);
//                      its columns of near-constant deltas pack to a few MB.
//   version 1 (read):  lower edges u64 per value bin; rows, min key, max key
//                      per bin; coarse groups u32; offset, length, XXH3-64
//                      per bitmap; all raw.
//   checksum           XXH3-64 of every byte before it
// All little-endian.
#include <xxhash.h>

#include <zstd.h>

#include <cstring>
#include <memory>
#include <stdexcept>

#include "indexes/bitmap_index.h"
#include "indexes/index_internal.h"

namespace mmfs::indexes {

namespace {

constexpr char kMagic[8] = {'M', 'M', 'F', 'S', '.', 'I', 'D', 'X'};
constexpr std::uint32_t kVersion = 2;  // written; 1 is still read
// zstd level of the packed columns: level 1 packs them nearly as well as the
// default, at a fraction of the time (they are deltas, mostly zero bytes).
constexpr int kPackLevel = 1;
// More bins than any binning makes (exact and precision stop at about
// kMaxExactBins): bounds what a header may claim.
constexpr std::uint64_t kMaxBins = 2 * kMaxExactBins + 2;

struct Writer {
  std::string out;
  template <class T>
  void put(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof v);
    out.append(b, sizeof b);
  }
};

struct Reader {
  std::span<const std::byte> in;
  std::size_t pos = 0;
  template <class T>
  T get() {  // callers check the total size first
    T v;
    std::memcpy(&v, in.data() + pos, sizeof v);
    pos += sizeof v;
    return v;
  }
};

struct Prefix {
  std::uint32_t version;
  ValueType type;
  Encoding encoding;
  std::uint64_t rows, header_length, object_bytes;
  std::uint32_t value_bins, coarse_bins, entries;
  std::uint64_t packed;
};

// Version 1: the raw sections.
std::uint64_t header_size_v1(std::uint64_t value_bins, bool nan, std::uint64_t coarse, std::uint64_t entries) {
  return IndexHeader::kPrefixBytes + 8 * value_bins + 24 * (value_bins + (nan ? 1 : 0)) + 4 * coarse + 24 * entries + 8;
}
// Version 2: the most the columns can take before packing (every width 8).
constexpr std::size_t kColumns = 7;
std::uint64_t columns_bound(std::uint64_t value_bins, bool nan, std::uint64_t coarse, std::uint64_t entries) {
  return kColumns + 8 * (value_bins + (value_bins + (nan ? 1 : 0)) + 2 * value_bins + coarse + 2 * entries);
}

// A column in the narrowest width that holds all of its values.
void put_column(std::string* out, const std::vector<std::uint64_t>& values) {
  std::uint64_t top = 0;
  for (std::uint64_t v : values) top |= v;
  const std::uint8_t width = top < (1ull << 8) ? 1 : top < (1ull << 16) ? 2 : top < (1ull << 32) ? 4 : 8;
  out->push_back(char(width));
  const std::size_t at = out->size();
  out->resize(at + values.size() * width);
  char* p = out->data() + at;
  for (std::uint64_t v : values) {
    std::memcpy(p, &v, width);  // little-endian host: the low bytes first
    p += width;
  }
}

// Hands the `n` values of a column to sink(i, value); false when its width
// or length is wrong.
template <class Sink>
bool get_column(std::span<const std::byte> in, std::size_t* pos, std::size_t n, Sink&& sink) {
  if (*pos >= in.size()) return false;
  const auto width = std::to_integer<unsigned>(in[*pos]);
  if (width != 1 && width != 2 && width != 4 && width != 8) return false;
  ++*pos;
  if ((in.size() - *pos) / width < n) return false;
  const std::byte* p = in.data() + *pos;
  for (std::size_t i = 0; i < n; ++i, p += width) {
    std::uint64_t v = 0;
    std::memcpy(&v, p, width);
    sink(i, v);
  }
  *pos += n * width;
  return true;
}

std::optional<Prefix> parse_prefix(std::span<const std::byte> bytes) {
  if (bytes.size() < IndexHeader::kPrefixBytes || std::memcmp(bytes.data(), kMagic, 8) != 0) return std::nullopt;
  Reader r{bytes, 8};
  const std::uint32_t version = r.get<std::uint32_t>();
  if (version != 1 && version != kVersion) return std::nullopt;
  auto dtype = r.get<std::uint8_t>(), encoding = r.get<std::uint8_t>();
  if (dtype > std::uint8_t(ValueType::F64) || encoding > std::uint8_t(Encoding::IE)) return std::nullopt;
  if (r.get<std::uint16_t>() != 0) return std::nullopt;
  Prefix p{version, ValueType(dtype), Encoding(encoding), 0, 0, 0, 0, 0, 0, 0};
  p.rows = r.get<std::uint64_t>();
  p.header_length = r.get<std::uint64_t>();
  p.object_bytes = r.get<std::uint64_t>();
  p.value_bins = r.get<std::uint32_t>();
  p.coarse_bins = r.get<std::uint32_t>();
  p.entries = r.get<std::uint32_t>();
  if (r.get<std::uint32_t>() != 0) return std::nullopt;
  p.packed = r.get<std::uint64_t>();
  if ((version == 1) != (p.packed == 0)) return std::nullopt;
  if (p.value_bins < 1 || p.value_bins > kMaxBins || p.coarse_bins > p.value_bins) return std::nullopt;
  if (p.coarse_bins != 0 && (p.coarse_bins < 2 || (p.encoding != Encoding::RE && p.encoding != Encoding::IE))) {
    return std::nullopt;
  }
  detail::Layout layout{p.encoding, p.value_bins, is_float(p.type), p.coarse_bins};
  if (p.entries != layout.total()) return std::nullopt;
  if (version == 1) {
    if (p.header_length != header_size_v1(p.value_bins, is_float(p.type), p.coarse_bins, p.entries)) return std::nullopt;
  } else {
    const std::uint64_t raw = columns_bound(p.value_bins, is_float(p.type), p.coarse_bins, p.entries);
    if (p.packed > ZSTD_compressBound(raw) || p.header_length != IndexHeader::kPrefixBytes + p.packed + 8) {
      return std::nullopt;
    }
  }
  if (p.object_bytes < p.header_length) return std::nullopt;
  return p;
}
}  // namespace

std::string IndexHeader::encode(std::string_view body) {
  const std::uint32_t value_bins = binning_.value_bins();
  const std::vector<std::uint64_t>& lower = binning_.lower();
  Writer columns;
  std::vector<std::uint64_t> column;
  auto emit = [&](std::size_t n, auto&& value) {
    column.resize(n);
    for (std::size_t i = 0; i < n; ++i) column[i] = value(i);
    put_column(&columns.out, column);
  };
  emit(value_bins, [&](std::size_t i) { return i == 0 ? lower[0] : lower[i] - lower[i - 1]; });
  emit(stats_.size(), [&](std::size_t i) { return stats_[i].rows; });
  emit(value_bins, [&](std::size_t i) { return stats_[i].min_key - lower[i]; });
  emit(value_bins, [&](std::size_t i) { return stats_[i].max_key - stats_[i].min_key; });
  emit(coarse_groups_.size(), [&](std::size_t i) { return std::uint64_t(coarse_groups_[i]); });
  emit(directory_.size(), [&](std::size_t i) { return directory_[i].length; });
  emit(directory_.size(), [&](std::size_t i) { return directory_[i].checksum; });
  std::string packed(ZSTD_compressBound(columns.out.size()), '\0');
  const std::size_t n = ZSTD_compress(packed.data(), packed.size(), columns.out.data(), columns.out.size(), kPackLevel);
  if (ZSTD_isError(n)) throw std::runtime_error(std::string("zstd: ") + ZSTD_getErrorName(n));
  packed.resize(n);

  header_length_ = kPrefixBytes + packed.size() + 8;
  for (Entry& e : directory_) e.offset += header_length_;
  object_bytes_ = header_length_ + body.size();
  Writer w;
  w.out.reserve(header_length_ + body.size());
  w.out.append(kMagic, 8);
  w.put(kVersion);
  w.put(std::uint8_t(type()));
  w.put(std::uint8_t(encoding_));
  w.put(std::uint16_t(0));
  w.put(rows_);
  w.put(header_length_);
  w.put(object_bytes_);
  w.put(value_bins);
  w.put(std::uint32_t(coarse_groups_.size()));
  w.put(std::uint32_t(directory_.size()));
  w.put(std::uint32_t(0));
  w.put(std::uint64_t(packed.size()));
  w.out.append(packed);
  w.put(std::uint64_t(XXH3_64bits(w.out.data(), w.out.size())));
  w.out.append(body);
  return std::move(w.out);
}

std::optional<std::uint64_t> IndexHeader::header_bytes(std::span<const std::byte> prefix) {
  auto p = parse_prefix(prefix);
  if (!p) return std::nullopt;
  return p->header_length;
}

namespace {

// The sections of a header, as read (not yet checked).
struct Sections {
  std::vector<std::uint64_t> lower;
  std::vector<BinStats> stats;
  std::vector<std::uint32_t> groups;
  std::vector<IndexHeader::Entry> directory;
};

Sections read_v1(const Prefix& p, std::span<const std::byte> header, std::uint32_t bins) {
  Sections s;
  Reader r{header, IndexHeader::kPrefixBytes};
  s.lower.resize(p.value_bins);
  for (auto& k : s.lower) k = r.get<std::uint64_t>();
  s.stats.resize(bins);
  for (BinStats& b : s.stats) {
    b.rows = r.get<std::uint64_t>();
    b.min_key = r.get<std::uint64_t>();
    b.max_key = r.get<std::uint64_t>();
  }
  s.groups.resize(p.coarse_bins);
  for (auto& g : s.groups) g = r.get<std::uint32_t>();
  s.directory.resize(p.entries);
  for (auto& e : s.directory) {
    e.offset = r.get<std::uint64_t>();
    e.length = r.get<std::uint64_t>();
    e.checksum = r.get<std::uint64_t>();
  }
  return s;
}

std::variant<Sections, std::string> read_v2(const Prefix& p, std::span<const std::byte> header, std::uint32_t bins) {
  const std::uint64_t bound = columns_bound(p.value_bins, bins > p.value_bins, p.coarse_bins, p.entries);
  const std::byte* frame = header.data() + IndexHeader::kPrefixBytes;
  const unsigned long long raw = ZSTD_getFrameContentSize(frame, p.packed);
  if (raw == ZSTD_CONTENTSIZE_UNKNOWN || raw == ZSTD_CONTENTSIZE_ERROR || raw > bound) {
    return std::string("index header: packed columns have the wrong size");
  }
  std::unique_ptr<std::byte[]> columns(new std::byte[raw]);  // every byte is written by the frame
  const std::size_t n = ZSTD_decompress(columns.get(), raw, frame, p.packed);
  if (ZSTD_isError(n) || n != raw) return std::string("index header: packed columns do not unpack");
  const std::span<const std::byte> in(columns.get(), raw);
  std::size_t pos = 0;
  Sections s;
  s.lower.resize(p.value_bins);
  s.stats.resize(bins);
  s.groups.resize(p.coarse_bins);
  s.directory.resize(p.entries);
  std::uint64_t previous = 0, offset = p.header_length;
  bool groups_fit = true;
  const bool ok =
      get_column(in, &pos, p.value_bins, [&](std::size_t i, std::uint64_t v) { previous = s.lower[i] = previous + v; }) &&
      get_column(in, &pos, bins, [&](std::size_t i, std::uint64_t v) { s.stats[i].rows = v; }) &&
      get_column(in, &pos, p.value_bins, [&](std::size_t i, std::uint64_t v) { s.stats[i].min_key = s.lower[i] + v; }) &&
      get_column(in, &pos, p.value_bins,
                 [&](std::size_t i, std::uint64_t v) { s.stats[i].max_key = s.stats[i].min_key + v; }) &&
      get_column(in, &pos, p.coarse_bins,
                 [&](std::size_t i, std::uint64_t v) {
                   groups_fit = groups_fit && v <= 0xFFFFFFFFu;
                   s.groups[i] = std::uint32_t(v);
                 }) &&
      get_column(in, &pos, p.entries,
                 [&](std::size_t i, std::uint64_t v) {
                   s.directory[i].offset = offset;
                   s.directory[i].length = v;
                   offset += v;  // wraps only on a lie, which the directory check catches
                 }) &&
      get_column(in, &pos, p.entries, [&](std::size_t i, std::uint64_t v) { s.directory[i].checksum = v; }) &&
      pos == in.size();
  if (!ok) return std::string("index header: malformed packed columns");
  if (!groups_fit) return std::string("index header: bad coarse bins");
  return s;
}

}  // namespace

std::variant<IndexHeader, std::string> IndexHeader::decode(std::span<const std::byte> header) {
  auto p = parse_prefix(header);
  if (!p) return std::string("not an index header");
  if (header.size() != p->header_length) return std::string("index header has the wrong length");
  std::uint64_t sum;
  std::memcpy(&sum, header.data() + header.size() - 8, 8);
  if (XXH3_64bits(header.data(), header.size() - 8) != sum) return std::string("index header checksum mismatch");

  const std::uint32_t bins = p->value_bins + (is_float(p->type) ? 1 : 0);
  Sections s;
  if (p->version == 1) {
    s = read_v1(*p, header, bins);
  } else {
    auto v2 = read_v2(*p, header, bins);
    if (auto* e = std::get_if<std::string>(&v2)) return *e;
    s = std::move(std::get<Sections>(v2));
  }

  IndexHeader h;
  h.encoding_ = p->encoding;
  h.rows_ = p->rows;
  h.header_length_ = p->header_length;
  h.object_bytes_ = p->object_bytes;
  if (s.lower[0] != min_key(p->type)) return std::string("index header: bad first bin edge");
  for (std::size_t i = 1; i < s.lower.size(); ++i) {
    if (s.lower[i] <= s.lower[i - 1] || s.lower[i] > max_key(p->type)) return std::string("index header: bad bin edges");
  }
  h.binning_ = Binning(p->type, std::move(s.lower));
  h.stats_ = std::move(s.stats);
  std::uint64_t total = 0;
  for (std::uint32_t b = 0; b < h.stats_.size(); ++b) {
    const BinStats& st = h.stats_[b];
    if (st.rows > h.rows_) return std::string("index header: bad bin statistics");
    total += st.rows;
    if (b < h.binning_.value_bins() && st.rows > 0) {
      auto [lo, hi] = h.binning_.key_range(b);
      if (st.min_key > st.max_key || st.min_key < lo || st.max_key > hi) {
        return std::string("index header: bin statistics outside the bin");
      }
    }
  }
  if (total != h.rows_) return std::string("index header: bins do not hold every row");
  h.coarse_groups_ = std::move(s.groups);
  for (std::size_t j = 0; j < h.coarse_groups_.size(); ++j) {
    bool ok = j == 0 ? h.coarse_groups_[0] == 0
                     : h.coarse_groups_[j] > h.coarse_groups_[j - 1] && h.coarse_groups_[j] < p->value_bins;
    if (!ok) return std::string("index header: bad coarse bins");
  }
  h.directory_ = std::move(s.directory);
  std::uint64_t next = h.header_length_;
  for (const Entry& e : h.directory_) {
    // Bitmaps follow the header back to back, up to the object's end.
    if (e.offset != next || e.length < 8 || e.length > h.object_bytes_ - e.offset) {
      return std::string("index header: bad bitmap directory");
    }
    next = e.offset + e.length;
  }
  if (next != h.object_bytes_) return std::string("index header: directory does not cover the object");
  return h;
}

bool IndexHeader::decode_bitmap(std::uint32_t id, std::span<const std::byte> bytes, Bitmap* out) const {
  if (id >= directory_.size() || bytes.size() != directory_[id].length) return false;
  if (XXH3_64bits(bytes.data(), bytes.size()) != directory_[id].checksum) return false;
  return deserialize(bytes, out);
}

std::uint64_t IndexHeader::fine_bytes() const {
  detail::Layout layout{encoding_, binning_.value_bins(), binning_.has_nan_bin(), coarse_bins()};
  std::uint64_t sum = 0;
  for (std::uint32_t i = 0; i < layout.coarse_first(); ++i) sum += directory_[i].length;
  return sum;
}
std::uint64_t IndexHeader::coarse_bytes() const {
  detail::Layout layout{encoding_, binning_.value_bins(), binning_.has_nan_bin(), coarse_bins()};
  std::uint64_t sum = 0;
  for (std::uint32_t i = layout.coarse_first(); i < layout.total(); ++i) sum += directory_[i].length;
  return sum;
}

}  // namespace mmfs::indexes
