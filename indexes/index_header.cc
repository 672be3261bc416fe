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

std::string IndexHeader::encode(Encoding encoding, std::uint64_t rows, const Binning& binning,
                                const std::vector<BinStats>& stats, const std::vector<std::uint32_t>& coarse_groups,
                                const std::vector<Entry>& directory, std::string_view body) {
  const std::uint32_t value_bins = binning.value_bins();
  const std::vector<std::uint64_t>& lower = binning.lower();
  Writer columns;
  std::vector<std::uint64_t> column;
  auto emit = [&](std::size_t n, auto&& value) {
    column.resize(n);
    for (std::size_t i = 0; i < n; ++i) column[i] = value(i);
    put_column(&columns.out, column);
  };
  emit(value_bins, [&](std::size_t i) { return i == 0 ? lower[0] : lower[i] - lower[i - 1]; });
  emit(stats.size(), [&](std::size_t i) { return stats[i].rows; });
  emit(value_bins, [&](std::size_t i) { return stats[i].min_key - lower[i]; });
  emit(value_bins, [&](std::size_t i) { return stats[i].max_key - stats[i].min_key; });
  emit(coarse_groups.size(), [&](std::size_t i) { return std::uint64_t(coarse_groups[i]); });
  emit(directory.size(), [&](std::size_t i) { return directory[i].length; });
  emit(directory.size(), [&](std::size_t i) { return directory[i].checksum; });
  std::string packed(ZSTD_compressBound(columns.out.size()), '\0');
  const std::size_t n = ZSTD_compress(packed.data(), packed.size(), columns.out.data(), columns.out.size(), kPackLevel);
  if (ZSTD_isError(n)) throw std::runtime_error(std::string("zstd: ") + ZSTD_getErrorName(n));
  packed.resize(n);

  const std::uint64_t header_length = kPrefixBytes + packed.size() + 8;
  const std::uint64_t object_bytes = header_length + body.size();
  Writer w;
  w.out.reserve(object_bytes);
  w.out.append(kMagic, 8);
  w.put(kVersion);
  w.put(std::uint8_t(binning.type()));
  w.put(std::uint8_t(encoding));
  w.put(std::uint16_t(0));
  w.put(rows);
  w.put(header_length);
  w.put(object_bytes);
  w.put(value_bins);
  w.put(std::uint32_t(coarse_groups.size()));
  w.put(std::uint32_t(directory.size()));
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

// The seven columns of a header, unpacked (not yet checked).
struct Columns {
  std::shared_ptr<const std::byte[]> bytes;
  PackedColumn lower_deltas, rows, min_offsets, max_offsets, groups, lengths, checksums;
};

// The next column of `n` values at *pos: its width byte, then the values.
std::optional<PackedColumn> next_column(std::span<const std::byte> in, std::size_t* pos, std::size_t n) {
  if (*pos >= in.size()) return std::nullopt;
  const auto width = std::to_integer<unsigned>(in[*pos]);
  if (width != 1 && width != 2 && width != 4 && width != 8) return std::nullopt;
  ++*pos;
  if ((in.size() - *pos) / width < n) return std::nullopt;
  PackedColumn c(in.data() + *pos, width, n);
  *pos += n * width;
  return c;
}

std::optional<Columns> locate(std::shared_ptr<const std::byte[]> bytes, std::size_t size, const Prefix& p,
                              std::uint32_t bins) {
  const std::span<const std::byte> in(bytes.get(), size);
  std::size_t pos = 0;
  Columns c;
  for (auto [column, n] : {std::pair{&c.lower_deltas, std::size_t(p.value_bins)}, {&c.rows, std::size_t(bins)},
                           {&c.min_offsets, std::size_t(p.value_bins)}, {&c.max_offsets, std::size_t(p.value_bins)},
                           {&c.groups, std::size_t(p.coarse_bins)}, {&c.lengths, std::size_t(p.entries)},
                           {&c.checksums, std::size_t(p.entries)}}) {
    auto got = next_column(in, &pos, n);
    if (!got) return std::nullopt;
    *column = *got;
  }
  if (pos != size) return std::nullopt;
  c.bytes = std::move(bytes);
  return c;
}

std::variant<Columns, std::string> read_v2(const Prefix& p, std::span<const std::byte> header, std::uint32_t bins) {
  const std::uint64_t bound = columns_bound(p.value_bins, bins > p.value_bins, p.coarse_bins, p.entries);
  const std::byte* frame = header.data() + IndexHeader::kPrefixBytes;
  const unsigned long long raw = ZSTD_getFrameContentSize(frame, p.packed);
  if (raw == ZSTD_CONTENTSIZE_UNKNOWN || raw == ZSTD_CONTENTSIZE_ERROR || raw > bound) {
    return std::string("index header: packed columns have the wrong size");
  }
  std::shared_ptr<std::byte[]> columns(new std::byte[raw]);  // every byte is written by the frame
  const std::size_t n = ZSTD_decompress(columns.get(), raw, frame, p.packed);
  if (ZSTD_isError(n) || n != raw) return std::string("index header: packed columns do not unpack");
  auto c = locate(std::move(columns), raw, p, bins);
  if (!c) return std::string("index header: malformed packed columns");
  return std::move(*c);
}

// Version 1's raw sections, repacked as version 2's columns. Its offsets
// are not kept: they must be the running sum of the lengths (checked).
std::variant<Columns, std::string> read_v1(const Prefix& p, std::span<const std::byte> header, std::uint32_t bins) {
  Reader r{header, IndexHeader::kPrefixBytes};
  std::string out;
  std::vector<std::uint64_t> column(p.value_bins);
  std::uint64_t previous = 0;
  for (auto& k : column) {
    const std::uint64_t edge = r.get<std::uint64_t>();
    k = edge - previous;  // wraps for a decreasing edge: caught as a bad edge after the running sum
    previous = edge;
  }
  put_column(&out, column);
  // The smallest and largest keys as offsets (modulo 2^64, so any stored
  // pair comes back as it was; the checks after decoding judge them).
  std::vector<std::uint64_t> rows(bins), min_offsets(p.value_bins), max_offsets(p.value_bins);
  const std::size_t edges_at = IndexHeader::kPrefixBytes;
  for (std::uint32_t b = 0; b < bins; ++b) {
    rows[b] = r.get<std::uint64_t>();
    const std::uint64_t lo = r.get<std::uint64_t>(), hi = r.get<std::uint64_t>();
    if (b < p.value_bins) {
      std::uint64_t edge;
      std::memcpy(&edge, header.data() + edges_at + 8 * b, 8);
      min_offsets[b] = lo - edge;
      max_offsets[b] = hi - lo;
    }
  }
  put_column(&out, rows);
  put_column(&out, min_offsets);
  put_column(&out, max_offsets);
  column.resize(p.coarse_bins);
  for (auto& g : column) g = r.get<std::uint32_t>();
  put_column(&out, column);
  std::vector<std::uint64_t> lengths(p.entries), checksums(p.entries);
  std::uint64_t next = p.header_length;
  for (std::uint32_t i = 0; i < p.entries; ++i) {
    const std::uint64_t offset = r.get<std::uint64_t>();
    lengths[i] = r.get<std::uint64_t>();
    checksums[i] = r.get<std::uint64_t>();
    if (offset != next) return std::string("index header: bad bitmap directory");
    next = offset + lengths[i];
  }
  put_column(&out, lengths);
  put_column(&out, checksums);
  std::shared_ptr<std::byte[]> bytes(new std::byte[out.size()]);
  std::memcpy(bytes.get(), out.data(), out.size());
  auto c = locate(std::move(bytes), out.size(), p, bins);
  if (!c) return std::string("index header: malformed sections");
  return std::move(*c);
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
  auto read = p->version == 1 ? read_v1(*p, header, bins) : read_v2(*p, header, bins);
  if (auto* e = std::get_if<std::string>(&read)) return *e;
  Columns& c = std::get<Columns>(read);

  IndexHeader h;
  h.encoding_ = p->encoding;
  h.rows_ = p->rows;
  h.header_length_ = p->header_length;
  h.object_bytes_ = p->object_bytes;
  std::vector<std::uint64_t> lower(p->value_bins);
  std::uint64_t previous = 0;
  for (std::size_t i = 0; i < lower.size(); ++i) previous = lower[i] = previous + c.lower_deltas[i];
  if (lower[0] != min_key(p->type)) return std::string("index header: bad first bin edge");
  for (std::size_t i = 1; i < lower.size(); ++i) {
    if (lower[i] <= lower[i - 1] || lower[i] > max_key(p->type)) return std::string("index header: bad bin edges");
  }
  h.binning_ = Binning(p->type, std::move(lower));
  h.columns_ = c.bytes;
  h.bin_rows_ = c.rows;
  h.min_offsets_ = c.min_offsets;
  h.max_offsets_ = c.max_offsets;
  std::uint64_t total = 0;
  const BinStatsView stats = h.stats();
  for (std::uint32_t b = 0; b < bins; ++b) {
    const std::uint64_t rows = stats.rows(b);
    // Against the rows left, not rows_: a sum of several bins could wrap past 2^64 back to rows_.
    if (rows > h.rows_ - total) return std::string("index header: bins do not hold every row");
    total += rows;
    if (b < h.binning_.value_bins() && rows > 0) {
      const BinStats st = stats[b];
      auto [lo, hi] = h.binning_.key_range(b);
      if (st.min_key > st.max_key || st.min_key < lo || st.max_key > hi) {
        return std::string("index header: bin statistics outside the bin");
      }
    }
  }
  if (total != h.rows_) return std::string("index header: bins do not hold every row");
  h.coarse_groups_.resize(c.groups.size());
  for (std::size_t j = 0; j < c.groups.size(); ++j) {
    const std::uint64_t g = c.groups[j];
    const bool ok = j == 0 ? g == 0 : g > h.coarse_groups_[j - 1] && g < p->value_bins;
    if (!ok) return std::string("index header: bad coarse bins");
    h.coarse_groups_[j] = std::uint32_t(g);
  }
  // Bitmaps follow the header back to back, up to the object's end.
  std::uint64_t next = h.header_length_;
  for (std::size_t i = 0; i < c.lengths.size(); ++i) {
    const std::uint64_t length = c.lengths[i];
    if (length < 8 || length > h.object_bytes_ - next) return std::string("index header: bad bitmap directory");
    next += length;
  }
  if (next != h.object_bytes_) return std::string("index header: directory does not cover the object");
  h.directory_ = BitmapDirectory(std::move(c.bytes), c.lengths, c.checksums, h.header_length_);
  return h;
}

bool IndexHeader::check_bitmap(std::uint32_t id, std::span<const std::byte> bytes) const {
  return id < directory_.size() && bytes.size() == directory_.length(id) &&
         XXH3_64bits(bytes.data(), bytes.size()) == directory_[id].checksum;
}

bool IndexHeader::decode_bitmap(std::uint32_t id, std::span<const std::byte> bytes, Bitmap* out) const {
  return check_bitmap(id, bytes) && deserialize(bytes, out);
}

std::uint64_t IndexHeader::fine_bytes() const {
  detail::Layout layout{encoding_, binning_.value_bins(), binning_.has_nan_bin(), coarse_bins()};
  std::uint64_t sum = 0;
  for (std::uint32_t i = 0; i < layout.coarse_first(); ++i) sum += directory_.length(i);
  return sum;
}
std::uint64_t IndexHeader::coarse_bytes() const {
  detail::Layout layout{encoding_, binning_.value_bins(), binning_.has_nan_bin(), coarse_bins()};
  std::uint64_t sum = 0;
  for (std::uint32_t i = layout.coarse_first(); i < layout.total(); ++i) sum += directory_.length(i);
  return sum;
}

}  // namespace mmfs::indexes
