// A directory's table in the MEMS paper's capsules (fs/table/capsule_table.h):
// placing its attributes, growing it in place, moving it out again, reading
// records; every step against a model of the bytes, the capsule format and
// the device's equivalence classes. Power cuts: test_capsule_table_crash.cc;
// refused operations: test_capsule_table_errors.cc.
#include <catch2/catch.hpp>

#include "tests/unit/support/capsule_table_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;
using namespace mmfs::fs::testing::tables;

TEST_CASE("capsule table: placed, grown in place and moved out, record reads match a brute-force interleave",
          "[capsule_table]") {
  const geom::MemStore g = small_mems();
  std::mt19937_64 rng(2024);
  auto dev = formatted(g, kDeviceBytes);
  const std::uint64_t n0 = 3000;
  Ino dir = 0;
  std::vector<Bytes> models;
  {
    Mount m = mount(ref(*dev));
    dir = make_table_dir(m, kColumns, {n0, n0, n0});
  }
  {
    Table t = open_table(ref(*dev), dir);
    REQUIRE(t.attrs.size() == kColumns.size());
    for (std::size_t i = 0; i < kColumns.size(); ++i) {
      CHECK(t.attrs[i].name == kColumns[i].name);
      models.emplace_back(t.attrs[i].array->size(), 0);
    }
    write_random_records(t.attrs, models, rng, 6);
    // The last record too: its cells are partial (3000 is no multiple of a cell's records).
    for (std::size_t i = 0; i < t.attrs.size(); ++i) {
      const std::uint32_t size = t.attrs[i].array->schema().dtype.itemsize;
      const Bytes last(size, std::uint8_t(0x30 + i));
      write_at(*t.attrs[i].array, (n0 - 1) * size, last);
      flush(*t.attrs[i].array);
      std::copy(last.begin(), last.end(), models[i].end() - size);
    }
    check_bytes(t.attrs, models);
    CHECK(!t.m.md().xattr(dir, kTableXattr));
    litter_free_space(t.m);
    // Some not yet written back: the placement takes them along.
    write_random_records(t.attrs, models, rng, 2, false);
    for (const TableAttribute& a : t.attrs) CHECK(a.array->has_dirty_cells());

    std::string msg;
    int r = place(t, dir, &msg);
    INFO(msg);
    REQUIRE(r == 0);
    check_in_capsules(t, dir, n0, models, *dev);
    check_bytes(t.attrs, models);
    check_rows(t.m, t.attrs, models, rng);
    check_fsck(*t.m.vol);
  }
  std::vector<std::vector<geom::Lbn>> old_lbns;
  std::vector<std::uint64_t> sample = {0, 1, 63, 64, 383, 384, 1000, 2047, 2999};
  {
    // Remounted: the same placement from the stored schemas.
    Table t = open_table(ref(*dev), dir);
    check_in_capsules(t, dir, n0, models, *dev);
    check_bytes(t.attrs, models);
    check_rows(t.m, t.attrs, models, rng);
    check_fsck(*t.m.vol);
    // Writes into the capsules.
    write_random_records(t.attrs, models, rng, 3);
    check_bytes(t.attrs, models);
    check_in_capsules(t, dir, n0, models, *dev);
    old_lbns = lbns_of(t.attrs, sample);
    write_random_records(t.attrs, models, rng, 2, false);  // and dirty ones, which growing writes back

    // Grown inside the first band (its free slots): the old records keep
    // their sectors, the new read as zeros although their sectors hold stale bytes.
    std::string msg;
    const std::uint64_t nh = 20000;
    {
      int r = grow(t, dir, nh, &msg);
      INFO(msg);
      REQUIRE(r == 0);
    }
    for (std::size_t i = 0; i < models.size(); ++i) models[i].resize(nh * t.attrs[i].array->schema().dtype.itemsize, 0);
    CHECK(lbns_of(t.attrs, sample) == old_lbns);
    CHECK(table_info(t.attrs, dir, stored_record(t.m, dir))["capsule"]["bands"] == 1);
    CHECK(stale_records(t.attrs, *dev, g.sector_size(), n0, nh) > 0);
    check_in_capsules(t, dir, nh, models, *dev);
    check_bytes(t.attrs, models);
    check_rows(t.m, t.attrs, models, rng);
    check_fsck(*t.m.vol);

    // Grown to more than a band: a new band, on stale bytes too.
    litter_free_space(t.m);
    const std::uint64_t n1 = 40000;
    int r = grow(t, dir, n1, &msg);
    INFO(msg);
    REQUIRE(r == 0);
    for (std::size_t i = 0; i < models.size(); ++i) models[i].resize(n1 * t.attrs[i].array->schema().dtype.itemsize, 0);
    const std::uint64_t band_records = stored_record(t.m, dir)->records_per_capsule * g.sectors_per_track();
    REQUIRE(band_records < n1);
    CHECK(stale_records(t.attrs, *dev, g.sector_size(), band_records, n1) > 0);
    for (const TableAttribute& a : t.attrs) CHECK(a.array->shape() == std::vector<std::uint64_t>{n1});
    CHECK(lbns_of(t.attrs, sample) == old_lbns);
    check_in_capsules(t, dir, n1, models, *dev);
    check_bytes(t.attrs, models);
    check_rows(t.m, t.attrs, models, rng);
    CHECK(table_info(t.attrs, dir, stored_record(t.m, dir))["capsule"]["bands"] == 2);
    check_fsck(*t.m.vol);
    // Growing to the same length changes nothing.
    REQUIRE(grow(t, dir, n1, &msg) == 0);
    CHECK(lbns_of(t.attrs, sample) == old_lbns);
  }
  {
    Table t = open_table(ref(*dev), dir);
    const std::uint64_t n1 = t.attrs[0].array->shape().at(0);
    REQUIRE(n1 == 40000);
    CHECK(lbns_of(t.attrs, sample) == old_lbns);
    check_in_capsules(t, dir, n1, models, *dev);
    check_bytes(t.attrs, models);
    check_rows(t.m, t.attrs, models, rng);
    check_fsck(*t.m.vol);
    // New records written, in the new band too.
    write_random_records(t.attrs, models, rng, 4);
    std::vector<std::uint8_t> last(t.attrs[0].array->schema().dtype.itemsize, 0x5A);
    write_at(*t.attrs[0].array, (n1 - 1) * last.size(), last);
    flush(*t.attrs[0].array);
    std::copy(last.begin(), last.end(), models[0].end() - std::ptrdiff_t(last.size()));
    check_bytes(t.attrs, models);
    check_rows(t.m, t.attrs, models, rng);

    // Moved out to naive placements: the bytes stay, the capsule records go.
    const std::vector<ArraySchema> next = apart_schemas(t.attrs, "naive");
    std::string msg;
    int r = apart(t, dir, next, &msg);
    INFO(msg);
    REQUIRE(r == 0);
    check_apart(t, dir, next);
    check_bytes(t.attrs, models);
    check_rows(t.m, t.attrs, models, rng);
    CHECK(table_info(t.attrs, dir, stored_record(t.m, dir))["layout"] == "none");
    check_fsck(*t.m.vol);
  }
  {
    Table t = open_table(ref(*dev), dir);
    const std::vector<ArraySchema> next = apart_schemas(t.attrs, "naive");
    check_apart(t, dir, next);
    check_bytes(t.attrs, models);
    check_rows(t.m, t.attrs, models, rng);
    check_fsck(*t.m.vol);
    // Not in capsules any more: growing is refused.
    std::string msg;
    CHECK(grow(t, dir, 50000, &msg) == EINVAL);
    // And back into capsules.
    int r = place(t, dir, &msg);
    INFO(msg);
    REQUIRE(r == 0);
    check_in_capsules(t, dir, 40000, models, *dev);
    check_bytes(t.attrs, models);
    check_fsck(*t.m.vol);
  }
  {
    Table t = open_table(ref(*dev), dir);
    check_in_capsules(t, dir, 40000, models, *dev);
    check_bytes(t.attrs, models);
    check_rows(t.m, t.attrs, models, rng);
    check_fsck(*t.m.vol);
    // Records read see the writes not yet written back.
    write_random_records(t.attrs, models, rng, 3, false);
    check_rows(t.m, t.attrs, models, rng);
    check_bytes(t.attrs, models);
  }
}

TEST_CASE("capsule table: with an attribute removed, growing gives the new bands' tracks it would own back",
          "[capsule_table]") {
  const geom::MemStore g = small_mems();
  std::mt19937_64 rng(99);
  auto dev = formatted(g, kDeviceBytes);
  const std::uint64_t n0 = 3000, n1 = 40000;
  Ino dir = 0;
  {
    Mount m = mount(ref(*dev));
    dir = make_table_dir(m, kColumns, {n0, n0, n0});
  }
  std::vector<Bytes> models;
  std::vector<std::uint64_t> sample = {0, 5, 383, 384, 2999};
  std::vector<std::vector<geom::Lbn>> old_lbns;
  std::uint64_t track_sectors = 0, removed_blocks = 0, kept_blocks = 0, free_after = 0;
  {
    Table t = open_table(ref(*dev), dir);
    for (const TableAttribute& a : t.attrs) models.emplace_back(a.array->size(), 0);
    write_random_records(t.attrs, models, rng, 5);
    std::string msg;
    {
      int r = place(t, dir, &msg);
      INFO(msg);
      REQUIRE(r == 0);
    }
    track_sectors = g.sectors_per_track();
    for (const TableAttribute& a : t.attrs)
      (a.name == "b_i4" ? removed_blocks : kept_blocks) += a.array->schema().table_part->cells_per_capsule;
    // b_i4 goes: its tracks of the band with it.
    const std::uint64_t free_placed = t.m.vol->allocator().free_sectors();
    t.attrs.erase(t.attrs.begin() + 1);
    models.erase(models.begin() + 1);
    REQUIRE(t.m.md().unlink(dir, "b_i4") == 0);
    REQUIRE(t.m.md().sync() == 0);
    CHECK(t.m.vol->allocator().free_sectors() == free_placed + removed_blocks * track_sectors);
    old_lbns = lbns_of(t.attrs, sample);
    const std::uint64_t free_before = t.m.vol->allocator().free_sectors();
    // Grown into a second band: of its tracks, only the remaining attributes' stay allocated.
    {
      int r = grow(t, dir, n1, &msg);
      INFO(msg);
      REQUIRE(r == 0);
    }
    for (std::size_t i = 0; i < models.size(); ++i) models[i].resize(n1 * t.attrs[i].array->schema().dtype.itemsize, 0);
    CHECK(table_info(t.attrs, dir, stored_record(t.m, dir))["capsule"]["bands"] == 2);
    free_after = t.m.vol->allocator().free_sectors();
    CHECK(free_after == free_before - kept_blocks * track_sectors);
    CHECK(lbns_of(t.attrs, sample) == old_lbns);
    check_bytes(t.attrs, models);
    check_rows(t.m, t.attrs, models, rng);
    check_fsck(*t.m.vol);
  }
  Table t = open_table(ref(*dev), dir);
  REQUIRE(t.attrs.size() == 2);
  CHECK(t.m.vol->allocator().free_sectors() == free_after);
  CHECK(lbns_of(t.attrs, sample) == old_lbns);
  check_bytes(t.attrs, models);
  check_rows(t.m, t.attrs, models, rng);
  check_fsck(*t.m.vol);
}

TEST_CASE("capsule table: more attributes than the parallelism, capsules split across two classes",
          "[capsule_table]") {
  const geom::MemStore g = small_mems();
  std::mt19937_64 rng(12);
  auto dev = formatted(g, kDeviceBytes);
  std::vector<Column> columns;
  const char* dtypes[] = {"uint8", "int16", "float32", "int64"};
  for (int i = 0; i < 12; ++i) columns.push_back({fmt::format("x{:02}", i), dtypes[i % 4], i % 2 ? "naive" : "hilbert"});
  const std::uint64_t n0 = 2500, n1 = 30000;
  Ino dir = 0;
  {
    Mount m = mount(ref(*dev));
    dir = make_table_dir(m, columns, std::vector<std::uint64_t>(columns.size(), n0));
  }
  std::vector<Bytes> models;
  {
    Table t = open_table(ref(*dev), dir);
    REQUIRE(t.attrs.size() == 12);
    for (const TableAttribute& a : t.attrs) models.emplace_back(a.array->size(), 0);
    write_random_records(t.attrs, models, rng, 3);
    std::string msg;
    int r = place(t, dir, &msg);
    INFO(msg);
    REQUIRE(r == 0);
    const layouts::CapsuleFormat format = format_of(t.m, t.attrs);
    CHECK(format.total == 12);
    const nlohmann::json info = table_info(t.attrs, dir, stored_record(t.m, dir));
    INFO(info.dump());
    CHECK(info["capsule"]["split_capsules"].get<std::uint64_t>() > 0);
    // A record's sectors lie in at most two classes: those of its first blocks, then the rest.
    for (std::uint64_t rec = 0; rec < n0; rec += 11) {
      INFO("record " << rec);
      std::vector<geom::Lbn> cls;
      int classes = 0;
      for (const TableAttribute& a : t.attrs) {
        const geom::Lbn lbn = where(*a.array, rec).first;
        if (classes == 0 || !std::binary_search(cls.begin(), cls.end(), lbn)) {
          ++classes;
          cls = g.equivalent(lbn);
          std::sort(cls.begin(), cls.end());
        }
      }
      CHECK(classes <= 2);
    }
    check_bytes(t.attrs, models);
    check_rows(t.m, t.attrs, models, rng);
    check_fsck(*t.m.vol);
    r = grow(t, dir, n1, &msg);
    REQUIRE(r == 0);
    for (std::size_t i = 0; i < models.size(); ++i) models[i].resize(n1 * t.attrs[i].array->schema().dtype.itemsize, 0);
    check_bytes(t.attrs, models);
    check_rows(t.m, t.attrs, models, rng);
    check_fsck(*t.m.vol);
  }
  Table t = open_table(ref(*dev), dir);
  check_bytes(t.attrs, models);
  check_rows(t.m, t.attrs, models, rng);
  check_fsck(*t.m.vol);
}
