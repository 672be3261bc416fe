// Superblock encoding and its corruption handling.
#include <catch2/catch.hpp>
#include <random>
#include <vector>

#include "fs/meta/superblock.h"

using namespace mmfs::fs;

namespace {
Superblock sample() {
  Superblock sb;
  for (int i = 0; i < 16; ++i) sb.uuid[i] = std::uint8_t(i * 7);
  sb.label = "data";
  sb.created_ns = 123456789;
  sb.volume_bytes = 1ull << 30;
  sb.meta_offset = 16384;
  sb.meta_length = 8 << 20;
  sb.data_first_lbn = 17000;
  sb.data_end_lbn = 2000000;
  sb.backup_offset = (1ull << 30) - 16384;
  sb.geometry_json = R"({"kind":"flash","sector_size":4096})";
  return sb;
}
}  // namespace

TEST_CASE("superblock round-trips", "[superblock]") {
  std::vector<std::byte> buf(kSuperblockBytes);
  encode_superblock(sample(), buf);
  SuperblockStatus st;
  auto sb = decode_superblock(buf, &st);
  REQUIRE(sb);
  CHECK(st == SuperblockStatus::Ok);
  CHECK(*sb == sample());
}

TEST_CASE("superblock: every single bit flip is detected", "[superblock]") {
  std::vector<std::byte> good(kSuperblockBytes);
  encode_superblock(sample(), good);
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
  Superblock newer = sample();
  newer.version = kFormatVersion + 1;
  encode_superblock(newer, buf);
  CHECK_FALSE(decode_superblock(buf, &st));
  CHECK(st == SuperblockStatus::NewerVersion);
  Superblock big = sample();
  big.geometry_json.assign(kSuperblockBytes, 'x');
  CHECK_THROWS_AS(encode_superblock(big, buf), std::length_error);
  Superblock inconsistent = sample();
  inconsistent.meta_offset = 0;
  encode_superblock(inconsistent, buf);
  CHECK_FALSE(decode_superblock(buf, &st));
  CHECK(st == SuperblockStatus::Malformed);
}
