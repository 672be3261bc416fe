// Superblock encoding and its corruption handling.
#include <catch2/catch.hpp>
#include <random>
#include <vector>

#include "fs/meta/superblock.h"
#include "tests/unit/support/meta_samples.h"

using namespace mmfs::fs;

TEST_CASE("superblock round-trips", "[superblock]") {
  std::vector<std::byte> buf(kSuperblockBytes);
  encode_superblock(testing::sample_superblock(), buf);
  SuperblockStatus st;
  auto sb = decode_superblock(buf, &st);
  REQUIRE(sb);
  CHECK(st == SuperblockStatus::Ok);
  CHECK(*sb == testing::sample_superblock());
}

TEST_CASE("superblock: every single bit flip is detected", "[superblock]") {
  std::vector<std::byte> good(kSuperblockBytes);
  encode_superblock(testing::sample_superblock(), good);
  std::mt19937_64 rng(1);
  for (int i = 0; i < 4000; ++i) {
    auto bad = good;
    std::size_t bit = i < 1000 ? std::size_t(i) : rng() % (kSuperblockBytes * 8);  // all of the header, then anywhere
    bad[bit / 8] ^= std::byte(1u << (bit % 8));
    SuperblockStatus st;
    CHECK_FALSE(decode_superblock(bad, &st));
    CHECK(st != SuperblockStatus::Ok);
  }
}

TEST_CASE("superblock: wrong magic, newer version, oversize fields", "[superblock]") {
  std::vector<std::byte> buf(kSuperblockBytes, std::byte{0});
  SuperblockStatus st;
  CHECK_FALSE(decode_superblock(buf, &st));
  CHECK(st == SuperblockStatus::NotMmfs);
  Superblock newer = testing::sample_superblock();
  newer.version = kFormatVersion + 1;
  encode_superblock(newer, buf);
  CHECK_FALSE(decode_superblock(buf, &st));
  CHECK(st == SuperblockStatus::NewerVersion);
  Superblock big = testing::sample_superblock();
  big.geometry_json.assign(kSuperblockBytes, 'x');
  CHECK_THROWS_AS(encode_superblock(big, buf), std::length_error);
  Superblock inconsistent = testing::sample_superblock();
  inconsistent.meta_offset = 0;
  encode_superblock(inconsistent, buf);
  CHECK_FALSE(decode_superblock(buf, &st));
  CHECK(st == SuperblockStatus::Malformed);
}
