// Binning (docs/reference.md §4 `user.mmfs.bins`): how element values are grouped into
// the bins an index keeps one equality bitmap per.
//
//   exact          one bin per distinct value (at most kMaxExactBins)
//   N              equal-frequency: each bin holds about 1/N of the elements,
//                  edges chosen from the data (a sample of it, for large arrays)
//   precision:D    low-precision binning (the bitmap-index paper, §4.4): for
//                  every D-significant-digit representative r present, a bin
//                  for the values that round to r from below, one for r
//                  itself and one for those that round to r from above, so a
//                  condition whose constants have at most D digits is
//                  answered from the bins alone
//   edges:a,b,...  explicit edges: bins (-inf,a) [a,b) ... [last,+inf)
//
// Bins partition the key space of the dtype (indexes/values.h): bin i holds
// the keys [lower[i], lower[i+1]) and the last bin runs to max_key, so a
// value written after the bins were chosen always has a bin. Float dtypes
// have one more bin, after the others, for NaN. Pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <roaring/roaring.hh>

#include "indexes/values.h"

namespace mmfs::indexes {

struct BinSpec {
  enum class Kind : std::uint8_t { Exact, EqualFrequency, Precision, Edges };
  Kind kind = Kind::Exact;
  std::uint32_t count = 0;    // EqualFrequency: N >= 1
  std::uint32_t digits = 0;   // Precision: 1..17
  std::vector<Number> edges;  // Edges: ascending
};
// The text of user.mmfs.bins (already validated by the schema parser; this
// still refuses anything malformed with a one-line reason).
std::variant<BinSpec, std::string> parse_bin_spec(std::string_view text);
// "exact" for integer dtypes, "100" for floats (docs/reference.md §4).
std::string_view default_bin_spec(ValueType t);

inline constexpr std::size_t kMaxExactBins = 1u << 20;

class Binning {
 public:
  Binning() = default;
  // REQUIRES lower non-empty, ascending, unique, lower[0] == min_key(t).
  Binning(ValueType t, std::vector<std::uint64_t> lower);

  ValueType type() const { return type_; }
  // Bins of non-NaN values.
  std::uint32_t value_bins() const { return std::uint32_t(lower_.size()); }
  // All bins: value_bins() plus the NaN bin for float dtypes.
  std::uint32_t bins() const { return value_bins() + (is_float(type_) ? 1 : 0); }
  bool has_nan_bin() const { return is_float(type_); }
  std::uint32_t nan_bin() const { return value_bins(); }  // REQUIRES has_nan_bin()
  const std::vector<std::uint64_t>& lower() const { return lower_; }
  // Closed key range of a value bin.
  std::pair<std::uint64_t, std::uint64_t> key_range(std::uint32_t bin) const;
  std::uint32_t bin_of_key(std::uint64_t key) const;
  std::uint32_t bin_of(const std::byte* element) const;  // NaN: nan_bin()
  // Bins of `count` consecutive elements into `out` (vectorisable hot path).
  void bins_of(const std::byte* elements, std::size_t count, std::uint32_t* out) const;
  bool operator==(const Binning&) const = default;

 private:
  template <class T>
  void bins_of_typed(const std::byte* elements, std::size_t count, std::uint32_t* out) const;

  ValueType type_ = ValueType::F64;
  std::vector<std::uint64_t> lower_;
  // Bins of keys lower_[1] .. lower_.back() by direct lookup, when that
  // span is small (exact binning of narrow integers): no search per element.
  std::vector<std::uint32_t> table_;
  // Otherwise the bins of the keys sharing each 16-bit prefix of
  // (key - min_key): prefix p's keys lie in bins prefix_[p] .. prefix_[p+1],
  // so a lookup searches a few edges at most.
  std::vector<std::uint32_t> prefix_;
  int shift_ = 0;
  std::uint32_t search(std::uint64_t key, std::uint32_t first, std::uint32_t last) const;
};

// Pass 1 of building an index: sees every element once (in C order, in
// pieces) and chooses the bins.
class BinningBuilder {
 public:
  BinningBuilder(ValueType t, BinSpec spec, std::uint64_t total_elements);
  void add(const std::byte* elements, std::size_t count);
  // The bins, or a one-line reason (e.g. more than kMaxExactBins distinct
  // values for `exact`: "use N or precision:D").
  std::variant<Binning, std::string> finish();

 private:
  std::variant<Binning, std::string> finish_equal_frequency();

  ValueType type_;
  BinSpec spec_;
  std::uint64_t total_;
  std::uint64_t seen_ = 0;
  std::uint64_t next_sample_ = 0;  // equal-frequency: the row sampled next
  ::Roaring narrow_keys_;  // exact, dtypes of at most 4 bytes: distinct keys - min_key
  std::vector<std::uint64_t> keys_;  // exact: distinct keys so far; N: a strided sample
  std::vector<std::pair<double, std::uint64_t>> reps_;  // precision: representative -> smallest key rounding to it
  bool too_many_ = false;
};

}  // namespace mmfs::indexes
