// The metadata store's keys (fs/meta/keys.h): every kind's bytes as the code
// before built them by hand (the on-disk format must not change), parsed back
// to the same kind and fields, malformed keys refused.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "fs/meta/keys.h"
#include "tests/unit/support/keys_test_support.h"

using namespace mmfs::fs;

namespace {

using testing::be64;
using testing::kInos;

std::string old_key(char letter, std::uint64_t ino) { return std::string{letter, '/'} + be64(ino); }

}  // namespace

TEST_CASE("keys: each kind's bytes as before", "[keys]") {
  for (std::uint64_t ino : kInos) {
    CAPTURE(ino);
    CHECK(keys::inode(ino) == old_key('i', ino));
    CHECK(keys::dirent_prefix(ino) == old_key('d', ino));
    CHECK(keys::dirent(ino, "name.txt") == old_key('d', ino) + "name.txt");
    CHECK(keys::xattr_prefix(ino) == old_key('x', ino));
    CHECK(keys::xattr(ino, "user.a") == old_key('x', ino) + "user.a");
    CHECK(keys::extents(ino) == old_key('e', ino));
    CHECK(keys::checksum_prefix(ino) == old_key('c', ino));
    CHECK(keys::alt_checksum_prefix(ino) == old_key('a', ino));
    CHECK(keys::checksum_prefix(ino, 'c') == old_key('c', ino));
    CHECK(keys::checksum_prefix(ino, 'a') == old_key('a', ino));
    for (std::uint64_t record : {std::uint64_t(0), std::uint64_t(1), std::uint64_t(1) << 40, ~std::uint64_t(0)}) {
      CHECK(keys::checksum_record(ino, record) == old_key('c', ino) + be64(record));
      CHECK(keys::checksum_record(ino, record, 'a') == old_key('a', ino) + be64(record));
    }
    CHECK(keys::index_prefix(ino) == old_key('q', ino));
    CHECK(keys::index_record(ino) == old_key('q', ino));
    CHECK(keys::index_pending(ino) == old_key('q', ino) + "p");
    CHECK(keys::index_extents(ino) == old_key('e', ino) + "i");
    CHECK(keys::mloc_extents(ino) == old_key('e', ino) + "m");
    CHECK(keys::mloc_record(ino) == old_key('x', ino) + "mmfs.mloc");
  }
  CHECK(keys::next_ino() == "n");
  // Spelled out once, in full.
  CHECK(keys::inode(0x0102030405060708ull) == std::string("i/\x01\x02\x03\x04\x05\x06\x07\x08", 10));
  CHECK(keys::checksum_record(1, 2, 'a') == std::string("a/\0\0\0\0\0\0\0\x01\0\0\0\0\0\0\0\x02", 18));
}

TEST_CASE("keys: parse gives back the kind and the fields", "[keys]") {
  using K = keys::Kind;
  for (std::uint64_t ino : kInos) {
    CAPTURE(ino);
    auto is = [&](const std::string& key, K kind, std::uint64_t record = 0, std::string_view name = {}) {
      const auto k = keys::parse(key);
      REQUIRE(k);
      CHECK(k->kind == kind);
      CHECK(k->ino == ino);
      CHECK(k->record == record);
      CHECK(k->name == name);
      CHECK(keys::owner(key) == ino);
      CHECK(key.starts_with(keys::scan_prefix(kind)));
    };
    is(keys::inode(ino), K::Inode);
    is(keys::dirent(ino, "a"), K::Dirent, 0, "a");
    is(keys::dirent(ino, std::string("x\0/y", 4)), K::Dirent, 0, std::string_view("x\0/y", 4));
    is(keys::xattr(ino, "user.comment"), K::Xattr, 0, "user.comment");
    is(keys::mloc_record(ino), K::Xattr, 0, "mmfs.mloc");
    is(keys::extents(ino), K::Extents);
    is(keys::index_extents(ino), K::IndexExtents);
    is(keys::mloc_extents(ino), K::MlocExtents);
    is(keys::checksum_record(ino, 77), K::Checksums, 77);
    is(keys::checksum_record(ino, ~std::uint64_t(0), keys::kAltChecksumTable), K::AltChecksums, ~std::uint64_t(0));
    is(keys::index_record(ino), K::IndexRecord);
    is(keys::index_pending(ino), K::IndexPending);
  }
  const auto n = keys::parse(keys::next_ino());
  REQUIRE(n);
  CHECK(n->kind == K::NextIno);
  CHECK(n->ino == 0);
  CHECK_FALSE(keys::owner(keys::next_ino()));
  CHECK(keys::scan_prefix(K::NextIno) == "n");
}

TEST_CASE("keys: an extra copy's keys carry its slot", "[keys]") {
  using K = keys::Kind;
  for (std::uint64_t ino : kInos) {
    CAPTURE(ino);
    for (std::uint8_t slot : {std::uint8_t(1), std::uint8_t(7), std::uint8_t(255)}) {
      CAPTURE(int(slot));
      const std::string ext = keys::copy_extents(ino, slot);
      CHECK(ext == old_key('e', ino) + "k" + char(slot));
      auto k = keys::parse(ext);
      REQUIRE(k);
      CHECK(k->kind == K::CopyExtents);
      CHECK(k->slot == slot);
      CHECK(ext.starts_with(keys::scan_prefix(K::Extents)));  // the allocator's rebuild sees it
      for (char table : {keys::kCopyChecksumTable, keys::kCopyAltChecksumTable}) {
        const std::string rec = keys::checksum_record(ino, 300, table, slot);
        CHECK(rec == old_key(table, ino) + char(slot) + be64(300));
        CHECK(rec.starts_with(keys::checksum_table_prefix(ino, table, slot)));
        CHECK(rec.starts_with(keys::checksum_prefix(ino, table)));  // removal with the inode
        CHECK_FALSE(rec.starts_with(keys::checksum_table_prefix(ino, table, std::uint8_t(slot ^ 2))));
        k = keys::parse(rec);
        REQUIRE(k);
        CHECK(k->kind == (table == keys::kCopyChecksumTable ? K::CopyChecksums : K::CopyAltChecksums));
        CHECK(k->slot == slot);
        CHECK(k->record == 300);
        CHECK(k->ino == ino);
      }
    }
    // The primary's tables have no slot byte.
    CHECK(keys::checksum_table_prefix(ino, keys::kChecksumTable, 9) == keys::checksum_prefix(ino));
  }
  const std::string ino = be64(42);
  CHECK_FALSE(keys::parse(std::string("e/") + ino + "k"));                      // no slot
  CHECK_FALSE(keys::parse(std::string("e/") + ino + "k" + std::string(1, '\0')));  // slot 0
  CHECK_FALSE(keys::parse(std::string("k/") + ino + be64(1)));                  // no slot byte
  CHECK_FALSE(keys::parse(std::string("j/") + ino + std::string(1, '\0') + be64(1)));
  CHECK(keys::copy_record(42) == keys::xattr(42, "mmfs.copies"));
  CHECK(keys::lost_cells(42) == keys::xattr(42, "mmfs.lost"));
}

TEST_CASE("keys: malformed keys are refused", "[keys]") {
  const std::string ino = be64(42);
  for (const std::string& bad : {
           std::string(),                          // empty
           std::string("n2"),                      // the counter's key, longer
           std::string("i"),                       // no '/'
           std::string("i/") + ino.substr(0, 7),   // the inode number cut short
           std::string("i/") + ino + "x",          // an inode key with a suffix
           std::string("i|") + ino,                // not a '/'
           std::string("d/") + ino,                // a dirent without a name
           std::string("x/") + ino,                // an xattr without a name
           std::string("e/") + ino + "z",          // an extent map of no known kind
           std::string("e/") + ino + "ii",         //   nor this
           std::string("c/") + ino,                // a checksum record without its number
           std::string("c/") + ino + be64(1).substr(0, 7),
           std::string("a/") + ino + be64(1) + "x",
           std::string("q/") + ino + "pp",         // an index key of no known kind
           std::string("z/") + ino,                // an unknown letter
       }) {
    CAPTURE(bad);
    CHECK_FALSE(keys::parse(bad));
  }
  // owner() reads the inode of any per-inode key, known kind or not.
  CHECK(keys::owner(std::string("z/") + ino + "whatever") == 42u);
  CHECK(keys::owner(std::string("e/") + ino + "z") == 42u);
  CHECK_FALSE(keys::owner(std::string("i/") + ino.substr(0, 7)));
  CHECK_FALSE(keys::owner(std::string("ii") + ino));
}

TEST_CASE("keys: big-endian inode numbers keep scans in number order", "[keys]") {
  std::mt19937_64 rng(3);
  std::vector<std::uint64_t> inos(500);
  for (auto& i : inos) i = rng() >> (rng() % 64);
  std::vector<std::string> built;
  for (std::uint64_t i : inos) built.push_back(keys::inode(i));
  std::sort(inos.begin(), inos.end());
  std::sort(built.begin(), built.end());  // as the store orders keys: bytewise
  for (std::size_t i = 0; i < inos.size(); ++i) CHECK(keys::parse(built[i])->ino == inos[i]);
  // A prefix scan of one inode sees only its own keys.
  CHECK_FALSE(keys::xattr(1, "a").starts_with(keys::xattr_prefix(256)));
  CHECK(keys::xattr(256, "a").starts_with(keys::xattr_prefix(256)));
}
