// The mloc image directory (layouts/mloc_directory.h): both forms, dense
// (MlocDirectory) and sparse (MlocCatalog), encode, decode and locate the
// same pieces; malformed directories are refused by both alike.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "layouts/mloc.h"
#include "layouts/mloc_codec.h"
#include "layouts/mloc_directory.h"
#include "tests/unit/support/mloc_test_support.h"

using namespace mmfs::layouts;
using namespace mmfs::layouts::testing;

namespace {

// zero_empty: the entries of a bin a chunk has no values of are all zero,
// as the encoder writes them; otherwise they hold noise (a version 2
// directory stores them too).
MlocDirectory make_directory(std::mt19937_64& rng, MlocPriority p, bool zero_empty = false) {
  MlocDirectory d;
  d.shape = {10, 7};
  d.chunk = {4, 4};  // a 3 x 2 chunk grid, clipped at both far edges
  d.itemsize = 8;
  d.float64 = true;
  d.priority = p;
  d.bins = 3;
  d.zstd_level = 3;
  d.value_type = 9;
  d.bin_lower = {rng(), rng(), rng()};
  const MlocGrid g = d.grid();
  d.positions.resize(u64(g.bins()) * g.chunks());
  d.units.resize(g.units());
  for (u64 c = 0; c < g.chunks(); ++c) {
    // Split the chunk's elements among the bins at random (some bins empty).
    std::vector<u32> counts(g.bins(), 0);
    const u64 n = g.chunk_elements(c);
    const u32 skip = u32(rng() % (g.bins() + 1));  // a bin left empty (or none)
    for (u64 i = 0; i < n; ++i) {
      u32 b = u32(rng() % g.bins());
      if (b == skip) b = (b + 1) % g.bins();
      ++counts[b];
    }
    for (u32 b = 0; b < g.bins(); ++b) {
      if (zero_empty && counts[b] == 0) continue;
      MlocPositionEntry& e = d.positions[g.position_entry(b, c)];
      e.count = counts[b];
      e.raw = 8 + 2 * counts[b];
      e.stored = u32(rng() % (e.raw + 1));
      e.checksum = u32(rng());
      for (u32 gr = 0; gr < g.groups().size(); ++gr) {
        MlocUnitEntry& u = d.units[g.unit(b, gr, c)];
        u.stored = u32(rng() % (mloc_unit_raw_bytes(g, counts[b], gr) + 1));
        u.checksum = u32(rng());
      }
    }
  }
  return d;
}

void check_same(const MlocDirectory& a, const MlocDirectory& b) {
  CHECK(a.shape == b.shape);
  CHECK(a.chunk == b.chunk);
  CHECK(a.itemsize == b.itemsize);
  CHECK(a.float64 == b.float64);
  CHECK(a.priority == b.priority);
  CHECK(a.bins == b.bins);
  CHECK(a.zstd_level == b.zstd_level);
  CHECK(a.value_type == b.value_type);
  CHECK(a.bin_lower == b.bin_lower);
  REQUIRE(a.positions.size() == b.positions.size());
  for (std::size_t i = 0; i < a.positions.size(); ++i) {
    CHECK(a.positions[i].count == b.positions[i].count);
    CHECK(a.positions[i].raw == b.positions[i].raw);
    CHECK(a.positions[i].stored == b.positions[i].stored);
    CHECK(a.positions[i].checksum == b.positions[i].checksum);
  }
  REQUIRE(a.units.size() == b.units.size());
  for (std::size_t i = 0; i < a.units.size(); ++i) {
    CHECK(a.units[i].stored == b.units[i].stored);
    CHECK(a.units[i].checksum == b.units[i].checksum);
  }
  CHECK(a.header_bytes == b.header_bytes);
  CHECK(a.positions_start == b.positions_start);
  CHECK(a.data_start == b.data_start);
  CHECK(a.image_bytes == b.image_bytes);
  CHECK(a.position_blocks == b.position_blocks);
  CHECK(a.unit_blocks == b.unit_blocks);
}

// The layout of a located directory, recomputed from its sizes.
void check_located(const MlocDirectory& d, u32 sector) {
  CHECK(d.header_bytes == d.encode().size());
  CHECK(d.positions_start % sector == 0);
  CHECK(d.positions_start >= d.header_bytes);
  CHECK(d.positions_start < d.header_bytes + sector);
  u64 at = d.positions_start, pos_total = 0, unit_total = 0;
  for (std::size_t i = 0; i < d.positions.size(); ++i) {
    CHECK(d.position_offset(i) == at);
    at += d.positions[i].stored;
    pos_total += d.positions[i].stored;
  }
  CHECK(d.data_start == at);
  for (std::size_t i = 0; i < d.units.size(); ++i) {
    CHECK(d.unit_offset(i) == at);
    at += d.units[i].stored;
    unit_total += d.units[i].stored;
  }
  CHECK(d.image_bytes == at);
  CHECK(d.data_start == d.positions_start + pos_total);
  CHECK(d.image_bytes == d.data_start + unit_total);
}

// What decode() promises of any directory it accepts.
void check_satisfies_grid(const MlocDirectory& back) {
  MlocGrid bg = back.grid();
  REQUIRE(back.positions.size() == u64(bg.bins()) * bg.chunks());
  REQUIRE(back.units.size() == bg.units());
  for (u64 c = 0; c < bg.chunks(); ++c) {
    u64 sum = 0;
    for (u32 b = 0; b < bg.bins(); ++b) {
      const MlocPositionEntry& e = back.positions[bg.position_entry(b, c)];
      sum += e.count;
      CHECK(e.stored <= e.raw);
      for (u32 gr = 0; gr < bg.groups().size(); ++gr)
        CHECK(back.units[bg.unit(b, gr, c)].stored <= mloc_unit_raw_bytes(bg, e.count, gr));
    }
    CHECK(sum == bg.chunk_elements(c));
  }
  check_located(back, 512);
}

// The sparse form against the dense one it was read or built from: the
// same header, places and entries (zero where the catalog leaves a (bin,
// chunk) out), and the same totals.
void check_catalog(const MlocCatalog& cat, const MlocDirectory& d) {
  const MlocHeader& h = cat.header();
  CHECK(h.shape == d.shape);
  CHECK(h.chunk == d.chunk);
  CHECK(h.itemsize == d.itemsize);
  CHECK(h.float64 == d.float64);
  CHECK(h.priority == d.priority);
  CHECK(h.bins == d.bins);
  CHECK(h.zstd_level == d.zstd_level);
  CHECK(h.value_type == d.value_type);
  CHECK(h.bin_lower == d.bin_lower);
  CHECK(cat.header_bytes() == d.header_bytes);
  CHECK(cat.positions_start() == d.positions_start);
  CHECK(cat.data_start() == d.data_start);
  CHECK(cat.image_bytes() == d.image_bytes);
  const MlocGrid g = d.grid();
  const u64 C = g.chunks();
  const u32 G = u32(g.groups().size());
  const std::vector<bool> present = d.present();
  std::vector<u64> per_bin(g.bins(), 0), per_group(G, 0);
  u64 wrong = 0, lists = 0, pos_stored = 0, pos_raw = 0;
  for (u64 e = 0; e < d.positions.size(); ++e) {
    const u32 b = u32(e / C);
    const u64 c = e % C;
    const MlocPositionEntry got = cat.position(e), want = d.positions[e];
    wrong += cat.present(e) != present[e];
    wrong += got.count != want.count || got.raw != want.raw || got.stored != want.stored ||
             got.checksum != want.checksum;
    if (present[e]) wrong += cat.position_offset(e) != d.position_offset(e);
    per_bin[b] += want.count;
    lists += want.count != 0;
    pos_stored += want.stored;
    pos_raw += want.raw;
    for (u32 k = 0; k < G; ++k) {
      const u64 u = g.unit(b, k, c);
      const MlocUnitEntry gu = cat.unit(e, k), wu = d.units[u];
      wrong += gu.stored != wu.stored || gu.checksum != wu.checksum;
      if (present[e]) wrong += cat.unit_offset(e, k) != d.unit_offset(u);
      per_group[k] += wu.stored;
    }
  }
  CHECK(wrong == 0);
  CHECK(cat.lists() == lists);
  CHECK(cat.positions_stored() == pos_stored);
  CHECK(cat.positions_raw() == pos_raw);
  for (u32 b = 0; b < g.bins(); ++b) CHECK(cat.bin_elements(b) == per_bin[b]);
  for (u32 k = 0; k < G; ++k) CHECK(cat.group_stored(k) == per_group[k]);
}

// Decodes `bytes` both ways: the catalog refuses exactly what the dense
// decoder refuses, and reads what it accepts alike.
std::optional<MlocDirectory> decode_both(std::string_view bytes, u32 sector) {
  auto d = MlocDirectory::decode(bytes, sector);
  auto cat = MlocCatalog::decode(bytes, sector);
  CHECK(cat.has_value() == d.has_value());
  if (cat && d) check_catalog(*cat, *d);
  return d;
}

std::optional<MlocDirectory> reencode(MlocDirectory d, u32 sector = 512) {
  return decode_both(d.encode(), sector);
}

}  // namespace

TEST_CASE("mloc: the directory encodes, decodes and locates its pieces", "[mloc]") {
  std::mt19937_64 rng(2024);
  for (const std::string& text : all_priority_texts()) {
    INFO(text);
    MlocDirectory d = make_directory(rng, priority_of(text));
    const MlocGrid g = d.grid();
    REQUIRE(d.positions.size() == u64(g.bins()) * g.chunks());
    REQUIRE(d.units.size() == g.units());
    // The fixture is consistent: counts per chunk add up to its elements.
    for (u64 c = 0; c < g.chunks(); ++c) {
      u64 sum = 0;
      for (u32 b = 0; b < g.bins(); ++b) sum += d.positions[g.position_entry(b, c)].count;
      REQUIRE(sum == g.chunk_elements(c));
    }
    for (u32 sector : {512u, 4096u}) {
      INFO("sector " << sector);
      MlocDirectory located = d;
      located.locate(sector);
      check_located(located, sector);
      const std::string bytes = located.encode();
      CHECK(bytes.size() == located.header_bytes);
      auto back = decode_both(bytes, sector);
      REQUIRE(back.has_value());
      check_same(*back, located);
      check_located(*back, sector);
      CHECK(back->encode() == bytes);
      check_catalog(MlocCatalog::of(located), located);
    }
    // The same bytes located for 4096-byte sectors: only the start moves.
    MlocDirectory a = d, b = d;
    a.locate(512);
    b.locate(4096);
    CHECK(b.positions_start % 4096 == 0);
    CHECK(b.positions_start >= a.positions_start);
    for (std::size_t i = 0; i < a.units.size(); ++i)
      CHECK(b.unit_offset(i) - b.positions_start == a.unit_offset(i) - a.positions_start);
  }
  SECTION("positions_start is the header rounded up, not a floor plus one sector") {
    MlocDirectory d = make_directory(rng, kVMS);
    d.locate(1);
    const u64 h = d.header_bytes;
    CHECK(d.positions_start == h);
    d.locate(u32(h));  // a header of exactly one sector
    CHECK(d.positions_start == h);
    d.locate(u32(h - 1));
    CHECK(d.positions_start == 2 * (h - 1));
    d.locate(u32(h + 1));
    CHECK(d.positions_start == h + 1);
  }
}

TEST_CASE("mloc: malformed directories are rejected", "[mloc]") {
  std::mt19937_64 rng(99);
  const MlocDirectory d = make_directory(rng, priority_of("S-V-M"));
  const MlocGrid g = d.grid();
  const std::string good = d.encode();
  REQUIRE(decode_both(good, 512).has_value());

  SECTION("wrong magic or version") {
    for (std::size_t i : {0u, 3u, 7u, 8u}) {
      std::string s = good;
      s[i] = char(s[i] ^ 0x20);
      INFO("byte " << i);
      CHECK_FALSE(decode_both(s, 512).has_value());
    }
  }
  SECTION("every truncation, and a trailing byte") {
    for (std::size_t len = 0; len < good.size(); ++len) {
      INFO("length " << len);
      CHECK_FALSE(decode_both(good.substr(0, len), 512).has_value());
    }
    CHECK_FALSE(decode_both(good + '\0', 512).has_value());
  }
  SECTION("counts that do not add up to the chunk's elements") {
    MlocDirectory bad = d;
    bad.positions[g.position_entry(0, 0)].count += 1;
    CHECK_FALSE(reencode(bad).has_value());
    // Moving an element's count from one chunk to another keeps the total.
    bad = d;
    u32 from = 0;
    while (bad.positions[g.position_entry(from, 0)].count == 0) ++from;
    bad.positions[g.position_entry(from, 0)].count -= 1;
    bad.positions[g.position_entry(from, 1)].count += 1;
    for (u32 gr = 0; gr < g.groups().size(); ++gr) bad.units[g.unit(from, gr, 0)].stored = 0;
    CHECK_FALSE(reencode(bad).has_value());
    // Moving it between bins of one chunk is consistent (units sized within).
    bad = d;
    const u32 to = (from + 1) % g.bins();
    bad.positions[g.position_entry(from, 0)].count -= 1;
    bad.positions[g.position_entry(to, 0)].count += 1;
    for (u32 gr = 0; gr < g.groups().size(); ++gr) bad.units[g.unit(from, gr, 0)].stored = 0;
    CHECK(reencode(bad).has_value());
  }
  SECTION("stored sizes larger than raw ones") {
    for (u64 c = 0; c < g.chunks(); ++c)
      for (u32 b = 0; b < g.bins(); ++b)
        for (u32 gr = 0; gr < g.groups().size(); ++gr) {
          MlocDirectory bad = d;
          const u64 raw = mloc_unit_raw_bytes(g, d.positions[g.position_entry(b, c)].count, gr);
          bad.units[g.unit(b, gr, c)].stored = u32(raw + 1);
          INFO("bin " << b << " group " << gr << " chunk " << c);
          CHECK_FALSE(reencode(bad).has_value());
          bad.units[g.unit(b, gr, c)].stored = u32(raw);
          CHECK(reencode(bad).has_value());
        }
    for (std::size_t i = 0; i < d.positions.size(); ++i) {
      MlocDirectory bad = d;
      bad.positions[i].stored = bad.positions[i].raw + 1;
      CHECK_FALSE(reencode(bad).has_value());
    }
  }
  SECTION("entry tables that disagree with the grid") {
    MlocDirectory bad = d;
    bad.positions.pop_back();
    CHECK_FALSE(reencode(bad).has_value());
    bad = d;
    bad.units.push_back({});
    CHECK_FALSE(reencode(bad).has_value());
    bad = d;
    bad.bins = 4;  // the tables are sized for 3 bins
    CHECK_FALSE(reencode(bad).has_value());
    bad = d;
    bad.float64 = false;  // 8 byte groups, the tables hold 7
    CHECK_FALSE(reencode(bad).has_value());
  }
  SECTION("headers no grid accepts") {
    MlocDirectory bad = d;
    bad.priority = {MlocLevel::Value, MlocLevel::Value, MlocLevel::Space};
    CHECK_FALSE(reencode(bad).has_value());
    bad = d;
    bad.priority = {MlocLevel('v'), MlocLevel::Precision, MlocLevel::Space};
    CHECK_FALSE(reencode(bad).has_value());
    bad = d;
    bad.bins = 0;
    bad.bin_lower.clear();
    bad.positions.clear();
    bad.units.clear();
    CHECK_FALSE(reencode(bad).has_value());
    bad = d;
    bad.chunk = {4, 0};
    CHECK_FALSE(reencode(bad).has_value());
    bad = d;
    bad.chunk = {4};
    CHECK_FALSE(reencode(bad).has_value());
    bad = d;
    bad.shape.clear();
    bad.chunk.clear();
    CHECK_FALSE(reencode(bad).has_value());
    bad = d;
    bad.itemsize = 0;
    CHECK_FALSE(reencode(bad).has_value());
    bad = d;
    bad.bin_lower.push_back(1);  // more lower bounds than bins
    CHECK_FALSE(reencode(bad).has_value());
  }
  SECTION("single corrupted bytes: rejected, or a directory that satisfies the grid") {
    // Offsets 18 and 19 are the high bytes of itemsize: corrupting them asks
    // MlocGrid for 2^24..2^32 byte groups, which it builds before its unit
    // limit rejects them (hundreds of MB to tens of GB), so they are left out.
    std::size_t accepted = 0;
    for (std::size_t i = 0; i < good.size(); ++i) {
      if (i == 18 || i == 19) continue;
      std::string s = good;
      s[i] = char(s[i] ^ 0xFF);
      auto back = decode_both(s, 512);
      if (!back) continue;
      ++accepted;
      INFO("byte " << i);
      check_satisfies_grid(*back);
    }
    // The opaque fields (zstd level, value type, bin bounds, checksums) are
    // not the decoder's to judge: corrupting them is accepted.
    CHECK(accepted >= 4 + 4 + 3 * 8 + d.positions.size() * 4 + d.units.size() * 4);
  }
}

TEST_CASE("mloc: directory version 2 leaves out empty (bin, chunk)s; version 1 still decodes", "[mloc]") {
  std::mt19937_64 rng(77);
  for (const std::string& text : all_priority_texts()) {
    INFO(text);
    const MlocDirectory d = make_directory(rng, priority_of(text), true);
    const MlocGrid g = d.grid();
    const u64 np = d.positions.size(), nu = d.units.size(), G = g.groups().size();
    const std::vector<bool> present = d.present();
    u64 n = 0;
    for (u64 e = 0; e < np; ++e) {
      CHECK(present[e] == (d.positions[e].count != 0));
      n += present[e];
    }
    REQUIRE(n < np);  // the fixture leaves bins empty
    MlocDirectory v1 = d;
    v1.version = 1;
    const std::string dense = v1.encode(), sparse = d.encode();
    u32 version = 0;
    std::memcpy(&version, sparse.data() + 8, 4);
    CHECK(version == 2);
    std::memcpy(&version, dense.data() + 8, 4);
    CHECK(version == 1);
    CHECK(sparse.size() == dense.size() - np * sizeof(MlocPositionEntry) - nu * sizeof(MlocUnitEntry) +
                               (np + 7) / 8 + n * (sizeof(MlocPositionEntry) + G * sizeof(MlocUnitEntry)));
    for (u32 sector : {512u, 4096u}) {
      MlocDirectory located = d, located_v1 = v1;
      located.locate(sector);
      located_v1.locate(sector);
      CHECK(located.header_bytes == sparse.size());
      auto back = decode_both(sparse, sector);
      REQUIRE(back.has_value());
      check_same(*back, located);
      CHECK(back->encode() == sparse);
      auto back_v1 = decode_both(dense, sector);
      REQUIRE(back_v1.has_value());
      check_same(*back_v1, located_v1);
      CHECK(back_v1->version == 1);
      CHECK(back_v1->encode() == dense);
      // The same pieces either way, after the header.
      for (std::size_t u = 0; u < nu; ++u)
        CHECK(back->unit_offset(u) - back->positions_start == back_v1->unit_offset(u) - back_v1->positions_start);
    }
    // Every presence bit matters: flipping one changes how many entries
    // follow, or makes an absent (bin, chunk) present with counts that no
    // longer add up.
    const std::size_t bits_at = dense.size() - np * sizeof(MlocPositionEntry) - nu * sizeof(MlocUnitEntry);
    for (u64 e = 0; e < (np + 7) / 8 * 8; ++e) {
      std::string bad = sparse;
      bad[bits_at + e / 8] = char(std::uint8_t(bad[bits_at + e / 8]) ^ (1u << (e % 8)));
      INFO("bit " << e);
      CHECK_FALSE(decode_both(bad, 512).has_value());
    }
    // Any single corrupted byte: refused, or a directory the grid accepts.
    for (std::size_t i = 0; i < sparse.size(); ++i) {
      if (i == 18 || i == 19) continue;  // itemsize's high bytes: see the test above
      std::string bad = sparse;
      bad[i] = char(bad[i] ^ 0xFF);
      if (auto back = decode_both(bad, 512)) {
        INFO("byte " << i);
        check_satisfies_grid(*back);
      }
    }
  }
}
