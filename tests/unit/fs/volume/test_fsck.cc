// mmfsck's checks and repairs (fs/volume/fsck.h) on in-memory volumes: a
// clean volume reports nothing; damaged link counts, dangling entries,
// orphans, stray records, directory parents, a directory's second name, the
// inode counter and a superblock copy are found (exit code 4), repaired
// (exit code 1), and clean afterwards.
#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <algorithm>
#include <string>
#include <vector>

#include "fs/device/fault_device.h"
#include "fs/meta/keys.h"
#include "fs/meta/metadata.h"
#include "fs/volume/fsck.h"
#include "fs/volume/volume.h"
#include "tests/unit/support/volume_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;

namespace {

using namespace testing::volumes;

bool mentions(const std::vector<std::string>& lines, const std::string& text) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return l.find(text) != std::string::npos; });
}

}  // namespace

TEST_CASE("fsck repairs link counts, dangling entries and orphans", "[volume]") {
  auto vol = fresh_volume();
  Metadata& m = vol->metadata();
  Inode f, orphan;
  REQUIRE(m.create(kRootIno, "f", S_IFREG | 0644, 0, 0, "", &f) == 0);
  REQUIRE(m.create(kRootIno, "o", S_IFREG | 0644, 0, 0, "", &orphan) == 0);
  std::vector<Extent> ext;
  REQUIRE(m.allocate_small_extents(orphan.ino, 64, &ext) == 0);
  WriteBatch damage;
  Inode wrong = f;
  wrong.nlink = 5;
  damage.put(keys::inode(f.ino), encode_inode(wrong));
  damage.del(keys::dirent(kRootIno, "o"));  // orphan
  std::string dangling(8, '\0');
  dangling[7] = char(200);
  damage.put(keys::dirent(kRootIno, "ghost"), dangling);
  damage.put(keys::xattr(999, "user.x"), "stray");                  // records of an inode that does not exist
  damage.put(keys::checksum_prefix(999) + std::string(8, '\0'), "abcd");
  REQUIRE(vol->store().apply(damage) == 0);
  REQUIRE(vol->store().sync() == 0);
  auto n = check_volume(*vol, false);
  CHECK(n.problems.size() == 5);
  CHECK(n.exit_code() == 4);
  auto y = check_volume(*vol, true);
  CHECK(y.exit_code() == 1);
  CHECK(check_volume(*vol, false).exit_code() == 0);
  CHECK(m.inode(f.ino)->nlink == 1);
  CHECK_FALSE(m.inode(orphan.ino));
  CHECK_FALSE(m.xattr(999, "user.x"));
  int stray = 0;
  vol->store().scan(keys::checksum_prefix(999), [&](std::string_view, std::string_view) { return ++stray, true; });
  CHECK(stray == 0);
}

TEST_CASE("fsck: a clean volume has nothing to report or repair", "[volume][fsck]") {
  auto vol = fresh_volume();
  Metadata& m = vol->metadata();
  Inode d, f;
  REQUIRE(m.create(kRootIno, "d", S_IFDIR | 0755, 0, 0, "", &d) == 0);
  REQUIRE(m.create(d.ino, "f", S_IFREG | 0644, 0, 0, "", &f) == 0);
  REQUIRE(m.link(f.ino, kRootIno, "g", nullptr) == 0);
  std::vector<Extent> ext;
  REQUIRE(m.allocate_small_extents(f.ino, 16, &ext) == 0);
  REQUIRE(m.set_xattr(f.ino, "user.k", "v") == 0);
  REQUIRE(m.sync() == 0);
  for (bool repair : {false, true}) {
    const FsckReport r = check_volume(*vol, repair);
    INFO((r.problems.empty() ? "" : r.problems[0]));
    CHECK(r.problems.empty());
    CHECK(r.repairs.empty());
    CHECK(r.uncorrected == 0);
    CHECK(r.exit_code() == 0);
  }
}

TEST_CASE("fsck: directory parents, a directory's second name and the inode counter", "[volume][fsck]") {
  auto vol = fresh_volume();
  Metadata& m = vol->metadata();
  Inode a, b, sub;
  REQUIRE(m.create(kRootIno, "a", S_IFDIR | 0755, 0, 0, "", &a) == 0);
  REQUIRE(m.create(kRootIno, "b", S_IFDIR | 0755, 0, 0, "", &b) == 0);
  REQUIRE(m.create(a.ino, "sub", S_IFDIR | 0755, 0, 0, "", &sub) == 0);
  REQUIRE(m.sync() == 0);
  WriteBatch damage;
  Inode wrong = sub;
  wrong.parent = b.ino;  // its entry is in a
  damage.put(keys::inode(sub.ino), encode_inode(wrong));
  damage.put(keys::dirent(b.ino, "zz"), encode_ino(a.ino));  // a directory's second name
  damage.put(keys::next_ino(), encode_ino(2));                    // below the inodes in use
  REQUIRE(vol->store().apply(damage) == 0);
  REQUIRE(vol->store().sync() == 0);
  const FsckReport found = check_volume(*vol, false);
  CHECK(found.exit_code() == 4);
  CHECK(found.problems.size() == 3);
  CHECK(mentions(found.problems, "directory " + std::to_string(sub.ino) + " records parent " +
                                     std::to_string(b.ino) + ", its entry is in " + std::to_string(a.ino)));
  CHECK(mentions(found.problems, "directory " + std::to_string(a.ino) + " has a second name 'zz'"));
  CHECK(mentions(found.problems,
                 "the next inode number 2 is not above the largest inode " + std::to_string(sub.ino)));
  CHECK(found.repairs.empty());
  const FsckReport fixed = check_volume(*vol, true);
  CHECK(fixed.exit_code() == 1);
  CHECK(fixed.repairs.size() == 3);
  CHECK(check_volume(*vol, false).exit_code() == 0);
  CHECK(m.inode(sub.ino)->parent == a.ino);
  CHECK_FALSE(m.lookup(b.ino, "zz"));
  CHECK(m.lookup(kRootIno, "a") == a.ino);
  // The counter is above every inode again: metadata opened afresh numbers a new file past them.
  Metadata fresh(vol->store(), vol->allocator());
  Inode next;
  REQUIRE(fresh.create(kRootIno, "next", S_IFREG | 0644, 0, 0, "", &next) == 0);
  CHECK(next.ino == sub.ino + 1);
}

TEST_CASE("fsck: a damaged superblock copy is reported by name and rewritten", "[volume][fsck]") {
  auto g = small_disk();
  auto dev = formatted(*g);
  dev->bytes()[100] ^= std::byte{0x10};  // inside the primary copy
  auto vol = open_ok(std::move(dev));
  const FsckReport found = check_volume(*vol, false);
  CHECK(found.exit_code() == 4);
  CHECK(mentions(found.problems, "the primary superblock is damaged or differs from the other copy"));
  CHECK(check_volume(*vol, true).exit_code() == 1);
  CHECK(vol->primary_valid());
  CHECK(vol->backup_valid());
  CHECK(check_volume(*vol, false).exit_code() == 0);
}

TEST_CASE("fsck: a directory's second name in its own parent is dropped and not counted", "[volume][fsck]") {
  // The second entry is in the same directory as the first: repairing it
  // must leave the parent's link count as if it never was (2 + one subdirectory).
  auto g = small_disk();
  auto vol = open_ok(formatted(*g));
  Metadata& m = vol->metadata();
  Inode a, sub;
  REQUIRE(m.create(kRootIno, "a", S_IFDIR | 0755, 0, 0, "", &a) == 0);
  REQUIRE(m.create(a.ino, "sub", S_IFDIR | 0755, 0, 0, "", &sub) == 0);
  REQUIRE(m.sync() == 0);
  WriteBatch damage;
  damage.put(keys::dirent(a.ino, "twin"), encode_ino(sub.ino));
  REQUIRE(vol->store().apply(damage) == 0);
  REQUIRE(vol->store().sync() == 0);
  const FsckReport found = check_volume(*vol, false);
  CHECK(found.exit_code() == 4);
  REQUIRE(found.problems.size() == 1);
  CHECK(mentions(found.problems, "has a second name"));
  CHECK(check_volume(*vol, true).exit_code() == 1);
  const FsckReport again = check_volume(*vol, false);
  CHECK(again.exit_code() == 0);
  CHECK(again.problems.empty());
  CHECK(m.inode(a.ino)->nlink == 3);
  CHECK(m.lookup(a.ino, "sub").has_value() != m.lookup(a.ino, "twin").has_value());  // one name is left
}
