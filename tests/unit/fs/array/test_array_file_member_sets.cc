// Copies on a volume of several devices (fs/array/member_sets.h,
// docs/copies-on-members.md): each placement of an array (the primary and
// every copy) lies on its own set of members, so a lost member loses at most
// one copy of any cell. Checked on a RAID 0 volume of four in-memory members:
// where every sector of each placement lies, which member holds the bytes
// A@/lbn names, reads with a member gone, the primary's move when the number
// of copies changes, space accounting and mmfsck, and a damaged record.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "fs/array/array_file.h"
#include "fs/meta/keys.h"
#include "fs/volume/fsck.h"
#include "tests/unit/support/member_sets_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;
using namespace mmfs::fs::testing::arrays;
using namespace mmfs::fs::testing::members;

TEST_CASE("member sets: each placement of an array lies on members of its own", "[array_file][copies][members]") {
  Striped m;
  std::mt19937_64 rng(131);
  ArraySchema s = with_copies(make_schema({40, 32, 24}, "float64", "multimap"), "naive;hilbert:cell=4,4,4");
  Bytes model;
  auto a = filled(m, "spread", s, rng, &model);
  std::string msg;

  // Three placements on four members: placement k on the members m = k (mod 3).
  const ArraySchema placed = a->schema();
  CHECK(placed.members == std::vector<std::uint32_t>{0, 3});
  REQUIRE(placed.copies.size() == 2);
  CHECK(placed.copies[0].members == std::vector<std::uint32_t>{1});
  CHECK(placed.copies[1].members == std::vector<std::uint32_t>{2});
  // Every sector each placement holds lies on its own members.
  CHECK(m.members_of(m.vol->metadata().extents(a->ino())) == as_set(placed.members));
  for (const CopySpec& c : placed.copies) CHECK(m.members_of(m.copy_extents(a->ino(), c.slot)) == as_set(c.members));
  const nlohmann::json info = a->info();
  CHECK(info["members"] == nlohmann::json({0, 3}));
  CHECK(info["copies"][1]["members"] == nlohmann::json({2}));

  for (int round = 0; round < 2; ++round) {
    for (std::size_t k = 0; k <= 2; ++k) check_placement(*a, k, model);
    CHECK(bytes_diff(read_all(*a), model) == "");
    // A@/lbn names volume sectors: the bytes of an element are on the member
    // and at the member LBN the volume maps it to, on the placement's members.
    for (std::size_t k = 0; k <= 2; ++k)
      for (const std::vector<std::uint64_t>& at : {std::vector<std::uint64_t>{0, 0, 0}, {39, 31, 23}, {17, 5, 11}}) {
        std::string text;
        REQUIRE(a->lbn_text(at, &text, &msg, int(k)) == 0);
        const geom::Lbn v = std::stoull(text);
        const std::uint32_t offset = std::uint32_t(std::stoul(text.substr(text.find(' ') + 1)));
        const auto where = m.geometry().locate(v);
        const std::vector<std::uint32_t>& own = k == 0 ? placed.members : placed.copies[k - 1].members;
        CHECK(as_set(own).count(where.member) == 1);
        const std::uint64_t element = (at[0] * 32 + at[1]) * 24 + at[2];
        CHECK(std::memcmp(m.disks[where.member]->bytes().data() + where.lbn * 512 + offset, model.data() + element * 8,
                          8) == 0);
      }
    a = reopen(m, a);
  }
  CHECK(check_volume(*m.vol, false).problems.empty());
}

TEST_CASE("member sets: with a member lost, every view is served by a placement that does not use it",
          "[array_file][copies][members]") {
  Striped m;
  std::mt19937_64 rng(137);
  // One copy on four members: the primary on members 0 and 2, the copy on 1 and 3.
  // 1.5 MB: several tracks, so each placement has sectors on both its members.
  ArraySchema s = with_copies(make_schema({96, 80, 48}, "int32", "zorder"), "naive:order=0,2,1");
  Bytes model;
  auto a = filled(m, "lossy", s, rng, &model);
  std::string msg;
  CHECK(a->schema().members == std::vector<std::uint32_t>{0, 2});
  CHECK(a->schema().copies[0].members == std::vector<std::uint32_t>{1, 3});
  REQUIRE(m.members_of(m.vol->metadata().extents(a->ino())) == std::set<std::uint32_t>{0, 2});
  REQUIRE(m.members_of(m.copy_extents(a->ino(), a->schema().copies[0].slot)) == std::set<std::uint32_t>{1, 3});
  for (int lost = 0; lost < 4; ++lost) {
    INFO("member " << lost << " lost");
    a = reopen(m, a);
    m.around.clear();
    m.lose(lost);
    // Whatever placement the model prefers, the bytes come back whole.
    CHECK(bytes_diff(read_all(*a), model) == "");
    for (std::size_t d = 0; d < 3; ++d) {
      std::vector<Sel> sel{Sel{false, 0, 96, 1}, Sel{false, 0, 80, 1}, Sel{false, 0, 48, 1}};
      sel[d] = Sel{true, s.shape[d] / 2, 0, 1};
      CHECK(bytes_diff(view_bytes(*a, {"slice", std::to_string(d), std::to_string(s.shape[d] / 2)}),
                       extract(model, s.shape, 4, sel)) == "");
    }
    CHECK_FALSE(m.around.empty());  // some piece needed the lost member's placement first
    // Through the placement on the lost member alone: its device error; the other reads whole.
    const std::size_t hit = lost % 2 == 0 ? 0 : 1;
    int error = 0;
    view_bytes(*a, {"copy", std::to_string(hit)}, &error);
    CHECK(error == EIO);
    CHECK(bytes_diff(view_bytes(*a, {"copy", std::to_string(1 - hit)}), model) == "");
    m.lose(-1);
  }
}

TEST_CASE("member sets: a new number of copies moves the primary in the same commit; dropping them moves nothing",
          "[array_file][copies][members]") {
  Striped m;
  std::mt19937_64 rng(139);
  Inode n;
  new_file(m.vol->metadata(), "moving", &n);
  std::shared_ptr<ArrayFile> a;
  std::string msg;
  // 2 MB: several tracks on every member of any set.
  REQUIRE(ArrayFile::create(m.ctx(), n, make_schema({64, 64, 64}, "float64", "hilbert"), nullptr, &a, &msg) == 0);
  const Bytes model = random_bytes(rng, a->size());
  REQUIRE(write_file(*a, 0, model) == 0);
  REQUIRE(a->flush(true, &msg) == 0);
  // Alone, the array stripes over the whole volume.
  CHECK(a->schema().members.empty());
  CHECK(m.members_of(m.vol->metadata().extents(a->ino())).size() == 4);
  const std::uint64_t total = m.accounted(*a);

  auto set_copies = [&](const char* copies) {
    REQUIRE(a->change_schema(with_copies(a->schema(), copies), &msg) == 0);
    REQUIRE(a->catch_up(&msg) == 0);
    CHECK(m.accounted(*a) == total);  // nothing leaked, nothing freed twice
    CHECK(m.members_of(m.vol->metadata().extents(a->ino())) == as_set(a->schema().members));
    for (const CopySpec& c : a->schema().copies)
      CHECK(m.members_of(m.copy_extents(a->ino(), c.slot)) == as_set(c.members));
    for (std::size_t k = 0; k <= a->schema().copies.size(); ++k) check_placement(*a, k, model);
  };
  set_copies("naive");
  CHECK(a->schema().members == std::vector<std::uint32_t>{0, 2});
  const std::uint8_t first_slot = a->schema().copies[0].slot;
  CHECK(a->schema().copies[0].members == std::vector<std::uint32_t>{1, 3});
  // A second copy: three sets, so the primary moves again and the first copy is built anew on its new set.
  set_copies("naive;zorder");
  CHECK(a->schema().members == std::vector<std::uint32_t>{0, 3});
  CHECK(a->schema().copies[0].members == std::vector<std::uint32_t>{1});
  CHECK(a->schema().copies[0].slot != first_slot);
  CHECK(a->schema().copies[1].members == std::vector<std::uint32_t>{2});
  CHECK_FALSE(m.vol->metadata().store().get(keys::copy_extents(a->ino(), first_slot)));
  CHECK_FALSE(m.vol->metadata().xattr(a->ino(), set_extents_record(first_slot)));
  // Setting the same list again changes nothing.
  const ArraySchema before = a->schema();
  REQUIRE(a->change_schema(with_copies(a->schema(), "naive;zorder"), &msg) == 0);
  CHECK(a->schema() == before);
  // Without copies the primary stays where it is: no data moves.
  const std::vector<Extent> primary = m.vol->metadata().extents(a->ino());
  set_copies("none");
  CHECK(a->schema().members == std::vector<std::uint32_t>{0, 3});
  CHECK(m.vol->metadata().extents(a->ino()) == primary);
  a = reopen(m, a);
  check_placement(*a, 0, model);
  // A relayout of the primary keeps it on its members.
  ArraySchema z = a->schema();
  z.layout = "naive";
  REQUIRE(a->change_schema(z, &msg) == 0);
  CHECK(m.members_of(m.vol->metadata().extents(a->ino())) == std::set<std::uint32_t>{0, 3});
  CHECK(m.accounted(*a) == total);
  a = reopen(m, a);
  check_placement(*a, 0, model);
  CHECK(check_volume(*m.vol, false).problems.empty());
}

TEST_CASE("member sets: a placement whose set record disagrees with its extent map does not open",
          "[array_file][copies][members]") {
  Striped m;
  std::mt19937_64 rng(149);
  Inode n;
  new_file(m.vol->metadata(), "damaged", &n);
  std::shared_ptr<ArrayFile> a;
  std::string msg;
  REQUIRE(ArrayFile::create(m.ctx(), n, with_copies(make_schema({16, 16, 16}, "int16", "naive"), "zorder"), nullptr,
                            &a, &msg) == 0);
  const Bytes model = random_bytes(rng, a->size());
  REQUIRE(write_file(*a, 0, model) == 0);
  REQUIRE(a->flush(true, &msg) == 0);
  const Ino ino = a->ino();
  const std::uint8_t slot = a->schema().copies[0].slot;
  const ArraySchema stored = a->schema();
  a->quiesce();
  a.reset();
  auto own = decode_extents(*m.vol->metadata().xattr(ino, set_extents_record(slot)));
  REQUIRE(own);
  REQUIRE(!own->empty());
  for (const std::string& damage : {std::string("garbage"), encode_extents({{own->front().start + 1, 1}})}) {
    REQUIRE(m.vol->metadata().set_xattr(ino, set_extents_record(slot), damage) == 0);
    CHECK(ArrayFile::open(m.ctx(), ino, stored, &a, &msg) == EUCLEAN);
    CHECK(msg.find("disagrees with the volume's") != std::string::npos);
  }
  // Without the volume's member sets, a placement recorded on one does not open either.
  REQUIRE(m.vol->metadata().set_xattr(ino, set_extents_record(slot), encode_extents(*own)) == 0);
  ArrayContext bare = m.ctx();
  bare.member_sets = nullptr;
  CHECK(ArrayFile::open(bare, ino, stored, &a, &msg) == EUCLEAN);
  REQUIRE(ArrayFile::open(m.ctx(), ino, stored, &a, &msg) == 0);
  CHECK(bytes_diff(read_all(*a), model) == "");
  CHECK(check_volume(*m.vol, false).problems.empty());
  // mmfsck: a record of a slot the schema does not list is stray (dropped);
  // a listed copy on a set without its record is damage it reports.
  REQUIRE(m.vol->metadata().set_xattr(ino, set_extents_record(9), encode_extents(*own)) == 0);
  auto report = check_volume(*m.vol, false);
  REQUIRE(report.problems.size() == 1);
  CHECK(report.problems[0].find("mmfs.set_extents.9") != std::string::npos);
  CHECK(check_volume(*m.vol, true).uncorrected == 0);
  CHECK_FALSE(m.vol->metadata().xattr(ino, set_extents_record(9)));
  CHECK(m.vol->metadata().xattr(ino, set_extents_record(slot)));
  CHECK(check_volume(*m.vol, false).problems.empty());
  a->quiesce();
  a.reset();
  REQUIRE(m.vol->metadata().remove_xattr(ino, set_extents_record(slot)) == 0);
  report = check_volume(*m.vol, false);
  REQUIRE(report.problems.size() == 1);
  CHECK(report.problems[0].find("its set's extents are missing") != std::string::npos);
  CHECK(ArrayFile::open(m.ctx(), ino, stored, &a, &msg) == EUCLEAN);
}

TEST_CASE("member sets: a power cut while the primary moves to its set leaves the old placement or the new",
          "[array_file][copies][members][crash]") {
  // One device carrying a volume of four striped members (the form a
  // volume's superblock stores): every device event can be cut.
  auto member = geom::load_geometry(nlohmann::json{{"kind", "disk"}, {"sector_size", 512}, {"cylinders", 40},
                                                   {"surfaces", 2}, {"sectors_per_track", 64}, {"rpm", 10000},
                                                   {"settle_ms", 1.0}, {"settle_cylinders", 4}, {"name", "small"}});
  geom::StripedGeometry g(std::move(member), 4);
  std::mt19937_64 rng(157);
  auto golden = formatted(g, g.capacity_sectors() * 512);
  Ino ino = 0;
  Bytes model;
  std::uint64_t total = 0;
  auto accounted = [](const Mount& m, Ino i) {
    std::uint64_t t = m.vol->allocator().free_sectors();
    for (const Extent& e : m.md().extents(i)) t += e.sectors;
    if (auto s = stored_schema(m, i))
      for (const CopySpec& c : s->copies)
        if (auto v = m.md().store().get(keys::copy_extents(i, c.slot))) {
          const std::vector<Extent> extents = decode_extents(*v).value();
          for (const Extent& e : extents) t += e.sectors;
        }
    return t;
  };
  {
    Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*golden)));
    REQUIRE(m.sets->stripe_members() == 4);
    auto a = create_array(m, "moving", make_schema({32, 32, 24}, "float32", "zorder"));
    ino = a->ino();
    model = random_bytes(rng, a->size());
    REQUIRE(write_file(*a, 0, model) == 0);
    std::string msg;
    REQUIRE(a->flush(true, &msg) == 0);
    total = accounted(m, ino);
  }
  const ArraySchema target = with_copies(*stored_schema(mount(std::unique_ptr<BlockDevice>(new RefDevice(*golden))),
                                                        ino), "naive");
  std::uint64_t events = 0;
  {
    auto* fault = new FaultInjectingDevice(copy_of(*golden), 1);
    Mount m = mount(std::unique_ptr<BlockDevice>(fault));
    auto a = open_stored(m, ino);
    const std::uint64_t before = fault->events();
    std::string msg;
    REQUIRE(a->change_schema(target, &msg) == 0);
    REQUIRE(a->schema().members == std::vector<std::uint32_t>{0, 2});
    events = fault->events() - before;
  }
  int old_kept = 0, new_kept = 0;
  for (std::uint64_t i = 0; i < 40; ++i) {
    const std::uint64_t cut = i % 8 == 7 ? 0 : 1 + (i * 104729) % events;
    INFO("iteration " << i << " cut " << cut << " of " << events);
    auto* fault = new FaultInjectingDevice(copy_of(*golden), 5000 + i);
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
    const bool is_old = stored->copies.empty() && stored->members.empty();
    const bool is_new = copies_text(stored->copies) == "naive" && stored->members == std::vector<std::uint32_t>{0, 2};
    CHECK((is_old || is_new));
    if (r == 0) CHECK(is_new);
    (is_new ? new_kept : old_kept)++;
    auto a = open_stored(m, ino);
    CHECK(bytes_diff(read_all(*a), model) == "");
    if (is_new) CHECK(bytes_diff(view_bytes(*a, {"copy", "1"}), model) == "");
    CHECK(accounted(m, ino) == total);  // the allocator's rebuild finds every sector once
    auto report = check_volume(*m.vol, false);
    INFO((report.problems.empty() ? "" : report.problems[0]));
    REQUIRE(report.problems.empty());
  }
  CHECK(old_kept > 0);
  CHECK(new_kept > 0);
}

TEST_CASE("member sets: a RAID 0 volume without a member serves an array with copies and takes its writes",
          "[array_file][copies][members]") {
  Striped m;
  std::mt19937_64 rng(167);
  Bytes model;
  auto a = filled(m, "kept", with_copies(make_schema({96, 80, 48}, "int32", "zorder"), "naive:order=0,2,1"), rng,
                  &model);
  std::string msg;
  const Ino ino = a->ino();
  a->quiesce();
  a.reset();
  // Member 1 gone: the copy (members 1 and 3) cannot be written; the primary can.
  m.reopen({0, 2, 3});
  REQUIRE(m.vol->superblock().failed == std::vector<std::uint32_t>{1});
  auto stored = *stored_schema_of(m, ino);
  REQUIRE(ArrayFile::open(m.ctx(), ino, stored, &a, &msg) == 0);
  CHECK(bytes_diff(read_all(*a), model) == "");
  const Bytes row = random_bytes(rng, 80 * 48 * 4);
  std::copy(row.begin(), row.end(), model.begin() + 7 * 80 * 48 * 4);
  REQUIRE(write_file(*a, 7 * 80 * 48 * 4, row) == 0);
  REQUIRE(a->flush(true, &msg) == 0);
  CHECK(a->catch_up(&msg) != 0);  // the copy's cells on member 1 cannot be written
  CHECK(bytes_diff(read_all(*a), model) == "");
  a->quiesce();
  a.reset();
  // A later mount (recorded failed: no option needed) opens it, the copy behind and never read.
  m.reopen({0, 2, 3});
  REQUIRE(ArrayFile::open(m.ctx(), ino, *stored_schema_of(m, ino), &a, &msg) == 0);
  CHECK(a->info()["copies"][0]["state"] == "behind");
  CHECK(bytes_diff(read_all(*a), model) == "");
  check_placement(*a, 0, model);
  a->quiesce();
  a.reset();
  // Member 1 back (still recorded failed: its metadata copy is not read): the copy catches up.
  m.reopen({0, 1, 2, 3});
  REQUIRE(ArrayFile::open(m.ctx(), ino, *stored_schema_of(m, ino), &a, &msg) == 0);
  REQUIRE(a->catch_up(&msg) == 0);
  CHECK(a->info()["copies"][0]["state"] == "current");
  check_placement(*a, 1, model);
}
