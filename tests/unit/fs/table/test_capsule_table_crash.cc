// A power cut at every device event while a capsule table is placed, grown
// or moved out (fs/table/capsule_table.h) leaves every attribute in its old or
// every one in its new placement, and fsck clean.
#include <catch2/catch.hpp>

#include "tests/unit/support/capsule_table_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;
using namespace mmfs::fs::testing::tables;

TEST_CASE("capsule table: a power cut while placing, growing or moving out leaves every attribute old or every "
          "one new",
          "[capsule_table][crash]") {
  const geom::MemStore g = small_mems();
  std::mt19937_64 rng(777);
  const std::uint64_t n0 = 3000, n1 = 40000;
  // Golden images: the arrays apart (full of data, durable), and the same in capsules.
  auto apart_image = formatted(g, kDeviceBytes);
  Ino dir = 0;
  std::vector<Bytes> models;
  {
    Mount m = mount(ref(*apart_image));
    dir = make_table_dir(m, kColumns, {n0, n0, n0});
  }
  {
    Table t = open_table(ref(*apart_image), dir);
    for (const TableAttribute& a : t.attrs) models.emplace_back(a.array->size(), 0);
    write_random_records(t.attrs, models, rng, 6);
  }
  const std::vector<Bytes> apart_models = models;
  auto capsule_image = copy_of(*apart_image);
  {
    Table t = open_table(ref(*capsule_image), dir);
    std::string msg;
    int r = place(t, dir, &msg);
    INFO(msg);
    REQUIRE(r == 0);
    write_random_records(t.attrs, models, rng, 2);  // and some records written in the capsules
  }
  std::vector<Bytes> grown = models;
  for (std::size_t i = 0; i < grown.size(); ++i) grown[i].resize(grown[i].size() / n0 * n1, 0);

  struct Op {
    std::string name;
    MemoryDevice* golden;
    const std::vector<Bytes>* before;
    const std::vector<Bytes>* after;
  };
  const std::vector<Op> ops = {{"place_table_in_capsules", apart_image.get(), &apart_models, &apart_models},
                               {"grow_table", capsule_image.get(), &models, &grown},
                               {"place_table_apart", capsule_image.get(), &models, &models}};
  auto run = [&](std::size_t op, Table& t, std::string* msg) {
    switch (op) {
      case 0: return place(t, dir, msg);
      case 1: return grow(t, dir, n1, msg);
      default: return apart(t, dir, apart_schemas(t.attrs, "naive"), msg);
    }
  };
  for (std::size_t op = 0; op < ops.size(); ++op) {
    INFO("operation " << ops[op].name);
    // The old and new states (stored schemas and the directory's record), and
    // the device events between them, from a clean run.
    std::vector<std::optional<ArraySchema>> old_schemas, new_schemas;
    std::optional<std::string> old_record, new_record;
    std::uint64_t events = 0;
    {
      auto* fault = new FaultInjectingDevice(copy_of(*ops[op].golden), 1);
      Table t = open_table(std::unique_ptr<BlockDevice>(fault), dir);
      old_schemas = stored_schemas(t.m, t.attrs);
      old_record = t.m.md().xattr(dir, kTableXattr);
      const std::uint64_t before = fault->events();
      std::string msg;
      int r = run(op, t, &msg);
      INFO(msg);
      REQUIRE(r == 0);
      events = fault->events() - before;
      new_schemas = stored_schemas(t.m, t.attrs);
      new_record = t.m.md().xattr(dir, kTableXattr);
    }
    REQUIRE(events > 2);
    REQUIRE(old_schemas != new_schemas);
    for (std::size_t i = 0; i < old_schemas.size(); ++i) {
      REQUIRE(old_schemas[i]);
      REQUIRE(new_schemas[i]);
      REQUIRE(*old_schemas[i] != *new_schemas[i]);  // every attribute moves
    }
    if (op == 0) CHECK((!old_record && new_record));
    if (op == 1) CHECK((old_record && old_record == new_record));
    if (op == 2) CHECK((old_record && !new_record));
    // The cut points: every event (six times each: the unflushed writes of a
    // power cut are kept, lost or torn at random), or 60 of them (the first
    // and the last among them).
    std::vector<std::uint64_t> cuts;
    if (events <= 20) {
      for (int rep = 0; rep < 6; ++rep)
        for (std::uint64_t c = 1; c <= events; ++c) cuts.push_back(c);
    } else {
      cuts = {1, events};
      while (cuts.size() < 60) cuts.push_back(1 + rng() % events);
    }
    int old_kept = 0, new_kept = 0;
    for (std::size_t k = 0; k < cuts.size(); ++k) {
      const std::uint64_t cut = cuts[k];
      INFO("cut " << cut << " of " << events);
      auto* fault = new FaultInjectingDevice(copy_of(*ops[op].golden), 100 * op + k + 7);
      std::unique_ptr<MemoryDevice> image;
      int r = 0;
      {
        Table t = open_table(std::unique_ptr<BlockDevice>(fault), dir);
        fault->fail_after(fault->events() + cut);
        std::string msg;
        r = run(op, t, &msg);
        image = fault->crash_image();
      }
      Table t = open_table(std::move(image), dir);
      REQUIRE(t.attrs.size() == kColumns.size());
      const std::vector<std::optional<ArraySchema>> stored = stored_schemas(t.m, t.attrs);
      int is_old = 0, is_new = 0;
      for (std::size_t i = 0; i < stored.size(); ++i) {
        is_old += stored[i] == old_schemas[i];
        is_new += stored[i] == new_schemas[i];
      }
      const int n = int(stored.size());
      // All old or all new: never a mix, never a third state.
      REQUIRE(((is_old == n && is_new == 0) || (is_new == n && is_old == 0)));
      const bool now_new = is_new == n;
      if (r == 0) CHECK(now_new);  // the operation returns once the new placement is durable
      (now_new ? new_kept : old_kept)++;
      // The directory's record agrees with the attributes.
      CHECK(t.m.md().xattr(dir, kTableXattr) == (now_new ? new_record : old_record));
      check_bytes(t.attrs, now_new ? *ops[op].after : *ops[op].before);
      check_fsck(*t.m.vol);
    }
    INFO("old kept " << old_kept << ", new kept " << new_kept);
    CHECK(old_kept > 0);
    CHECK(new_kept > 0);
  }
}
