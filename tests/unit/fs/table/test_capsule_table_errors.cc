// Operations a capsule table refuses (fs/table/capsule_table.h) change
// nothing: the bytes, the schemas, the record and the free space stay.
#include <catch2/catch.hpp>

#include "tests/unit/support/capsule_table_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;
using namespace mmfs::fs::testing::tables;

TEST_CASE("capsule table: refused operations change nothing", "[capsule_table]") {
  std::mt19937_64 rng(5);
  // What every attribute stores and reads, to compare after a refusal.
  auto snapshot = [](const Table& t, Ino dir) {
    std::vector<std::pair<std::optional<ArraySchema>, Bytes>> out;
    for (const TableAttribute& a : t.attrs) out.emplace_back(stored_schema(t.m, a.ino), read_all(*a.array));
    return std::make_pair(out, t.m.md().xattr(dir, kTableXattr));
  };
  auto fill = [&](Table& t) {
    std::vector<Bytes> models;
    for (const TableAttribute& a : t.attrs) models.emplace_back(a.array->size(), 0);
    write_random_records(t.attrs, models, rng, 3);
  };

  SECTION("attributes of different lengths: EINVAL") {
    const geom::MemStore g = small_mems();
    auto dev = formatted(g, kDeviceBytes);
    Ino dir = 0;
    {
      Mount m = mount(ref(*dev));
      dir = make_table_dir(m, kColumns, {3000, 2999, 3000});
    }
    Table t = open_table(ref(*dev), dir);
    fill(t);
    const auto before = snapshot(t, dir);
    const std::uint64_t free_before = t.m.vol->allocator().free_sectors();
    std::string msg;
    CHECK(place(t, dir, &msg) == EINVAL);
    CHECK_THAT(msg, Catch::Contains("b_i4"));
    CHECK(snapshot(t, dir) == before);
    CHECK(t.m.vol->allocator().free_sectors() == free_before);
    // Nor with no attributes at all, or one that is not 1-D.
    CHECK(place_table_in_capsules(t.m.ctx(), dir, std::vector<TableAttribute>{}, &msg) == EINVAL);
    {
      Inode n;
      REQUIRE(t.m.md().create(dir, "d_2d", S_IFREG | 0644, 0, 0, "", &n) == 0);
      std::shared_ptr<ArrayFile> a;
      REQUIRE(ArrayFile::create(t.m.ctx(), n, make_schema({3000, 2}, "int16", "naive"), nullptr, &a, &msg) == 0);
      std::vector<TableAttribute> with = {t.attrs[0], t.attrs[2], TableAttribute{"d_2d", n.ino, a}};
      CHECK(place_table_in_capsules(t.m.ctx(), dir, with, &msg) == EINVAL);
      CHECK_THAT(msg, Catch::Contains("d_2d"));
    }
    CHECK(snapshot(t, dir) == before);
    check_fsck(*t.m.vol);
    unmount(t);
    Table again = open_table(ref(*dev), dir);
    CHECK(snapshot(again, dir) == before);
  }

  SECTION("a sealed mloc attribute: EINVAL, the others' staged copies given back") {
    const geom::MemStore g = small_mems();
    auto dev = formatted(g, kDeviceBytes);
    std::vector<Column> columns = kColumns;
    columns[2].layout = "mloc";  // staged last: the first two are copied into the bands before it fails
    Ino dir = 0;
    {
      Mount m = mount(ref(*dev));
      dir = make_table_dir(m, columns, {3000, 3000, 3000});
    }
    Table t = open_table(ref(*dev), dir);
    std::vector<Bytes> models;
    for (const TableAttribute& a : t.attrs) models.emplace_back(a.array->size(), 0);
    std::vector<TableAttribute> cells = {t.attrs[0], t.attrs[1]};
    write_random_records(cells, models, rng, 3);
    REQUIRE(t.attrs[2].array->schema().layout == "mloc");
    const auto before = snapshot(t, dir);
    const std::uint64_t free_before = t.m.vol->allocator().free_sectors();
    std::string msg;
    CHECK(place(t, dir, &msg) == EINVAL);
    CHECK_THAT(msg, Catch::Contains("c_u1"));
    CHECK(snapshot(t, dir) == before);
    CHECK(t.m.vol->allocator().free_sectors() == free_before);
    check_bytes(t.attrs, models);
    check_fsck(*t.m.vol);
    unmount(t);
    Table again = open_table(ref(*dev), dir);
    CHECK(snapshot(again, dir) == before);
    check_fsck(*again.m.vol);
  }

  SECTION("a volume without equivalence classes: ENOTSUP") {
    auto g = testing::toy_disk();
    auto dev = formatted(*g);
    Ino dir = 0;
    {
      Mount m = mount(ref(*dev));
      dir = make_table_dir(m, kColumns, {3000, 3000, 3000});
    }
    Table t = open_table(ref(*dev), dir);
    fill(t);
    const auto before = snapshot(t, dir);
    const std::uint64_t free_before = t.m.vol->allocator().free_sectors();
    std::string msg;
    CHECK(place(t, dir, &msg) == ENOTSUP);
    CHECK_THAT(msg, Catch::Contains("MEMS"));
    CHECK(snapshot(t, dir) == before);
    CHECK(t.m.vol->allocator().free_sectors() == free_before);
    check_fsck(*t.m.vol);
  }

  SECTION("growing: shrinking, an attribute with an index, a table not in capsules: EINVAL") {
    const geom::MemStore g = small_mems();
    auto dev = formatted(g, kDeviceBytes);
    Ino dir = 0;
    {
      Mount m = mount(ref(*dev));
      dir = make_table_dir(m, kColumns, {3000, 3000, 3000});
    }
    Table t = open_table(ref(*dev), dir);
    fill(t);
    std::string msg;
    // Not (yet) in capsules.
    {
      const auto before = snapshot(t, dir);
      CHECK(grow(t, dir, 4000, &msg) == EINVAL);
      CHECK(snapshot(t, dir) == before);
    }
    REQUIRE(place(t, dir, &msg) == 0);
    {
      const auto before = snapshot(t, dir);
      const std::uint64_t free_before = t.m.vol->allocator().free_sectors();
      CHECK(grow(t, dir, 2999, &msg) == EINVAL);
      CHECK_THAT(msg, Catch::Contains("shrinks"));
      CHECK(grow(t, dir, 0, &msg) == EINVAL);
      CHECK(snapshot(t, dir) == before);
      CHECK(t.m.vol->allocator().free_sectors() == free_before);
      for (const TableAttribute& a : t.attrs) CHECK(a.array->shape() == std::vector<std::uint64_t>{3000});
    }
    // An attribute with a bitmap index.
    ArraySchema s = t.attrs[1].array->schema();
    s.index = "e1";
    {
      int r = t.attrs[1].array->change_schema(s, &msg);
      INFO(msg);
      REQUIRE(r == 0);
    }
    {
      const auto before = snapshot(t, dir);
      const std::uint64_t free_before = t.m.vol->allocator().free_sectors();
      CHECK(grow(t, dir, 40000, &msg) == EINVAL);
      CHECK_THAT(msg, Catch::Contains("b_i4"));
      CHECK(snapshot(t, dir) == before);
      CHECK(t.m.vol->allocator().free_sectors() == free_before);
      for (const TableAttribute& a : t.attrs) CHECK(a.array->shape() == std::vector<std::uint64_t>{3000});
      check_fsck(*t.m.vol);
      unmount(t);
      Table again = open_table(ref(*dev), dir);
      CHECK(snapshot(again, dir) == before);
      check_fsck(*again.m.vol);
    }
  }

  SECTION("an index set before placing: the table places, but does not grow") {
    const geom::MemStore g = small_mems();
    auto dev = formatted(g, kDeviceBytes);
    Ino dir = 0;
    {
      Mount m = mount(ref(*dev));
      dir = make_table_dir(m, kColumns, {3000, 3000, 3000});
    }
    Table t = open_table(ref(*dev), dir);
    fill(t);
    std::string msg;
    ArraySchema s = t.attrs[2].array->schema();
    s.index = "e1";
    {
      int r = t.attrs[2].array->change_schema(s, &msg);
      INFO(msg);
      REQUIRE(r == 0);
    }
    {
      int r = place(t, dir, &msg);
      INFO(msg);
      REQUIRE(r == 0);
    }
    CHECK(t.attrs[2].array->schema().index == "e1");
    const auto before = snapshot(t, dir);
    CHECK(grow(t, dir, 40000, &msg) == EINVAL);
    CHECK_THAT(msg, Catch::Contains("c_u1"));
    CHECK(snapshot(t, dir) == before);
    check_fsck(*t.m.vol);
  }
}
