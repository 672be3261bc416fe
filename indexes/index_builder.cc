// The index builder: every row's bin, then the stored object.
//
// Two ways to the same bytes. An array of at most IndexBuilder::kDirectRows
// rows keeps each row's bin (4 bytes a row) and, at finish, sorts its rows
// by bin once: every bitmap is then built from its complete ascending row
// list, serialized, and freed before the next one. A column of 500,000 bins
// thus allocates each Roaring container once, at its final size, and frees
// it while the allocator still has it at hand; growing 500,000 bitmaps side
// by side and freeing ten million scattered containers at the end took
// twice as long. A larger array adds its rows to one growing bitmap per
// bin, 2^24 rows at a time.
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <span>

#include "indexes/bitmap_index.h"
#include "indexes/index_internal.h"

namespace mmfs::indexes {

using detail::Layout;

namespace {

// Rows bucketed per step (bounds the scratch memory of the incremental way).
constexpr std::size_t kStep = 1u << 24;
// Fewer fine bins than this: a coarse level cannot save anything worth a level.
constexpr std::uint32_t kMinFineForCoarse = 8;
// A row no piece has given yet (direct way).
constexpr std::uint32_t kUnwritten = ~0u;

// Appends bitmaps to the object body, recording their directory entries.
struct Emitter {
  std::string body;
  std::vector<IndexHeader::Entry> entries;
  // `b` is run-optimized already.
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
// range costs as much through either level's share. `sizes`: each value
// bin's stored bitmap. Empty: no coarse level.
std::vector<std::uint32_t> choose_coarse(const std::vector<std::uint64_t>& sizes, std::uint64_t rows) {
  const auto value_bins = std::uint32_t(sizes.size());
  if (value_bins < kMinFineForCoarse) return {};
  std::uint64_t total = 0;
  for (std::uint64_t s : sizes) total += s;
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
void emit_coarse(Emitter* e, Encoding encoding, std::span<const Bitmap> coarse) {
  if (encoding == Encoding::RE) {
    emit_range(e, coarse);
  } else {
    emit_interval(e, coarse);
  }
}

// The coarse bin of every value bin (groups: first fine bin of each).
std::vector<std::uint32_t> coarse_of_bin(const std::vector<std::uint32_t>& groups, std::uint32_t value_bins) {
  std::vector<std::uint32_t> out(value_bins);
  for (std::size_t j = 0; j < groups.size(); ++j) {
    const std::uint32_t end = j + 1 < groups.size() ? groups[j + 1] : value_bins;
    std::fill(out.begin() + groups[j], out.begin() + end, std::uint32_t(j));
  }
  return out;
}

// A run-optimized bitmap of ascending rows below 2^32.
Bitmap bitmap_of(const std::uint32_t* rows, std::size_t n) {
  Bitmap b;
  add_rows32(&b, 0, rows, n);
  b.runOptimize();
  b.shrinkToFit();
  return b;
}

}  // namespace

IndexBuilder::IndexBuilder(Binning binning, Encoding encoding, std::uint64_t rows, std::uint64_t direct_rows)
    : binning_(std::move(binning)),
      encoding_(encoding),
      rows_(rows),
      direct_(rows <= std::min<std::uint64_t>(direct_rows, 1ull << 32)),
      stats_(binning_.bins()) {
  if (direct_) {
    bin_of_row_.assign(rows_, kUnwritten);
  } else {
    fine_.resize(binning_.bins());
  }
}

void IndexBuilder::add(std::uint64_t first_row, const std::byte* elements, std::size_t count) {
  const std::size_t size = itemsize(binning_.type());
  if (!direct_) {
    for (std::size_t done = 0; done < count;) {
      std::size_t n = std::min(kStep, count - done);
      detail::Bucketed piece = detail::bucket_by_bin(binning_, first_row + done, elements + done * size, n, &stats_);
      for (std::uint32_t b = 0; b < binning_.bins(); ++b) {
        std::uint32_t begin = piece.bin_start[b], end = piece.bin_start[b + 1];
        if (begin < end) detail::add_rows(&fine_[b], piece.rows.data() + begin, end - begin);
      }
      done += n;
    }
    return;
  }
  if (first_row > rows_ || count > rows_ - first_row) return;  // outside the array: not a row of it
  std::uint32_t* bins = bin_of_row_.data() + first_row;
  binning_.bins_of(elements, count, bins);
  const ValueType t = binning_.type();
  const std::uint32_t value_bins = binning_.value_bins();
  for (std::size_t i = 0; i < count; ++i) {
    BinStats& s = stats_[bins[i]];
    ++s.rows;
    if (bins[i] < value_bins) {
      std::uint64_t k = value_key(t, elements + i * size);
      s.min_key = std::min(s.min_key, k);
      s.max_key = std::max(s.max_key, k);
    }
  }
}

// Rows never added read as zero (docs/reference.md §4): they belong to zero's bin, so
// every row of [0, rows) is in exactly one bin.
void IndexBuilder::add_unwritten_rows() {
  std::uint64_t seen = 0;
  for (const BinStats& s : stats_) seen += s.rows;
  if (seen == rows_) return;
  std::vector<std::byte> zero(itemsize(binning_.type()), std::byte{0});
  const std::uint32_t bin = binning_.bin_of(zero.data());
  const std::uint64_t key = value_key(binning_.type(), zero.data());
  std::uint64_t added = 0;
  if (direct_) {
    for (std::uint32_t& b : bin_of_row_)
      if (b == kUnwritten) {
        b = bin;
        ++added;
      }
  } else {
    std::vector<const Bitmap*> parts;
    for (const Bitmap& b : fine_) parts.push_back(&b);
    Bitmap missing = range_bitmap(0, rows_) - union_all(std::move(parts));
    added = missing.cardinality();
    fine_[bin] |= missing;
  }
  if (added == 0) return;
  stats_[bin].rows += added;
  stats_[bin].min_key = std::min(stats_[bin].min_key, key);
  stats_[bin].max_key = std::max(stats_[bin].max_key, key);
}

std::string IndexBuilder::finish() {
  add_unwritten_rows();
  std::vector<std::uint32_t> groups;
  std::vector<IndexHeader::Entry> directory;
  const std::string body = direct_ ? finish_direct(&groups, &directory) : finish_incremental(&groups, &directory);
  return IndexHeader::encode(encoding_, rows_, binning_, stats_, groups, directory, body);
}

std::string IndexBuilder::finish_incremental(std::vector<std::uint32_t>* groups,
                                             std::vector<IndexHeader::Entry>* directory) {
  for (Bitmap& b : fine_) {
    b.runOptimize();
    b.shrinkToFit();
  }
  const std::uint32_t value_bins = binning_.value_bins();
  if (encoding_ == Encoding::RE || encoding_ == Encoding::IE) {
    std::vector<std::uint64_t> sizes(value_bins);
    for (std::uint32_t b = 0; b < value_bins; ++b) sizes[b] = fine_[b].getSizeInBytes(true);
    *groups = choose_coarse(sizes, rows_);
  }
  const Layout layout{encoding_, value_bins, binning_.has_nan_bin(), std::uint32_t(groups->size())};
  Emitter e;
  const std::span<const Bitmap> values(fine_.data(), value_bins);
  switch (encoding_) {
    case Encoding::BN:
      for (std::uint32_t k = 0; k < layout.slices(); ++k) {
        std::vector<const Bitmap*> parts;
        for (std::uint32_t b = 0; b < value_bins; ++b)
          if ((b >> k) & 1) parts.push_back(&fine_[b]);
        e.emit_optimized(union_all(std::move(parts)));
      }
      break;
    case Encoding::Range: emit_range(&e, values); break;
    case Encoding::Interval: emit_interval(&e, values); break;
    default:
      for (const Bitmap& b : values) e.emit(b);
  }
  if (binning_.has_nan_bin()) e.emit(fine_[binning_.nan_bin()]);
  if (layout.coarse_count() > 0) {
    std::vector<Bitmap> coarse;
    for (std::size_t j = 0; j < groups->size(); ++j) {
      const std::uint32_t last = j + 1 < groups->size() ? (*groups)[j + 1] - 1 : value_bins - 1;
      std::vector<const Bitmap*> parts;
      for (std::uint32_t b = (*groups)[j]; b <= last; ++b) parts.push_back(&fine_[b]);
      coarse.push_back(union_all(std::move(parts)));
    }
    emit_coarse(&e, encoding_, coarse);
  }
  *directory = std::move(e.entries);
  return std::move(e.body);
}

std::string IndexBuilder::finish_direct(std::vector<std::uint32_t>* groups,
                                        std::vector<IndexHeader::Entry>* directory) {
  if (encoding_ == Encoding::BN) return finish_bit_sliced(directory);
  const std::uint32_t bins = binning_.bins(), value_bins = binning_.value_bins();
  // The rows sorted by bin (a counting sort: each bin's rows stay ascending).
  std::vector<std::uint64_t> start(std::size_t(bins) + 1, 0);
  for (std::uint32_t b : bin_of_row_) ++start[b + 1];
  for (std::uint32_t b = 0; b < bins; ++b) start[b + 1] += start[b];
  std::vector<std::uint32_t> sorted(rows_);
  {
    std::vector<std::uint64_t> fill(start.begin(), start.end() - 1);
    for (std::uint64_t r = 0; r < rows_; ++r) sorted[fill[bin_of_row_[r]]++] = std::uint32_t(r);
  }
  auto bin_bitmap = [&](std::uint32_t b) { return bitmap_of(sorted.data() + start[b], start[b + 1] - start[b]); };

  Emitter e;
  std::vector<std::uint64_t> sizes;  // RE/IE: each value bin's stored bitmap
  switch (encoding_) {
    case Encoding::Range:
    case Encoding::Interval: {
      std::vector<Bitmap> values;
      values.reserve(value_bins);
      for (std::uint32_t b = 0; b < value_bins; ++b) values.push_back(bin_bitmap(b));
      if (encoding_ == Encoding::Range) {
        emit_range(&e, values);
      } else {
        emit_interval(&e, values);
      }
      break;
    }
    default:
      for (std::uint32_t b = 0; b < value_bins; ++b) {
        e.emit(bin_bitmap(b));
        sizes.push_back(e.entries.back().length);
      }
  }
  if (binning_.has_nan_bin()) e.emit(bin_bitmap(binning_.nan_bin()));
  if (encoding_ == Encoding::RE || encoding_ == Encoding::IE) *groups = choose_coarse(sizes, rows_);
  const Layout layout{encoding_, value_bins, binning_.has_nan_bin(), std::uint32_t(groups->size())};
  if (layout.coarse_count() > 0) {
    // Each coarse bin's rows, ascending: a counting sort by coarse bin.
    const std::vector<std::uint32_t> coarse_bin = coarse_of_bin(*groups, value_bins);
    std::vector<std::uint64_t> cstart(groups->size() + 1, 0);
    for (std::size_t j = 0; j < groups->size(); ++j)
      cstart[j + 1] = start[j + 1 < groups->size() ? (*groups)[j + 1] : value_bins];
    std::vector<std::uint64_t> fill(cstart.begin(), cstart.end() - 1);
    for (std::uint64_t r = 0; r < rows_; ++r) {
      const std::uint32_t b = bin_of_row_[r];
      if (b < value_bins) sorted[fill[coarse_bin[b]]++] = std::uint32_t(r);
    }
    std::vector<Bitmap> coarse;
    for (std::size_t j = 0; j < groups->size(); ++j)
      coarse.push_back(bitmap_of(sorted.data() + cstart[j], cstart[j + 1] - cstart[j]));
    emit_coarse(&e, encoding_, coarse);
  }
  *directory = std::move(e.entries);
  return std::move(e.body);
}

// Bit slice k holds the rows whose value bin has bit k set. Each slice is
// filled as 64-bit words straight from the rows' bins (no sort, no branch,
// no row list) and handed to CRoaring a container at a time: building a
// slice went from about 70 ms to a few ms per 10 million rows.
std::string IndexBuilder::finish_bit_sliced(std::vector<IndexHeader::Entry>* directory) {
  const std::uint32_t value_bins = binning_.value_bins();
  const std::uint32_t slices = Layout{encoding_, value_bins, false, 0}.slices();
  std::vector<std::uint64_t> words((rows_ + 63) / 64);
  const std::uint32_t* bins = bin_of_row_.data();
  auto fill = [&](auto in_bitmap) {
    const std::uint64_t full = rows_ / 64;
    for (std::uint64_t w = 0; w < full; ++w) {
      const std::uint32_t* p = bins + w * 64;
      std::uint64_t word = 0;
      for (unsigned r = 0; r < 64; ++r) word |= std::uint64_t(in_bitmap(p[r])) << r;
      words[w] = word;
    }
    if (full < words.size()) {
      std::uint64_t word = 0;
      for (std::uint64_t r = full * 64; r < rows_; ++r) word |= std::uint64_t(in_bitmap(bins[r])) << (r % 64);
      words[full] = word;
    }
  };
  Emitter e;
  for (std::uint32_t k = 0; k < slices; ++k) {
    fill([=](std::uint32_t b) { return ((b >> k) & 1u) & std::uint32_t(b < value_bins); });
    e.emit(bitmap_of_words(words));
  }
  if (binning_.has_nan_bin()) {
    const std::uint32_t nan_bin = binning_.nan_bin();
    fill([=](std::uint32_t b) { return std::uint32_t(b == nan_bin); });
    e.emit(bitmap_of_words(words));
  }
  *directory = std::move(e.entries);
  return std::move(e.body);
}

}  // namespace mmfs::indexes
