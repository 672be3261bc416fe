#include "indexes/binning.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "util/align.h"

namespace mmfs::indexes {

namespace {

constexpr std::uint64_t kSign = 1ull << 63;
// Largest span of keys a direct bin table covers (4 MiB of table).
constexpr std::uint64_t kMaxTable = 1u << 20;
// At most this many samples are kept for equal-frequency edges.
constexpr std::uint64_t kMaxSample = 1u << 20;

// value_key() specialised per element type, for the hot loops.
template <class T>
inline std::uint64_t key_of(T v) {
  // Branch-free (random signs would mispredict): -0.0 becomes +0.0, then
  // negatives flip every bit and positives only the sign bit.
  if constexpr (std::is_same_v<T, float>) {
    std::uint32_t b = std::bit_cast<std::uint32_t>(v);
    b = b == 0x80000000u ? 0 : b;
    return b ^ (std::uint32_t(std::int32_t(b) >> 31) | 0x80000000u);
  } else if constexpr (std::is_same_v<T, double>) {
    std::uint64_t b = std::bit_cast<std::uint64_t>(v);
    b = b == kSign ? 0 : b;
    return b ^ (std::uint64_t(std::int64_t(b) >> 63) | kSign);
  } else if constexpr (std::is_signed_v<T>) {
    return std::uint64_t(std::int64_t(v)) ^ kSign;
  } else {
    return std::uint64_t(v);
  }
}
template <class T>
inline bool nan_of(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return v != v;
  } else {
    return false;
  }
}
template <class T>
inline T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Calls f.template operator()<T>() with the element type of t.
template <class F>
decltype(auto) with_type(ValueType t, F&& f) {
  switch (t) {
    case ValueType::I8: return f.template operator()<std::int8_t>();
    case ValueType::U8: return f.template operator()<std::uint8_t>();
    case ValueType::I16: return f.template operator()<std::int16_t>();
    case ValueType::U16: return f.template operator()<std::uint16_t>();
    case ValueType::I32: return f.template operator()<std::int32_t>();
    case ValueType::U32: return f.template operator()<std::uint32_t>();
    case ValueType::I64: return f.template operator()<std::int64_t>();
    case ValueType::U64: return f.template operator()<std::uint64_t>();
    case ValueType::F32: return f.template operator()<float>();
    case ValueType::F64: break;
  }
  return f.template operator()<double>();
}

// Keys of the non-NaN elements.
std::vector<std::uint64_t> keys_of(ValueType t, const std::byte* elements, std::size_t count, std::uint64_t stride,
                                   std::uint64_t phase) {
  return with_type(t, [&]<class T>() {
    std::vector<std::uint64_t> keys;
    keys.reserve(stride == 1 ? count : count / stride + 1);
    for (std::size_t i = phase; i < count; i += stride) {
      T v = load<T>(elements + i * sizeof(T));
      if (!nan_of(v)) keys.push_back(key_of(v));
    }
    return keys;
  });
}

// The smallest key of the dtype whose value is >= v (nullopt: none).
std::optional<std::uint64_t> first_key_at_least(ValueType t, double v) {
  Number n;
  n.value = v;
  KeySet s = compare_keys(t, CompareOp::Ge, n);
  if (s.ranges.empty()) return std::nullopt;
  return s.ranges.front().first;
}
std::optional<std::uint64_t> first_key_at_least(ValueType t, const Number& n) {
  KeySet s = compare_keys(t, CompareOp::Ge, n);
  if (s.ranges.empty()) return std::nullopt;
  return s.ranges.front().first;
}

double pow10(int e) {
  static const double small[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  if (e >= 0 && e <= 22) return small[e];
  return std::pow(10.0, e);
}

// v rounded to `digits` significant decimal digits, as the double nearest
// that decimal (so it equals the constant a user writes for it).
double round_significant(double v, std::uint32_t digits) {
  if (v == 0 || !std::isfinite(v)) return v == 0 ? 0.0 : v;
  double a = std::fabs(v);
  int e = int(std::floor(std::log10(a)));
  if (a >= pow10(e + 1)) ++e;  // log10 can be off by one next to powers of ten
  if (a < pow10(e)) --e;
  int shift = int(digits) - 1 - e;  // v * 10^shift has `digits` integer digits
  double r;
  if (shift >= 0) {
    double scale = pow10(shift);
    double m = std::nearbyint(a * scale);
    r = m / scale;
  } else {
    double scale = pow10(-shift);
    double m = std::nearbyint(a / scale);
    r = m * scale;
  }
  if (!std::isfinite(r) || r == 0) return v;  // outside what scaling can represent: the value stands for itself
  return v < 0 ? -r : r;
}

void sort_unique(std::vector<std::uint64_t>* v) {
  std::sort(v->begin(), v->end());
  v->erase(std::unique(v->begin(), v->end()), v->end());
}

std::variant<Binning, std::string> make_binning(ValueType t, std::vector<std::uint64_t> edges) {
  sort_unique(&edges);
  std::vector<std::uint64_t> lower{min_key(t)};
  for (std::uint64_t e : edges) {
    if (e > min_key(t) && e <= max_key(t)) lower.push_back(e);
  }
  return Binning(t, std::move(lower));
}

}  // namespace

// --- specs ------------------------------------------------------------------

std::variant<BinSpec, std::string> parse_bin_spec(std::string_view text) {
  BinSpec spec;
  auto parse_uint = [](std::string_view s, std::uint32_t* out) {
    if (s.empty() || s.size() > 9) return false;
    auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
    return r.ec == std::errc() && r.ptr == s.data() + s.size();
  };
  if (text == "exact") return spec;
  if (text.starts_with("precision:")) {
    spec.kind = BinSpec::Kind::Precision;
    if (!parse_uint(text.substr(10), &spec.digits) || spec.digits < 1 || spec.digits > 17) {
      return std::string("precision:D needs D from 1 to 17");
    }
    return spec;
  }
  if (text.starts_with("edges:")) {
    spec.kind = BinSpec::Kind::Edges;
    std::string_view rest = text.substr(6);
    while (true) {
      std::size_t comma = rest.find(',');
      auto n = parse_number(rest.substr(0, comma));
      if (!n || std::isnan(n->value)) return "edges: '" + std::string(rest.substr(0, comma)) + "' is not a number";
      if (!spec.edges.empty()) {
        const Number& prev = spec.edges.back();
        bool ascending = (prev.integer && n->integer) ? *prev.integer < *n->integer : prev.value < n->value;
        if (!ascending) return std::string("edges must be strictly ascending");
      }
      spec.edges.push_back(*n);
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    if (spec.edges.size() > kMaxExactBins) return std::string("too many edges");
    return spec;
  }
  spec.kind = BinSpec::Kind::EqualFrequency;
  if (!parse_uint(text, &spec.count) || spec.count < 1 || spec.count > kMaxExactBins) {
    return "bins must be exact, N (1.." + std::to_string(kMaxExactBins) + "), precision:D or edges:a,b,...";
  }
  return spec;
}

std::string_view default_bin_spec(ValueType t) { return is_float(t) ? "100" : "exact"; }

// --- Binning ----------------------------------------------------------------

Binning::Binning(ValueType t, std::vector<std::uint64_t> lower) : type_(t), lower_(std::move(lower)) {
  // Only for spans not much wider than the bins themselves: a table is
  // built on every decode of a header too.
  if (lower_.size() > 1 && lower_.back() - lower_[1] < kMaxTable &&
      lower_.back() - lower_[1] < 64 * std::uint64_t(lower_.size())) {
    table_.resize(lower_.back() - lower_[1] + 1);
    std::uint32_t bin = 1;
    for (std::uint64_t i = 0; i < table_.size(); ++i) {  // key lower_[1] + i (may end at UINT64_MAX)
      while (bin + 1 < lower_.size() && lower_[1] + i >= lower_[bin + 1]) ++bin;
      table_[i] = bin;
    }
  } else if (lower_.size() > 1) {
    std::uint64_t span = max_key(t) - min_key(t);
    shift_ = std::max(0, int(std::bit_width(span)) - 16);
    std::size_t n = std::size_t(span >> shift_) + 1;
    prefix_.resize(n + 1);
    for (std::size_t p = 0; p < n; ++p) prefix_[p] = search(min_key(t) + (std::uint64_t(p) << shift_), 0, value_bins() - 1);
    prefix_[n] = value_bins() - 1;
  }
}

// The bin of `key`, known to be one of first..last.
std::uint32_t Binning::search(std::uint64_t key, std::uint32_t first, std::uint32_t last) const {
  // Branch-free upper_bound over lower_[first..last]: the last edge <= key.
  const std::uint64_t* base = lower_.data() + first;
  std::size_t n = last - first + 1;
  while (n > 1) {
    std::size_t half = n / 2;
    base = (base[half] <= key) ? base + half : base;
    n -= half;
  }
  return std::uint32_t(base - lower_.data());
}

std::pair<std::uint64_t, std::uint64_t> Binning::key_range(std::uint32_t bin) const {
  std::uint64_t hi = bin + 1 < lower_.size() ? lower_[bin + 1] - 1 : max_key(type_);
  return {lower_[bin], hi};
}

std::uint32_t Binning::bin_of_key(std::uint64_t key) const {
  if (!table_.empty()) {
    if (key < lower_[1]) return 0;
    std::uint64_t i = key - lower_[1];
    return i < table_.size() ? table_[i] : value_bins() - 1;
  }
  if (prefix_.empty()) return 0;  // one value bin
  // NaN keys lie outside [min_key, max_key]: clamp (bins_of discards them).
  std::size_t p = std::min(std::size_t((key - lower_[0]) >> shift_), prefix_.size() - 2);
  return search(key, prefix_[p], prefix_[p + 1]);
}

std::uint32_t Binning::bin_of(const std::byte* element) const {
  if (is_nan(type_, element)) return nan_bin();
  return bin_of_key(value_key(type_, element));
}

template <class T>
void Binning::bins_of_typed(const std::byte* elements, std::size_t count, std::uint32_t* out) const {
  const std::uint32_t nan = value_bins();  // == nan_bin() for floats
  if (lower_.size() == 1) {
    for (std::size_t i = 0; i < count; ++i) out[i] = nan_of(load<T>(elements + i * sizeof(T))) ? nan : 0;
    return;
  }
  for (std::size_t i = 0; i < count; ++i) {
    T v = load<T>(elements + i * sizeof(T));
    std::uint32_t b = bin_of_key(key_of(v));  // NaN's key is some key: select after
    out[i] = nan_of(v) ? nan : b;
  }
}

void Binning::bins_of(const std::byte* elements, std::size_t count, std::uint32_t* out) const {
  with_type(type_, [&]<class T>() { bins_of_typed<T>(elements, count, out); });
}

// --- BinningBuilder ---------------------------------------------------------

BinningBuilder::BinningBuilder(ValueType t, BinSpec spec, std::uint64_t total_elements)
    : type_(t), spec_(std::move(spec)), total_(total_elements) {}

void BinningBuilder::add(const std::byte* elements, std::size_t count) {
  std::uint64_t first = seen_;
  seen_ += count;
  switch (spec_.kind) {
    case BinSpec::Kind::Exact: {
      if (too_many_) return;
      if (itemsize(type_) <= 4) {
        // Keys of narrow dtypes span at most 2^32 values: a 32-bit Roaring
        // set collects the distinct ones without sorting every slab. A
        // small direct-mapped table of keys just seen keeps the repeats of
        // a low-cardinality column (most of its elements) out of it.
        const std::uint64_t base = min_key(type_);
        constexpr std::size_t kBlock = 1u << 16, kRecent = 4096;
        std::vector<std::uint32_t> fresh;
        fresh.reserve(kBlock);
        std::vector<std::uint32_t> recent;
        const std::size_t size = itemsize(type_);
        for (std::size_t at = 0; at < count && !too_many_; at += kBlock) {
          const std::vector<std::uint64_t> keys = keys_of(type_, elements + at * size, std::min(kBlock, count - at), 1, 0);
          if (keys.empty()) continue;
          if (recent.empty()) {  // seeded with a key that is then added: a hit on it is a true repeat
            recent.assign(kRecent, std::uint32_t(keys[0] - base));
            narrow_keys_.add(recent[0]);
          }
          fresh.clear();
          for (std::uint64_t k : keys) {
            const auto offset = std::uint32_t(k - base);
            std::uint32_t& slot = recent[(offset ^ (offset >> 12)) & (kRecent - 1)];
            if (slot == offset) continue;
            slot = offset;
            fresh.push_back(offset);
          }
          narrow_keys_.addMany(fresh.size(), fresh.data());
          if (narrow_keys_.cardinality() > kMaxExactBins) {
            too_many_ = true;
            narrow_keys_ = Roaring();
          }
        }
        return;
      }
      std::vector<std::uint64_t> keys = keys_of(type_, elements, count, 1, 0);
      sort_unique(&keys);
      std::vector<std::uint64_t> merged;
      merged.reserve(keys.size() + keys_.size());
      std::set_union(keys_.begin(), keys_.end(), keys.begin(), keys.end(), std::back_inserter(merged));
      keys_ = std::move(merged);
      if (keys_.size() > kMaxExactBins) {
        too_many_ = true;
        keys_ = {};
      }
      return;
    }
    case BinSpec::Kind::EqualFrequency: {
      // About every stride-th element, at jittered steps: a fixed stride
      // aliases with the array's shape (a stride of 256 on a (..., 256)
      // array samples one plane and skews every edge).
      const std::uint64_t stride = std::max<std::uint64_t>(1, util::div_up(total_, kMaxSample));
      if (stride == 1) {
        std::vector<std::uint64_t> keys = keys_of(type_, elements, count, 1, 0);
        keys_.insert(keys_.end(), keys.begin(), keys.end());
        return;
      }
      with_type(type_, [&]<class T>() {
        while (next_sample_ < first + count) {
          if (next_sample_ >= first) {
            T v = load<T>(elements + (next_sample_ - first) * sizeof(T));
            if (!nan_of(v)) keys_.push_back(key_of(v));
          }
          // splitmix64 of the row: a step of 1 .. 2*stride-1, mean stride.
          std::uint64_t z = next_sample_ + 0x9E3779B97F4A7C15ull;
          z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
          z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
          z ^= z >> 31;
          next_sample_ += 1 + z % (2 * stride - 1);
        }
      });
      return;
    }
    case BinSpec::Kind::Precision: {
      if (too_many_) return;
      with_type(type_, [&]<class T>() {
        std::vector<std::pair<double, std::uint64_t>> reps;
        reps.reserve(count);
        for (std::size_t i = 0; i < count; ++i) {
          T v = load<T>(elements + i * sizeof(T));
          if (nan_of(v)) continue;
          double r = round_significant(double(v), spec_.digits);
          reps.push_back({r == 0 ? 0.0 : r, key_of(v)});
        }
        std::sort(reps.begin(), reps.end());  // by representative, then key: first of each is the smallest
        reps.erase(std::unique(reps.begin(), reps.end(), [](auto& a, auto& b) { return a.first == b.first; }),
                   reps.end());
        std::vector<std::pair<double, std::uint64_t>> merged;
        merged.reserve(reps.size() + reps_.size());
        std::merge(reps_.begin(), reps_.end(), reps.begin(), reps.end(), std::back_inserter(merged));
        merged.erase(std::unique(merged.begin(), merged.end(), [](auto& a, auto& b) { return a.first == b.first; }),
                     merged.end());
        reps_ = std::move(merged);
      });
      if (reps_.size() > kMaxExactBins / 3) {
        too_many_ = true;
        reps_ = {};
      }
      return;
    }
    case BinSpec::Kind::Edges: return;
  }
}

std::variant<Binning, std::string> BinningBuilder::finish() {
  switch (spec_.kind) {
    case BinSpec::Kind::Exact: {
      if (too_many_) {
        return "more than " + std::to_string(kMaxExactBins) + " distinct values for exact bins: use N or precision:D";
      }
      if (itemsize(type_) <= 4) {
        std::vector<std::uint32_t> offsets(narrow_keys_.cardinality());
        if (!offsets.empty()) narrow_keys_.toUint32Array(offsets.data());
        keys_.clear();
        for (std::uint32_t o : offsets) keys_.push_back(min_key(type_) + o);
      }
      // One bin per distinct key: each distinct key starts a bin (the first
      // bin starts at min_key and holds the smallest key).
      std::vector<std::uint64_t> edges(keys_.begin() + (keys_.empty() ? 0 : 1), keys_.end());
      return make_binning(type_, std::move(edges));
    }
    case BinSpec::Kind::EqualFrequency: return finish_equal_frequency();
    case BinSpec::Kind::Precision: {
      if (too_many_) return "precision:" + std::to_string(spec_.digits) + " gives too many bins: use N or fewer digits";
      // Per representative r: [smallest key rounding to r, r), [r], (r, next rep's smallest key).
      std::vector<std::uint64_t> edges;
      for (auto [r, smallest] : reps_) {
        auto at = first_key_at_least(type_, r);
        edges.push_back(smallest);
        if (!at) continue;
        edges.push_back(*at);
        if (*at < max_key(type_)) edges.push_back(*at + 1);
      }
      return make_binning(type_, std::move(edges));
    }
    case BinSpec::Kind::Edges: {
      std::vector<std::uint64_t> edges;
      for (const Number& n : spec_.edges) {
        if (auto k = first_key_at_least(type_, n)) edges.push_back(*k);
      }
      return make_binning(type_, std::move(edges));
    }
  }
  return std::string("unknown binning");
}

// Edges at the sample's quantiles; a value that spans several quantiles
// gets a bin of its own ([v, v+1)). Never more than N value bins: each
// repeated quantile frees the slot its own closing edge takes.
std::variant<Binning, std::string> BinningBuilder::finish_equal_frequency() {
  std::vector<std::uint64_t>& sample = keys_;
  std::sort(sample.begin(), sample.end());
  const std::uint64_t n = spec_.count, s = sample.size();
  if (n <= 1 || s == 0) return make_binning(type_, {});
  // Heavy values: at least 1/N of the sample. Each gets [v, v+1).
  std::vector<std::uint64_t> heavy;
  for (std::size_t i = 0; i < s;) {
    std::size_t j = std::size_t(std::upper_bound(sample.begin() + i, sample.end(), sample[i]) - sample.begin());
    if ((j - i) * n >= s) heavy.push_back(sample[i]);
    i = j;
  }
  std::vector<std::uint64_t> fixed, quantiles;
  for (std::uint64_t v : heavy) {
    fixed.push_back(v);
    if (v < max_key(type_)) fixed.push_back(v + 1);
  }
  for (std::uint64_t i = 1; i < n; ++i) {
    std::uint64_t q = sample[std::size_t(i * s / n)];
    if (!std::binary_search(heavy.begin(), heavy.end(), q)) quantiles.push_back(q);
  }
  sort_unique(&fixed);
  sort_unique(&quantiles);
  // Never more than N bins: thin the quantile edges evenly to what is left.
  std::size_t room = fixed.size() >= n - 1 ? 0 : std::size_t(n - 1 - fixed.size());
  std::vector<std::uint64_t> edges = fixed;
  if (fixed.size() > n - 1) edges.resize(std::size_t(n - 1));
  for (std::size_t i = 0; i < std::min(room, quantiles.size()); ++i) {
    edges.push_back(quantiles[i * quantiles.size() / std::min(room, quantiles.size())]);
  }
  return make_binning(type_, std::move(edges));
}

}  // namespace mmfs::indexes
