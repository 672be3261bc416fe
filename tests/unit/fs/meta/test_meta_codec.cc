// The metadata store's on-disk encodings (fs/meta/meta_codec.h): region
// headers, log chunks and checkpoints round-trip; every flipped bit of a
// header is caught; a region's geometry is checked against its device;
// the log window; and the decoders refuse malformed input without crashing.
#include <catch2/catch.hpp>
#include <xxhash.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "fs/meta/meta_codec.h"
#include "fs/meta/meta_store.h"
#include "tests/unit/support/meta_samples.h"

using namespace mmfs::fs;

namespace {

bool same(const meta::RegionHeader& a, const meta::RegionHeader& b) {
  return a.version == b.version && a.block_size == b.block_size && a.nonce == b.nonce &&
         a.region_length == b.region_length && a.slot_offset[0] == b.slot_offset[0] &&
         a.slot_offset[1] == b.slot_offset[1] && a.slot_length == b.slot_length && a.log_offset == b.log_offset &&
         a.log_length == b.log_length;
}

}  // namespace

TEST_CASE("meta codec: a region header round-trips and any flipped bit is refused", "[meta][codec]") {
  const meta::RegionHeader h = testing::sample_region_v2();
  std::vector<std::byte> block(4096, std::byte{0});
  meta::encode_region_header(h, block);
  auto back = meta::decode_region_header(block);
  REQUIRE(back);
  CHECK(same(*back, h));
  CHECK(back->copies() == 2);
  CHECK(back->copy_stride() == 512 * 1024);
  CHECK(back->copy_length() == 512 * 1024);
  for (std::size_t bit = 0; bit < meta::kRegionHeaderSize * 8; ++bit) {
    std::vector<std::byte> bad = block;
    bad[bit / 8] ^= std::byte(1u << (bit % 8));
    INFO("bit " << bit);
    CHECK_FALSE(meta::decode_region_header(bad));
  }
  // Version 1: one copy spanning the region.
  meta::RegionHeader v1 = h;
  v1.version = 1;
  CHECK(v1.copies() == 1);
  CHECK(v1.copy_stride() == 0);
  CHECK(v1.copy_length() == 1 << 20);
}

TEST_CASE("meta codec: a region's geometry must match its device and keep its areas apart", "[meta][codec]") {
  const meta::RegionHeader h = testing::sample_region_v2();
  CHECK(meta::check_region_geometry(h, 4096, 1 << 20).empty());
  CHECK(meta::check_region_geometry(h, 512, 1 << 20) == "block size 4096 does not match the device's 512");
  CHECK(meta::check_region_geometry(h, 4096, 2 << 20) ==
        "region length 1048576 does not match the expected 2097152");
  auto with = [&](auto edit) {
    meta::RegionHeader x = h;
    edit(x);
    return meta::check_region_geometry(x, 4096, 1 << 20);
  };
  CHECK(with([](auto& x) { x.version = 3; }) == "unsupported version");
  CHECK(with([](auto& x) { x.version = 0; }) == "unsupported version");
  CHECK(with([](auto& x) { x.log_offset += 512; }) == "areas outside the region or not block-aligned");
  CHECK(with([](auto& x) { x.log_length = 4096 * 200; }) == "areas outside the region or not block-aligned");
  CHECK(with([](auto& x) { x.slot_length = 0; }) == "areas outside the region or not block-aligned");
  CHECK(with([](auto& x) { x.log_length = 4096; }) == "areas too small");
  CHECK(with([](auto& x) { x.slot_offset[1] = 4096 * 10; }) == "areas overlap");
  CHECK(with([](auto& x) { x.slot_offset[0] = 0; }) == "areas overlap");  // over the header block
  CHECK(with([](auto& x) {
          x.region_length = 4096 * 14;  // copies of 7 blocks
        }).find("does not match") != std::string::npos);
  meta::RegionHeader tiny = h;
  tiny.region_length = 4096 * 14;
  CHECK(meta::check_region_geometry(tiny, 4096, 4096 * 14) == "region too small for its copies");
}

TEST_CASE("meta codec: the log window is twice the checkpoint, at least 4 MiB, at most the log", "[meta][codec]") {
  meta::RegionHeader h = testing::sample_region_v2();
  h.log_length = 64 << 20;
  CHECK(meta::log_window(h, 100) == meta::kMinLogWindow);
  CHECK(meta::log_window(h, 3 << 20) == 6 << 20);
  CHECK(meta::log_window(h, (3 << 20) + 1) == (6 << 20) + 2 * 4096);  // whole blocks
  CHECK(meta::log_window(h, 40 << 20) == 64 << 20);
  h.log_length = 1 << 20;
  CHECK(meta::log_window(h, 100) == 1 << 20);
  h.version = 1;
  h.log_length = 64 << 20;
  CHECK(meta::log_window(h, 100) == 64 << 20);  // version 1: the whole log
}

TEST_CASE("meta codec: log batches' bytes; chunk and checkpoint headers round-trip", "[meta][codec]") {
  WriteBatch b;
  b.put("i/1", "value");
  b.del("d/1/x");
  b.put("", "");
  std::string payload;
  meta::append_log_batch(payload, 41, b);
  // sequence u64, op count u32; per op: kind u8, key length u32, key, (put) value length u32, value.
  CHECK(payload.size() == 8 + 4 + (1 + 4 + 3 + 4 + 5) + (1 + 4 + 5) + (1 + 4 + 0 + 4 + 0));
  CHECK(meta::log_batch_bytes(b) == payload.size());
  CHECK(meta::log_batch_bytes(WriteBatch{}) == 12);
  std::uint64_t seq = 0;
  std::memcpy(&seq, payload.data(), 8);
  CHECK(seq == 41);  // little-endian

  meta::ChunkHeader c;
  c.nonce = 5;
  c.epoch = 6;
  c.chunk_seq = 7;
  c.position = 8192;
  c.first_batch = c.last_batch = 41;
  c.payload_length = payload.size();
  c.payload_hash = XXH3_64bits(payload.data(), payload.size());
  std::vector<std::byte> chunk(meta::kChunkHeaderSize + payload.size() + 100, std::byte{0x77});
  meta::encode_chunk_header(c, chunk);
  std::memcpy(chunk.data() + meta::kChunkHeaderSize, payload.data(), payload.size());
  auto head = meta::decode_chunk_header(chunk);
  REQUIRE(head);
  CHECK(head->epoch == 6);
  CHECK(head->position == 8192);
  auto whole = meta::decode_chunk(chunk);  // the bytes may run on past the chunk
  REQUIRE(whole);
  REQUIRE(whole->batches.size() == 1);
  CHECK(whole->batches[0].sequence == 41);
  CHECK(whole->batches[0].batch.size() == 3);
  // A chunk claiming batches the payload does not hold is refused.
  c.last_batch = 42;
  meta::encode_chunk_header(c, chunk);
  CHECK(meta::decode_chunk_header(chunk));
  CHECK_FALSE(meta::decode_chunk(chunk));

  const meta::StateMap state{{"a", "1"}, {"bb", ""}, {"c", std::string(300, 'z')}};
  std::uint64_t entries = 0;
  for (const auto& [k, v] : state) entries += meta::checkpoint_entry_bytes(k.size(), v.size());
  CHECK(meta::checkpoint_bytes(state) == meta::kCheckpointHeaderSize + entries);
  CHECK(meta::checkpoint_bytes({}) == meta::kCheckpointHeaderSize);
  meta::CheckpointHeader ck;
  ck.nonce = 9;
  ck.sequence = 3;
  ck.last_batch = 41;
  std::vector<std::byte> out(meta::checkpoint_bytes(state));
  meta::encode_checkpoint(ck, state, out);
  auto back = meta::decode_checkpoint(out);
  REQUIRE(back);
  CHECK(back->state == state);
  CHECK(back->header.entry_count == 3);
  CHECK(back->header.sequence == 3);
  CHECK(back->header.payload_length == entries);
  CHECK(meta::decode_checkpoint_header(out)->last_batch == 41);
  CHECK_FALSE(meta::decode_checkpoint(std::span<const std::byte>(out).first(out.size() - 1)));
}

TEST_CASE("meta: decoders reject malformed input without crashing", "[meta][corrupt]") {
  std::mt19937_64 rng(5);
  auto seal = [](std::byte* p) {  // header checksum: XXH3 of bytes [0, 72) at 72
    const std::uint64_t h = XXH3_64bits(p, 72);
    std::memcpy(p + 72, &h, 8);  // little-endian host
  };
  auto set_u64 = [](std::byte* p, std::uint64_t v) { std::memcpy(p, &v, 8); };
  // A valid chunk to mutate.
  std::string payload;
  WriteBatch b1, b2;
  b1.put("i/1", "D");
  b1.del("x");
  b2.put("d/1/a", "2");
  meta::append_log_batch(payload, 7, b1);
  meta::append_log_batch(payload, 8, b2);
  std::vector<std::byte> chunk(meta::kChunkHeaderSize + payload.size());
  std::memcpy(chunk.data() + meta::kChunkHeaderSize, payload.data(), payload.size());
  meta::ChunkHeader h;
  h.nonce = 1, h.epoch = 1, h.chunk_seq = 3, h.first_batch = 7, h.last_batch = 8;
  h.payload_length = payload.size();
  h.payload_hash = XXH3_64bits(payload.data(), payload.size());
  meta::encode_chunk_header(h, chunk);
  auto c = meta::decode_chunk(chunk);
  REQUIRE(c.has_value());
  REQUIRE(c->batches.size() == 2);
  CHECK(c->batches[1].batch.ops()[0].key == "d/1/a");
  CHECK(c->batches[0].batch.ops()[1].is_put == false);
  CHECK(!meta::decode_chunk(std::span<const std::byte>(chunk).first(chunk.size() - 1)));

  meta::StateMap state{{"a", "1"}, {"b", std::string(100, 'x')}, {"c", ""}};
  std::vector<std::byte> ckpt(meta::checkpoint_bytes(state));
  meta::encode_checkpoint(meta::CheckpointHeader{}, state, ckpt);
  auto k = meta::decode_checkpoint(ckpt);
  REQUIRE(k.has_value());
  CHECK(k->state == state);

  int accepted = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    // Mutate the payload, then make the checksums right again so the parsers see it.
    std::vector<std::byte> m = (trial % 2 == 0) ? chunk : ckpt;
    const int n = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < n; ++i) {
      const std::size_t at = rng() % m.size();
      if (rng() % 2) {
        m[at] = static_cast<std::byte>(rng());
      } else if (at >= 8) {
        m[at] ^= std::byte{1};
      }
    }
    if (rng() % 3 == 0) m.resize(rng() % (m.size() + 1));
    if (m.size() >= 80) {
      if (rng() % 4 == 0) set_u64(m.data() + 56, rng() % 300);  // payload length
      const std::uint64_t plen = std::min<std::uint64_t>(
          m.size() - 80, [&] { std::uint64_t v; std::memcpy(&v, m.data() + 56, 8); return v; }());
      set_u64(m.data() + 64, XXH3_64bits(m.data() + 80, plen));
      seal(m.data());
    }
    const bool ok = trial % 2 == 0 ? meta::decode_chunk(m).has_value() : meta::decode_checkpoint(m).has_value();
    accepted += ok;
    (void)meta::decode_region_header(m);
  }
  INFO("accepted " << accepted);
  CHECK(accepted < 20000);
}
