// An array's extra copies (fs/array/array_file_copies.cc): every view
// through every copy equals the bytes written, for every layout as primary
// and as copy; a copy that lags serves nothing stale; dropping copies gives
// their space back; and a power cut at any device event, during writes and
// their catch-up or while copies are built and dropped, leaves each copy
// current or recorded as behind, never read stale.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "fs/array/array_file.h"
#include "fs/array/behind_record.h"
#include "fs/array/copy_spec.h"
#include "fs/device/fault_device.h"
#include "fs/meta/keys.h"
#include "fs/paths/view_path.h"
#include "fs/volume/fsck.h"
#include "tests/unit/support/array_file_test_support.h"
#include "tests/unit/support/copies_test_support.h"
#include "tests/unit/support/array_test_support.h"
#include "tests/unit/support/array_view_support.h"
#include "tests/unit/support/fs_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;
using namespace mmfs::fs::testing::arrays;


TEST_CASE("array copies: every layout as primary and as copy serves every view", "[array_file][copies]") {
  auto g = toy_disk();
  auto dev = formatted(*g);
  Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
  std::mt19937_64 rng(41);
  for (const std::string& primary : kLayouts) {
    INFO("primary " << primary);
    const ArraySchema s = make_schema({12, 9, 10}, "int32", primary);
    auto a = create_array(m, "p-" + primary, s);
    Bytes model(a->size(), 0);
    random_writes(*a, model, rng, 10);
    std::string copies;
    for (const std::string& c : kLayouts) copies += (copies.empty() ? "" : ";") + c;
    copies += ";naive:order=0,2,1:cell=3,3,3";
    std::string msg;
    REQUIRE(a->change_schema(with_copies(a->schema(), copies.c_str()), &msg) == 0);
    REQUIRE(a->schema().copies.size() == kLayouts.size() + 1);
    check_every_copy(*a, model);
    // Writes reach every copy: read at once (never stale), then after the catch-up and a reopen.
    random_writes(*a, model, rng, 10);
    check_every_copy(*a, model);
    REQUIRE(a->flush(true, &msg) == 0);
    REQUIRE(a->catch_up(&msg) == 0);
    CHECK(all_current(*a));
    const Ino ino = a->ino();
    a->quiesce();
    a.reset();
    a = open_stored(m, ino);
    check_every_copy(*a, model);
  }
}

TEST_CASE("array copies: cells behind are recorded with the write-back, so a reopen never serves them",
          "[array_file][copies]") {
  auto g = toy_disk();
  auto dev = formatted(*g);
  Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
  std::mt19937_64 rng(45);
  // Cells that held data (rewritten in place) and cells that never did.
  auto a = create_array(m, "rec", with_copies(make_schema({32, 16, 8}, "float64", "hilbert"), "naive"));
  Bytes model(a->size(), 0);
  const Bytes first = random_bytes(rng, a->size() / 2);
  REQUIRE(write_file(*a, 0, first) == 0);
  std::copy(first.begin(), first.end(), model.begin());
  std::string msg;
  REQUIRE(a->flush(true, &msg) == 0);
  REQUIRE(a->catch_up(&msg) == 0);
  for (std::uint64_t at : {std::uint64_t(100), a->size() / 2 + 4096}) {  // a rewrite, then fresh cells
    const Bytes more = random_bytes(rng, 3000);
    REQUIRE(write_file(*a, at, more) == 0);
    std::copy(more.begin(), more.end(), model.begin() + std::ptrdiff_t(at));
    REQUIRE(a->flush(true, &msg) == 0);  // written back and durable; no catch-up yet
    const Ino ino = a->ino();
    a->quiesce();
    a.reset();
    // Durable with the write-back: the record names the copy's cells the
    // write reached (the reopen below catches up on them in the background,
    // so its in-memory state may already be current).
    const auto record = m.md().store().get(keys::copy_record(ino));
    std::map<std::uint8_t, Roaring> behind;
    REQUIRE(record);
    REQUIRE(decode_behind(*record, &behind));
    CHECK(behind.count(1) == 1);
    a = open_stored(m, ino);
    a->quiesce();
    CHECK(bytes_diff(view_bytes(*a, {"copy", "1"}), model) == "");
  }
}

TEST_CASE("array copies: a lagging copy serves no view until caught up", "[array_file][copies]") {
  auto g = toy_disk();
  auto dev = formatted(*g);
  Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
  std::mt19937_64 rng(43);
  auto a = create_array(m, "lag", with_copies(make_schema({32, 16, 8}, "float64", "multimap"), "naive;hilbert"));
  Bytes model(a->size(), 0);
  random_writes(*a, model, rng, 5);
  std::string msg;
  REQUIRE(a->flush(false, &msg) == 0);  // written back; no catch-up started (that is fsync's, or idle time's)
  nlohmann::json info = a->info();
  REQUIRE(info["copies"].size() == 2);
  CHECK(info["copies"][0]["state"] == "behind");
  CHECK(info["copies"][0]["cells_behind"].get<std::uint64_t>() > 0);
  // A plan names only current placements as the server.
  const DataView slice = resolve({"slice", "2", "3"}, a->schema());
  nlohmann::json plan;
  REQUIRE(a->plan(slice, &plan, &msg) == 0);
  CHECK(plan["served_by"] == 0);
  CHECK(plan["copies"][1]["state"] == "behind");
  CHECK(bytes_diff(view_bytes(*a, {"slice", "2", "3"}), extract(model, {32, 16, 8}, 8,
                                                                 {Sel{false, 0, 32, 1}, Sel{false, 0, 16, 1},
                                                                  Sel{true, 3, 0, 1}})) == "");
  // Reading through copy 2 catches it up first; copy 1 stays behind.
  CHECK(bytes_diff(view_bytes(*a, {"copy", "2"}), model) == "");
  info = a->info();
  CHECK(info["copies"][0]["state"] == "behind");
  CHECK(info["copies"][1]["state"] == "current");
  REQUIRE(a->catch_up(&msg) == 0);
  CHECK(all_current(*a));
  check_every_copy(*a, model);
}

TEST_CASE("array copies: dropping copies gives their space back; truncate zeroes them", "[array_file][copies]") {
  auto g = toy_disk();
  auto dev = formatted(*g);
  Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
  std::mt19937_64 rng(47);
  const std::uint64_t free0 = m.vol->allocator().free_sectors();
  auto a = create_random(m, "space", make_schema({20, 20, 20}, "float64", "hilbert"), rng);
  const std::uint64_t free1 = m.vol->allocator().free_sectors();
  std::string msg;
  REQUIRE(a->change_schema(with_copies(a->schema(), "naive;zorder:cell=4,4,4"), &msg) == 0);
  const nlohmann::json info = a->info();
  std::uint64_t sum = 0;
  for (const auto& c : info["copies"]) sum += c["device_bytes"].get<std::uint64_t>();
  CHECK(info["device_bytes"]["copies"] == sum);
  CHECK(free1 - m.vol->allocator().free_sectors() == sum / 512);
  // Reordered: the same copies kept (their slots and bytes), nothing rebuilt.
  const auto before = a->schema().copies;
  REQUIRE(a->change_schema(with_copies(a->schema(), "zorder:cell=4,4,4;naive"), &msg) == 0);
  CHECK(a->schema().copies[0].slot == before[1].slot);
  CHECK(a->schema().copies[1].slot == before[0].slot);
  CHECK(free1 - m.vol->allocator().free_sectors() == sum / 512);
  // The same list set again (parsed without slots) keeps every slot, in memory and in the record.
  const auto reordered = a->schema().copies;
  REQUIRE(a->change_schema(with_copies(a->schema(), "zorder:cell=4,4,4;naive"), &msg) == 0);
  CHECK(a->schema().copies == reordered);
  CHECK(stored_schema(m, a->ino())->copies == reordered);
  CHECK(check_volume(*m.vol, false).problems.empty());
  // Truncate to 0 zeroes every copy.
  REQUIRE(a->zero(&msg) == 0);
  check_every_copy(*a, Bytes(a->size(), 0));
  REQUIRE(a->change_schema(with_copies(a->schema(), "none"), &msg) == 0);
  CHECK(m.vol->allocator().free_sectors() == free1);
  int keys_left = 0;
  for (const std::string& prefix : {keys::extents(a->ino()) + "k", keys::checksum_prefix(a->ino(), 'k'),
                                    keys::checksum_prefix(a->ino(), 'j'), keys::copy_record(a->ino())})
    m.md().store().scan(prefix, [&](std::string_view, std::string_view) {
      ++keys_left;
      return true;
    });
  CHECK(keys_left == 0);
  CHECK(free0 > free1);
  CHECK(check_volume(*m.vol, false).problems.empty());
}

TEST_CASE("array copies: refused where not implemented, and nothing changes", "[array_file][copies]") {
  auto g = toy_disk();
  auto dev = formatted(*g);
  Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
  std::mt19937_64 rng(53);
  auto a = create_random(m, "refused", make_schema({16, 16, 8}, "float64", "naive"), rng);
  const std::uint64_t free = m.vol->allocator().free_sectors();
  std::string msg;
  CHECK(a->change_schema(with_copies(a->schema(), "hilbert;capsule"), &msg) == ENOTSUP);
  CHECK(msg.find("capsule") != std::string::npos);
  CHECK(a->schema().copies.empty());
  CHECK(m.vol->allocator().free_sectors() == free);
}

TEST_CASE("array copies: a power cut during writes and their catch-up never leaves a copy read stale",
          "[array_file][copies][crash]") {
  auto g = toy_disk();
  std::mt19937_64 rng(59);
  auto golden = formatted(*g);
  Ino ino = 0;
  Bytes model;
  {
    Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*golden)));
    // (An mloc copy's catch-up encodes a new image on fresh extents and swaps it in one commit.)
    auto a = create_array(m, "cut", with_copies(make_schema({24, 20, 10}, "int16", "multimap"),
                                                "naive;hilbert;mloc:compress=zstd"));
    ino = a->ino();
    model.assign(a->size(), 0);
    // Only the first half holds data: the cut writes also reach cells that never held any.
    const Bytes half = random_bytes(rng, a->size() / 2);
    REQUIRE(write_file(*a, 0, half) == 0);
    std::copy(half.begin(), half.end(), model.begin());
    std::string msg;
    REQUIRE(a->flush(true, &msg) == 0);
    REQUIRE(a->catch_up(&msg) == 0);
  }
  // The operation cut: writes, a write-back (the record with it), and the catch-up.
  auto operate = [&](ArrayFile& a, std::mt19937_64& r) {
    Bytes scratch = model;
    for (int i = 0; i < 6; ++i) {
      const std::uint64_t off = r() % scratch.size();
      const Bytes data = random_bytes(r, std::size_t(1 + r() % std::min<std::uint64_t>(3000, scratch.size() - off)));
      if (write_file(a, off, data) != 0) return;
    }
    std::string msg;
    if (a.flush(false, &msg) != 0) return;
    (void)a.catch_up(&msg);
  };
  std::uint64_t events = 0;
  {
    auto* fault = new FaultInjectingDevice(copy_of(*golden), 1);
    Mount m = mount(std::unique_ptr<BlockDevice>(fault));
    auto a = open_stored(m, ino);
    const std::uint64_t before = fault->events();
    std::mt19937_64 r(7);
    operate(*a, r);
    events = fault->events() - before;
    REQUIRE(events > 4);
  }
  int behind_seen = 0;
  for (std::uint64_t i = 0; i < 60; ++i) {
    const std::uint64_t cut = 1 + (i * 7919) % events;
    INFO("iteration " << i << " cut " << cut << " of " << events);
    auto* fault = new FaultInjectingDevice(copy_of(*golden), 2000 + i);
    std::unique_ptr<MemoryDevice> image;
    {
      Mount m = mount(std::unique_ptr<BlockDevice>(fault));
      auto a = open_stored(m, ino);
      fault->fail_after(fault->events() + cut);
      std::mt19937_64 r(7);
      operate(*a, r);
      image = fault->crash_image();
      a->quiesce();
    }
    Mount m = mount(std::move(image));
    auto a = open_stored(m, ino);
    a->quiesce();  // no background catch-up: each copy is read as the cut left it
    const Bytes primary = view_bytes(*a, {"copy", "0"});
    const nlohmann::json info = a->info();
    for (std::size_t k = 1; k <= 3; ++k) {
      INFO("copy " << k << " " << info["copies"][k - 1].dump());
      if (info["copies"][k - 1]["state"] == "behind") ++behind_seen;
      // Current: its bytes as they lie; behind: caught up first. Either way the primary's.
      REQUIRE(bytes_diff(view_bytes(*a, {"copy", std::to_string(k)}), primary) == "");
    }
    auto report = check_volume(*m.vol, false);
    INFO((report.problems.empty() ? "" : report.problems[0]));
    REQUIRE(report.problems.empty());
  }
  CHECK(behind_seen > 0);
}

TEST_CASE("array copies: a power cut while copies are built and dropped leaves the old set or the new",
          "[array_file][copies][crash]") {
  auto g = toy_disk();
  std::mt19937_64 rng(61);
  auto golden = formatted(*g);
  Ino ino = 0;
  Bytes model;
  ArraySchema old_schema;
  {
    Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*golden)));
    auto a = create_array(m, "swap", with_copies(make_schema({30, 20, 10}, "float32", "naive"), "hilbert;zorder"));
    ino = a->ino();
    model.assign(a->size(), 0);
    random_writes(*a, model, rng, 20);
    std::string msg;
    REQUIRE(a->flush(true, &msg) == 0);
    REQUIRE(a->catch_up(&msg) == 0);
    old_schema = a->schema();
  }
  const ArraySchema target = with_copies(old_schema, "multimap;hilbert");
  std::uint64_t events = 0;
  {
    auto* fault = new FaultInjectingDevice(copy_of(*golden), 1);
    Mount m = mount(std::unique_ptr<BlockDevice>(fault));
    auto a = open_stored(m, ino);
    const std::uint64_t before = fault->events();
    std::string msg;
    REQUIRE(a->change_schema(target, &msg) == 0);
    events = fault->events() - before;
  }
  int old_kept = 0, new_kept = 0;
  for (std::uint64_t i = 0; i < 40; ++i) {
    const std::uint64_t cut = i % 8 == 7 ? 0 : 1 + (i * 104729) % events;
    INFO("iteration " << i << " cut " << cut << " of " << events);
    auto* fault = new FaultInjectingDevice(copy_of(*golden), 3000 + i);
    std::unique_ptr<MemoryDevice> image;
    int r = 0;
    {
      Mount m = mount(std::unique_ptr<BlockDevice>(fault));
      auto a = open_stored(m, ino);
      if (cut) fault->fail_after(fault->events() + cut);
      std::string msg;
      r = a->change_schema(target, &msg);
      image = fault->crash_image();
      a->quiesce();
    }
    Mount m = mount(std::move(image));
    auto stored = stored_schema(m, ino);
    REQUIRE(stored);
    const std::string text = copies_text(stored->copies);
    const bool is_old = text == "hilbert;zorder", is_new = text == "multimap;hilbert";
    CHECK((is_old || is_new));
    if (r == 0) CHECK(is_new);
    (is_new ? new_kept : old_kept)++;
    auto a = open_stored(m, ino);
    check_every_copy(*a, model);
    auto report = check_volume(*m.vol, false);
    INFO((report.problems.empty() ? "" : report.problems[0]));
    REQUIRE(report.problems.empty());
  }
  CHECK(old_kept > 0);
  CHECK(new_kept > 0);
}

TEST_CASE("array copies: a power cut while an array is created with copies leaves no array or all of it",
          "[array_file][copies][crash]") {
  auto g = toy_disk();
  auto golden = formatted(*g);
  const ArraySchema s = with_copies(make_schema({30, 20, 10}, "float32", "multimap"), "hilbert;naive");
  // The events of one creation, counted on a copy of the volume.
  std::uint64_t events = 0;
  {
    auto* fault = new FaultInjectingDevice(copy_of(*golden), 1);
    Mount m = mount(std::unique_ptr<BlockDevice>(fault));
    Inode n;
    new_file(m.md(), "born", &n);
    const std::uint64_t before = fault->events();
    std::shared_ptr<ArrayFile> a;
    std::string msg;
    REQUIRE(ArrayFile::create(m.ctx(), n, s, nullptr, &a, &msg) == 0);
    events = fault->events() - before;
    a->quiesce();
  }
  int absent = 0, whole = 0;
  for (std::uint64_t i = 0; i < 30; ++i) {
    const std::uint64_t cut = 1 + (i * 7919) % events;
    INFO("iteration " << i << " cut " << cut << " of " << events);
    auto* fault = new FaultInjectingDevice(copy_of(*golden), 5000 + i);
    std::unique_ptr<MemoryDevice> image;
    Ino ino = 0;
    {
      Mount m = mount(std::unique_ptr<BlockDevice>(fault));
      Inode n;
      new_file(m.md(), "born", &n);
      REQUIRE(m.md().sync() == 0);
      ino = n.ino;
      fault->fail_after(fault->events() + cut);
      std::shared_ptr<ArrayFile> a;
      std::string msg;
      (void)ArrayFile::create(m.ctx(), n, s, nullptr, &a, &msg);
      image = fault->crash_image();
      if (a) a->quiesce();
    }
    Mount m = mount(std::move(image));
    auto stored = stored_schema(m, ino);
    if (!stored || stored->shape.empty()) {
      ++absent;
    } else {
      ++whole;
      CHECK(copies_text(stored->copies) == "hilbert;naive");
      auto a = open_stored(m, ino);
      check_every_copy(*a, Bytes(a->size(), 0));
    }
    auto report = check_volume(*m.vol, false);
    INFO((report.problems.empty() ? "" : report.problems[0]));
    REQUIRE(report.problems.empty());
  }
  CHECK(absent > 0);
  CHECK(whole > 0);
}

TEST_CASE("array copies: a cell that fails its checksum is served from another copy and rewritten",
          "[array_file][copies]") {
  auto g = toy_disk();
  auto dev = formatted(*g);
  std::vector<std::string> healed;
  Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
  ArrayContext ctx = m.ctx();
  ctx.on_healed = [&](Ino, const std::string& message) { healed.push_back(message); };
  std::mt19937_64 rng(67);
  const ArraySchema s = with_copies(make_schema({24, 16, 12}, "float64", "multimap"), "naive;hilbert");
  Bytes model;
  std::shared_ptr<ArrayFile> a = filled_with_copies(m, ctx, "heal", s, rng, &model);
  std::string msg;
  // Flip a byte in some sectors of each placement (the primary's and copy 1's extents).
  auto extents_of = [&](std::uint32_t k) {
    if (k == 0) return m.md().extents(a->ino());
    auto v = m.md().store().get(keys::copy_extents(a->ino(), a->schema().copies[k - 1].slot));
    REQUIRE(v);
    return *decode_extents(*v);
  };
  std::size_t flipped = 0;
  for (std::uint32_t k : {0u, 1u}) {
    for (const Extent& e : extents_of(k))
      for (std::uint64_t sector = e.start + 3; sector < e.start + e.sectors; sector += 41) {
        dev->bytes()[sector * 512 + 100] ^= std::byte{0x5A};
        ++flipped;
      }
  }
  REQUIRE(flipped > 4);
  // A fresh handle: nothing cached. Every view of every placement reads the bytes written.
  const Ino ino = a->ino();
  a->quiesce();
  a.reset();
  REQUIRE(ArrayFile::open(ctx, ino, *stored_schema(m, ino), &a, &msg) == 0);
  check_every_copy(*a, model);
  CHECK(!healed.empty());
  INFO(healed.front());
  CHECK(healed.front().find("rewritten in place") != std::string::npos);
  // Repaired on the device: a second handle reads every placement with no healing.
  const std::size_t after = healed.size();
  a->quiesce();
  a.reset();
  REQUIRE(ArrayFile::open(ctx, ino, *stored_schema(m, ino), &a, &msg) == 0);
  check_every_copy(*a, model);
  CHECK(healed.size() == after);
  CHECK(check_volume(*m.vol, false).problems.empty());
}

TEST_CASE("array copies: many bad cells of one piece are found by one read and each rewritten once",
          "[array_file][copies]") {
  auto g = toy_disk();
  auto dev = formatted(*g);
  std::vector<std::string> healed;
  auto* ref = new RefDevice(*dev);
  Mount m = mount(std::unique_ptr<BlockDevice>(ref));
  ArrayContext ctx = m.ctx();
  ctx.on_healed = [&](Ino, const std::string& message) { healed.push_back(message); };
  std::mt19937_64 rng(68);
  const ArraySchema s = with_copies(make_schema({24, 16, 12}, "float64", "naive"), "hilbert");
  Bytes model;
  std::shared_ptr<ArrayFile> a = filled_with_copies(m, ctx, "many", s, rng, &model);
  std::string msg;
  // One flipped byte in every fourth sector of the primary: many bad cells in each piece a view reads.
  std::size_t flipped = 0;
  std::uint64_t primary_bytes = 0;
  for (const Extent& e : m.md().extents(a->ino())) {
    primary_bytes += e.sectors * 512;
    for (std::uint64_t sector = e.start + 1; sector < e.start + e.sectors; sector += 4, ++flipped)
      dev->bytes()[sector * 512 + 7] ^= std::byte{0x3C};
  }
  REQUIRE(flipped >= 20);
  const Ino ino = a->ino();
  a->quiesce();
  a.reset();
  REQUIRE(ArrayFile::open(ctx, ino, *stored_schema(m, ino), &a, &msg) == 0);
  const std::uint64_t before = ref->bytes_read.load();
  CHECK(bytes_diff(read_all(*a), model) == "");
  const std::uint64_t read = ref->bytes_read.load() - before;
  // Each bad cell healed once (no cell twice: the messages name distinct cells).
  REQUIRE(healed.size() >= 8);  // several flipped sectors may share a cell
  std::set<std::string> distinct(healed.begin(), healed.end());
  CHECK(distinct.size() == healed.size());
  // The piece read to serve it, once more to find every bad cell, once to prove them clean and
  // once to serve it, plus each bad cell from the copy: about 5 reads of the primary's bytes here.
  // One read of the piece per bad cell (12 or more) would be well past 6.
  INFO("read " << read << " bytes; the primary holds " << primary_bytes << "; " << healed.size() << " cells healed");
  CHECK(read <= 6 * primary_bytes);
  // Repaired on the device: nothing more to heal.
  const std::size_t after = healed.size();
  a->quiesce();
  a.reset();
  REQUIRE(ArrayFile::open(ctx, ino, *stored_schema(m, ino), &a, &msg) == 0);
  CHECK(bytes_diff(read_all(*a), model) == "");
  CHECK(healed.size() == after);
  CHECK(check_volume(*m.vol, false).problems.empty());
}

TEST_CASE("array copies: a piece the device cannot read in one placement is served from another copy",
          "[array_file][copies]") {
  auto g = toy_disk();
  auto dev = formatted(*g);
  auto* ref = new RefDevice(*dev);
  Mount m = mount(std::unique_ptr<BlockDevice>(ref));
  std::vector<std::string> around, healed;
  ArrayContext ctx = m.ctx();
  ctx.on_served_around = [&](Ino, const std::string& message) { around.push_back(message); };
  ctx.on_healed = [&](Ino, const std::string& message) { healed.push_back(message); };
  std::mt19937_64 rng(71);
  const ArraySchema s = with_copies(make_schema({24, 16, 12}, "float64", "multimap"), "naive;hilbert");
  Bytes model;
  std::shared_ptr<ArrayFile> a = filled_with_copies(m, ctx, "around", s, rng, &model);
  std::string msg;
  // The primary's sectors become unreadable (a lost member, bad sectors);
  // a fresh handle, so nothing is served from memory.
  for (const Extent& e : m.md().extents(a->ino())) ref->failing.emplace_back(e.start * 512, (e.start + e.sectors) * 512);
  REQUIRE(!ref->failing.empty());
  const Ino ino = a->ino();
  a->quiesce();
  a.reset();
  REQUIRE(ArrayFile::open(ctx, ino, *stored_schema(m, ino), &a, &msg) == 0);
  // Every view that may use any copy reads the bytes written: slices along
  // every dimension (the primary's cheapest among them), a box, the file.
  for (std::size_t d = 0; d < 3; ++d) {
    std::vector<Sel> sel{Sel{false, 0, 24, 1}, Sel{false, 0, 16, 1}, Sel{false, 0, 12, 1}};
    sel[d] = Sel{true, s.shape[d] / 3, 0, 1};
    CHECK(bytes_diff(view_bytes(*a, {"slice", std::to_string(d), std::to_string(s.shape[d] / 3)}),
                     extract(model, s.shape, 8, sel)) == "");
  }
  CHECK(bytes_diff(view_bytes(*a, {"box", "1:20:3,:,2:9"}),
                   extract(model, s.shape, 8, {Sel{false, 1, 20, 3}, Sel{false, 0, 16, 1}, Sel{false, 2, 9, 1}})) ==
        "");
  CHECK(bytes_diff(read_all(*a), model) == "");
  REQUIRE(!around.empty());
  INFO(around.front());
  CHECK(around.front().find("the primary failed to read") != std::string::npos);
  CHECK(around.front().find("served from copy") != std::string::npos);
  CHECK(healed.empty());  // nothing is rewritten: the sectors are the device's to remap
  // A@/copy/0@ reads the primary only: the device's error, not another copy's bytes.
  {
    const ArraySchema sc = a->schema();
    const std::vector<std::string> path{"copy", "0@", "slice", "0", "2"};
    auto r = resolve_view(path, sc.shape, 8, false, {}, sc.copies.size());
    REQUIRE(std::holds_alternative<ViewNode>(r));
    const DataView v = *std::get<ViewNode>(r).data;
    Bytes out(v.bytes(8));
    std::size_t got = 0;
    CHECK(a->read_view(v, 0, out.size(), reinterpret_cast<std::byte*>(out.data()), &got, &msg) == EIO);
  }
  // A relayout, whose reads are the array's own (no view), takes the bytes
  // from a copy too: the new primary, on other sectors, holds them.
  ArraySchema z = a->schema();
  z.layout = "zorder";
  REQUIRE(a->change_schema(z, &msg) == 0);
  CHECK(bytes_diff(view_bytes(*a, {"copy", "0"}), model) == "");
  // The device reads again: every placement reads the bytes.
  ref->failing.clear();
  check_every_copy(*a, model);
}

TEST_CASE("array copies: mmfsck drops records of copies the schema does not list", "[array_file][copies]") {
  auto g = toy_disk();
  auto dev = formatted(*g);
  Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
  std::mt19937_64 rng(71);
  auto a = create_random(m, "stray", make_schema({16, 16, 8}, "float64", "naive"), rng);
  std::string msg;
  REQUIRE(a->change_schema(with_copies(a->schema(), "hilbert"), &msg) == 0);
  CHECK(check_volume(*m.vol, false).problems.empty());
  // A slot nobody lists: its extent map (of no sectors) and a checksum record.
  WriteBatch b;
  b.put(keys::copy_extents(a->ino(), 9), encode_extents({}));
  b.put(keys::checksum_record(a->ino(), 0, keys::kCopyChecksumTable, 9), std::string(8, '\x01'));
  b.put(keys::copy_mloc_record(a->ino(), 9), std::string(24, '\0'));  // an mloc copy's image record
  REQUIRE(m.md().apply(b, {}) == 0);
  auto report = check_volume(*m.vol, false);
  CHECK(report.problems.size() == 3);
  report = check_volume(*m.vol, true);
  CHECK(report.uncorrected == 0);
  CHECK(check_volume(*m.vol, false).problems.empty());
  // The listed copy is untouched.
  check_every_copy(*a, read_all(*a));
}
