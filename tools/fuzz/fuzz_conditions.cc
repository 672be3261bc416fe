// libFuzzer target over the bitmap-index library's parsers and decoders:
//   - parse_condition on the input as text; an accepted condition must come
//     back from to_text unchanged (parse(to_text(c)) is the same tree and
//     its text the same), and combine() must bracket evaluate_row's answer
//     (sure rows match, rows outside sure|maybe do not) for per-atom
//     estimates drawn from the input;
//   - each atom's KeySet for a dtype picked from the input, scanned over the
//     input's bytes as elements: scan_keys/count_keys must agree with
//     contains();
//   - IndexHeader::header_bytes / decode (and plan, decode_bitmap on what
//     decodes), IndexDelta::decode for a few binnings, and deserialize, on
//     the raw input.
// Any disagreement aborts. Run it with tools/fuzz.sh (not part of CI).
//
// Built with -DMMFS_FUZZ_SEED_MAIN instead, this file is a small program
// that writes seed inputs (real index objects, deltas, bitmaps and
// conditions) into the corpus directory given as its argument.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "indexes/binning.h"
#include "indexes/bitmap.h"
#include "indexes/bitmap_index.h"
#include "indexes/condition.h"
#include "indexes/evaluate.h"
#include "indexes/scan.h"
#include "indexes/values.h"

using namespace mmfs::indexes;

namespace {

[[noreturn]] void fail(const char* what, std::string_view detail) {
  std::fprintf(stderr, "fuzz_conditions: %s: %.*s\n", what, int(detail.size()), detail.data());
  std::abort();
}

// A cheap deterministic stream of bits from the input, for choices.
struct Bits {
  std::uint64_t state;
  explicit Bits(std::span<const std::byte> in) : state(0x9e3779b97f4a7c15ull ^ in.size()) {
    for (std::size_t i = 0; i < in.size() && i < 64; ++i) state = state * 31 + std::to_integer<std::uint8_t>(in[i]);
  }
  std::uint64_t next() {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  }
};

// combine() against evaluate_row over a small universe, with estimates
// that satisfy combine's precondition (sure ⊆ truth ⊆ sure ∪ maybe).
void check_combine(const Condition& c, Bits& bits) {
  constexpr std::uint64_t kRows = 64;
  std::vector<std::uint64_t> truth;  // per atom, in visit order: bit r = truth on row r
  std::vector<Estimate> estimates;
  for_each_atom(c, [&](const Atom&) {
    std::uint64_t t = bits.next(), s = t & bits.next(), extra = ~t & bits.next();
    std::uint64_t m = (t & ~s) | extra;
    truth.push_back(t);
    Estimate e;
    for (std::uint64_t r = 0; r < kRows; ++r) {
      if (s >> r & 1) e.sure.add(r);
      if (m >> r & 1) e.maybe.add(r);
    }
    estimates.push_back(std::move(e));
  });
  // Atoms are told apart by their position in the text (unique per atom).
  std::vector<std::size_t> positions;
  for_each_atom(c, [&](const Atom& a) { positions.push_back(a.position); });
  auto index_of = [&](const Atom& a) {
    for (std::size_t i = 0; i < positions.size(); ++i)
      if (positions[i] == a.position) return i;
    fail("atom not visited", "");
  };
  Estimate e = combine(c, kRows, [&](const Atom& a) { return estimates[index_of(a)]; });
  if (!(e.sure & e.maybe).isEmpty()) fail("combine: sure and maybe overlap", to_text(c));
  for (std::uint64_t r = 0; r < kRows; ++r) {
    bool match = evaluate_row(c, [&](const Atom& a) { return bool(truth[index_of(a)] >> r & 1); });
    if (e.sure.contains(r) && !match) fail("combine: a sure row does not match", to_text(c));
    if (match && !e.sure.contains(r) && !e.maybe.contains(r)) fail("combine: a matching row was dropped", to_text(c));
  }
}

// Every atom's keys for one dtype, scanned over the input's bytes.
void check_scans(const Condition& c, std::span<const std::byte> in, Bits& bits) {
  ValueType t = ValueType(bits.next() % 10);
  std::size_t count = std::min<std::size_t>(in.size() / itemsize(t), 4096);
  std::size_t atoms = 0;
  for_each_atom(c, [&](const Atom& a) {
    if (++atoms > 8) return;  // enough to cover the shapes; keeps each run fast
    KeySet keys = a.interval ? interval_keys(t, a.low, a.high) : compare_keys(t, a.op, a.value);
    std::uint64_t expect = 0;
    Bitmap rows;
    std::uint64_t first = bits.next() % 3 == 0 ? (std::uint64_t(1) << 32) - count / 2 : 0;
    for (std::size_t i = 0; i < count; ++i)
      if (contains(keys, t, in.data() + i * itemsize(t))) {
        ++expect;
        rows.add(first + i);
      }
    Bitmap got;
    scan_keys(t, keys, in.data(), count, first, &got);
    if (!(got ^ rows).isEmpty()) fail("scan_keys disagrees with contains()", to_text(c));
    if (count_keys(t, keys, in.data(), count) != expect) fail("count_keys disagrees with contains()", to_text(c));
  });
}

void fuzz_condition(std::span<const std::byte> in) {
  std::string_view text(reinterpret_cast<const char*>(in.data()), in.size());
  auto parsed = parse_condition(text);
  if (auto* err = std::get_if<ConditionError>(&parsed)) {
    if (err->position > text.size()) fail("error position past the end", err->message);
    return;
  }
  const Condition& c = std::get<Condition>(parsed);
  std::string canonical = to_text(c);
  auto again = parse_condition(canonical);
  if (auto* err = std::get_if<ConditionError>(&again)) fail("canonical text refused", canonical + " : " + err->message);
  if (!same_tree(std::get<Condition>(again), c)) fail("round trip changed the tree", canonical);
  if (to_text(std::get<Condition>(again)) != canonical) fail("canonical text not stable", canonical);
  (void)names(c);
  Bits bits(in);
  check_combine(c, bits);
  check_scans(c, in, bits);
}

// Binnings for the delta decoder: float64 with three edges, exact int32.
std::vector<Binning> binnings() {
  auto key_of = [](ValueType t, auto v) { return value_key(t, reinterpret_cast<const std::byte*>(&v)); };
  return {
      Binning(ValueType::F64, {min_key(ValueType::F64), key_of(ValueType::F64, 0.0), key_of(ValueType::F64, 1.5),
                               key_of(ValueType::F64, 100.0)}),
      Binning(ValueType::I32, {min_key(ValueType::I32), key_of(ValueType::I32, std::int32_t(1)),
                               key_of(ValueType::I32, std::int32_t(2))}),
  };
}

void fuzz_decoders(std::span<const std::byte> in) {
  Bitmap b;
  const bool decodes = deserialize(in, &b);
  if (decodes) (void)b.cardinality();
  // ORed straight into words, the same bytes must be accepted exactly when
  // they decode (and fit the words) and give the same rows.
  std::vector<std::uint64_t> words(8 * 1024, 0);
  const bool ored = or_serialized_into(in, words);
  if (ored && !decodes) fail("or_serialized_into accepted bytes deserialize refuses", "");
  if (ored && !same_rows(bitmap_of_words(words), b)) fail("or_serialized_into: other rows than deserialize", "");
  static const std::vector<Binning> kBinnings = binnings();
  for (const Binning& binning : kBinnings)
    if (auto delta = IndexDelta::decode(binning, in)) {
      std::string again = delta->encode();
      if (again.size() != delta->bytes()) fail("delta: bytes() differs from encode()", "");
    }
  auto length = IndexHeader::header_bytes(in.first(std::min(in.size(), IndexHeader::kPrefixBytes)));
  std::span<const std::byte> header = in;
  if (length && *length <= in.size()) header = in.first(*length);
  auto decoded = IndexHeader::decode(header);
  auto* h = std::get_if<IndexHeader>(&decoded);
  if (!h) return;
  // A decoded header: plan some atoms and decode the bitmaps the input holds.
  ValueType t = h->type();
  for (const char* constant : {"0", "1.5", "-3", "nan", "inf"}) {
    auto n = parse_number(constant);
    for (CompareOp op : {CompareOp::Lt, CompareOp::Ge, CompareOp::Eq, CompareOp::Ne})
      (void)h->plan(compare_keys(t, op, *n));
  }
  const auto& directory = h->directory();
  for (std::uint32_t id = 0; id < directory.size() && id < 64; ++id) {
    const auto& e = directory[id];
    if (e.offset > in.size() || e.length > in.size() - e.offset) continue;
    Bitmap out;
    (void)h->decode_bitmap(id, in.subspan(e.offset, e.length), &out);
  }
}

}  // namespace

#ifndef MMFS_FUZZ_SEED_MAIN

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);
  fuzz_condition(in);
  fuzz_decoders(in);
  return 0;
}

#else

namespace {

void write_seed(const std::string& dir, const std::string& name, std::string_view bytes) {
  std::string path = dir + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) fail("cannot write", path);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  std::string dir = argv[1];
  const char* conditions[] = {">3", "x>=-2.5e3&y<1|!(z in[1,2])", "!!(>3)", ">3&<5|==7", "in[-inf,inf]", "!=nan",
                              "a in [ 0 , 1e300 ] | b != -0.0"};
  for (std::size_t i = 0; i < std::size(conditions); ++i) write_seed(dir, "cond" + std::to_string(i), conditions[i]);

  std::vector<double> values(1000);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = double(i % 37) * 0.5 - 3;
  const auto* bytes = reinterpret_cast<const std::byte*>(values.data());
  Binning binning = binnings()[0];
  for (Encoding e : {Encoding::E1, Encoding::BN, Encoding::Range, Encoding::Interval, Encoding::RE, Encoding::IE}) {
    IndexBuilder builder(binning, e, values.size());
    builder.add(0, bytes, values.size());
    write_seed(dir, "index_" + std::string(encoding_name(e)), builder.finish());
  }
  IndexDelta delta(binning);
  delta.set(binning, 10, bytes, 20);
  write_seed(dir, "delta", delta.encode());
  write_seed(dir, "bitmap", serialize(range_bitmap(5, 5000)));
  return 0;
}

#endif
