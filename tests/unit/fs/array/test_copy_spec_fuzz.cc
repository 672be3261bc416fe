// [fuzz] fs/array/copy_spec: mutants of user.mmfs.copies texts through
// parse_copies, and of stored copy records through decode_copies and
// decode_members. A refused text says why in one printable line; accepted
// copies fit the array (check_copies), are at most kMaxCopies, and read back
// the same from their canonical text; a decoded record keeps its slots
// distinct and its members distinct and below 65536, and survives
// re-encoding.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>
#include <vector>

#include "fs/array/copy_spec.h"
#include "tests/unit/support/fuzz_support.h"

using namespace mmfs::fs;
using namespace mmfs::testing::fuzz;

namespace {

const std::vector<std::string> kCopies = {"none",
                                          "naive",
                                          "naive:order=2,1,0;hilbert:cell=16,16,4",
                                          "mloc:compress=zstd:3:priority=S-V-M",
                                          "zorder:chunk=8,8,8:compress=zstd",
                                          "multimap:basic_cube=2,2,2;naive;zorder;hilbert;mloc;naive;zorder;hilbert",
                                          "quadrangle:cell=4,4,4"};

const std::vector<std::string> kTokens = {";", ":", "=", "order=", "cell=", "basic_cube=", "priority=", "chunk=",
                                          "compress=", "zstd:", "naive", "mloc", "none", "V-M-S"};

ArraySchema array(const char* shape) {
  ArraySchema s;
  REQUIRE_FALSE(set_schema_attr(s, "shape", shape));
  return s;
}

bool one_line(const std::string& m) {
  return !m.empty() && std::none_of(m.begin(), m.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
}

bool members_ok(const std::vector<std::uint32_t>& m) {
  for (std::size_t i = 0; i < m.size(); ++i) {
    if (m[i] >= 65536) return false;
    for (std::size_t j = 0; j < i; ++j)
      if (m[j] == m[i]) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("fuzz: parse_copies on mutated copy lists", "[fuzz][copies]") {
  const std::vector<ArraySchema> bases = {array("100,100,100"), array("64,64,64"), ArraySchema{}};
  Mutator mutator(seed_of("parse_copies"), kCopies, kTokens);
  Tally tally("parse_copies");
  for (std::size_t i = 0, n = iterations(10000); i < n; ++i) {
    const std::string text = mutator.next();
    const ArraySchema& base = bases[i % bases.size()];
    tally.run(text, [&] {
      std::vector<CopySpec> copies{CopySpec{}};
      auto r = parse_copies(base, text, &copies);
      if (r) {
        tally.failed();
        tally.check(r.error == EINVAL || r.error == EFBIG, "an errno other than EINVAL/EFBIG", text);
        tally.check(one_line(r.message), "the message is not one printable line: " + shown(r.message), text);
        tally.check(copies.empty(), "copies left behind by a refusal", text);
        return;
      }
      tally.parsed();
      tally.check(copies.size() <= kMaxCopies, "more than kMaxCopies copies", text);
      ArraySchema s = base;
      s.copies = copies;
      tally.check(!check_copies(s), "accepted copies that do not fit the array", text);
      std::vector<CopySpec> again;
      const std::string canonical = copies_text(copies);
      tally.check(!parse_copies(base, canonical, &again) && again == copies,
                  "the canonical text '" + canonical + "' reads back differently", text);
    });
  }
  tally.finish();
}

TEST_CASE("fuzz: decode_copies and decode_members on mutated records", "[fuzz][copies]") {
  const ArraySchema base = array("100,100,100");
  std::vector<std::string> corpus;
  for (const std::string& text : kCopies) {
    std::vector<CopySpec> copies;
    REQUIRE_FALSE(parse_copies(base, text, &copies));
    assign_copy_slots({}, &copies);
    if (!copies.empty()) copies[0].members = {0, 3, 5};
    corpus.push_back(encode_copies(copies).dump());
  }
  Mutator mutator(seed_of("decode_copies"), corpus,
                  {"null", "true", "[]", "{}", "-1", "1e2", "256", "65536", "\"slot\":1,", "\"members\":[0,0],",
                   "\"members\":[],", "\"order\":[4294967296],", "\"layout\":\"tape\","});
  Tally tally("decode_copies");
  const std::vector<std::string> keys = {"layout", "order", "cell", "basic_cube", "priority", "chunk", "compress",
                                         "slot", "members"};
  for (std::size_t i = 0, n = iterations(8000); i < n; ++i) {
    const std::string text = i % 4 ? mutate_json(mutator.pick(), mutator.rng(), keys) : mutator.next();
    tally.run(text, [&] {
      const auto j = nlohmann::json::parse(text, nullptr, false);
      if (j.is_discarded()) return;  // not JSON: never reaches the decoder
      auto copies = decode_copies(j);
      if (!copies) {
        tally.failed();
        return;
      }
      tally.parsed();
      tally.check(copies->size() <= kMaxCopies, "more than kMaxCopies copies", text);
      std::vector<std::uint8_t> slots;
      bool ok = true;
      for (const CopySpec& c : *copies) {
        ok = ok && members_ok(c.members);
        if (c.slot != 0) ok = ok && std::find(slots.begin(), slots.end(), c.slot) == slots.end();
        slots.push_back(c.slot);
      }
      tally.check(ok, "slots twice, or members alike or beyond 65535", text);
      auto back = decode_copies(encode_copies(*copies));
      tally.check(back && *back == *copies, "no round trip", text);
    });
  }
  tally.finish();

  Mutator members(seed_of("decode_members"), {"[0,1,2]", "[5]", "[65535,0]", "[3,1,4,15,9,2,6]"});
  Tally members_tally("decode_members");
  for (std::size_t i = 0, n = iterations(5000); i < n; ++i) {
    const std::string text = i % 2 ? mutate_json(members.pick(), members.rng()) : members.next();
    members_tally.run(text, [&] {
      const auto j = nlohmann::json::parse(text, nullptr, false);
      if (j.is_discarded()) return;
      std::vector<std::uint32_t> out{7};
      if (!decode_members(j, &out)) {
        members_tally.failed();
        members_tally.check(out == std::vector<std::uint32_t>{7}, "a refusal changed the output", text);
        return;
      }
      members_tally.parsed();
      members_tally.check(!out.empty() && members_ok(out) && out.size() == j.size(), "a bad member set", text);
    });
  }
  members_tally.finish();
}

TEST_CASE("fuzz: decode_members regressions", "[fuzz][copies]") {
  // The largest member set a record may hold decodes in linear time, not
  // quadratic (65536 distinct members: 2^31 comparisons took seconds).
  nlohmann::json all = nlohmann::json::array();
  for (std::uint32_t m = 65536; m-- > 0;) all.push_back(m);
  std::vector<std::uint32_t> out;
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(decode_members(all, &out));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(200));
  CHECK(out.size() == 65536);
  all.push_back(7);  // one too many, and 7 twice
  CHECK_FALSE(decode_members(all, &out));
}

TEST_CASE("fuzz: parse_copies regressions", "[fuzz][copies]") {
  // User text in the message came out raw: control bytes and newlines in a
  // line of .mmfs/errors.
  const ArraySchema base = array("100,100,100");
  std::vector<CopySpec> copies;
  for (const char* text : {"naaaai\raaaaive", "naive:foo\n=1", "n\x04\xb2>", "naive:order=2,1,0:order\x1b"}) {
    auto r = parse_copies(base, text, &copies);
    INFO(shown(text) << " -> " << shown(r.message));
    CHECK(r.error == EINVAL);
    CHECK(one_line(r.message));
  }
}
