// Building a placement's cells (fs/array/array_file_build.cc): what it
// refuses and why, and that a refusal takes no space — layouts this release
// or this device cannot place, a member set that is full though the volume
// is not, a placement recorded on a member set that this volume or context
// cannot provide, and a stored extent map the layout cannot use.
#include <catch2/catch.hpp>

#include <string>

#include "fs/array/array_file.h"
#include "fs/meta/keys.h"
#include "geometry/load.h"
#include "geometry/striped.h"
#include "tests/unit/support/array_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;
using namespace mmfs::fs::testing::arrays;

namespace {

int create(const Mount& m, const std::string& name, const ArraySchema& s, std::string* msg) {
  Inode n;
  new_file(m.md(), name, &n);
  std::shared_ptr<ArrayFile> a;
  return ArrayFile::create(m.ctx(), n, s, nullptr, &a, msg);
}

std::unique_ptr<geom::Geometry> member_disk(int cylinders) {
  return geom::load_geometry(nlohmann::json{{"kind", "disk"}, {"sector_size", 512}, {"cylinders", cylinders},
                                            {"surfaces", 2}, {"sectors_per_track", 64}, {"rpm", 10000},
                                            {"settle_ms", 1.0}, {"settle_cylinders", 4}, {"name", "small"}});
}

}  // namespace

TEST_CASE("array build: layouts the device cannot place are refused, taking no space", "[array_file][build]") {
  auto g = toy_disk();
  Mount m = mount(formatted(*g));
  const std::uint64_t free = m.vol->allocator().free_sectors();
  std::string msg;
  CHECK(create(m, "caps", make_schema({64}, "float32", "capsule"), &msg) == ENOTSUP);
  CHECK(msg.find("needs a MEMS volume") != std::string::npos);
  ArraySchema z = make_schema({8, 8}, "int16", "zorder");
  z.compress = "zstd";
  CHECK(create(m, "packed", z, &msg) == ENOTSUP);
  CHECK(msg.find("compression comes with the mloc layout") != std::string::npos);
  CHECK(m.vol->allocator().free_sectors() == free);
}

TEST_CASE("array build: a member set that is full is ENOSPC naming it, though the volume has room",
          "[array_file][build][members]") {
  geom::StripedGeometry g(member_disk(40), 4);  // four members of 2.6 MB
  Mount m = mount(formatted(g, g.capacity_sectors() * 512));
  REQUIRE(m.sets->stripe_members() == 4);
  const std::uint64_t free = m.vol->allocator().free_sectors();
  // 3 MB with one copy: each placement on two members, which hold less than that.
  std::string msg;
  ArraySchema s = make_schema({96, 64, 64}, "float64", "naive");
  REQUIRE(set_schema_attr(s, "copies", "naive").error == 0);
  CHECK(create(m, "wide", s, &msg) == ENOSPC);
  CHECK(msg.find("on the members 0,2") != std::string::npos);
  CHECK(m.vol->allocator().free_sectors() == free);
  // Without copies the same array stripes over all four members and fits.
  s.copies.clear();
  CHECK(create(m, "wide2", s, &msg) == 0);
}

TEST_CASE("array build: a placement recorded on a member set opens only where the set exists",
          "[array_file][build][members]") {
  auto g = toy_disk();
  Mount m = mount(formatted(*g));
  auto a = create_array(m, "plain-volume", make_schema({8, 8, 8}, "int32", "naive"));
  const Ino ino = a->ino();
  a->quiesce();
  a.reset();
  ArraySchema stored = *stored_schema(m, ino);
  stored.members = {1};
  std::string msg;
  CHECK(ArrayFile::open(m.ctx(), ino, stored, &a, &msg) == EUCLEAN);
  CHECK(msg.find("this volume has one") != std::string::npos);
  ArrayContext bare = m.ctx();
  bare.member_sets = nullptr;
  CHECK(ArrayFile::open(bare, ino, stored, &a, &msg) == EUCLEAN);
  CHECK(msg.find("does not provide") != std::string::npos);
  stored.members.clear();
  CHECK(ArrayFile::open(m.ctx(), ino, stored, &a, &msg) == 0);
}

TEST_CASE("array build: a stored extent map the layout cannot use does not open", "[array_file][build]") {
  auto g = toy_disk();
  Mount m = mount(formatted(*g));
  auto a = create_array(m, "cut", make_schema({16, 16, 16}, "float64", "naive"));
  const Ino ino = a->ino();
  const ArraySchema s = a->schema();
  a->quiesce();
  a.reset();
  std::vector<Extent> extents = m.md().extents(ino);
  REQUIRE(!extents.empty());
  extents.back().sectors -= 1;  // one sector short
  WriteBatch b;
  b.put(keys::extents(ino), encode_extents(extents));
  REQUIRE(m.md().apply(b, {}) == 0);
  std::string msg;
  CHECK(ArrayFile::open(m.ctx(), ino, s, &a, &msg) == EUCLEAN);
  CHECK(msg.find("does not fit the layout") != std::string::npos);
}
