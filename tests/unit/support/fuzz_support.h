// A small, deterministic mutation engine for the [fuzz] tests: from a corpus
// of valid inputs (texts or byte records, both held in std::string) it makes
// mutants by bit flips, byte replacement, truncation, duplication, insertion
// and deletion of slices, splicing two corpus entries, replacing numbers and
// little-endian integers by interesting values, and inserting tokens of a
// per-target dictionary (separators, huge numbers, NUL, UTF-8, long repeats);
// mutate_json makes structural mutants of JSON records that stay JSON. The
// tests add their own grammar-aware mutants where a checksum or a packing
// stands in front of the decoder (re-sealed headers, re-packed columns).
//
// Every target runs a fixed number of mutants from a fixed seed, so a failure
// reproduces; MMFS_FUZZ_SEED=N perturbs every seed and MMFS_FUZZ_SCALE=K runs
// K times as many mutants (for longer runs under the sanitizers), and
// MMFS_FUZZ_STATS=1 prints each target's parsed/failed counts. A Tally counts
// mutants that parsed and that failed: a target must see both, or its mutants
// never reach past the first check (or never fail one) and test nothing.
#pragma once

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mmfs::testing::fuzz {

using Rng = std::mt19937_64;

// Mutants per target: `base` times MMFS_FUZZ_SCALE (default 1).
inline std::size_t iterations(std::size_t base) {
  const char* scale = std::getenv("MMFS_FUZZ_SCALE");
  const long k = scale ? std::strtol(scale, nullptr, 10) : 1;
  return base * std::size_t(k > 0 ? k : 1);
}

// A target's seed: its name hashed (FNV-1a), mixed with MMFS_FUZZ_SEED.
inline std::uint64_t seed_of(std::string_view target) {
  std::uint64_t h = 1469598103934665603ull;
  for (char c : target) h = (h ^ std::uint8_t(c)) * 1099511628211ull;
  if (const char* s = std::getenv("MMFS_FUZZ_SEED")) h ^= std::strtoull(s, nullptr, 10) * 0x9e3779b97f4a7c15ull;
  return h;
}

inline std::span<const std::byte> bytes_of(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }

// An input as a failure message shows it: printable ASCII as is, the rest as
// \xNN, at most 400 characters.
inline std::string shown(std::string_view s) {
  std::string out = "\"";
  for (std::size_t i = 0; i < s.size() && i < 400; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"') {
      out += char(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  out += '"';
  if (s.size() > 400) out += " ... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

// Tokens every text target gets: digits, boundary numbers, separators,
// blanks, NUL, UTF-8 and long repeats.
inline std::vector<std::string> common_tokens() {
  std::vector<std::string> t = {
      "0", "1", "9", "-1", "-0", "+1", "00", "007", "255", "256", "65535", "65536", "4294967295", "4294967296",
      "9223372036854775807", "9223372036854775808", "18446744073709551615", "18446744073709551616",
      "340282366920938463463374607431768211456", "1e308", "1e309", "-1e309", "1e-400", "0.5", ".5", "5.", "1e",
      "inf", "-inf", "nan", "NaN", ",", ":", ";", "=", "@", "/", "&", "|", "(", ")", "<", ">", "!", "~", ".",
      "[", "]", "{", "}", "\"", "'", "\\", " ", "\t", "\n", "\r", std::string(1, '\0'), "\xc3\xa9", "\xe2\x82\xac",
      "\xf0\x9f\x98\x80", "\xff", "\xc0\x80", "\xed\xa0\x80"};
  t.push_back(std::string(300, '9'));
  t.push_back(std::string(5000, '('));
  t.push_back(std::string(2000, ','));
  t.push_back(std::string(4097, 'a'));
  return t;
}

// Little-endian integers a binary mutant may plant.
inline std::vector<std::uint64_t> interesting_values() {
  return {0,          1,          2,          7,          8,          12,         0x7f,       0x80,
          0xff,       0x100,      0x7fff,     0x8000,     0xffff,     0x10000,    0x7fffffff, 0x80000000,
          0xffffffff, 0x100000000ull, 0x7fffffffffffffffull, 0x8000000000000000ull, ~0ull, ~0ull - 1,
          512,        4096,       16384,      1u << 20};
}

// Mutants of a corpus. next() picks an entry and applies 1..4 mutations.
class Mutator {
 public:
  Mutator(std::uint64_t seed, std::vector<std::string> corpus, std::vector<std::string> dictionary = {},
          std::size_t max_size = 1 << 16)
      : rng_(seed), corpus_(std::move(corpus)), dict_(std::move(dictionary)), max_size_(max_size) {
    for (auto& t : common_tokens()) dict_.push_back(std::move(t));
  }

  Rng& rng() { return rng_; }
  std::size_t below(std::size_t n) { return n == 0 ? 0 : std::size_t(rng_() % n); }
  const std::string& pick() { return corpus_[below(corpus_.size())]; }

  std::string next() { return mutate(pick()); }

  std::string mutate(std::string s) {
    const std::size_t rounds = below(2) ? 1 : 2 + below(3);  // mostly one: a mutant near a valid input goes deep
    for (std::size_t r = 0; r < rounds; ++r) mutate_once(s);
    if (s.size() > max_size_) s.resize(max_size_);
    return s;
  }

 private:
  void mutate_once(std::string& s) {
    const std::size_t n = s.size();
    switch (below(13)) {
      case 0:  // bit flip
        if (n) s[below(n)] ^= char(1u << below(8));
        break;
      case 1:  // byte replacement
        if (n) s[below(n)] = char(rng_());
        break;
      case 2:  // truncation at any point
        s.resize(below(n + 1));
        break;
      case 3: {  // duplicate a slice somewhere
        const std::size_t a = below(n + 1), len = below(std::min<std::size_t>(n - a, 64) + 1);
        s.insert(below(n + 1), s.substr(a, len));
        break;
      }
      case 4: {  // delete a slice
        const std::size_t a = below(n + 1);
        s.erase(a, below(std::min<std::size_t>(n - a, 16) + 1));
        break;
      }
      case 5: {  // insert random bytes
        std::string junk(1 + below(8), '\0');
        for (char& c : junk) c = char(rng_());
        s.insert(below(n + 1), junk);
        break;
      }
      case 6: {  // splice: this one's prefix, another's suffix
        const std::string& other = pick();
        const std::size_t from = below(other.size() + 1);
        s = s.substr(0, below(n + 1)) + other.substr(from);
        break;
      }
      case 7:
      case 8:  // insert a dictionary token
        s.insert(below(n + 1), token());
        break;
      case 9: {  // replace a slice with a token
        const std::size_t a = below(n + 1);
        s.replace(a, below(std::min<std::size_t>(n - a, 8) + 1), token());
        break;
      }
      case 10: {  // replace a run of digits (a number in a text) with a token
        std::vector<std::size_t> starts;
        for (std::size_t i = 0; i < n; ++i)
          if (s[i] >= '0' && s[i] <= '9' && (i == 0 || s[i - 1] < '0' || s[i - 1] > '9')) starts.push_back(i);
        if (starts.empty()) break;
        const std::size_t a = starts[below(starts.size())];
        std::size_t b = a;
        while (b < n && s[b] >= '0' && s[b] <= '9') ++b;
        s.replace(a, b - a, token());
        break;
      }
      case 11: {  // plant an interesting little-endian integer of 1, 2, 4 or 8 bytes
        const std::size_t width = std::size_t(1) << below(4);
        if (n < width) break;
        const auto values = interesting_values();
        std::uint64_t v = values[below(values.size())];
        if (below(4) == 0) {  // or nudge the one there
          std::memcpy(&v, s.data() + (below(n - width + 1)), width);
          v += below(2) ? 1 : ~0ull;
        }
        std::memcpy(s.data() + below(n - width + 1), &v, width);  // little-endian host
        break;
      }
      default: {  // repeat a slice many times
        const std::size_t a = below(n + 1), len = 1 + below(std::min<std::size_t>(n - a, 4) + 1);
        const std::string piece = n > a ? s.substr(a, len) : std::string("(");
        std::string rep;
        for (std::size_t k = 0, times = 2 + below(200); k < times; ++k) rep += piece;
        s.insert(a, rep);
        break;
      }
    }
  }

  const std::string& token() { return dict_[below(dict_.size())]; }

  Rng rng_;
  std::vector<std::string> corpus_;
  std::vector<std::string> dict_;
  std::size_t max_size_;
};

// A structural mutant of a JSON text (records, geometry files): 1..3 of
// leaves replaced by boundary values, fields deleted, array elements
// duplicated, fields of `keys` added. It stays JSON, so it gets past the
// parser to the checks of the decoder. `text` must be JSON.
inline std::string mutate_json(const std::string& text, Rng& rng, const std::vector<std::string>& keys = {}) {
  using nlohmann::json;
  static const std::vector<json> values = {
      0, 1, 2, -1, 7, 255, 256, 1024, 65535, 65536, 1 << 24, 4294967295u, 4294967296ull, 9007199254740993ull,
      1ull << 62, 1ull << 63, ~0ull, 0.5, -0.5, 1e300, "", "x", "none", "naive", nullptr, true, false,
      json::array(), json::array({0, 0}), json::object()};
  json j = json::parse(text);
  for (std::size_t rounds = 1 + rng() % 3; rounds-- > 0;) {
    const json flat = j.flatten();  // (items() of a temporary would dangle)
    std::vector<std::string> leaves;
    for (const auto& item : flat.items()) leaves.push_back(item.key());
    const std::size_t kind = rng() % 8;
    if (kind <= 3 && !leaves.empty()) {  // a leaf becomes a boundary value
      j[json::json_pointer(leaves[rng() % leaves.size()])] = values[rng() % values.size()];
    } else if (kind == 4 && !leaves.empty()) {  // a field or element goes
      const json::json_pointer p(leaves[rng() % leaves.size()]);
      if (p.empty()) continue;
      json& parent = j[p.parent_pointer()];
      if (parent.is_object()) parent.erase(p.back());
      else if (parent.is_array() && !parent.empty()) parent.erase(parent.size() - 1);
    } else if (kind == 5 && !leaves.empty()) {  // an array's element again (a zone, a copy, a member)
      const json::json_pointer leaf(leaves[rng() % leaves.size()]);
      if (leaf.empty()) continue;  // the root itself is the leaf
      json& parent = j[leaf.parent_pointer()];
      if (parent.is_array() && !parent.empty()) parent.push_back(parent[rng() % parent.size()]);
    } else if (j.is_object()) {  // a field appears
      const std::string key = keys.empty() || rng() % 4 == 0 ? std::string("bogus") : keys[rng() % keys.size()];
      j[key] = values[rng() % values.size()];
    }
  }
  return j.dump();
}

// Parsed and failed mutants of a target, and the slowest one. check() turns a
// failed property into a test failure naming the input (the first few only).
class Tally {
 public:
  explicit Tally(std::string target) : target_(std::move(target)) {}
  ~Tally() {
    if (std::getenv("MMFS_FUZZ_STATS"))
      std::fprintf(stderr, "fuzz %-34s %7llu mutants: %7llu parsed, %7llu failed, slowest %.1f ms\n", target_.c_str(),
                   (unsigned long long)(ok_ + failed_), (unsigned long long)ok_, (unsigned long long)failed_,
                   slowest_ms_);
  }

  void parsed() { ++ok_; }
  void failed() { ++failed_; }
  std::uint64_t parsed_count() const { return ok_; }
  std::uint64_t failed_count() const { return failed_; }

  // Runs f() on one input, keeping the slowest input; an exception escaping
  // f (none of the targets documents one it lets out) fails the test.
  template <class F>
  void run(const std::string& input, F&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      f();
    } catch (const std::exception& e) {
      check(false, std::string("exception escaped: ") + e.what(), input);
    } catch (...) {
      check(false, "a non-standard exception escaped", input);
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (ms > slowest_ms_) {
      slowest_ms_ = ms;
      slowest_ = input;
    }
  }

  // A property of one input; a failure is reported with the input.
  bool check(bool ok, std::string_view what, const std::string& input) {
    if (!ok && ++reported_ <= 5) FAIL_CHECK(target_ << ": " << what << " for input " << shown(input));
    if (!ok) ++violations_;
    return ok;
  }

  // Both kinds of mutants occurred, nothing was too slow (a hang in the
  // making: every call here takes microseconds), no property failed.
  void finish(double slow_ms = 2000) {
    INFO(target_ << ": " << ok_ << " parsed, " << failed_ << " failed");
    CHECK(ok_ > 0);
    CHECK(failed_ > 0);
    CHECK(violations_ == 0);
    INFO("slowest input " << shown(slowest_));
    CHECK(slowest_ms_ < slow_ms);
  }

 private:
  std::string target_;
  std::uint64_t ok_ = 0, failed_ = 0, violations_ = 0, reported_ = 0;
  double slowest_ms_ = 0;
  std::string slowest_;
};

}  // namespace mmfs::testing::fuzz
