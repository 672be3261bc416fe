// The stored header of an index: its byte layout, and a decoder that trusts
// nothing it reads.
//
//   prefix (64 bytes)  magic "MMFS.IDX", version u32, dtype u8, encoding u8,
//                      2 zero bytes, rows u64, header length u64, object
//                      bytes u64, value bins u32, coarse bins u32, directory
//                      entries u32, 12 zero bytes
//   lower edges        u64 per value bin
//   statistics         rows, min key, max key (u64 each) per bin, NaN last
//   coarse groups      u32 per coarse bin: its first fine bin
//   directory          offset, length, XXH3-64 (u64 each) per bitmap
//   checksum           XXH3-64 of every byte before it
// All little-endian.
#include <xxhash.h>

#include <cstring>

#include "indexes/bitmap_index.h"
#include "indexes/index_internal.h"

namespace mmfs::indexes {

namespace {

constexpr char kMagic[8] = {'M', 'M', 'F', 'S', '.', 'I', 'D', 'X'};
constexpr std::uint32_t kVersion = 1;
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
  ValueType type;
  Encoding encoding;
  std::uint64_t rows, header_length, object_bytes;
  std::uint32_t value_bins, coarse_bins, entries;
};

std::uint64_t header_size(std::uint64_t value_bins, bool nan, std::uint64_t coarse, std::uint64_t entries) {
  return IndexHeader::kPrefixBytes + 8 * value_bins + 24 * (value_bins + (nan ? 1 : 0)) + 4 * coarse + 24 * entries + 8;
}

std::optional<Prefix> parse_prefix(std::span<const std::byte> bytes) {
  if (bytes.size() < IndexHeader::kPrefixBytes || std::memcmp(bytes.data(), kMagic, 8) != 0) return std::nullopt;
  Reader r{bytes, 8};
  if (r.get<std::uint32_t>() != kVersion) return std::nullopt;
  auto dtype = r.get<std::uint8_t>(), encoding = r.get<std::uint8_t>();
  if (dtype > std::uint8_t(ValueType::F64) || encoding > std::uint8_t(Encoding::IE)) return std::nullopt;
  if (r.get<std::uint16_t>() != 0) return std::nullopt;
  Prefix p{ValueType(dtype), Encoding(encoding), 0, 0, 0, 0, 0, 0};
  p.rows = r.get<std::uint64_t>();
  p.header_length = r.get<std::uint64_t>();
  p.object_bytes = r.get<std::uint64_t>();
  p.value_bins = r.get<std::uint32_t>();
  p.coarse_bins = r.get<std::uint32_t>();
  p.entries = r.get<std::uint32_t>();
  if (r.get<std::uint32_t>() != 0 || r.get<std::uint64_t>() != 0) return std::nullopt;
  if (p.value_bins < 1 || p.value_bins > kMaxBins || p.coarse_bins > p.value_bins) return std::nullopt;
  if (p.coarse_bins != 0 && (p.coarse_bins < 2 || (p.encoding != Encoding::RE && p.encoding != Encoding::IE))) {
    return std::nullopt;
  }
  detail::Layout layout{p.encoding, p.value_bins, is_float(p.type), p.coarse_bins};
  if (p.entries != layout.total()) return std::nullopt;
  if (p.header_length != header_size(p.value_bins, is_float(p.type), p.coarse_bins, p.entries)) return std::nullopt;
  if (p.object_bytes < p.header_length) return std::nullopt;
  return p;
}

}  // namespace

std::string IndexHeader::encode(std::string_view body) {
  const std::uint32_t value_bins = binning_.value_bins();
  header_length_ = header_size(value_bins, binning_.has_nan_bin(), coarse_groups_.size(), directory_.size());
  for (Entry& e : directory_) e.offset += header_length_;
  object_bytes_ = header_length_ + body.size();
  Writer w;
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
  w.put(std::uint64_t(0));
  for (std::uint64_t k : binning_.lower()) w.put(k);
  for (const BinStats& s : stats_) {
    w.put(s.rows);
    w.put(s.min_key);
    w.put(s.max_key);
  }
  for (std::uint32_t g : coarse_groups_) w.put(g);
  for (const Entry& e : directory_) {
    w.put(e.offset);
    w.put(e.length);
    w.put(e.checksum);
  }
  w.put(std::uint64_t(XXH3_64bits(w.out.data(), w.out.size())));
  w.out.append(body);
  return std::move(w.out);
}

std::optional<std::uint64_t> IndexHeader::header_bytes(std::span<const std::byte> prefix) {
  auto p = parse_prefix(prefix);
  if (!p) return std::nullopt;
  return p->header_length;
}

std::variant<IndexHeader, std::string> IndexHeader::decode(std::span<const std::byte> header) {
  auto p = parse_prefix(header);
  if (!p) return std::string("not an index header");
  if (header.size() != p->header_length) return std::string("index header has the wrong length");
  std::uint64_t sum;
  std::memcpy(&sum, header.data() + header.size() - 8, 8);
  if (XXH3_64bits(header.data(), header.size() - 8) != sum) return std::string("index header checksum mismatch");

  IndexHeader h;
  h.encoding_ = p->encoding;
  h.rows_ = p->rows;
  h.header_length_ = p->header_length;
  h.object_bytes_ = p->object_bytes;
  Reader r{header, kPrefixBytes};
  std::vector<std::uint64_t> lower(p->value_bins);
  for (auto& k : lower) k = r.get<std::uint64_t>();
  if (lower[0] != min_key(p->type)) return std::string("index header: bad first bin edge");
  for (std::size_t i = 1; i < lower.size(); ++i) {
    if (lower[i] <= lower[i - 1] || lower[i] > max_key(p->type)) return std::string("index header: bad bin edges");
  }
  h.binning_ = Binning(p->type, std::move(lower));
  h.stats_.resize(h.binning_.bins());
  std::uint64_t total = 0;
  for (std::uint32_t b = 0; b < h.stats_.size(); ++b) {
    BinStats& s = h.stats_[b];
    s.rows = r.get<std::uint64_t>();
    s.min_key = r.get<std::uint64_t>();
    s.max_key = r.get<std::uint64_t>();
    if (s.rows > h.rows_) return std::string("index header: bad bin statistics");
    total += s.rows;
    if (b < h.binning_.value_bins() && s.rows > 0) {
      auto [lo, hi] = h.binning_.key_range(b);
      if (s.min_key > s.max_key || s.min_key < lo || s.max_key > hi) {
        return std::string("index header: bin statistics outside the bin");
      }
    }
  }
  if (total != h.rows_) return std::string("index header: bins do not hold every row");
  h.coarse_groups_.resize(p->coarse_bins);
  for (std::size_t j = 0; j < h.coarse_groups_.size(); ++j) {
    h.coarse_groups_[j] = r.get<std::uint32_t>();
    bool ok = j == 0 ? h.coarse_groups_[0] == 0
                     : h.coarse_groups_[j] > h.coarse_groups_[j - 1] && h.coarse_groups_[j] < p->value_bins;
    if (!ok) return std::string("index header: bad coarse bins");
  }
  h.directory_.resize(p->entries);
  std::uint64_t next = h.header_length_;
  for (Entry& e : h.directory_) {
    e.offset = r.get<std::uint64_t>();
    e.length = r.get<std::uint64_t>();
    e.checksum = r.get<std::uint64_t>();
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
