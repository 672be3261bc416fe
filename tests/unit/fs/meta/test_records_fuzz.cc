// [fuzz] fs/meta/metadata and fs/meta/superblock: mutants of the typed
// records a volume holds (inodes, extent maps, inode numbers) and of the
// superblock, re-sealed after mutation so that they get past its checksum.
// A record that decodes encodes back to the same bytes (the superblock: to
// the same value); a decoded extent never runs past 2^64; a decoded
// superblock keeps its areas inside the volume and its members consistent.
#include <catch2/catch.hpp>
#include <xxhash.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "fs/meta/metadata.h"
#include "fs/meta/superblock.h"
#include "tests/unit/support/fuzz_support.h"
#include "tests/unit/support/meta_samples.h"

using namespace mmfs::fs;
using namespace mmfs::testing::fuzz;

namespace {

constexpr std::size_t kChecksumAt = kSuperblockBytes - 8;

Superblock members() {
  Superblock sb = mmfs::fs::testing::sample_superblock();
  sb.version = 2;
  sb.devices = 4;
  sb.member_index = 1;
  sb.member_bytes = 1ull << 28;
  sb.failed = {2};
  sb.meta_sets = true;
  return sb;
}

std::string encoded(const Superblock& sb) {
  std::string s(kSuperblockBytes, '\0');
  encode_superblock(sb, std::as_writable_bytes(std::span(s.data(), s.size())));
  return s;
}

void seal(std::string& s) {
  if (s.size() < kSuperblockBytes) return;
  const std::uint64_t sum = XXH3_64bits(s.data(), kChecksumAt);
  std::memcpy(s.data() + kChecksumAt, &sum, 8);
}

const std::string kMembersJson =
    R"({"devices":4,"failed":[2],"index":1,"member_bytes":268435456,"meta_sets":true,"raid":0})";

// The superblock of `sb` with `members` for its members' JSON (after the
// geometry JSON: u32 length at 160, the text at 164, then u32 length and the
// members' text), sealed.
std::string with_members_json(const Superblock& sb, const std::string& members) {
  const std::string s = encoded(sb);
  std::uint32_t json_len;
  std::memcpy(&json_len, s.data() + 160, 4);
  std::string out = s.substr(0, 164 + json_len);
  const auto n = std::uint32_t(members.size());
  out.append(reinterpret_cast<const char*>(&n), 4);
  out += members;
  out.resize(kSuperblockBytes, '\0');
  seal(out);
  return out;
}

bool sane(const Superblock& sb) {
  const unsigned __int128 meta_end = (unsigned __int128)sb.meta_offset + sb.meta_length;
  const unsigned __int128 backup_end = (unsigned __int128)sb.backup_offset + kSuperblockBytes;
  bool ok = sb.version >= 1 && sb.version <= kFormatVersion && sb.label.size() <= 63 &&
            sb.meta_offset >= kSuperblockBytes && sb.meta_length > 0 && meta_end <= sb.volume_bytes &&
            sb.data_first_lbn <= sb.data_end_lbn && backup_end <= sb.volume_bytes && sb.devices >= 1;
  if (sb.devices > 1) {
    ok = ok && sb.member_index < sb.devices && sb.raid <= 1;
    for (auto f : sb.failed) ok = ok && f < sb.devices;
  }
  return ok;
}

}  // namespace

TEST_CASE("fuzz: decode_superblock on mutated, re-sealed superblocks", "[fuzz][superblock]") {
  const std::vector<std::string> corpus = {encoded(mmfs::fs::testing::sample_superblock()), encoded(members())};
  std::vector<std::string> heads;
  for (const auto& s : corpus) heads.push_back(s.substr(0, 512));
  Mutator mutator(seed_of("decode_superblock"), heads,
                  {"\"devices\":", "\"index\":", "\"raid\":1", "\"failed\":[", "\"meta_sets\":true", "1e10", "-1"});
  Tally tally("decode_superblock");
  for (std::size_t i = 0, n = iterations(8000); i < n; ++i) {
    std::string s;
    if (i % 3 == 0) {  // boundary values in the offsets and lengths (u64s at 96 .. 152)
      s = corpus[i % 2];
      for (std::size_t k = 1 + mutator.below(2); k-- > 0;) {
        const std::size_t at = 96 + 8 * mutator.below(8);
        const auto values = interesting_values();
        std::uint64_t v = values[mutator.below(values.size())] - mutator.below(3) * kSuperblockBytes;
        std::memcpy(s.data() + at, &v, 8);
      }
    } else if (i % 3 == 1 && i % 2) {  // the members' JSON, mutated as JSON
      s = with_members_json(members(), mutate_json(kMembersJson, mutator.rng(),
                                                   {"devices", "index", "raid", "member_bytes", "failed", "meta_sets"}));
    } else {  // the fields and the JSON are in the first 512 bytes: mutate those, keep the rest
      s = mutator.next() + corpus[i % 2].substr(512);
      s.resize(i % 50 == 0 ? s.size() : std::size_t(kSuperblockBytes), '\0');
    }
    if (i % 8) seal(s);
    tally.run(s, [&] {
      SuperblockStatus status = SuperblockStatus::Ok;
      auto sb = decode_superblock(bytes_of(s), &status);
      if (!sb) {
        tally.failed();
        tally.check(status != SuperblockStatus::Ok && *to_string(status), "refused with status Ok", s);
        return;
      }
      tally.parsed();
      tally.check(status == SuperblockStatus::Ok, "accepted with a status other than Ok", s);
      tally.check(sane(*sb), "a superblock with areas outside the volume or members out of range", s);
      SuperblockStatus again_status;
      auto again = decode_superblock(bytes_of(encoded(*sb)), &again_status);
      tally.check(again && *again == *sb, "does not survive re-encoding", s);
    });
  }
  tally.finish();
}

TEST_CASE("fuzz: decode_superblock regressions", "[fuzz][superblock]") {
  // A backup copy at the very end of the address space: backup_offset +
  // kSuperblockBytes wrapped past 2^64 and passed the volume-size check.
  for (std::uint64_t backup : {~0ull - 100, ~0ull - kSuperblockBytes + 1, (1ull << 30) - kSuperblockBytes + 1}) {
    Superblock sb = mmfs::fs::testing::sample_superblock();
    sb.backup_offset = backup;
    SuperblockStatus status;
    CHECK_FALSE(decode_superblock(bytes_of(encoded(sb)), &status));
    CHECK(status == SuperblockStatus::Malformed);
  }
  CHECK(decode_superblock(bytes_of(encoded(mmfs::fs::testing::sample_superblock())), nullptr));
  // Member fields beyond 32 bits were truncated (4294967300 devices read as
  // 4), and a float out of range was converted with undefined behaviour.
  auto good = decode_superblock(bytes_of(with_members_json(members(), kMembersJson)), nullptr);
  REQUIRE(good);
  CHECK(*good == members());
  for (const char* bad :
       {R"({"devices":4294967300,"failed":[2],"index":1,"member_bytes":268435456,"meta_sets":true,"raid":0})",
        R"({"devices":1e10,"failed":[2],"index":1,"member_bytes":268435456,"meta_sets":true,"raid":0})",
        R"({"devices":4,"failed":[4294967298],"index":1,"member_bytes":268435456,"meta_sets":true,"raid":0})",
        R"({"devices":4,"failed":[2],"index":1,"member_bytes":-1,"meta_sets":true,"raid":0})",
        R"({"devices":4,"failed":2,"index":1,"member_bytes":268435456,"meta_sets":true,"raid":0})"}) {
    SuperblockStatus status;
    INFO(bad);
    CHECK_FALSE(decode_superblock(bytes_of(with_members_json(members(), bad)), &status));
    CHECK(status == SuperblockStatus::Malformed);
  }
}

TEST_CASE("fuzz: decode_inode, decode_extents and decode_ino on mutated records", "[fuzz][metadata]") {
  Inode file;
  file.ino = 42;
  file.mode = 0100644;
  file.uid = 1000;
  file.gid = 100;
  file.nlink = 1;
  file.size = 1 << 20;
  file.atime_ns = -5;
  file.parent = 1;
  Inode link = file;
  link.mode = 0120777;
  link.symlink = "../target/file";
  std::vector<mmfs::layouts::Extent> extents = {{100, 8}, {5000, 1}, {~0ull - 10, 10}};
  const std::vector<std::string> corpus = {encode_inode(file), encode_inode(link), encode_extents(extents),
                                           encode_extents({}), encode_ino(7), encode_ino(~0ull)};
  Mutator mutator(seed_of("metadata records"), corpus);
  Tally inodes("decode_inode"), extent_maps("decode_extents"), inos("decode_ino");
  for (std::size_t i = 0, n = iterations(15000); i < n; ++i) {
    const std::string s = mutator.next();
    inodes.run(s, [&] {
      auto in = decode_inode(s);
      if (!in) return inodes.failed();
      inodes.parsed();
      inodes.check(encode_inode(*in) == s, "does not encode back to its bytes", s);
    });
    extent_maps.run(s, [&] {
      auto ex = decode_extents(s);
      if (!ex) return extent_maps.failed();
      extent_maps.parsed();
      bool ok = true;
      for (const auto& e : *ex) ok = ok && e.sectors > 0 && e.start + e.sectors >= e.start && e.start + e.sectors != 0;
      extent_maps.check(ok, "an empty extent or one past 2^64", s);
      extent_maps.check(encode_extents(*ex) == s, "does not encode back to its bytes", s);
    });
    inos.run(s, [&] {
      auto ino = decode_ino(s);
      if (!ino) return inos.failed();
      inos.parsed();
      inos.check(encode_ino(*ino) == s, "does not encode back to its bytes", s);
    });
  }
  inodes.finish();
  extent_maps.finish();
  inos.finish();
}
