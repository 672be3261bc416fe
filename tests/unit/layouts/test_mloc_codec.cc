// MLOC's unit codec (layouts/mloc_codec.h) against brute force: the padding
// of edge bricks, the split of a chunk into position lists and byte planes
// and its scatter back (with PLoD), packing, position bitmaps and checksums.
// MLOC's structure is in test_mloc.cc, the image directory in
// test_mloc_directory.cc.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "layouts/mloc.h"
#include "layouts/mloc_codec.h"
#include "tests/unit/support/mloc_test_support.h"
#include "tests/unit/support/stderr_capture.h"

using namespace mmfs::layouts;
using namespace mmfs::layouts::testing;
using mmfs::testing::StderrCapture;

// ---------------------------------------------------------------- split / scatter

TEST_CASE("mloc: padding marks exactly the brick positions outside the array", "[mloc]") {
  for (const auto& [shape, chunk] : std::vector<std::pair<Shape, Shape>>{
           {{37, 50}, {8, 16}}, {{9, 10, 11}, {4, 4, 4}}, {{1000}, {64}}, {{16, 16}, {4, 4}}}) {
    MlocGrid g = make_grid(shape, 4, chunk, 2);
    const std::size_t n = g.dims();
    const u64 brick = product(g.chunk());
    for (u64 r = 0; r < g.chunks(); ++r) {
      std::vector<u32> bins(brick, 1);
      mloc_mark_padding(g, r, bins.data());
      auto c = g.coords_of(r);
      u64 i = 0, inside = 0;
      for_each_index(g.chunk(), [&](const Shape& x) {
        bool in = true;
        for (std::size_t d = 0; d < n; ++d) in = in && c[d] * chunk[d] + x[d] < shape[d];
        INFO("rank " << r << " brick index " << i);
        CHECK(bins[i] == (in ? 1u : kMlocNoBin));
        inside += in;
        ++i;
      });
      CHECK(inside == g.chunk_elements(r));
    }
  }
}

TEST_CASE("mloc: split then scatter reproduces a chunk; planes and positions match brute force; PLoD", "[mloc]") {
  std::mt19937_64 rng(0x4d4c4f43);
  const Shape shape{37, 50}, chunk{8, 16};
  for (u32 item : {1u, 2u, 4u, 8u}) {
    for (bool f64 : {false, true}) {
      for (u32 B : {1u, 3u, 7u}) {
        MlocGrid g = make_grid(shape, item, chunk, B, kVMS, f64);
        const auto& groups = g.groups();
        const std::size_t G = groups.size();
        const u64 brick = product(g.chunk());
        MlocChunkSplit reused;  // split into chunk after chunk, as the encoder does
        for (u64 r = 0; r < g.chunks(); ++r) {
          INFO("itemsize " << item << " float64 " << f64 << " bins " << B << " rank " << r);
          const Bytes elems = random_bytes(rng, brick * item);
          const std::vector<u32> bins = random_bins(g, r, B, rng);
          MlocChunkSplit split;
          mloc_split_chunk(g, elems.data(), brick, bins.data(), &split);
          mloc_split_chunk(g, elems.data(), brick, bins.data(), &reused);
          CHECK((reused.positions == split.positions && reused.planes == split.planes));
          REQUIRE(split.positions.size() == B);
          REQUIRE(split.planes.size() == B * G);

          u64 held = 0;
          for (u32 b = 0; b < B; ++b) {
            std::vector<u32> want;
            for (u64 i = 0; i < brick; ++i)
              if (bins[i] == b) want.push_back(u32(i));
            REQUIRE(split.positions[b] == want);
            const std::size_t nb = want.size();
            held += nb;
            for (std::size_t gi = 0; gi < G; ++gi) {
              const Bytes& plane = split.planes[b * G + gi];
              REQUIRE(plane.size() == nb * groups[gi].bytes);
              REQUIRE(plane.size() == mloc_unit_raw_bytes(g, nb, u32(gi)));
              for (u32 j = 0; j < groups[gi].bytes; ++j)
                for (std::size_t k = 0; k < nb; ++k)
                  REQUIRE(plane[j * nb + k] == elems[std::size_t(want[k]) * item + item - 1 - (groups[gi].first_rank + j)]);
            }
          }
          CHECK(held == g.chunk_elements(r));

          // Scatter the first Gk groups of every bin: exactly the kept most
          // significant bytes of the held elements come back, their other
          // bytes are 0, and the padding is not touched.
          for (std::size_t Gk = 1; Gk <= G; ++Gk) {
            Bytes out(elems.size(), std::byte{0xAB});
            for (u32 b = 0; b < B; ++b) {
              std::vector<const std::byte*> planes;
              for (std::size_t gi = 0; gi < G; ++gi) planes.push_back(split.planes[b * G + gi].data());
              mloc_scatter(g, split.positions[b], u32(Gk), planes.data(), out.data());
            }
            u32 kept = 0;
            for (std::size_t gi = 0; gi < Gk; ++gi) kept += groups[gi].bytes;
            CHECK(mloc_groups_for_bytes(groups, kept) == Gk);
            bool ok = true;
            for (u64 i = 0; i < brick; ++i)
              for (u32 y = 0; y < item; ++y) {
                const u32 rank = item - 1 - y;  // significance of byte y (little endian)
                const bool held_here = bins[i] != kMlocNoBin;
                const std::byte want = !held_here      ? std::byte{0xAB}
                                       : rank < kept ? elems[i * item + y]
                                                     : std::byte{0};
                ok = ok && out[i * item + y] == want;
              }
            INFO("groups scattered " << Gk << " bytes kept " << kept);
            CHECK(ok);
            // One element at a time (a gather's way): the scattered bytes.
            std::uint64_t unequal = 0;
            for (u32 b = 0; b < B; ++b) {
              std::vector<const std::byte*> planes;
              for (std::size_t gi = 0; gi < G; ++gi) planes.push_back(split.planes[b * G + gi].data());
              const MlocElementReader element(g, split.positions[b].size(), u32(Gk), planes.data());
              Bytes one(item, std::byte{0xCD});
              for (std::size_t k = 0; k < split.positions[b].size(); ++k) {
                element.write(k, one.data());
                unequal += !std::equal(one.begin(), one.end(), out.begin() + std::size_t(split.positions[b][k]) * item);
              }
            }
            CHECK(unequal == 0);
            if (Gk == G) {
              // The full scatter is the chunk itself on the held positions.
              bool same = true;
              for (u64 i = 0; i < brick; ++i)
                if (bins[i] != kMlocNoBin)
                  same = same && std::equal(out.begin() + i * item, out.begin() + (i + 1) * item,
                                            elems.begin() + i * item);
              CHECK(same);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("mloc: split rejects a bin out of range", "[mloc]") {
  MlocGrid g = make_grid({16}, 4, {16}, 3);
  Bytes elems(16 * 4, std::byte{7});
  std::vector<u32> bins(16, 0);
  bins[5] = 3;
  MlocChunkSplit split;
  CHECK_THROWS_AS(mloc_split_chunk(g, elems.data(), 16, bins.data(), &split), std::invalid_argument);
}

// ---------------------------------------------------------------- packing

TEST_CASE("mloc: pack compresses only when it shrinks by an eighth, and unpack inverts it", "[mloc]") {
  std::mt19937_64 rng(42);
  const Bytes constant(4096, std::byte{0x5a});
  const Bytes noise = random_bytes(rng, 4096);

  CHECK(mloc_pack(constant, 0) == constant);
  const Bytes packed = mloc_pack(constant, 3);
  CHECK(packed.size() < constant.size());
  Bytes out(4096);
  REQUIRE(mloc_unpack(packed, 4096, out.data()));
  CHECK(out == constant);

  const Bytes stored = mloc_pack(noise, 3);
  CHECK(stored.size() == noise.size());
  CHECK(stored == noise);
  std::fill(out.begin(), out.end(), std::byte{0});
  REQUIRE(mloc_unpack(stored, 4096, out.data()));
  CHECK(out == noise);

  // zstd shrinks noise with a run of 5 % zeros by about 5 %: not worth a
  // decompression on every read. A run of 25 % is.
  for (auto [zeros, compressed] : {std::pair{205, false}, std::pair{1024, true}}) {
    Bytes mostly = noise;
    std::fill(mostly.begin(), mostly.begin() + zeros, std::byte{0});
    INFO("zeros " << zeros);
    CHECK((mloc_pack(mostly, 3).size() < mostly.size()) == compressed);
  }

  SECTION("round trips over sizes, contents and levels") {
    for (std::size_t size : {0u, 1u, 63u, 64u, 65u, 100u, 1000u, 5000u}) {
      for (int kind = 0; kind < 3; ++kind) {
        Bytes raw = kind == 0 ? Bytes(size, std::byte{1}) : random_bytes(rng, size);
        if (kind == 2)
          for (std::size_t i = 0; i < size; i += 2) raw[i] = std::byte{0};
        for (int level : {0, 1, 3}) {
          INFO("size " << size << " kind " << kind << " level " << level);
          const Bytes s = mloc_pack(raw, level);
          CHECK(s.size() <= raw.size());
          if (level == 0) CHECK(s == raw);
          Bytes back(size + 1, std::byte{0xEE});
          REQUIRE(mloc_unpack(s, size, back.data()));
          CHECK(std::equal(raw.begin(), raw.end(), back.begin()));
          CHECK(back[size] == std::byte{0xEE});  // nothing written past raw_bytes
        }
      }
    }
  }

  SECTION("unpack rejects wrong sizes and garbage") {
    Bytes big(8192);
    CHECK_FALSE(mloc_unpack(packed, 4095, big.data()));
    CHECK_FALSE(mloc_unpack(packed, 4097, big.data()));
    CHECK_FALSE(mloc_unpack(packed, 0, big.data()));
    CHECK_FALSE(mloc_unpack(stored, 4095, big.data()));  // stored larger than raw
    // A truncated frame.
    CHECK_FALSE(mloc_unpack(std::span<const std::byte>(packed.data(), packed.size() - 1), 4096, big.data()));
    CHECK_FALSE(mloc_unpack(std::span<const std::byte>(packed.data(), 4), 4096, big.data()));
    CHECK_FALSE(mloc_unpack(std::span<const std::byte>(), 4096, big.data()));
    for (int t = 0; t < 200; ++t) {
      const Bytes junk = random_bytes(rng, 1 + rng() % 200);
      INFO("trial " << t);
      CHECK_FALSE(mloc_unpack(junk, 4096, big.data()));
    }
    // A corrupted frame never reports success with the wrong bytes.
    for (std::size_t i = 0; i < packed.size(); ++i) {
      Bytes bad = packed;
      bad[i] ^= std::byte{0xFF};
      Bytes o(4096);
      if (mloc_unpack(bad, 4096, o.data())) CHECK(o.size() == 4096);
    }
  }
}

// ---------------------------------------------------------------- position bitmaps

TEST_CASE("mloc: position lists round-trip through portable bitmaps; bad ones are rejected", "[mloc]") {
  std::mt19937_64 rng(7);
  std::vector<std::vector<u32>> lists;
  lists.push_back({});
  {
    std::vector<u32> dense;
    for (u32 i = 0; i < 10000; ++i) dense.push_back(i);
    for (u32 i = 20000; i < 30000; ++i) dense.push_back(i);
    for (u32 i : {65535u, 65536u, 65537u, 200000u}) dense.push_back(i);
    lists.push_back(dense);
  }
  {
    std::set<u32> s;
    while (s.size() < 300) s.insert(u32(rng()));
    s.insert(0xFFFFFFFFu);
    lists.push_back(std::vector<u32>(s.begin(), s.end()));
  }
  {
    std::set<u32> s;
    while (s.size() < 2000) s.insert(u32(rng() % 5000));
    lists.push_back(std::vector<u32>(s.begin(), s.end()));
  }
  lists.push_back({17});
  for (const auto& pos : lists) {
    const u64 n = pos.size();
    const u64 limit = pos.empty() ? 1 : u64(pos.back()) + 1;
    INFO("positions " << n << " limit " << limit);
    const Bytes enc = mloc_encode_positions(pos);
    std::vector<u32> out{99, 98};
    REQUIRE(mloc_decode_positions(enc, n, limit, &out));
    CHECK(out == pos);
    CHECK(mloc_decode_positions(enc, n, u64{1} << 32, &out));
    CHECK(out == pos);

    CHECK_FALSE(mloc_decode_positions(enc, n + 1, limit, &out));
    if (n > 0) {
      CHECK_FALSE(mloc_decode_positions(enc, n - 1, limit, &out));
      CHECK_FALSE(mloc_decode_positions(enc, n, limit - 1, &out));  // the last position is >= limit
      CHECK_FALSE(mloc_decode_positions(enc, n, 0, &out));
    }
    // Every truncation is refused, and without a word on stderr: the bytes
    // are checked before CRoaring (whose 0.2 parser prints a line for each
    // malformed bitmap, from the daemon too) sees them.
    StderrCapture quiet;
    for (std::size_t len = 0; len < enc.size(); ++len) {
      INFO("truncated to " << len);
      CHECK_FALSE(mloc_decode_positions(std::span<const std::byte>(enc.data(), len), n, limit, &out));
    }
    CHECK(quiet.text().empty());
    CHECK_FALSE(mloc_decode_positions(std::span<const std::byte>(enc.data(), enc.size() - 1), n, limit, &out));
    Bytes longer = enc;
    longer.push_back(std::byte{0});
    CHECK_FALSE(mloc_decode_positions(longer, n, limit, &out));
    // Corrupted bytes: rejected, or decoded into a valid list (never a crash,
    // never a list that breaks the contract).
    for (std::size_t i = 0; i < enc.size(); i += i < 48 ? 1 : 89) {
      Bytes bad = enc;
      bad[i] ^= std::byte{0xA5};
      std::vector<u32> o;
      if (mloc_decode_positions(bad, n, limit, &o)) {
        REQUIRE(o.size() == n);
        for (std::size_t k = 0; k < o.size(); ++k) {
          CHECK(o[k] < limit);
          if (k > 0) CHECK(o[k - 1] < o[k]);
        }
      }
    }
  }
  StderrCapture quiet;
  for (int t = 0; t < 100; ++t) {
    const Bytes junk = random_bytes(rng, rng() % 100);
    std::vector<u32> o;
    INFO("trial " << t);
    CHECK_FALSE(mloc_decode_positions(junk, 1 + rng() % 8, 1000, &o));
  }
  CHECK(quiet.text().empty());
}

// ---------------------------------------------------------------- assemble and checksums

TEST_CASE("mloc: assemble writes each kept group's bytes at their rank, most significant first", "[mloc]") {
  std::mt19937_64 rng(0x61737365);
  MlocGrid g = make_grid({10, 10}, 4, {4, 4}, 1);
  const auto& groups = g.groups();
  REQUIRE(!groups.empty());
  const u64 count = 37;
  std::vector<u32> values(count);
  for (auto& v : values) v = u32(rng());
  // planes[k]: byte j of group k of every element in turn, rank 0 the value's most significant byte.
  std::vector<Bytes> planes;
  for (const MlocByteGroup& group : groups) {
    Bytes p(group.bytes * count);
    for (u32 j = 0; j < group.bytes; ++j)
      for (u64 i = 0; i < count; ++i)
        p[j * count + i] = std::byte((values[i] >> (8 * (3 - (group.first_rank + j)))) & 0xFF);
    planes.push_back(std::move(p));
  }
  std::vector<const std::byte*> ptrs;
  for (const Bytes& p : planes) ptrs.push_back(p.data());
  for (u32 kept = 0; kept <= groups.size(); ++kept) {
    INFO("groups kept " << kept);
    Bytes out(count * 4, std::byte{0xAB});
    mloc_assemble(g, count, kept, ptrs.data(), out.data());
    u32 kept_bytes = 0;
    for (u32 k = 0; k < kept; ++k) kept_bytes += groups[k].bytes;
    for (u64 i = 0; i < count; ++i)
      for (u32 rank = 0; rank < 4; ++rank) {
        const std::size_t at = i * 4 + (3 - rank);  // little-endian: rank 0 is the last byte
        const std::byte want = rank < kept_bytes ? std::byte((values[i] >> (8 * (3 - rank))) & 0xFF) : std::byte{0xAB};
        CHECK(out[at] == want);
      }
  }
}

TEST_CASE("mloc: checksums are XXH3's low 32 bits, stored in images, and see every flipped bit", "[mloc]") {
  // XXH3-64 of no bytes is 2d06800538d394c2 (the published test vector).
  CHECK(mloc_checksum({}) == 0x38d394c2u);
  const std::string text = "mmfs";
  CHECK(mloc_checksum(std::as_bytes(std::span(text.data(), text.size()))) == 0x2d9489d3u);
  std::mt19937_64 rng(5);
  Bytes b = random_bytes(rng, 4096);
  const u32 base = mloc_checksum(b);
  CHECK(mloc_checksum(b) == base);
  for (int i = 0; i < 200; ++i) {
    const std::size_t bit = rng() % (b.size() * 8);
    b[bit / 8] ^= std::byte(1u << (bit % 8));
    CHECK(mloc_checksum(b) != base);
    b[bit / 8] ^= std::byte(1u << (bit % 8));
  }
  CHECK(mloc_checksum(std::span(b).first(4095)) != base);
}
