// Rows rewritten since an index was built, and their correction of the
// stored index's estimates.
//
// Encoded form (little-endian): magic "MMFS.DLT", bins u32, entries u32,
// the stale bitmap (u64 length + 64-bit portable bytes), then per non-empty
// bin: bin u32, rows, min key, max key (u64 each), bitmap (u64 length +
// bytes); then XXH3-64 of every byte before it.
#include <xxhash.h>

#include <cstring>

#include "indexes/bitmap_index.h"
#include "indexes/index_internal.h"

namespace mmfs::indexes {

namespace {

constexpr char kMagic[8] = {'M', 'M', 'F', 'S', '.', 'D', 'L', 'T'};

template <class T>
void put(std::string* out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof v);
  out->append(b, sizeof b);
}

struct Reader {
  std::span<const std::byte> in;
  std::size_t pos = 0;
  template <class T>
  bool get(T* v) {
    if (in.size() - pos < sizeof(T)) return false;
    std::memcpy(v, in.data() + pos, sizeof(T));
    pos += sizeof(T);
    return true;
  }
  bool bitmap(Bitmap* b) {
    std::uint64_t len;
    if (!get(&len) || len > in.size() - pos) return false;
    if (!deserialize(in.subspan(pos, len), b)) return false;
    pos += len;
    return true;
  }
};

}  // namespace

// The per-bin vectors wait for the first write: an index of 500,000 bins is
// loaded on a query's first touch, and most are never written.
IndexDelta::IndexDelta(const Binning& binning) : bins_(binning.bins()) {}

void IndexDelta::set(const Binning& binning, std::uint64_t first_row, const std::byte* elements, std::size_t count) {
  if (count == 0) return;
  if (bins_ != binning.bins()) *this = IndexDelta(binning);
  if (added_.empty()) {
    added_.resize(bins_);
    stats_.resize(bins_);
  }
  Bitmap rows = range_bitmap(first_row, first_row + count);
  stale_ |= rows;
  // A row rewritten again leaves the bin its previous value put it in.
  for (std::size_t b = 0; b < added_.size(); ++b) {
    if (stats_[b].rows == 0) continue;
    added_[b] -= rows;
    stats_[b].rows = added_[b].cardinality();
    if (stats_[b].rows == 0) stats_[b] = BinStats{};
  }
  // Bucketing counts rows into scratch statistics; keys widen ours (the
  // key bounds of a bin only grow, so they always cover its rows).
  std::vector<BinStats> fresh(binning.bins());
  detail::Bucketed piece = detail::bucket_by_bin(binning, first_row, elements, count, &fresh);
  for (std::uint32_t b = 0; b < binning.bins(); ++b) {
    std::uint32_t begin = piece.bin_start[b], end = piece.bin_start[b + 1];
    if (begin == end) continue;
    detail::add_rows(&added_[b], piece.rows.data() + begin, end - begin);
    added_[b].runOptimize();
    stats_[b].rows = added_[b].cardinality();
    stats_[b].min_key = std::min(stats_[b].min_key, fresh[b].min_key);
    stats_[b].max_key = std::max(stats_[b].max_key, fresh[b].max_key);
  }
  stale_.runOptimize();
}

Estimate IndexDelta::apply(const Binning& binning, const KeySet& raw, Estimate base) const {
  if (stale_.isEmpty()) return base;
  base.sure -= stale_;
  base.maybe -= stale_;
  KeySet keys = detail::normalized(raw);
  for (std::uint32_t b = 0; b < added_.size() && b < binning.bins(); ++b) {
    if (stats_[b].rows == 0) continue;
    if (binning.has_nan_bin() && b == binning.nan_bin()) {
      if (keys.nan) base.sure |= added_[b];
      continue;
    }
    switch (detail::classify(keys, binning.key_range(b), stats_[b])) {
      case detail::BinClass::Sure: base.sure |= added_[b]; break;
      case detail::BinClass::Maybe: base.maybe |= added_[b]; break;
      default: break;
    }
  }
  base.maybe -= base.sure;
  return base;
}

std::string IndexDelta::encode() const {
  std::string out(kMagic, 8);
  std::uint32_t entries = 0;
  for (const BinStats& s : stats_) entries += s.rows > 0;
  put(&out, bins_);
  put(&out, entries);
  auto put_bitmap = [&](const Bitmap& b) {
    std::string s = serialize(b);
    put(&out, std::uint64_t(s.size()));
    out += s;
  };
  put_bitmap(stale_);
  for (std::uint32_t b = 0; b < added_.size(); ++b) {
    if (stats_[b].rows == 0) continue;
    put(&out, b);
    put(&out, stats_[b].rows);
    put(&out, stats_[b].min_key);
    put(&out, stats_[b].max_key);
    put_bitmap(added_[b]);
  }
  put(&out, std::uint64_t(XXH3_64bits(out.data(), out.size())));
  return out;
}

std::uint64_t IndexDelta::bytes() const {
  std::uint64_t n = 8 + 8 + 8 + stale_.getSizeInBytes(true) + 8;
  for (std::uint32_t b = 0; b < added_.size(); ++b) {
    if (stats_[b].rows > 0) n += 4 + 24 + 8 + added_[b].getSizeInBytes(true);
  }
  return n;
}

std::optional<IndexDelta> IndexDelta::decode(const Binning& binning, std::span<const std::byte> bytes) {
  if (bytes.size() < 8 + 8 + 8 + 8 || std::memcmp(bytes.data(), kMagic, 8) != 0) return std::nullopt;
  std::uint64_t sum;
  std::memcpy(&sum, bytes.data() + bytes.size() - 8, 8);
  if (XXH3_64bits(bytes.data(), bytes.size() - 8) != sum) return std::nullopt;
  Reader r{bytes.first(bytes.size() - 8), 8};
  std::uint32_t bins = 0, entries = 0;
  if (!r.get(&bins) || !r.get(&entries) || bins != binning.bins() || entries > bins) return std::nullopt;
  IndexDelta d(binning);
  d.added_.resize(bins);
  d.stats_.resize(bins);
  if (!r.bitmap(&d.stale_)) return std::nullopt;
  long prev = -1;
  Bitmap all_added;
  for (std::uint32_t i = 0; i < entries; ++i) {
    std::uint32_t b;
    BinStats s;
    if (!r.get(&b) || long(b) <= prev || b >= bins) return std::nullopt;
    prev = b;
    if (!r.get(&s.rows) || !r.get(&s.min_key) || !r.get(&s.max_key)) return std::nullopt;
    if (!r.bitmap(&d.added_[b])) return std::nullopt;
    // Statistics must describe the bitmap, which must hold rewritten rows only.
    if (s.rows == 0 || s.rows != d.added_[b].cardinality()) return std::nullopt;
    if (!is_subset(d.added_[b], d.stale_) || !(all_added & d.added_[b]).isEmpty()) return std::nullopt;
    if (!(binning.has_nan_bin() && b == binning.nan_bin())) {
      auto [lo, hi] = binning.key_range(b);
      if (s.min_key > s.max_key || s.min_key < lo || s.max_key > hi) return std::nullopt;
    }
    all_added |= d.added_[b];
    d.stats_[b] = s;
  }
  if (r.pos != r.in.size()) return std::nullopt;
  return d;
}

}  // namespace mmfs::indexes
