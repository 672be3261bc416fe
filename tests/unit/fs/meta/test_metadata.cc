// The filesystem's metadata as typed records (fs/meta/metadata.h): the
// stored forms of inodes, extent lists and inode numbers byte by byte and
// their refusals; the namespace operations with POSIX's errnos (create, link,
// unlink, rmdir, rename and its flags), link counts, xattrs, and extents that
// return to the allocator only after the sync that makes their drop durable.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "fs/device/fault_device.h"
#include "fs/meta/allocator.h"
#include "fs/meta/metadata.h"
#include "fs/meta/meta_store.h"
#include "geometry/load.h"
#include "tests/unit/support/keys_test_support.h"

using namespace mmfs::fs;

namespace {

using testing::be64;
using testing::kInos;

std::string le64(std::uint64_t v) {
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(char((v >> (8 * i)) & 0xff));
  return s;
}

// A formatted metadata store in memory, its root owned by uid 10, gid 20,
// and an allocator over the Atlas 10K III's tracks 10..999.
struct Fs {
  MemoryDevice dev{4 << 20};
  const MetaRegion region{4096 * 4, 512 * 1024};
  std::unique_ptr<mmfs::geom::Geometry> g = mmfs::geom::load_geometry("atlas10k3");
  std::unique_ptr<MetaStore> store;
  Allocator alloc{*g, 686 * 10, 686 * 1000};
  std::unique_ptr<Metadata> md;
  Fs() {
    REQUIRE(MetaStore::format(dev, region) == 0);
    open();
    REQUIRE(Metadata::format(*store, 0755, 10, 20) == 0);
    md = std::make_unique<Metadata>(*store, alloc);
  }
  void open() {
    int err = 0;
    std::string msg;
    md.reset();
    store.reset();
    store = MetaStore::open(dev, region, &err, &msg);
    INFO(msg);
    REQUIRE(store);
  }
  Inode create(Ino parent, const std::string& name, std::uint32_t mode, const std::string& target = "") {
    Inode n;
    REQUIRE(md->create(parent, name, mode, 1000, 100, target, &n) == 0);
    return n;
  }
  std::vector<std::string> names(Ino dir) const {
    std::vector<std::string> out;
    md->readdir(dir, [&](std::string_view name, Ino) {
      out.emplace_back(name);
      return true;
    });
    return out;
  }
};

}  // namespace

TEST_CASE("metadata: an inode's stored bytes, field by field, and their refusals", "[metadata]") {
  Inode n;
  n.ino = 0x0102030405060708ull;
  n.mode = S_IFLNK | 0777;
  n.uid = 1000;
  n.gid = 0xfffffffe;
  n.nlink = 3;
  n.size = 5;
  n.atime_ns = -1;  // before 1970
  n.mtime_ns = 1'700'000'000'000'000'000;
  n.ctime_ns = 42;
  n.rdev = 0x0801;
  n.generation = 9;
  n.parent = 77;
  n.symlink = "a/b/c";
  const std::string bytes = encode_inode(n);
  std::string want(1, char(1));  // version 1, then 13 little-endian u64 fields, then the target
  for (std::uint64_t v : {n.ino, std::uint64_t(n.mode), std::uint64_t(n.uid), std::uint64_t(n.gid),
                          std::uint64_t(n.nlink), n.size, std::uint64_t(n.atime_ns), std::uint64_t(n.mtime_ns),
                          std::uint64_t(n.ctime_ns), n.rdev, n.generation, n.parent, std::uint64_t(5)})
    want += le64(v);
  want += "a/b/c";
  CHECK(bytes == want);
  CHECK(decode_inode(bytes) == n);
  CHECK(decode_inode(encode_inode(Inode{})) == Inode{});
  // Refused: nothing, another version, a byte short or over, a 32-bit field past 32 bits.
  CHECK_FALSE(decode_inode(""));
  std::string v2 = bytes;
  v2[0] = char(2);
  CHECK_FALSE(decode_inode(v2));
  CHECK_FALSE(decode_inode(bytes.substr(0, bytes.size() - 1)));
  CHECK_FALSE(decode_inode(bytes + "x"));
  CHECK_FALSE(decode_inode(bytes.substr(0, 50)));
  for (int field : {1, 2, 3, 4}) {  // mode, uid, gid, nlink
    std::string wide = bytes;
    wide.replace(1 + 8 * field, 8, le64(std::uint64_t(1) << 32));
    INFO("field " << field);
    CHECK_FALSE(decode_inode(wide));
  }
}

TEST_CASE("metadata: extent lists as little-endian (start, sectors) pairs; empty or wrapping extents refused",
          "[metadata]") {
  const std::vector<Extent> e{{6860, 686}, {0, 1}, {~std::uint64_t(0) - 10, 10}};
  const std::string bytes = encode_extents(e);
  CHECK(bytes == le64(6860) + le64(686) + le64(0) + le64(1) + le64(~std::uint64_t(0) - 10) + le64(10));
  CHECK(decode_extents(bytes) == e);
  CHECK(decode_extents("") == std::vector<Extent>{});
  CHECK(encode_extents({}).empty());
  CHECK_FALSE(decode_extents(bytes.substr(0, 15)));
  CHECK_FALSE(decode_extents(bytes + "x"));
  CHECK_FALSE(decode_extents(le64(5) + le64(0)));                      // no sectors
  CHECK_FALSE(decode_extents(le64(~std::uint64_t(0) - 9) + le64(11)));  // past 2^64
}

TEST_CASE("metadata: the root, created entries, link counts and names", "[metadata]") {
  Fs fs;
  const auto root = fs.md->inode(kRootIno);
  REQUIRE(root);
  CHECK(root->mode == (S_IFDIR | 0755));
  CHECK(root->uid == 10);
  CHECK(root->gid == 20);
  CHECK(root->nlink == 2);
  CHECK(root->parent == kRootIno);
  const Inode dir = fs.create(kRootIno, "dir", S_IFDIR | 0700);
  const Inode file = fs.create(dir.ino, "file", S_IFREG | 0644);
  const Inode link = fs.create(kRootIno, "link", S_IFLNK | 0777, "dir/file");
  Inode dev;
  REQUIRE(fs.md->create(kRootIno, "null", S_IFCHR | 0666, 0, 0, "", &dev, 0x0103) == 0);
  CHECK(dir.ino == 2);  // numbered from 2, in order
  CHECK(file.ino == 3);
  CHECK(dir.nlink == 2);
  CHECK(dir.parent == kRootIno);
  CHECK(file.nlink == 1);
  CHECK(file.uid == 1000);
  CHECK(link.symlink == "dir/file");
  CHECK(link.size == 8);
  CHECK(dev.rdev == 0x0103);
  CHECK(fs.md->inode(kRootIno)->nlink == 3);  // the subdirectory's ".."
  CHECK(fs.md->lookup(kRootIno, "dir") == dir.ino);
  CHECK(fs.md->lookup(dir.ino, "file") == file.ino);
  CHECK_FALSE(fs.md->lookup(kRootIno, "file"));
  CHECK(fs.names(kRootIno) == std::vector<std::string>{"dir", "link", "null"});  // name order
  // Errors.
  Inode out;
  CHECK(fs.md->create(kRootIno, "dir", S_IFREG | 0644, 0, 0, "", &out) == EEXIST);
  CHECK(fs.md->create(file.ino, "x", S_IFREG | 0644, 0, 0, "", &out) == ENOTDIR);
  CHECK(fs.md->create(999, "x", S_IFREG | 0644, 0, 0, "", &out) == ENOENT);
  for (std::string bad : {std::string(), std::string("."), std::string(".."), std::string("a/b"),
                          std::string("a\0b", 3)})
    CHECK(fs.md->create(kRootIno, bad, S_IFREG | 0644, 0, 0, "", &out) == EINVAL);
  CHECK(fs.md->create(kRootIno, std::string(256, 'n'), S_IFREG | 0644, 0, 0, "", &out) == ENAMETOOLONG);
  CHECK(fs.md->create(kRootIno, std::string(255, 'n'), S_IFREG | 0644, 0, 0, "", &out) == 0);
  // Hard links: counted, listed by names_of; none to directories.
  Inode linked;
  REQUIRE(fs.md->link(file.ino, kRootIno, "again", &linked) == 0);
  CHECK(linked.nlink == 2);
  auto names = fs.md->names_of(file.ino);
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::pair<Ino, std::string>>{{kRootIno, "again"}, {dir.ino, "file"}});
  CHECK(fs.md->link(dir.ino, kRootIno, "dir2", &out) == EPERM);
  CHECK(fs.md->link(file.ino, kRootIno, "again", &out) == EEXIST);
  CHECK(fs.md->link(file.ino, file.ino, "x", &out) == ENOTDIR);
  CHECK(fs.md->link(999, kRootIno, "x", &out) == ENOENT);
}

TEST_CASE("metadata: unlink frees at the last link, rmdir only empty directories", "[metadata]") {
  Fs fs;
  const Inode dir = fs.create(kRootIno, "dir", S_IFDIR | 0755);
  const Inode file = fs.create(dir.ino, "file", S_IFREG | 0644);
  REQUIRE(fs.md->set_xattr(file.ino, "user.a", "1") == 0);
  REQUIRE(fs.md->link(file.ino, kRootIno, "other", nullptr) == 0);
  CHECK(fs.md->unlink(kRootIno, "dir") == EISDIR);
  CHECK(fs.md->unlink(kRootIno, "missing") == ENOENT);
  CHECK(fs.md->unlink(file.ino, "x") == ENOTDIR);
  CHECK(fs.md->rmdir(kRootIno, "dir") == ENOTEMPTY);
  CHECK(fs.md->rmdir(kRootIno, "other") == ENOTDIR);
  REQUIRE(fs.md->unlink(kRootIno, "other") == 0);
  CHECK(fs.md->inode(file.ino)->nlink == 1);
  CHECK(fs.md->xattr(file.ino, "user.a") == "1");
  REQUIRE(fs.md->unlink(dir.ino, "file") == 0);
  CHECK_FALSE(fs.md->inode(file.ino));  // gone with its last name, and its xattrs with it
  CHECK_FALSE(fs.md->xattr(file.ino, "user.a"));
  CHECK(fs.md->inode(kRootIno)->nlink == 3);
  REQUIRE(fs.md->rmdir(kRootIno, "dir") == 0);
  CHECK_FALSE(fs.md->inode(dir.ino));
  CHECK(fs.md->inode(kRootIno)->nlink == 2);
  CHECK(fs.md->rmdir(kRootIno, "dir") == ENOENT);
}

TEST_CASE("metadata: rename moves, replaces and exchanges as POSIX and renameat2 say", "[metadata]") {
  Fs fs;
  const Inode a = fs.create(kRootIno, "a", S_IFDIR | 0755);
  const Inode b = fs.create(kRootIno, "b", S_IFDIR | 0755);
  const Inode f = fs.create(a.ino, "f", S_IFREG | 0644);
  const Inode g = fs.create(b.ino, "g", S_IFREG | 0644);
  const Inode sub = fs.create(a.ino, "sub", S_IFDIR | 0755);
  // A directory moving to another parent moves its ".." link.
  REQUIRE(fs.md->rename(a.ino, "sub", b.ino, "sub2", 0) == 0);
  CHECK(fs.md->lookup(b.ino, "sub2") == sub.ino);
  CHECK_FALSE(fs.md->lookup(a.ino, "sub"));
  CHECK(fs.md->inode(sub.ino)->parent == b.ino);
  CHECK(fs.md->inode(a.ino)->nlink == 2);
  CHECK(fs.md->inode(b.ino)->nlink == 3);
  // Flags.
  CHECK(fs.md->rename(a.ino, "f", b.ino, "g", Metadata::kNoReplace) == EEXIST);
  CHECK(fs.md->rename(a.ino, "f", b.ino, "none", Metadata::kExchange) == ENOENT);
  CHECK(fs.md->rename(a.ino, "f", b.ino, "g", Metadata::kNoReplace | Metadata::kExchange) == EINVAL);
  CHECK(fs.md->rename(a.ino, "missing", b.ino, "x", 0) == ENOENT);
  CHECK(fs.md->rename(a.ino, "f", b.ino, "", 0) == EINVAL);
  // No directory into its own subtree.
  CHECK(fs.md->rename(kRootIno, "b", sub.ino, "b", 0) == EINVAL);
  // Kinds must agree when replacing; a directory only over an empty one.
  CHECK(fs.md->rename(a.ino, "f", b.ino, "sub2", 0) == EISDIR);
  CHECK(fs.md->rename(b.ino, "sub2", b.ino, "g", 0) == ENOTDIR);
  CHECK(fs.md->rename(kRootIno, "a", kRootIno, "b", 0) == ENOTEMPTY);
  // The same file under both names: nothing happens.
  REQUIRE(fs.md->link(f.ino, a.ino, "f2", nullptr) == 0);
  CHECK(fs.md->rename(a.ino, "f", a.ino, "f2", 0) == 0);
  CHECK(fs.md->lookup(a.ino, "f") == f.ino);
  CHECK(fs.md->inode(f.ino)->nlink == 2);
  // Exchange swaps the two names.
  REQUIRE(fs.md->rename(a.ino, "f", b.ino, "g", Metadata::kExchange) == 0);
  CHECK(fs.md->lookup(a.ino, "f") == g.ino);
  CHECK(fs.md->lookup(b.ino, "g") == f.ino);
  // Replacing a file's last name removes it.
  REQUIRE(fs.md->rename(b.ino, "g", a.ino, "f", 0) == 0);  // f over g
  CHECK_FALSE(fs.md->inode(g.ino));
  CHECK(fs.md->lookup(a.ino, "f") == f.ino);
  CHECK_FALSE(fs.md->lookup(b.ino, "g"));
}

TEST_CASE("metadata: xattrs by name, bounded, removed with ENODATA when absent", "[metadata]") {
  Fs fs;
  const Inode f = fs.create(kRootIno, "f", S_IFREG | 0644);
  REQUIRE(fs.md->set_xattr(f.ino, "user.mmfs.shape", "10,20") == 0);
  REQUIRE(fs.md->set_xattr(f.ino, "user.a", "") == 0);
  REQUIRE(fs.md->set_xattr(f.ino, "user.a", "2") == 0);  // replaced
  CHECK(fs.md->xattr(f.ino, "user.a") == "2");
  CHECK(fs.md->xattr_names(f.ino) == std::vector<std::string>{"user.a", "user.mmfs.shape"});
  CHECK_FALSE(fs.md->xattr(f.ino, "user.b"));
  CHECK(fs.md->set_xattr(f.ino, "", "x") == EINVAL);
  CHECK(fs.md->set_xattr(f.ino, std::string(256, 'n'), "x") == ERANGE);
  CHECK(fs.md->set_xattr(f.ino, std::string(255, 'n'), "x") == 0);
  CHECK(fs.md->set_xattr(f.ino, "user.big", std::string(65537, 'v')) == E2BIG);
  CHECK(fs.md->set_xattr(f.ino, "user.big", std::string(65536, 'v')) == 0);
  CHECK(fs.md->set_xattr(999, "user.a", "x") == ENOENT);
  REQUIRE(fs.md->remove_xattr(f.ino, "user.a") == 0);
  CHECK(fs.md->remove_xattr(f.ino, "user.a") == ENODATA);
  CHECK(fs.md->remove_xattr(999, "user.a") == ENOENT);
}

TEST_CASE("metadata: extents dropped by an operation return to the allocator at the next sync", "[metadata]") {
  Fs fs;
  const Inode f = fs.create(kRootIno, "f", S_IFREG | 0644);
  const std::uint64_t total = fs.alloc.free_sectors();
  std::vector<Extent> got;
  REQUIRE(fs.md->allocate_extents(f.ino, {mmfs::layouts::SpaceShape::Runs, 3 * 686}, &got) == 0);
  CHECK(fs.md->extents(f.ino) == got);
  CHECK(fs.alloc.free_sectors() == total - 3 * 686);
  std::vector<Extent> small;
  REQUIRE(fs.md->allocate_small_extents(f.ino, 10, &small) == 0);  // replaces the runs
  CHECK(fs.md->extents(f.ino) == small);
  CHECK(fs.alloc.free_sectors() == total - 3 * 686 - 10);  // the runs are not free before the sync
  REQUIRE(fs.md->sync() == 0);
  CHECK(fs.alloc.free_sectors() == total - 10);
  REQUIRE(fs.md->unlink(kRootIno, "f") == 0);
  CHECK(fs.alloc.free_sectors() == total - 10);
  REQUIRE(fs.md->sync() == 0);
  CHECK(fs.alloc.free_sectors() == total);
  CHECK(fs.md->extents(f.ino).empty());
  CHECK(fs.md->allocate_extents(999, {mmfs::layouts::SpaceShape::Runs, 686}, &got) == ENOENT);
  CHECK(fs.md->set_extents(999, {}) == ENOENT);
  CHECK(fs.alloc.free_sectors() == total);
}

TEST_CASE("metadata: reopened, the namespace is as synced and inode numbers are not reused", "[metadata]") {
  Fs fs;
  const Inode a = fs.create(kRootIno, "a", S_IFREG | 0644);
  const Inode b = fs.create(kRootIno, "b", S_IFREG | 0644);
  REQUIRE(fs.md->unlink(kRootIno, "b") == 0);
  Inode changed = a;
  changed.size = 12345;
  REQUIRE(fs.md->set_inode(changed) == 0);
  Inode ghost;
  ghost.ino = 999;
  CHECK(fs.md->set_inode(ghost) == ENOENT);
  REQUIRE(fs.md->sync() == 0);
  fs.open();
  fs.md = std::make_unique<Metadata>(*fs.store, fs.alloc);
  CHECK(fs.names(kRootIno) == std::vector<std::string>{"a"});
  CHECK(fs.md->inode(a.ino)->size == 12345);
  const Inode c = fs.create(kRootIno, "c", S_IFREG | 0644);
  CHECK(c.ino == b.ino + 1);
}

TEST_CASE("keys: inode numbers as values", "[keys]") {
  for (std::uint64_t ino : kInos) {
    CHECK(encode_ino(ino) == be64(ino));
    CHECK(decode_ino(encode_ino(ino)) == ino);
  }
  CHECK_FALSE(decode_ino(""));
  CHECK_FALSE(decode_ino(be64(1).substr(0, 7)));
  CHECK_FALSE(decode_ino(be64(1) + "x"));
}
