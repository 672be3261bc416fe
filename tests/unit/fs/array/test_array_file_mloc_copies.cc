// mloc copies (user.mmfs.copies `mloc`, fs/array/array_file_copies.cc): an
// MLOC image of the array kept beside its cell placement. Every view through
// it equals the bytes written, for every cell layout as the primary; a write
// puts the image behind (never read stale) and the catch-up encodes a new
// image whole; truncate empties it; a damaged image is served around and
// encoded anew, by the read that meets it and by the scrub's repair; its
// keys go with the copy. An mloc array has copies of any layout (sealed,
// unsealed by writes, truncated, its damaged image sealed anew from them).
// On a volume of several devices each image lies on its placement's members.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "fs/array/array_file.h"
#include "fs/array/member_sets.h"
#include "fs/meta/keys.h"
#include "fs/volume/fsck.h"
#include "tests/unit/support/array_file_test_support.h"
#include "tests/unit/support/copies_test_support.h"
#include "tests/unit/support/member_sets_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;
using namespace mmfs::fs::testing::arrays;

namespace {

std::vector<Extent> copy_extents_of(const Mount& m, Ino ino, std::uint8_t slot) {
  auto v = m.md().store().get(keys::copy_extents(ino, slot));
  if (!v) return {};
  auto e = decode_extents(*v);
  REQUIRE(e);
  return *e;
}

}  // namespace

TEST_CASE("mloc copies: every cell layout as primary with mloc copies serves every view",
          "[array_file][copies][mloc_copies]") {
  auto g = toy_disk();
  auto dev = formatted(*g);
  Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
  std::mt19937_64 rng(71);
  for (const std::string& primary : kLayouts) {
    INFO("primary " << primary);
    auto a = create_array(m, "p-" + primary, make_schema({20, 18, 12}, "float64", primary));
    Bytes model(a->size(), 0);
    random_writes(*a, model, rng, 10);
    std::string msg;
    REQUIRE(a->change_schema(with_copies(a->schema(), "mloc;naive;mloc:priority=M-V-S:compress=zstd:chunk=8,8,8"),
                             &msg) == 0);
    const ArraySchema s = a->schema();
    REQUIRE(s.copies.size() == 3);
    const nlohmann::json info = a->info();
    CHECK(info["copies"][0]["layout"] == "mloc");
    CHECK(info["copies"][0].contains("mloc"));
    CHECK(info["copies"][2]["chunk"] == nlohmann::json({8, 8, 8}));
    // The image lies in the copy's extents, its record beside them.
    for (std::size_t i : {0u, 2u}) {
      CHECK(!copy_extents_of(m, a->ino(), s.copies[i].slot).empty());
      CHECK(m.md().store().get(keys::copy_mloc_record(a->ino(), s.copies[i].slot)));
    }
    check_every_copy(*a, model);
    // PLoD through the image: its leading byte groups.
    CHECK(bytes_diff(view_bytes(*a, {"copy", "1@", "plod", "2"}), view_bytes(*a, {"copy", "0@", "plod", "2"})) == "");
    // A write puts the images behind; nothing stale is read before the catch-up.
    random_writes(*a, model, rng, 6);
    CHECK(a->info()["copies"][0]["state"] == "behind");
    check_every_copy(*a, model);
    REQUIRE(a->flush(true, &msg) == 0);
    REQUIRE(a->catch_up(&msg) == 0);
    const nlohmann::json listed = a->info()["copies"];
    for (const auto& c : listed) CHECK(c["state"] == "current");
    check_every_copy(*a, model);
    const Ino ino = a->ino();
    a->quiesce();
    a.reset();
    a = open_stored(m, ino);
    check_every_copy(*a, model);
    CHECK(check_volume(*m.vol, false).problems.empty());
  }
}

TEST_CASE("mloc copies: dropped with their keys and space; truncate empties the image",
          "[array_file][copies][mloc_copies]") {
  auto g = toy_disk();
  auto dev = formatted(*g);
  Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
  std::mt19937_64 rng(73);
  auto a = create_random(m, "dropped", make_schema({24, 16, 16}, "int32", "hilbert"), rng);
  const std::uint64_t free1 = m.vol->allocator().free_sectors();
  std::string msg;
  REQUIRE(a->change_schema(with_copies(a->schema(), "mloc:compress=zstd"), &msg) == 0);
  const std::uint8_t slot = a->schema().copies[0].slot;
  const std::uint64_t bytes = a->info()["copies"][0]["device_bytes"].get<std::uint64_t>();
  CHECK(bytes > 0);
  CHECK(free1 - m.vol->allocator().free_sectors() == bytes / 512);
  // Truncate to 0: an empty image (no extents), reading zeros.
  REQUIRE(a->zero(&msg) == 0);
  check_every_copy(*a, Bytes(a->size(), 0));
  CHECK(copy_extents_of(m, a->ino(), slot).empty());
  CHECK(!m.md().store().get(keys::copy_mloc_record(a->ino(), slot)));
  REQUIRE(m.md().sync() == 0);  // dropped extents return to the allocator at the sync
  CHECK(m.vol->allocator().free_sectors() == free1);
  CHECK(check_volume(*m.vol, false).problems.empty());
  // Written again: the image comes back with the catch-up.
  Bytes model(a->size(), 0);
  random_writes(*a, model, rng, 8);
  REQUIRE(a->flush(true, &msg) == 0);
  REQUIRE(a->catch_up(&msg) == 0);
  CHECK(!copy_extents_of(m, a->ino(), slot).empty());
  check_every_copy(*a, model);
  // Dropped: keys and space gone.
  REQUIRE(a->change_schema(with_copies(a->schema(), "none"), &msg) == 0);
  CHECK(copy_extents_of(m, a->ino(), slot).empty());
  CHECK(!m.md().store().get(keys::copy_mloc_record(a->ino(), slot)));
  CHECK(m.vol->allocator().free_sectors() == free1);
  CHECK(check_volume(*m.vol, false).problems.empty());
}

TEST_CASE("mloc copies: a damaged image is served around and encoded anew", "[array_file][copies][mloc_copies]") {
  auto g = toy_disk();
  auto dev = formatted(*g);
  std::vector<std::string> healed;
  Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
  ArrayContext ctx = m.ctx();
  ctx.on_healed = [&](Ino, const std::string& message) { healed.push_back(message); };
  std::mt19937_64 rng(79);
  Bytes model;
  auto a = filled_with_copies(m, ctx, "damaged", with_copies(make_schema({24, 20, 16}, "float64", "zorder"), "mloc"),
                              rng, &model);
  const Ino ino = a->ino();
  const std::uint8_t slot = a->schema().copies[0].slot;
  std::string msg;
  // Flips a byte in every 7th sector of the image's second half (its units;
  // the directory is in its first bytes), or of all of it.
  auto flip = [&](bool directory) {
    std::vector<geom::Lbn> sectors;
    for (const Extent& e : copy_extents_of(m, ino, slot))
      for (std::uint64_t s = e.start; s < e.start + e.sectors; ++s) sectors.push_back(s);
    REQUIRE(sectors.size() > 8);
    for (std::size_t i = directory ? 0 : sectors.size() / 2; i < sectors.size(); i += 7)
      dev->bytes()[sectors[i] * 512 + 200] ^= std::byte{0x3C};
    return copy_extents_of(m, ino, slot);
  };
  auto reopen = [&] {
    a->quiesce();
    a.reset();
    REQUIRE(ArrayFile::open(ctx, ino, *stored_schema(m, ino), &a, &msg) == 0);
  };

  // Damaged units: through the copy alone its damage shows (EIO), and the
  // read that met it puts the image behind, so nothing reads it until the
  // catch-up has encoded it anew; the default views read whole meanwhile.
  std::vector<Extent> before = flip(false);
  reopen();
  int error = 0;
  view_bytes(*a, {"copy", "1"}, &error);
  CHECK(error == EIO);
  REQUIRE(healed.size() == 1);
  CHECK(healed[0].find("encoded anew") != std::string::npos);
  // Behind, or already encoded anew by the catch-up the read started in the background.
  CHECK((a->info()["copies"][0]["state"] == "behind" || copy_extents_of(m, ino, slot) != before));
  CHECK(bytes_diff(read_all(*a), model) == "");
  for (std::size_t d = 0; d < 3; ++d) {
    std::vector<Sel> sel{{false, 0, 24, 1}, {false, 0, 20, 1}, {false, 0, 16, 1}};
    sel[d] = Sel{true, 3, 0, 1};
    CHECK(bytes_diff(view_bytes(*a, {"slice", std::to_string(d), "3"}), extract(model, {24, 20, 16}, 8, sel)) == "");
  }
  REQUIRE(a->catch_up(&msg) == 0);
  CHECK(copy_extents_of(m, ino, slot) != before);
  check_every_copy(*a, model);
  // Damaged directory: the array opens as ever, the copy behind until encoded anew.
  before = copy_extents_of(m, ino, slot);
  flip(true);
  const std::size_t seen = healed.size();
  reopen();
  CHECK(healed.size() == seen + 1);
  REQUIRE(a->catch_up(&msg) == 0);
  CHECK(copy_extents_of(m, ino, slot) != before);
  check_every_copy(*a, model);
  // The scrub's repair finds damaged units the same way.
  flip(false);
  reopen();
  std::uint64_t repaired = 0;
  const std::atomic<bool> stop{false};
  REQUIRE(a->repair_placements(stop, &repaired, &msg) == 0);
  CHECK(repaired == 1);
  CHECK(healed.size() == seen + 2);
  check_every_copy(*a, model);
  REQUIRE(m.md().sync() == 0);
  CHECK(check_volume(*m.vol, false).problems.empty());
}

TEST_CASE("mloc copies: an mloc array with copies, sealed, written, truncated and repaired",
          "[array_file][copies][mloc_copies]") {
  auto g = toy_disk();
  auto dev = formatted(*g);
  std::vector<std::string> healed;
  Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
  ArrayContext ctx = m.ctx();
  ctx.on_healed = [&](Ino, const std::string& message) { healed.push_back(message); };
  std::mt19937_64 rng(89);
  // Created with its copies (listed before the shape): one commit, then sealed.
  Bytes model;
  auto a = filled_with_copies(m, ctx, "sealed", with_copies(make_schema({24, 20, 16}, "float64", "mloc"),
                                                            "naive;hilbert:cell=4,4,4;mloc:compress=zstd"),
                              rng, &model);
  std::string msg;
  REQUIRE(a->settle(&msg) == 0);
  REQUIRE(a->catch_up(&msg) == 0);
  CHECK(a->cells_locked() == nullptr);  // sealed: the primary is an image
  check_every_copy(*a, model);
  // A write unseals the primary into staging cells; the copies lag, nothing stale is read.
  random_writes(*a, model, rng, 6);
  check_every_copy(*a, model);
  REQUIRE(a->settle(&msg) == 0);  // sealed again; the copies catch up after it
  REQUIRE(a->catch_up(&msg) == 0);
  const nlohmann::json listed = a->info()["copies"];
  for (const auto& c : listed) CHECK(c["state"] == "current");
  const Ino ino = a->ino();
  a->quiesce();
  a.reset();
  REQUIRE(ArrayFile::open(ctx, ino, *stored_schema(m, ino), &a, &msg) == 0);
  check_every_copy(*a, model);
  {
    const auto report = check_volume(*m.vol, false);
    INFO((report.problems.empty() ? "" : report.problems[0]));
    CHECK(report.problems.empty());
  }
  INFO(a->info().dump());

  // The primary's image damaged: views read around it; the scrub seals it anew from the copies.
  auto image = m.md().store().get(keys::mloc_extents(ino));
  REQUIRE(image);
  const std::vector<Extent> primary = *decode_extents(*image);
  std::vector<geom::Lbn> sectors;
  for (const Extent& e : primary)
    for (std::uint64_t s = e.start; s < e.start + e.sectors; ++s) sectors.push_back(s);
  for (std::size_t i = sectors.size() / 2; i < sectors.size(); i += 5) dev->bytes()[sectors[i] * 512 + 64] ^= std::byte{0x11};
  a->quiesce();
  a.reset();
  REQUIRE(ArrayFile::open(ctx, ino, *stored_schema(m, ino), &a, &msg) == 0);
  CHECK(bytes_diff(read_all(*a), model) == "");
  std::uint64_t repaired = 0;
  const std::atomic<bool> stop{false};
  REQUIRE(a->repair_placements(stop, &repaired, &msg) == 0);
  CHECK(repaired == 1);
  REQUIRE(!healed.empty());
  CHECK(healed.back().find("the primary") != std::string::npos);
  CHECK(*decode_extents(*m.md().store().get(keys::mloc_extents(ino))) != primary);
  check_every_copy(*a, model);

  // Truncate to 0 zeroes the image and every copy.
  REQUIRE(a->zero(&msg) == 0);
  check_every_copy(*a, Bytes(a->size(), 0));
  // Relaid out as cells, and back to mloc: the copies stay.
  const auto copies = a->schema().copies;
  model = Bytes(a->size(), 0);
  random_writes(*a, model, rng, 4);
  ArraySchema naive = a->schema();
  naive.layout = "naive";
  REQUIRE(a->change_schema(naive, &msg) == 0);
  CHECK(a->schema().copies == copies);
  check_every_copy(*a, model);
  naive.layout = "mloc";
  REQUIRE(a->change_schema(naive, &msg) == 0);
  CHECK(a->cells_locked() == nullptr);
  REQUIRE(a->catch_up(&msg) == 0);
  check_every_copy(*a, model);
  REQUIRE(m.md().sync() == 0);
  CHECK(check_volume(*m.vol, false).problems.empty());
}

TEST_CASE("mloc copies: on a volume of several devices each image lies on its placement's members",
          "[array_file][copies][mloc_copies][members]") {
  using namespace mmfs::fs::testing::members;
  Striped m;
  std::mt19937_64 rng(83);
  Bytes model;
  std::string msg;
  auto stored_extents = [&](const std::string& key) {
    auto v = m.vol->metadata().store().get(key);
    REQUIRE(v);
    return *decode_extents(*v);
  };
  auto own_members = [&](Ino ino, std::uint8_t slot, const std::vector<std::uint32_t>& members) {
    const std::vector<Extent> volume = stored_extents(slot ? keys::copy_extents(ino, slot) : keys::mloc_extents(ino));
    CHECK(!volume.empty());
    const std::set<std::uint32_t> on = m.members_of(volume), own = as_set(members);
    CHECK(std::includes(own.begin(), own.end(), on.begin(), on.end()));  // (a small image: on one of them)
    CHECK(m.vol->metadata().xattr(ino, set_extents_record(slot)));
  };

  // An mloc copy: three placements on four members, the image on member 2.
  auto a = filled(m, "striped", make_schema({40, 32, 24}, "float64", "hilbert"), rng, &model);
  REQUIRE(a->change_schema(with_copies(a->schema(), "naive;mloc:compress=zstd"), &msg) == 0);
  const ArraySchema s = a->schema();
  REQUIRE(s.copies.size() == 2);
  CHECK(s.copies[1].members == std::vector<std::uint32_t>{2});
  CHECK(a->info()["copies"][1]["members"] == nlohmann::json({2}));
  own_members(a->ino(), s.copies[1].slot, {2});
  for (std::size_t k = 0; k <= 2; ++k) check_placement(*a, k, model);
  // Writes: behind, then encoded anew on its member.
  const Bytes row = random_bytes(rng, 32 * 24 * 8);
  std::copy(row.begin(), row.end(), model.begin() + 9 * 32 * 24 * 8);
  REQUIRE(write_file(*a, 9 * 32 * 24 * 8, row) == 0);
  REQUIRE(a->flush(true, &msg) == 0);
  REQUIRE(a->catch_up(&msg) == 0);
  own_members(a->ino(), s.copies[1].slot, {2});
  a = reopen(m, a);
  for (std::size_t k = 0; k <= 2; ++k) check_placement(*a, k, model);
  // Member 2 lost: the image's reads fail, every view is served by the others.
  m.lose(2);
  CHECK(bytes_diff(read_all(*a), model) == "");
  int error = 0;
  view_bytes(*a, {"copy", "2"}, &error);
  CHECK(error == EIO);
  m.lose(-1);
  REQUIRE(a->catch_up(&msg) == 0);  // the read that failed put it behind: encoded anew
  check_placement(*a, 2, model);
  CHECK(check_volume(*m.vol, false).problems.empty());

  // An mloc array with copies: its image moves to the primary's set with them.
  Bytes mmodel;
  auto b = filled(m, "striped-mloc", make_schema({32, 32, 16}, "float64", "mloc"), rng, &mmodel);
  REQUIRE(b->settle(&msg) == 0);
  REQUIRE(b->change_schema(with_copies(b->schema(), "zorder"), &msg) == 0);
  CHECK(b->cells_locked() == nullptr);  // sealed again, on its set
  CHECK(b->schema().members == std::vector<std::uint32_t>{0, 2});
  own_members(b->ino(), 0, {0, 2});
  for (std::size_t k = 0; k <= 1; ++k) check_placement(*b, k, mmodel);
  b = reopen(m, b);
  for (std::size_t k = 0; k <= 1; ++k) check_placement(*b, k, mmodel);
  // A write unseals it on its set; the seal puts the image back there.
  REQUIRE(write_file(*b, 0, Bytes(mmodel.begin(), mmodel.begin() + 4096)) == 0);
  REQUIRE(b->settle(&msg) == 0);
  own_members(b->ino(), 0, {0, 2});
  REQUIRE(b->catch_up(&msg) == 0);
  check_placement(*b, 1, mmodel);

  // An array with copies relaid out as mloc: the image on the primary's set.
  ArraySchema to_mloc = a->schema();
  to_mloc.layout = "mloc";
  REQUIRE(a->change_schema(to_mloc, &msg) == 0);
  own_members(a->ino(), 0, a->schema().members);
  for (std::size_t k = 0; k <= 2; ++k) check_placement(*a, k, model);
  a = reopen(m, a);
  check_placement(*a, 0, model);
  REQUIRE(m.vol->metadata().sync() == 0);
  const auto report = check_volume(*m.vol, false);
  INFO((report.problems.empty() ? "" : report.problems[0]));
  CHECK(report.problems.empty());
}

TEST_CASE("mloc copies: truncate zeroes an indexed array, its index and every copy",
          "[array_file][copies][mloc_copies]") {
  auto g = toy_disk();
  auto dev = formatted(*g);
  Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(*dev)));
  std::mt19937_64 rng(97);
  for (const char* layout : {"hilbert", "mloc"}) {  // cells, and a sealed image
    INFO(layout);
    ArraySchema s = with_copies(make_schema({20, 16, 12}, "float64", layout), "naive;mloc:compress=zstd");
    s.index = "range";
    Bytes model;
    auto a = filled_with_copies(m, m.ctx(), std::string("indexed-") + layout, s, rng, &model);
    std::string msg;
    REQUIRE(a->settle(&msg) == 0);
    REQUIRE(a->catch_up(&msg) == 0);
    REQUIRE(a->has_index());
    REQUIRE(a->zero(&msg) == 0);
    check_every_copy(*a, Bytes(a->size(), 0));
    REQUIRE(m.md().sync() == 0);
    const auto report = check_volume(*m.vol, false);
    INFO((report.problems.empty() ? "" : report.problems[0]));
    CHECK(report.problems.empty());
  }
}
