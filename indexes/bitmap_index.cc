// Encoding names and the helpers the builder, the planner and the delta
// share. The builder is in index_builder.cc, the header's stored form in
// index_header.cc, planning and evaluation in index_plan.cc, deltas in
// index_delta.cc.
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

}  // namespace mmfs::indexes
