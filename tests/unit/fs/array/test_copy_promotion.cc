// A copy promoted over a primary on a lost member (fs/array/copy_promotion.h):
// which copy qualifies, the swapped schema, and on a RAID 0 volume of four
// in-memory members opened without one: the promotion's commit (keys
// exchanged, the old primary all behind), the array's bytes through every
// view, writes that go on, a second open that promotes nothing, and the old
// primary brought current once its member is back.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cerrno>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "fs/array/array_file.h"
#include "fs/array/behind_record.h"
#include "fs/array/copy_promotion.h"
#include "fs/meta/keys.h"
#include "tests/unit/support/member_sets_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;
using namespace mmfs::fs::testing::arrays;
using namespace mmfs::fs::testing::members;

namespace {

ArraySchema three_placements() {
  ArraySchema s = with_copies(make_schema({40, 32, 24}, "float64", "zorder"), "naive:order=2,1,0;hilbert");
  s.members = {0, 3};
  s.copies[0].slot = 1;
  s.copies[0].members = {1};
  s.copies[1].slot = 2;
  s.copies[1].members = {2};
  return s;
}

std::map<std::uint8_t, Roaring> stored_behind(Striped& m, Ino ino) {
  std::map<std::uint8_t, Roaring> out;
  if (auto v = m.vol->metadata().store().get(keys::copy_record(ino))) REQUIRE(decode_behind(*v, &out));
  return out;
}

std::vector<Extent> primary_extents(Striped& m, Ino ino) { return m.vol->metadata().extents(ino); }

// Row `row` of `model` (rows of `row_bytes`) written with random bytes, durable.
void write_row(ArrayFile& a, Bytes& model, std::mt19937_64& rng, std::uint64_t row, std::uint64_t row_bytes) {
  const Bytes bytes = random_bytes(rng, row_bytes);
  std::copy(bytes.begin(), bytes.end(), model.begin() + std::ptrdiff_t(row * row_bytes));
  REQUIRE(write_file(a, row * row_bytes, bytes) == 0);
  std::string msg;
  REQUIRE(a.flush(true, &msg) == 0);
}

}  // namespace

TEST_CASE("copy promotion: the first current copy on surviving members", "[copies][promotion]") {
  const ArraySchema s = three_placements();
  std::map<std::uint8_t, Roaring> behind;
  CHECK_FALSE(promotable_copy(s, behind, nullptr));
  CHECK_FALSE(promotable_copy(s, behind, lose({1})));  // the primary keeps its members
  CHECK(promotable_copy(s, behind, lose({0})) == 0u);
  CHECK(promotable_copy(s, behind, lose({3, 1})) == 1u);  // copy 1 lost too: copy 2
  CHECK_FALSE(promotable_copy(s, behind, lose({0, 1, 2})));
  behind[1].add(5);  // copy 1 lags: never promoted
  CHECK(promotable_copy(s, behind, lose({0})) == 1u);
  behind[2].add(0);
  CHECK_FALSE(promotable_copy(s, behind, lose({0})));
  ArraySchema whole = s;  // a primary on the whole volume is no set's to lose
  whole.members.clear();
  CHECK_FALSE(promotable_copy(whole, {}, lose({0})));
}

TEST_CASE("copy promotion: when every copy lags, the one on surviving members lagging least", "[copies][promotion]") {
  ArraySchema s = three_placements();
  std::map<std::uint8_t, Roaring> behind;
  behind[1].addRange(0, 10);
  behind[2].addRange(0, 3);
  CHECK_FALSE(promotable_copy_lagging(s, behind, nullptr));
  CHECK_FALSE(promotable_copy_lagging(s, behind, lose({1})));  // the primary keeps its members
  CHECK(promotable_copy_lagging(s, behind, lose({0})) == 1u);
  CHECK(promotable_copy_lagging(s, behind, lose({0, 2})) == 0u);  // copy 2 lost too: copy 1
  CHECK_FALSE(promotable_copy_lagging(s, behind, lose({0, 1, 2})));
  behind[2].addRange(0, 20);
  CHECK(promotable_copy_lagging(s, behind, lose({0})) == 0u);
  s.copies[0].layout = "mloc";  // an image has no cells to mark lost
  CHECK(promotable_copy_lagging(s, behind, lose({0})) == 1u);
}

TEST_CASE("copy promotion: the schema trades the primary's placement for the copy's", "[copies][promotion]") {
  ArraySchema s = three_placements();
  s.cell = {8, 8, 8};
  s.layout_set = false;
  const ArraySchema p = promoted_schema(s, 0);
  CHECK(p.layout == "naive");
  CHECK(p.order == std::vector<std::uint32_t>{2, 1, 0});
  CHECK(p.cell.empty());
  CHECK(p.members == std::vector<std::uint32_t>{1});
  CHECK(p.layout_set);
  CHECK(p.layout_rule.find("promoted from copy 1") != std::string::npos);
  REQUIRE(p.copies.size() == 2);
  CHECK(p.copies[0].layout == "zorder");
  CHECK(p.copies[0].cell == std::vector<std::uint64_t>{8, 8, 8});
  CHECK(p.copies[0].order.empty());
  CHECK(p.copies[0].slot == 1);
  CHECK(p.copies[0].members == std::vector<std::uint32_t>{0, 3});
  CHECK(p.copies[1] == s.copies[1]);
  CHECK(p.shape == s.shape);
  CHECK(p.dtype == s.dtype);
  CHECK(check_copies(p).error == 0);
}

TEST_CASE("copy promotion: a degraded open makes the copy on survivors the primary; writes go on",
          "[array_file][copies][members][promotion]") {
  Striped m;
  std::mt19937_64 rng(211);
  Bytes model;
  // The primary on members 0 and 2, the copy on 1 and 3; 1.5 MB, so each has sectors on both.
  auto a = filled(m, "promoted", with_copies(make_schema({96, 80, 48}, "int32", "zorder"), "naive:order=0,2,1"), rng,
                  &model);
  std::string msg;
  const Ino ino = a->ino();
  const ArraySchema before = a->schema();
  REQUIRE(before.members == std::vector<std::uint32_t>{0, 2});
  const std::uint8_t slot = before.copies[0].slot;
  const std::vector<Extent> old_primary = primary_extents(m, ino), old_copy = m.copy_extents(ino, slot);
  const auto old_sums = m.vol->metadata().store().get(keys::checksum_record(ino, 0));
  REQUIRE(old_sums);
  a->quiesce();
  a.reset();

  // Member 0 gone: the primary has no home; the copy has every cell.
  a = reopen_array(m, ino, {1, 2, 3}, lose({0}));
  REQUIRE(m.promoted.size() == 1);
  CHECK(m.promoted[0].find("copy 1 (naive, members 1,3) is the primary now") != std::string::npos);
  const ArraySchema after = a->schema();
  CHECK(after.layout == "naive");
  CHECK(after.members == std::vector<std::uint32_t>{1, 3});
  CHECK(after.copies[0].layout == "zorder");
  CHECK(after.copies[0].members == std::vector<std::uint32_t>{0, 2});
  CHECK(after.copies[0].slot == slot);
  CHECK(*stored_schema_of(m, ino) == after);
  // The keys traded places; the old primary is behind in every cell.
  CHECK(primary_extents(m, ino) == old_copy);
  CHECK(m.copy_extents(ino, slot) == old_primary);
  CHECK(m.vol->metadata().store().get(keys::checksum_record(ino, 0, keys::kCopyChecksumTable, slot)) == old_sums);
  auto behind = stored_behind(m, ino);
  REQUIRE(behind.count(slot) == 1);
  CHECK(behind[slot].cardinality() == a->info()["copies"][0]["cells_behind"].get<std::uint64_t>());
  CHECK(a->info()["copies"][0]["state"] == "behind");
  CHECK(a->info()["copies"][0]["member_lost"] == true);
  CHECK_FALSE(a->info().contains("member_lost"));
  CHECK(a->info()["layout_rule"].get<std::string>().find("promoted from copy 1") != std::string::npos);

  // Every byte reads; a write lands and is durable.
  CHECK(bytes_diff(read_all(*a), model) == "");
  check_placement(*a, 0, model);
  const Bytes row = random_bytes(rng, 80 * 48 * 4);
  std::copy(row.begin(), row.end(), model.begin() + 11 * 80 * 48 * 4);
  REQUIRE(write_file(*a, 11 * 80 * 48 * 4, row) == 0);
  REQUIRE(a->flush(true, &msg) == 0);
  CHECK(bytes_diff(read_all(*a), model) == "");
  a->kick_catch_up();
  a->quiesce();
  CHECK_FALSE(a->info().contains("copies_error"));  // the catch-up passed over the lost copy
  a.reset();

  // The next degraded open promotes nothing: the primary's members are
  // whole. Member 0 back: the old primary, now copy 1, catches up.
  promoted_once_then_member_back(m, ino, after, model);
}

namespace {

std::optional<std::string> stored(Striped& m, const std::string& key) { return m.vol->metadata().store().get(key); }

// The one member `extents` lie on (a small placement lies on one of its set's).
std::uint32_t only_member(Striped& m, const std::string& extents_key) {
  const auto v = stored(m, extents_key);
  REQUIRE(v);
  const std::set<std::uint32_t> on = m.members_of(*decode_extents(*v));
  REQUIRE(on.size() == 1);
  return *on.begin();
}

std::vector<std::size_t> all_but(std::uint32_t lost) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < 4; ++i)
    if (i != lost) out.push_back(i);
  return out;
}

}  // namespace

TEST_CASE("copy promotion: a sealed mloc primary on a lost member is served from its copy, then traded for it",
          "[array_file][copies][members][promotion][mloc_copies]") {
  Striped m;
  std::mt19937_64 rng(227);
  Bytes model;
  std::string msg;
  auto a = filled(m, "mloc-primary", make_schema({32, 32, 16}, "float64", "mloc"), rng, &model);
  REQUIRE(a->settle(&msg) == 0);
  REQUIRE(a->change_schema(with_copies(a->schema(), "zorder"), &msg) == 0);
  REQUIRE(a->catch_up(&msg) == 0);
  REQUIRE(a->cells_locked() == nullptr);  // sealed, on its set
  const ArraySchema before = a->schema();
  const Ino ino = a->ino();
  const std::uint8_t slot = before.copies[0].slot;
  const std::uint32_t lost = only_member(m, keys::mloc_extents(ino));
  REQUIRE_FALSE(as_set(before.copies[0].members).count(lost));
  const auto image_extents = stored(m, keys::mloc_extents(ino)), image_record = stored(m, keys::mloc_record(ino));
  REQUIRE(image_record);
  const std::vector<Extent> copy_cells = m.copy_extents(ino, slot);
  a->quiesce();
  a.reset();

  // Without the image's member and no promotion (a read-only mount): the
  // directory does not load, yet the array opens and every view is the copy's.
  a = reopen_array(m, ino, all_but(lost), nullptr);
  CHECK(m.promoted.empty());
  REQUIRE_FALSE(m.around.empty());
  CHECK(m.around.back().find("the primary's mloc image does not load") != std::string::npos);
  CHECK(a->info()["unreadable"].get<std::string>().find("does not load") != std::string::npos);
  CHECK_FALSE(a->info().contains("mloc"));  // neither sealed nor staging: unknown
  CHECK(bytes_diff(read_all(*a), model) == "");
  check_placement(*a, 1, model);
  int error = 0;
  view_bytes(*a, {"copy", "0"}, &error);
  CHECK(error == EIO);  // A@/copy/0@ reads the primary only
  a->quiesce();
  a.reset();

  // A read-write degraded open: the copy is promoted, the image is copy `slot`, all behind.
  a = reopen_array(m, ino, all_but(lost), lose({lost}));
  REQUIRE(m.promoted.size() == 1);
  const ArraySchema after = a->schema();
  CHECK(after.layout == "zorder");
  CHECK(after.members == before.copies[0].members);
  CHECK(after.copies[0].layout == "mloc");
  CHECK(after.copies[0].members == before.members);
  CHECK(m.vol->metadata().extents(ino) == copy_cells);
  CHECK_FALSE(stored(m, keys::mloc_extents(ino)));
  CHECK_FALSE(stored(m, keys::mloc_record(ino)));
  CHECK(stored(m, keys::copy_extents(ino, slot)) == image_extents);
  CHECK(stored(m, keys::copy_mloc_record(ino, slot)) == image_record);
  CHECK(a->info()["copies"][0]["state"] == "behind");
  CHECK(bytes_diff(read_all(*a), model) == "");
  write_row(*a, model, rng, 5, 32 * 16 * 8);
  CHECK(bytes_diff(read_all(*a), model) == "");
  a->quiesce();
  a.reset();

  // The member back: the old primary's image is encoded anew from the new primary.
  with_every_member_back(m, ino, model);
  check_clean(m);
}

TEST_CASE("copy promotion: an mloc copy takes the place of a cell primary on a lost member",
          "[array_file][copies][members][promotion][mloc_copies]") {
  Striped m;
  std::mt19937_64 rng(229);
  Bytes model;
  std::string msg;
  auto a = filled(m, "mloc-copy", with_copies(make_schema({32, 32, 16}, "float64", "zorder"), "mloc"), rng, &model);
  const ArraySchema before = a->schema();
  const Ino ino = a->ino();
  const std::uint8_t slot = before.copies[0].slot;
  const auto image_extents = stored(m, keys::copy_extents(ino, slot));
  const auto image_record = stored(m, keys::copy_mloc_record(ino, slot));
  REQUIRE(image_record);
  const std::vector<Extent> cells = m.vol->metadata().extents(ino);
  std::uint32_t lost = before.members[0];
  REQUIRE_FALSE(as_set(before.copies[0].members).count(lost));
  a->quiesce();
  a.reset();

  a = reopen_array(m, ino, all_but(lost), lose({lost}));
  REQUIRE(m.promoted.size() == 1);
  CHECK(a->schema().layout == "mloc");
  CHECK(a->schema().copies[0].layout == "zorder");
  CHECK(a->cells_locked() == nullptr);  // a sealed image
  CHECK(m.vol->metadata().extents(ino).empty());
  CHECK(stored(m, keys::mloc_extents(ino)) == image_extents);
  CHECK(stored(m, keys::mloc_record(ino)) == image_record);
  CHECK(m.copy_extents(ino, slot) == cells);
  CHECK_FALSE(stored(m, keys::copy_mloc_record(ino, slot)));
  CHECK(bytes_diff(read_all(*a), model) == "");
  check_placement(*a, 0, model);
  // A write unseals it on the survivors' set; the seal puts it back there.
  write_row(*a, model, rng, 7, 32 * 16 * 8);
  REQUIRE(a->settle(&msg) == 0);
  CHECK(a->cells_locked() == nullptr);
  CHECK(bytes_diff(read_all(*a), model) == "");
  CHECK_FALSE(m.members_of(*decode_extents(*stored(m, keys::mloc_extents(ino)))).count(lost));
  a->quiesce();
  a.reset();

  with_every_member_back(m, ino, model);
  check_clean(m);
}
