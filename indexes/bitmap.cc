#include "indexes/bitmap.h"

#include <map>
#include <new>

#include <roaring/containers/bitset.h>
#include <roaring/containers/containers.h>
#include <roaring/containers/convert.h>
#include <roaring/containers/run.h>
#include <roaring/roaring.hh>

#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>
#include <exception>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

#include "util/roaring_portable.h"

namespace mmfs::indexes {

namespace {

template <class T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

constexpr std::uint32_t kMaxArray = util::kRoaringMaxArray;

using util::check_portable32;

std::string write64(const Bitmap& b) {
  std::string out(b.getSizeInBytes(true), '\0');
  out.resize(b.write(out.data(), true));
  return out;
}

// A 64-bit map holding `r` shifted into bucket `high`.
Bitmap in_bucket(std::uint32_t high, const Roaring& r) {
  if (high == 0) return Bitmap(r);
  // Roaring64Map has no public way to place a bucket: go through its
  // serialized form (rows >= 2^32 only).
  std::string s(12, '\0');
  std::uint64_t one = 1;
  std::memcpy(s.data(), &one, 8);
  std::memcpy(s.data() + 8, &high, 4);
  std::string body(r.getSizeInBytes(true), '\0');
  r.write(body.data(), true);
  s += body;
  Bitmap out;
  deserialize(std::as_bytes(std::span(s.data(), s.size())), &out);
  return out;
}

}  // namespace

Bitmap range_bitmap(std::uint64_t begin, std::uint64_t end) {
  Bitmap out;
  while (begin < end) {
    std::uint32_t high = std::uint32_t(begin >> 32);
    std::uint64_t bucket_end = (std::uint64_t(high) + 1) << 32;
    std::uint64_t stop = (high == 0xFFFFFFFFu || end < bucket_end) ? end : bucket_end;
    Roaring r;
    r.addRange(begin & 0xFFFFFFFFu, stop - (std::uint64_t(high) << 32));
    r.runOptimize();
    out |= in_bucket(high, r);
    if (stop == end) break;
    begin = stop;
  }
  return out;
}

std::string portable_mask(const Bitmap& b, std::uint64_t rows) {
  if (rows >= (1ull << 32)) return write64(b);
  // The 64-bit layout is: bucket count, then (key, 32-bit portable) pairs.
  // Every row is below 2^32, so the mask is bucket 0's serialization.
  std::string s = write64(b);
  std::size_t pos = 8;
  while (pos + 4 <= s.size()) {
    std::uint32_t key;
    std::memcpy(&key, s.data() + pos, 4);
    auto len = check_portable32(std::as_bytes(std::span(s.data() + pos + 4, s.size() - pos - 4)));
    if (!len) break;
    if (key == 0) return s.substr(pos + 4, *len);
    pos += 4 + *len;
  }
  Roaring empty;
  std::string out(empty.getSizeInBytes(true), '\0');
  empty.write(out.data(), true);
  return out;
}

std::string serialize(const Bitmap& b) { return write64(b); }

bool is_subset(const Bitmap& a, const Bitmap& b) { return (a - b).isEmpty(); }
bool same_rows(const Bitmap& a, const Bitmap& b) { return (a ^ b).isEmpty(); }

bool deserialize(std::span<const std::byte> bytes, Bitmap* out) {
  if (bytes.size() < 8) return false;
  std::uint64_t buckets = load<std::uint64_t>(bytes.data());
  if (buckets > (bytes.size() - 8) / 12) return false;  // each takes >= 12 bytes
  std::size_t pos = 8;
  long long prev_key = -1;
  bool only_zero = true;
  std::size_t zero_begin = 0, zero_len = 0;
  for (std::uint64_t i = 0; i < buckets; ++i) {
    if (bytes.size() - pos < 4) return false;
    std::uint32_t key = load<std::uint32_t>(bytes.data() + pos);
    if ((long long)key <= prev_key) return false;
    prev_key = key;
    pos += 4;
    auto len = check_portable32(bytes.subspan(pos));
    if (!len) return false;
    if (key != 0) only_zero = false;
    zero_begin = pos;
    zero_len = *len;
    pos += *len;
  }
  if (pos != bytes.size()) return false;
  try {
    if (buckets == 0) {
      *out = Bitmap();
    } else if (buckets == 1 && only_zero) {
      *out = Bitmap(Roaring::readSafe(reinterpret_cast<const char*>(bytes.data() + zero_begin), zero_len));
    } else {
      std::vector<std::uint64_t> aligned((bytes.size() + 7) / 8);
      std::memcpy(aligned.data(), bytes.data(), bytes.size());
      *out = Bitmap::readSafe(reinterpret_cast<const char*>(aligned.data()), bytes.size() - 8);
    }
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

namespace {

// Roaring64Map keeps its 32-bit buckets private and, in 0.2.66, offers no
// fast union of many maps. Naming a private member in an explicit template
// instantiation is allowed ([temp.spec]/6), which gives this one function
// the buckets so CRoaring's own roaring_bitmap_or_many can merge them.
using Buckets = std::map<std::uint32_t, Roaring>;
using BucketsPtr = Buckets Roaring64Map::*;
struct BucketsTag {
  friend BucketsPtr buckets_member(BucketsTag);
};
template <BucketsPtr Member>
struct BucketsAccess {
  friend BucketsPtr buckets_member(BucketsTag) { return Member; }
};
template struct BucketsAccess<&Roaring64Map::roarings>;
BucketsPtr buckets_member(BucketsTag);

}  // namespace

void Bitmap::take(Roaring64Map& other) noexcept {
  const BucketsPtr member = buckets_member(BucketsTag{});
  Buckets& mine = this->*member;
  mine.clear();
  mine.swap(other.*member);
}

std::uint64_t Bitmap::cardinality() const {
  std::uint64_t n = 0;
  for (const auto& [key, r] : this->*buckets_member(BucketsTag{})) n += r.cardinality();
  return n;
}

bool Bitmap::isEmpty() const {
  for (const auto& [key, r] : this->*buckets_member(BucketsTag{}))
    if (!r.isEmpty()) return false;
  return true;
}

std::size_t Bitmap::getSizeInBytes(bool portable) const {
  const Buckets& buckets = this->*buckets_member(BucketsTag{});
  std::size_t n = sizeof(std::uint64_t) + buckets.size() * sizeof(std::uint32_t);
  for (const auto& [key, r] : buckets) n += r.getSizeInBytes(portable);
  return n;
}

std::size_t Bitmap::write(char* buf, bool portable) const {
  const Buckets& buckets = this->*buckets_member(BucketsTag{});
  char* at = buf;
  const std::uint64_t count = buckets.size();
  std::memcpy(at, &count, sizeof count);
  at += sizeof count;
  for (const auto& [key, r] : buckets) {
    std::memcpy(at, &key, sizeof key);
    at += sizeof key;
    at += r.write(at, portable);
  }
  return std::size_t(at - buf);
}

void Bitmap::toUint64Array(std::uint64_t* out) const {
  // A container at a time (at most 2^16 rows, in L1/L2), widened as it
  // comes: a bucket-sized scratch array would cost its allocation, zeroing
  // and a second pass through memory (a 2.7 M-row coords query spent 15 %
  // there), and CRoaring 0.2.66's iterator reads a row per call.
  struct Part {
    const roaring_array_t* ra;
    std::uint64_t high;
    std::int32_t i;
    std::uint64_t at;  // where its rows go in `out`
  };
  std::vector<Part> parts;
  std::uint64_t total = 0;
  for (const auto& [key, r] : this->*buckets_member(BucketsTag{})) {
    const roaring_array_t& ra = r.roaring.high_low_container;
    for (std::int32_t i = 0; i < ra.size; ++i) {
      parts.push_back({&ra, std::uint64_t(key) << 32, i, total});
      total += std::uint64_t(container_get_cardinality(ra.containers[i], ra.typecodes[i]));
    }
  }
  auto widen = [&](std::size_t first, std::size_t end) {
    std::vector<std::uint32_t> low(std::size_t(1) << 16);
    for (std::size_t p = first; p < end; ++p) {
      const roaring_array_t& ra = *parts[p].ra;
      const std::int32_t i = parts[p].i;
      const int n = container_to_uint32_array(low.data(), ra.containers[i], ra.typecodes[i],
                                              std::uint32_t(ra.keys[i]) << 16);
      std::uint64_t* to = out + parts[p].at;
      for (int k = 0; k < n; ++k) to[k] = parts[p].high | low[k];
    }
  };
  // Large answers (a coords query's) on two threads, split by rows: the
  // widening is a memory-bound pass that one core cannot saturate.
  constexpr std::uint64_t kParallelRows = 1u << 20;
  if (total < kParallelRows || parts.size() < 2) return widen(0, parts.size());
  const auto half = std::partition_point(parts.begin(), parts.end(), [&](const Part& p) { return p.at < total / 2; });
  const std::size_t split = std::size_t(half - parts.begin());
  std::thread second;
  try {
    second = std::thread(widen, split, parts.size());
  } catch (const std::system_error&) {
    return widen(0, parts.size());  // no thread to be had: one pass
  }
  widen(0, split);
  second.join();
}

Bitmap union_all(std::vector<const Bitmap*> parts) {
  if (parts.empty()) return Bitmap();
  if (parts.size() == 1) return *parts[0];
  const BucketsPtr member = buckets_member(BucketsTag{});
  // Per bucket: every part's 32-bit bitmap, merged by CRoaring in one call
  // (lazy unions into bitsets, repaired once) instead of one growing result.
  std::map<std::uint32_t, std::vector<const roaring_bitmap_t*>> by_bucket;
  for (const Bitmap* p : parts)
    for (const auto& [key, r] : (*p).*member)
      if (!r.isEmpty()) by_bucket[key].push_back(&r.roaring);
  Bitmap out;
  Buckets& into = out.*member;
  for (auto& [key, list] : by_bucket) {
    roaring_bitmap_t* merged = list.size() == 1 ? roaring_bitmap_copy(list[0])
                                                : roaring_bitmap_or_many(list.size(), list.data());
    if (merged == nullptr) throw std::bad_alloc();
    into.emplace(key, Roaring(merged));
  }
  return out;
}

Bitmap intersect(const Bitmap& a, const Bitmap& b) {
  const BucketsPtr member = buckets_member(BucketsTag{});
  const Buckets& right = b.*member;
  Bitmap out;
  Buckets& into = out.*member;
  for (const auto& [key, r] : a.*member) {
    auto it = right.find(key);
    if (it == right.end()) continue;
    roaring_bitmap_t* both = roaring_bitmap_and(&r.roaring, &it->second.roaring);
    if (both == nullptr) throw std::bad_alloc();
    into.emplace(key, Roaring(both));
  }
  return out;
}

std::uint64_t and_count(const Bitmap& a, const Bitmap& b) {
  const BucketsPtr member = buckets_member(BucketsTag{});
  const Buckets& right = b.*member;
  std::uint64_t n = 0;
  for (const auto& [key, r] : a.*member) {
    auto it = right.find(key);
    if (it != right.end()) n += r.and_cardinality(it->second);
  }
  return n;
}

void add_rows32(Bitmap* b, std::uint32_t high, const std::uint32_t* low, std::size_t n) {
  if (n == 0) return;
  Buckets& buckets = (*b).*buckets_member(BucketsTag{});
  buckets[high].addMany(n, low);
}

bool or_serialized_into(std::span<const std::byte> bytes, std::span<std::uint64_t> words) {
  constexpr std::size_t kChunkWords = 1024;  // 2^16 rows
  struct Or {
    std::span<std::uint64_t> words;
    std::uint64_t high = 0;  // the bucket's first row / 2^16
    bool fits = true;
    std::uint64_t* chunk(std::uint16_t key) {
      const std::uint64_t at = (high + key) * kChunkWords;
      if (at + kChunkWords > words.size()) {
        fits = false;
        return nullptr;
      }
      return words.data() + at;
    }
    void run(std::uint16_t key, std::uint32_t start, std::uint32_t len) {
      std::uint64_t* w = chunk(key);
      if (w == nullptr) return;
      const std::uint32_t end = start + len + 1;  // exclusive, <= 2^16
      for (std::uint32_t i = start; i < end;) {
        const std::uint32_t bit = i % 64, n = std::min(64 - bit, end - i);
        w[i / 64] |= (n == 64 ? ~0ull : ((1ull << n) - 1)) << bit;
        i += n;
      }
    }
    void bitset(std::uint16_t key, const std::byte* bits) {
      std::uint64_t* w = chunk(key);
      if (w == nullptr) return;
      for (std::size_t i = 0; i < kChunkWords; ++i) w[i] |= load<std::uint64_t>(bits + 8 * i);
    }
    void array(std::uint16_t key, const std::byte* values, std::uint32_t n) {
      std::uint64_t* w = chunk(key);
      if (w == nullptr) return;
      for (std::uint32_t i = 0; i < n; ++i) {
        const std::uint16_t v = load<std::uint16_t>(values + 2 * i);
        w[v / 64] |= 1ull << (v % 64);
      }
    }
  } visit{words};
  if (bytes.size() < 8) return false;
  const std::uint64_t buckets = load<std::uint64_t>(bytes.data());
  if (buckets > (bytes.size() - 8) / 12) return false;
  std::size_t pos = 8;
  long long prev_key = -1;
  for (std::uint64_t i = 0; i < buckets; ++i) {
    if (bytes.size() - pos < 4) return false;
    const std::uint32_t key = load<std::uint32_t>(bytes.data() + pos);
    if ((long long)key <= prev_key) return false;
    prev_key = key;
    pos += 4;
    visit.high = std::uint64_t(key) << 16;
    auto len = check_portable32(bytes.subspan(pos), visit);
    if (!len || !visit.fits) return false;
    pos += *len;
  }
  return pos == bytes.size();
}

Bitmap bitmap_of_words(std::span<const std::uint64_t> words, std::uint64_t first_row, bool run_optimize) {
  constexpr std::size_t kChunkWords = BITSET_CONTAINER_SIZE_IN_WORDS;
  if (first_row % (64 * kChunkWords) != 0) throw std::invalid_argument("bitmap_of_words: first_row must be a multiple of 2^16");
  Roaring r;
  // A chunk of at most kMaxArray rows must be an array container (CRoaring's
  // invariant); it is converted from this scratch bitset.
  bitset_container_t* scratch = bitset_container_create();
  if (scratch == nullptr) throw std::bad_alloc();
  for (std::size_t first = 0; first < words.size(); first += kChunkWords) {
    const std::size_t n = std::min(kChunkWords, words.size() - first);
    std::uint64_t card = 0;
    for (std::size_t i = 0; i < n; ++i) card += std::popcount(words[first + i]);
    if (card == 0) continue;
    const std::uint64_t key64 = first_row / (64 * kChunkWords) + first / kChunkWords;
    if (key64 > 0xFFFF) {
      bitset_container_free(scratch);
      throw std::invalid_argument("bitmap_of_words: a row at or past 2^32");
    }
    const auto key = std::uint16_t(key64);
    void* container = nullptr;
    std::uint8_t type = 0;
    bitset_container_t* target = card > kMaxArray ? bitset_container_create() : scratch;
    if (target == nullptr) {
      bitset_container_free(scratch);
      throw std::bad_alloc();
    }
    std::memcpy(target->array, words.data() + first, n * 8);
    std::memset(target->array + n, 0, (kChunkWords - n) * 8);
    target->cardinality = std::int32_t(card);
    if (target == scratch) {
      container = array_container_from_bitset(scratch);
      type = ARRAY_CONTAINER_TYPE_CODE;
    } else {
      container = target;
      type = BITSET_CONTAINER_TYPE_CODE;
    }
    if (container == nullptr) {
      bitset_container_free(scratch);
      throw std::bad_alloc();
    }
    ra_append(&r.roaring.high_low_container, key, container, type);
  }
  bitset_container_free(scratch);
  if (run_optimize) r.runOptimize();
  r.shrinkToFit();
  Bitmap out;
  if (!r.isEmpty()) (out.*buckets_member(BucketsTag{}))[0] = std::move(r);
  return out;
}

namespace {

// One CRoaring container, read in place.
struct ContainerRef {
  const void* c = nullptr;
  std::uint8_t type = 0;
  std::uint32_t cardinality() const {
    switch (type) {
      case BITSET_CONTAINER_TYPE_CODE: return std::uint32_t(static_cast<const bitset_container_t*>(c)->cardinality);
      case ARRAY_CONTAINER_TYPE_CODE: return std::uint32_t(static_cast<const array_container_t*>(c)->cardinality);
      default: {
        const auto* r = static_cast<const run_container_t*>(c);
        std::uint32_t n = 0;
        for (std::int32_t i = 0; i < r->n_runs; ++i) n += r->runs[i].length + 1u;
        return n;
      }
    }
  }
  bool contains(std::uint16_t v) const {
    switch (type) {
      case BITSET_CONTAINER_TYPE_CODE:
        return (static_cast<const bitset_container_t*>(c)->array[v / 64] >> (v % 64)) & 1;
      case ARRAY_CONTAINER_TYPE_CODE: {
        const auto* a = static_cast<const array_container_t*>(c);
        return std::binary_search(a->array, a->array + a->cardinality, v);
      }
      default: {
        const auto* r = static_cast<const run_container_t*>(c);
        const rle16_t* begin = r->runs;
        const rle16_t* it =
            std::upper_bound(begin, begin + r->n_runs, v, [](std::uint16_t x, const rle16_t& run) { return x < run.value; });
        return it != begin && v <= std::uint32_t(std::prev(it)->value) + std::prev(it)->length;
      }
    }
  }
  // Applies `op(word, bits)` to each of the 1024 words of w with this
  // container's bits of that word.
  template <class Op>
  void combine_words(std::uint64_t* w, Op op) const {
    if (type == BITSET_CONTAINER_TYPE_CODE) {
      const std::uint64_t* bits = static_cast<const bitset_container_t*>(c)->array;
      for (std::size_t i = 0; i < 1024; ++i) w[i] = op(w[i], bits[i]);
      return;
    }
    std::uint64_t bits[1024] = {};
    if (type == ARRAY_CONTAINER_TYPE_CODE) {
      const auto* a = static_cast<const array_container_t*>(c);
      for (std::int32_t i = 0; i < a->cardinality; ++i) bits[a->array[i] / 64] |= 1ull << (a->array[i] % 64);
    } else {
      const auto* r = static_cast<const run_container_t*>(c);
      for (std::int32_t k = 0; k < r->n_runs; ++k)
        for (std::uint32_t v = r->runs[k].value, e = v + r->runs[k].length; v <= e; ++v) bits[v / 64] |= 1ull << (v % 64);
    }
    for (std::size_t i = 0; i < 1024; ++i) w[i] = op(w[i], bits[i]);
  }
};

// The container of `key` in `ra`, advancing *at (keys ascend).
std::optional<ContainerRef> container_at(const roaring_array_t& ra, std::uint16_t key, std::int32_t* at) {
  while (*at < ra.size && ra.keys[*at] < key) ++*at;
  if (*at >= ra.size || ra.keys[*at] != key) return std::nullopt;
  std::uint8_t type = ra.typecodes[*at];
  const void* c = container_unwrap_shared(ra.containers[*at], &type);
  return ContainerRef{c, type};
}

}  // namespace

void or_rows_into(const Bitmap& b, std::uint64_t first_row, std::span<std::uint64_t> words) {
  constexpr std::uint64_t kContainerRows = 1ull << 16;
  if (first_row % kContainerRows != 0) throw std::invalid_argument("or_rows_into: first_row must be a multiple of 2^16");
  const std::uint64_t end_row = first_row + 64 * std::uint64_t(words.size());
  for (const auto& [high, r] : b.*buckets_member(BucketsTag{})) {
    const std::uint64_t bucket_first = std::uint64_t(high) << 32;
    if (bucket_first >= end_row || bucket_first + (1ull << 32) <= first_row) continue;
    const roaring_array_t& ra = r.roaring.high_low_container;
    for (std::int32_t i = 0; i < ra.size; ++i) {
      const std::uint64_t row0 = bucket_first + (std::uint64_t(ra.keys[i]) << 16);
      if (row0 < first_row) continue;
      if (row0 >= end_row) break;
      std::uint8_t type = ra.typecodes[i];
      const void* c = container_unwrap_shared(ra.containers[i], &type);
      std::uint64_t* w = words.data() + (row0 - first_row) / 64;
      const std::uint64_t n = std::min<std::uint64_t>(1024, (end_row - row0) / 64);  // words of w in range
      if (type == BITSET_CONTAINER_TYPE_CODE) {
        const std::uint64_t* bits = static_cast<const bitset_container_t*>(c)->array;
        for (std::uint64_t k = 0; k < n; ++k) w[k] |= bits[k];
      } else if (type == ARRAY_CONTAINER_TYPE_CODE) {
        const auto* a = static_cast<const array_container_t*>(c);
        for (std::int32_t k = 0; k < a->cardinality; ++k) {
          const std::uint16_t v = a->array[k];
          if (v / 64u >= n) break;
          w[v / 64] |= 1ull << (v % 64);
        }
      } else {
        const auto* run = static_cast<const run_container_t*>(c);
        for (std::int32_t k = 0; k < run->n_runs; ++k) {
          std::uint64_t v = run->runs[k].value;
          const std::uint64_t e = std::min<std::uint64_t>(v + run->runs[k].length + 1, 64 * n);  // exclusive
          for (; v < e && v % 64 != 0; ++v) w[v / 64] |= 1ull << (v % 64);
          for (; v + 64 <= e; v += 64) w[v / 64] = ~0ull;
          for (; v < e; ++v) w[v / 64] |= 1ull << (v % 64);
        }
      }
    }
  }
}

std::uint64_t count_all_none(std::span<const Bitmap* const> all_of, std::span<const Bitmap* const> none_of) {
  if (all_of.empty()) return 0;
  const BucketsPtr member = buckets_member(BucketsTag{});
  std::uint64_t total = 0;
  std::uint64_t words[1024];
  for (const auto& [high, first] : (*all_of[0]).*member) {
    std::vector<const roaring_array_t*> pos, neg;
    for (const Bitmap* b : all_of) {
      const Buckets& buckets = (*b).*member;
      auto it = buckets.find(high);
      if (it == buckets.end()) break;
      pos.push_back(&it->second.roaring.high_low_container);
    }
    if (pos.size() != all_of.size()) continue;
    for (const Bitmap* b : none_of) {
      const Buckets& buckets = (*b).*member;
      if (auto it = buckets.find(high); it != buckets.end()) neg.push_back(&it->second.roaring.high_low_container);
    }
    // Walk the keys of the operand with the fewest containers.
    std::size_t lead = 0;
    for (std::size_t j = 1; j < pos.size(); ++j)
      if (pos[j]->size < pos[lead]->size) lead = j;
    std::vector<std::int32_t> pos_at(pos.size(), 0), neg_at(neg.size(), 0);
    std::vector<ContainerRef> cs(pos.size()), ns;
    for (std::int32_t i = 0; i < pos[lead]->size; ++i) {
      const std::uint16_t key = pos[lead]->keys[i];
      bool everywhere = true;
      for (std::size_t j = 0; j < pos.size() && everywhere; ++j) {
        auto c = container_at(*pos[j], key, &pos_at[j]);
        if (c) cs[j] = *c;
        everywhere = c.has_value();
      }
      if (!everywhere) continue;
      ns.clear();
      for (std::size_t j = 0; j < neg.size(); ++j)
        if (auto c = container_at(*neg[j], key, &neg_at[j])) ns.push_back(*c);
      // A sparse operand: test its rows in the others. Else word by word.
      std::size_t smallest = 0;
      std::uint32_t smallest_card = cs[0].cardinality();
      for (std::size_t j = 1; j < cs.size(); ++j)
        if (std::uint32_t n = cs[j].cardinality(); n < smallest_card) smallest = j, smallest_card = n;
      if (cs[smallest].type == ARRAY_CONTAINER_TYPE_CODE && smallest_card <= 1024) {
        const auto* a = static_cast<const array_container_t*>(cs[smallest].c);
        for (std::int32_t v = 0; v < a->cardinality; ++v) {
          const std::uint16_t x = a->array[v];
          bool in = true;
          for (std::size_t j = 0; j < cs.size() && in; ++j) in = j == smallest || cs[j].contains(x);
          for (std::size_t j = 0; j < ns.size() && in; ++j) in = !ns[j].contains(x);
          total += in;
        }
        continue;
      }
      // Start from a bitset operand's words (the common case: no fill pass).
      std::size_t start = cs.size();
      for (std::size_t j = 0; j < cs.size() && start == cs.size(); ++j)
        if (cs[j].type == BITSET_CONTAINER_TYPE_CODE) start = j;
      if (start < cs.size()) {
        std::memcpy(words, static_cast<const bitset_container_t*>(cs[start].c)->array, sizeof words);
      } else {
        std::fill(std::begin(words), std::end(words), ~0ull);
      }
      for (std::size_t j = 0; j < cs.size(); ++j)
        if (j != start) cs[j].combine_words(words, [](std::uint64_t w, std::uint64_t b) { return w & b; });
      for (const ContainerRef& c : ns) c.combine_words(words, [](std::uint64_t w, std::uint64_t b) { return w & ~b; });
      for (std::uint64_t w : words) total += std::uint64_t(std::popcount(w));
    }
  }
  return total;
}

std::vector<std::uint64_t> rows_of(const Bitmap& b) {
  std::vector<std::uint64_t> out(b.cardinality());
  if (!out.empty()) b.toUint64Array(out.data());
  return out;
}

}  // namespace mmfs::indexes
