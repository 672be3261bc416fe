// Encoding names, the shared layout helpers and the index builder. The
// header's stored form is in index_header.cc, planning and evaluation in
// index_plan.cc, deltas in index_delta.cc.
#include "indexes/bitmap_index.h"

#include <roaring/roaring.hh>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <span>

#include "indexes/index_internal.h"

namespace mmfs::indexes {

namespace {
constexpr std::string_view kEncodingNames[] = {"e1", "bn", "range", "interval", "re", "ie"};
// Rows bucketed per step (bounds the scratch memory of add()).
constexpr std::size_t kStep = 1u << 24;
// Fewer fine bins than this: a coarse level cannot save anything worth a level.
constexpr std::uint32_t kMinFineForCoarse = 8;
}  // namespace

std::optional<Encoding> parse_encoding(std::string_view name) {
  for (std::size_t i = 0; i < std::size(kEncodingNames); ++i) {
    if (name == kEncodingNames[i]) return Encoding(i);
  }
  return std::nullopt;
}
std::string_view encoding_name(Encoding e) { return kEncodingNames[std::size_t(e)]; }

namespace detail {

std::uint32_t Layout::slices() const { return value_bins <= 1 ? 0 : std::uint32_t(std::bit_width(value_bins - 1)); }

std::uint32_t Layout::fine_count() const {
  switch (encoding) {
    case Encoding::BN: return slices();
    case Encoding::Range: return value_bins - 1;
    case Encoding::Interval: return value_bins - interval_width() + 1;
    default: return value_bins;
  }
}
std::uint32_t Layout::coarse_count() const {
  if (coarse_bins < 2) return 0;
  if (encoding == Encoding::RE) return coarse_bins - 1;
  if (encoding == Encoding::IE) return coarse_bins - coarse_width() + 1;
  return 0;
}

void add_rows(Bitmap* b, const std::uint64_t* rows, std::size_t n) {
  std::vector<std::uint32_t> low;
  std::size_t i = 0;
  while (i < n) {
    std::uint32_t high = std::uint32_t(rows[i] >> 32);
    std::size_t j = i;
    low.clear();
    while (j < n && std::uint32_t(rows[j] >> 32) == high) low.push_back(std::uint32_t(rows[j++]));
    add_rows32(b, high, low.data(), low.size());
    i = j;
  }
}

KeySet normalized(const KeySet& keys) {
  KeySet out;
  out.nan = keys.nan;
  auto ranges = keys.ranges;
  std::sort(ranges.begin(), ranges.end());
  for (auto [lo, hi] : ranges) {
    if (lo > hi) continue;
    if (!out.ranges.empty() && (out.ranges.back().second == ~0ull || lo <= out.ranges.back().second + 1)) {
      out.ranges.back().second = std::max(out.ranges.back().second, hi);
    } else {
      out.ranges.push_back({lo, hi});
    }
  }
  return out;
}

namespace {
// The range of `keys` holding key k, if any (keys normalized).
const std::pair<std::uint64_t, std::uint64_t>* range_at(const KeySet& keys, std::uint64_t k) {
  auto it = std::upper_bound(keys.ranges.begin(), keys.ranges.end(), k,
                             [](std::uint64_t key, const auto& r) { return key < r.first; });
  if (it == keys.ranges.begin() || k > std::prev(it)->second) return nullptr;
  return &*std::prev(it);
}
bool inside(const KeySet& keys, std::uint64_t lo, std::uint64_t hi) {
  auto r = range_at(keys, lo);
  return r && hi <= r->second;
}
bool disjoint(const KeySet& keys, std::uint64_t lo, std::uint64_t hi) {
  // The first range ending at or after lo must start after hi.
  auto it = std::lower_bound(keys.ranges.begin(), keys.ranges.end(), lo,
                             [](const auto& r, std::uint64_t key) { return r.second < key; });
  return it == keys.ranges.end() || it->first > hi;
}
}  // namespace

BinClass classify(const KeySet& keys, std::pair<std::uint64_t, std::uint64_t> bin_keys, const BinStats& stats) {
  if (stats.rows == 0) return BinClass::Empty;
  if (inside(keys, bin_keys.first, bin_keys.second)) return BinClass::Sure;
  if (stats.min_key > stats.max_key) return BinClass::Maybe;  // rows without key statistics
  if (inside(keys, stats.min_key, stats.max_key)) return BinClass::Sure;
  if (disjoint(keys, stats.min_key, stats.max_key)) return BinClass::Skip;
  return BinClass::Maybe;
}

Bucketed bucket_by_bin(const Binning& binning, std::uint64_t first_row, const std::byte* elements, std::size_t count,
                       std::vector<BinStats>* stats) {
  const ValueType t = binning.type();
  const std::size_t size = itemsize(t);
  std::vector<std::uint32_t> bins(count);
  binning.bins_of(elements, count, bins.data());
  Bucketed out;
  out.bin_start.assign(binning.bins() + 1, 0);
  for (std::uint32_t b : bins) ++out.bin_start[b + 1];
  for (std::size_t b = 0; b < binning.bins(); ++b) out.bin_start[b + 1] += out.bin_start[b];
  out.rows.resize(count);
  std::vector<std::uint32_t> fill(out.bin_start.begin(), out.bin_start.end() - 1);
  for (std::size_t i = 0; i < count; ++i) {
    std::uint32_t b = bins[i];
    out.rows[fill[b]++] = first_row + i;
    BinStats& s = (*stats)[b];
    ++s.rows;
    if (b < binning.value_bins()) {
      std::uint64_t k = value_key(t, elements + i * size);
      s.min_key = std::min(s.min_key, k);
      s.max_key = std::max(s.max_key, k);
    }
  }
  return out;
}

}  // namespace detail

using detail::Layout;

// --- IndexBuilder -----------------------------------------------------------

IndexBuilder::IndexBuilder(Binning binning, Encoding encoding, std::uint64_t rows)
    : binning_(std::move(binning)), encoding_(encoding), rows_(rows), fine_(binning_.bins()), stats_(binning_.bins()) {}

void IndexBuilder::add(std::uint64_t first_row, const std::byte* elements, std::size_t count) {
  const std::size_t size = itemsize(binning_.type());
  for (std::size_t done = 0; done < count;) {
    std::size_t n = std::min(kStep, count - done);
    detail::Bucketed piece = detail::bucket_by_bin(binning_, first_row + done, elements + done * size, n, &stats_);
    for (std::uint32_t b = 0; b < binning_.bins(); ++b) {
      std::uint32_t begin = piece.bin_start[b], end = piece.bin_start[b + 1];
      if (begin < end) detail::add_rows(&fine_[b], piece.rows.data() + begin, end - begin);
    }
    done += n;
  }
}

namespace {

// Appends bitmaps to the object body, recording their directory entries.
struct Emitter {
  std::string body;
  std::vector<IndexHeader::Entry> entries;
  // `b` is run-optimized already (the fine level) or a union built here.
  void emit(const Bitmap& b) {
    const std::size_t at = body.size();
    body.resize(at + b.getSizeInBytes(true));
    body.resize(at + b.write(body.data() + at, true));
    entries.push_back({at, body.size() - at, XXH3_64bits(body.data() + at, body.size() - at)});
  }
  void emit_optimized(Bitmap b) {
    b.runOptimize();
    b.shrinkToFit();
    emit(b);
  }
};

// The first fine bin of each coarse bin: consecutive fine bins grouped to
// equal total size, their number chosen so that a coarse bitmap costs about
// what the fine bitmaps of one coarse bin cost (§4.2), i.e. answering a wide
// range costs as much through either level's share. Empty: no coarse level.
std::vector<std::uint32_t> choose_coarse(const std::vector<Bitmap>& fine, std::uint32_t value_bins,
                                         std::uint64_t rows) {
  if (value_bins < kMinFineForCoarse) return {};
  std::vector<std::uint64_t> sizes(value_bins);
  std::uint64_t total = 0;
  for (std::uint32_t b = 0; b < value_bins; ++b) total += sizes[b] = fine[b].getSizeInBytes(true);
  // A coarse bitmap holds about half the rows; Roaring stores a dense half
  // in about rows/8 bytes, a sparse one in about half the fine bytes.
  double coarse_bitmap = std::max(64.0, std::min(double(total) / 2, double(rows) / 8 + 64));
  auto count = std::uint32_t(std::clamp(std::lround(double(total) / coarse_bitmap), 0l, long(value_bins / 4)));
  if (count < 3) return {};
  std::vector<std::uint32_t> groups{0};
  std::uint64_t acc = 0;
  for (std::uint32_t b = 0; b < value_bins; ++b) {
    // Start a new group once this one reached its share of the total.
    if (acc * count >= total * groups.size() && b > groups.back() && groups.size() < count) groups.push_back(b);
    acc += sizes[b];
  }
  return groups.size() >= 3 ? groups : std::vector<std::uint32_t>{};
}

// Union of fine bins [first, last].
Bitmap union_of(const std::vector<Bitmap>& fine, std::uint32_t first, std::uint32_t last) {
  std::vector<const Bitmap*> parts;
  for (std::uint32_t b = first; b <= last; ++b) parts.push_back(&fine[b]);
  return union_all(std::move(parts));
}

// Range encoding of `parts`: R_i = parts 0..i, i < n-1.
void emit_range(Emitter* e, std::span<const Bitmap> parts) {
  Bitmap acc;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    acc |= parts[i];
    e->emit_optimized(acc);
  }
}
// Interval encoding of `parts`: I_i = parts i..i+m-1, i <= n-m, m = ceil(n/2).
void emit_interval(Emitter* e, std::span<const Bitmap> parts) {
  std::size_t n = parts.size(), m = (n + 1) / 2;
  std::vector<const Bitmap*> first;
  for (std::size_t i = 0; i < m; ++i) first.push_back(&parts[i]);
  Bitmap acc = union_all(std::move(first));
  for (std::size_t i = 0; i + m <= n; ++i) {
    if (i > 0) {
      acc -= parts[i - 1];  // bins are disjoint: removing one leaves the rest
      acc |= parts[i + m - 1];
    }
    e->emit_optimized(acc);
  }
}
// Bit slices of the bin number.
void emit_slices(Emitter* e, const std::vector<Bitmap>& fine, std::uint32_t value_bins, std::uint32_t slices) {
  for (std::uint32_t k = 0; k < slices; ++k) {
    std::vector<const Bitmap*> parts;
    for (std::uint32_t b = 0; b < value_bins; ++b)
      if ((b >> k) & 1) parts.push_back(&fine[b]);
    e->emit_optimized(union_all(std::move(parts)));
  }
}

}  // namespace

// Rows never added read as zero (SPEC §4): they belong to zero's bin, so
// every row of [0, rows) is in exactly one bin.
void IndexBuilder::add_unwritten_rows() {
  std::uint64_t seen = 0;
  for (const BinStats& s : stats_) seen += s.rows;
  if (seen == rows_) return;
  std::vector<const Bitmap*> parts;
  for (const Bitmap& b : fine_) parts.push_back(&b);
  Bitmap all = union_all(std::move(parts));
  Bitmap missing = range_bitmap(0, rows_) - all;
  if (missing.isEmpty()) return;
  std::vector<std::byte> zero(itemsize(binning_.type()), std::byte{0});
  std::uint32_t bin = binning_.bin_of(zero.data());
  std::uint64_t key = value_key(binning_.type(), zero.data());
  fine_[bin] |= missing;
  stats_[bin].rows += missing.cardinality();
  stats_[bin].min_key = std::min(stats_[bin].min_key, key);
  stats_[bin].max_key = std::max(stats_[bin].max_key, key);
}

std::string IndexBuilder::finish() {
  add_unwritten_rows();
  for (Bitmap& b : fine_) {
    b.runOptimize();
    b.shrinkToFit();
  }
  const std::uint32_t value_bins = binning_.value_bins();
  IndexHeader h;
  h.encoding_ = encoding_;
  h.rows_ = rows_;
  h.binning_ = binning_;
  h.stats_ = stats_;
  if (encoding_ == Encoding::RE || encoding_ == Encoding::IE) h.coarse_groups_ = choose_coarse(fine_, value_bins, rows_);
  Layout layout{encoding_, value_bins, binning_.has_nan_bin(), std::uint32_t(h.coarse_groups_.size())};

  Emitter e;
  const std::span<const Bitmap> values(fine_.data(), value_bins);
  switch (encoding_) {
    case Encoding::BN: emit_slices(&e, fine_, value_bins, layout.slices()); break;
    case Encoding::Range: emit_range(&e, values); break;
    case Encoding::Interval: emit_interval(&e, values); break;
    default:
      for (const Bitmap& b : values) e.emit(b);
  }
  if (binning_.has_nan_bin()) e.emit(fine_[binning_.nan_bin()]);
  if (layout.coarse_count() > 0) {
    std::vector<Bitmap> coarse;
    const auto& g = h.coarse_groups_;
    for (std::size_t j = 0; j < g.size(); ++j) {
      coarse.push_back(union_of(fine_, g[j], j + 1 < g.size() ? g[j + 1] - 1 : value_bins - 1));
    }
    if (encoding_ == Encoding::RE) {
      emit_range(&e, coarse);
    } else {
      emit_interval(&e, coarse);
    }
  }
  h.directory_ = std::move(e.entries);
  return h.encode(e.body);
}

}  // namespace mmfs::indexes
