// [fuzz] fs/meta/meta_codec: mutants of the metadata store's on-disk
// structures (region header, log chunks, checkpoints) through their
// decoders, the trust boundary of a corrupt volume. Most mutants are
// re-sealed after mutation (header checksum, and for payload mutants the
// payload's length, hash and counts too) so that they reach the checks
// behind the checksums. What decodes must encode back to the same bytes,
// and a region header its geometry check passes must describe areas inside
// its copy, aligned and apart.
#include <catch2/catch.hpp>
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "fs/meta/meta_codec.h"
#include "fs/meta/meta_store.h"
#include "tests/unit/support/fuzz_support.h"
#include "tests/unit/support/meta_samples.h"

using namespace mmfs::fs;
using namespace mmfs::fs::meta;
using namespace mmfs::testing::fuzz;

namespace {

std::uint64_t get64(const std::string& s, std::size_t at) {
  std::uint64_t v;
  std::memcpy(&v, s.data() + at, 8);
  return v;
}
void put64(std::string& s, std::size_t at, std::uint64_t v) { std::memcpy(s.data() + at, &v, 8); }
std::span<std::byte> writable(std::string& s) { return std::as_writable_bytes(std::span(s.data(), s.size())); }

// Header checksum: XXH3 of bytes [0, 72) at 72.
void seal(std::string& s) {
  if (s.size() >= 80) put64(s, 72, XXH3_64bits(s.data(), 72));
}

// Mutants of a structure of an 80-byte header and a payload: as mutated,
// re-sealed, or with the payload mutated and its length and hash (and, for
// checkpoints, `count_at`'s entry count when given) made to match.
std::string mutant(Mutator& m, const std::string& valid, bool payload_hash, std::size_t count_at = 0) {
  const std::size_t mode = m.below(8);
  if (mode == 0) return m.mutate(valid);
  std::string s;
  if (mode <= 3 || !payload_hash || valid.size() < 80) {
    s = m.mutate(valid);
  } else {
    std::string header = valid.substr(0, 80);
    if (mode == 7) header = m.mutate(header).substr(0, 80);
    header.resize(80, '\0');
    const std::string payload = m.mutate(valid.substr(80, get64(valid, 56)));
    put64(header, 56, payload.size());
    put64(header, 64, XXH3_64bits(payload.data(), payload.size()));
    if (count_at && mode == 5) put64(header, count_at, get64(header, count_at) + (m.below(2) ? 1 : ~0ull));
    s = header + payload + std::string(m.below(3) * 512, '\0');
  }
  seal(s);
  return s;
}

std::string encoded(const RegionHeader& h) {
  std::string s(4096, '\0');
  encode_region_header(h, writable(s));
  return s;
}

std::string chunk(std::uint64_t first, const std::vector<WriteBatch>& batches) {
  std::string payload;
  for (std::size_t i = 0; i < batches.size(); ++i) append_log_batch(payload, first + i, batches[i]);
  ChunkHeader h{0xabcdef, 3, 17, 8192, first, first + batches.size() - 1, payload.size(),
                XXH3_64bits(payload.data(), payload.size())};
  std::string s(80, '\0');
  encode_chunk_header(h, writable(s));
  return s + payload;
}

std::string checkpoint(const StateMap& state) {
  std::string s(checkpoint_bytes(state), '\0');
  encode_checkpoint(CheckpointHeader{0xabcdef, 9, 4096, 18, 77, 0, 0, 0}, state, writable(s));
  return s;
}

}  // namespace

TEST_CASE("fuzz: region headers", "[fuzz][meta_codec]") {
  RegionHeader v1 = mmfs::fs::testing::sample_region_v2();
  v1.version = 1;
  RegionHeader big = mmfs::fs::testing::sample_region_v2();
  big.region_length = 1ull << 40;
  big.log_length = (1ull << 39) - 4096 * 33;
  Mutator mutator(seed_of("decode_region_header"), {encoded(mmfs::fs::testing::sample_region_v2()), encoded(v1), encoded(big)});
  Tally tally("decode_region_header");
  for (std::size_t i = 0, n = iterations(10000); i < n; ++i) {
    std::string s = mutator.mutate(encoded(i % 2 ? mmfs::fs::testing::sample_region_v2() : big).substr(0, 80)) + std::string(4016, '\0');
    if (i % 4) seal(s);
    tally.run(s, [&] {
      auto h = decode_region_header(bytes_of(s));
      if (!h) {
        tally.failed();
        return;
      }
      tally.parsed();
      tally.check(encoded(*h).substr(0, 80) == s.substr(0, 80), "does not encode back to its bytes", s);
      const std::uint32_t device_block = i % 3 ? 4096 : 512;
      const std::string why = check_region_geometry(*h, device_block, h->region_length);
      (void)log_window(*h, get64(s, 16));
      if (!why.empty()) return;
      const std::uint64_t bs = h->block_size, span = h->copy_length();
      bool ok = bs == device_block && span >= 8 * bs && h->copies() * span <= h->region_length;
      const std::uint64_t offs[] = {h->slot_offset[0], h->slot_offset[1], h->log_offset};
      const std::uint64_t lens[] = {h->slot_length, h->slot_length, h->log_length};
      for (int a = 0; a < 3; ++a) {
        ok = ok && offs[a] % bs == 0 && lens[a] % bs == 0 && offs[a] >= bs && offs[a] <= span && lens[a] <= span - offs[a];
        for (int b = 0; b < a; ++b) ok = ok && (offs[a] + lens[a] <= offs[b] || offs[b] + lens[b] <= offs[a]);
      }
      tally.check(ok, "a geometry passed the check with areas outside, unaligned or overlapping", s);
      tally.check(log_window(*h, get64(s, 16)) <= h->log_length, "a log window beyond the log", s);
    });
  }
  tally.finish();
}

TEST_CASE("fuzz: log chunks", "[fuzz][meta_codec]") {
  WriteBatch a, b, c;
  a.put("inode/1", std::string(40, 'x'));
  a.del("dirent/1/old");
  b.put("k", "");
  c.put(std::string(200, 'k'), std::string(3, '\0'));
  c.del("");
  const std::vector<std::string> corpus = {chunk(1, {a}), chunk(5, {a, b, c}), chunk(1ull << 40, {c, b})};
  Mutator mutator(seed_of("decode_chunk"), corpus);
  Tally tally("decode_chunk");
  for (std::size_t i = 0, n = iterations(15000); i < n; ++i) {
    const std::string s = mutant(mutator, corpus[i % corpus.size()], true);
    tally.run(s, [&] {
      auto h = decode_chunk_header(bytes_of(s));
      auto ch = decode_chunk(bytes_of(s));
      if (!ch) {
        tally.failed();
        return;
      }
      tally.parsed();
      tally.check(h && h->payload_length == ch->header.payload_length, "decode_chunk without its header", s);
      const ChunkHeader& x = ch->header;
      std::string payload;
      bool ok = x.first_batch >= 1 && ch->batches.size() == x.last_batch - x.first_batch + 1;
      for (std::size_t k = 0; ok && k < ch->batches.size(); ++k) {
        ok = ch->batches[k].sequence == x.first_batch + k;
        append_log_batch(payload, ch->batches[k].sequence, ch->batches[k].batch);
      }
      tally.check(ok, "batches not first..last in order", s);
      tally.check(payload == s.substr(80, x.payload_length), "the batches do not encode back to the payload", s);
      std::string header(80, '\0');
      encode_chunk_header(x, writable(header));
      tally.check(header == s.substr(0, 80), "the header does not encode back to its bytes", s);
    });
  }
  tally.finish();
}

TEST_CASE("fuzz: checkpoints", "[fuzz][meta_codec]") {
  const std::vector<std::string> corpus = {
      checkpoint({}), checkpoint({{"a", "1"}, {"b", ""}, {"inode/7", std::string(30, 'v')}}),
      checkpoint({{"", "empty key"}, {std::string(1, '\0'), "nul"}, {"\xff", std::string(300, 'z')}})};
  Mutator mutator(seed_of("decode_checkpoint"), corpus);
  Tally tally("decode_checkpoint");
  for (std::size_t i = 0, n = iterations(15000); i < n; ++i) {
    const std::string s = mutant(mutator, corpus[i % corpus.size()], true, 48);
    tally.run(s, [&] {
      auto h = decode_checkpoint_header(bytes_of(s));
      auto ck = decode_checkpoint(bytes_of(s));
      if (!ck) {
        tally.failed();
        return;
      }
      tally.parsed();
      tally.check(h.has_value(), "decode_checkpoint without its header", s);
      tally.check(ck->header.entry_count == ck->state.size(), "entry count differs from the state", s);
      std::string again(checkpoint_bytes(ck->state), '\0');
      encode_checkpoint(ck->header, ck->state, writable(again));
      tally.check(again == s.substr(0, again.size()), "does not encode back to its bytes", s);
    });
  }
  tally.finish();
}
