// A copy promoted in place under an array already loaded when a member is
// lost while the volume runs (ArrayFile::promote_in_place_locked): at the
// array's next write, when its primary lies on the lost member and a copy
// on the survivors lags nothing but bytes the primary's dirty cells hold,
// which are carried over to it. On a RAID 0 volume of four in-memory
// members; the member's loss is what the array's context tells (the volume
// records it while it runs), its reads failing too.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "fs/array/array_file.h"
#include "tests/unit/support/member_sets_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;
using namespace mmfs::fs::testing::arrays;
using namespace mmfs::fs::testing::members;

namespace {

constexpr std::uint64_t kRowBytes = 80 * 48 * 4;  // one row of dimension 0 of the arrays below

// The arrays below: the primary on members 0 and 2, the copy on 1 and 3.
ArraySchema primary_and_copy() { return with_copies(make_schema({96, 80, 48}, "int32", "zorder"), "naive:order=0,2,1"); }

// Members lost from now on, as the volume reports them while it runs: the
// context an array was opened with sees each loss when it happens.
struct LostLater {
  std::shared_ptr<std::vector<std::uint32_t>> members = std::make_shared<std::vector<std::uint32_t>>();
  MemberLost lost() const {
    return [m = members](std::uint32_t x) { return std::find(m->begin(), m->end(), x) != m->end(); };
  }
  // Member `x` is lost: recorded, and every read of it fails.
  void lose(Striped& m, std::uint32_t x) {
    members->push_back(x);
    m.lose(int(x));
  }
};

// Row `row` of `model` written with random bytes (not flushed).
void write_row(ArrayFile& a, Bytes& model, std::mt19937_64& rng, std::uint64_t row) {
  const Bytes bytes = random_bytes(rng, kRowBytes);
  std::copy(bytes.begin(), bytes.end(), model.begin() + std::ptrdiff_t(row * kRowBytes));
  REQUIRE(write_file(a, row * kRowBytes, bytes) == 0);
}

}  // namespace

TEST_CASE("copy promotion in place: a loaded array's next write makes the copy on survivors the primary",
          "[array_file][copies][members][promotion]") {
  Striped m;
  LostLater later;
  m.lost = later.lost();
  std::mt19937_64 rng(307);
  Bytes model;
  auto a = filled(m, "held", primary_and_copy(), rng, &model);
  const ArraySchema before = a->schema();
  REQUIRE(before.members == std::vector<std::uint32_t>{0, 2});
  const std::vector<Extent> old_copy = m.copy_extents(a->ino(), before.copies[0].slot);
  std::string msg;

  later.lose(m, 0);
  // Reads promote nothing: they are served from the copy.
  CHECK(bytes_diff(read_all(*a), model) == "");
  CHECK(a->schema() == before);
  CHECK(m.promoted.empty());

  // The next write: promoted first, then written to the new primary.
  write_row(*a, model, rng, 7);
  REQUIRE(m.promoted.size() == 1);
  CHECK(m.promoted[0].find("copy 1 (naive, members 1,3) is the primary now") != std::string::npos);
  const ArraySchema after = a->schema();
  CHECK(after.layout == "naive");
  CHECK(after.members == std::vector<std::uint32_t>{1, 3});
  CHECK(after.copies[0].members == std::vector<std::uint32_t>{0, 2});
  CHECK(*stored_schema_of(m, a->ino()) == after);
  CHECK(m.vol->metadata().extents(a->ino()) == old_copy);
  REQUIRE(a->flush(true, &msg) == 0);
  CHECK(bytes_diff(read_all(*a), model) == "");
  check_placement(*a, 0, model);
  CHECK(a->info()["copies"][0]["state"] == "behind");
  CHECK(a->info()["copies"][0]["member_lost"] == true);
  CHECK_FALSE(a->info().contains("member_lost"));
  // Later writes go on without promoting again.
  write_row(*a, model, rng, 90);
  REQUIRE(a->flush(true, &msg) == 0);
  CHECK(m.promoted.size() == 1);
  CHECK(bytes_diff(read_all(*a), model) == "");
  a->quiesce();
  const Ino ino = a->ino();
  a.reset();

  // A degraded open finds the promotion made; with member 0 back the old
  // primary, now copy 1, catches up from the new one.
  promoted_once_then_member_back(m, ino, after, model);
  check_clean(m);
}

namespace {

// An array of primary_and_copy() filled and current, on a volume whose
// member 0 the test loses later.
struct HeldArray {
  Striped m;
  LostLater later;
  std::mt19937_64 rng;
  Bytes model;
  std::shared_ptr<ArrayFile> a;
  ArraySchema before;
  explicit HeldArray(std::uint64_t seed) : rng(seed) {
    m.lost = later.lost();
    a = filled(m, "held", primary_and_copy(), rng, &model);
    before = a->schema();
  }
  // Member 0 lost, then a write: nothing promoted, in memory or in the store.
  void write_after_the_loss_promotes_nothing() {
    later.lose(m, 0);
    write_row(*a, model, rng, 5);
    CHECK(m.promoted.empty());
    CHECK(a->schema() == before);
    CHECK(*stored_schema_of(m, a->ino()) == before);
    a->quiesce();
  }
};

}  // namespace

TEST_CASE("copy promotion in place: the primary's cells not yet written back are carried over to the copy",
          "[array_file][copies][members][promotion]") {
  HeldArray h(311);
  // Rows 2 and 30 written, not flushed: the copy lags only bytes the
  // primary's dirty cells hold (each row cuts the copy's cells).
  write_row(*h.a, h.model, h.rng, 2);
  write_row(*h.a, h.model, h.rng, 30);
  h.later.lose(h.m, 0);
  write_row(*h.a, h.model, h.rng, 5);
  REQUIRE(h.m.promoted.size() == 1);
  const ArraySchema after = h.a->schema();
  CHECK(after.members == std::vector<std::uint32_t>{1, 3});
  CHECK(bytes_diff(read_all(*h.a), h.model) == "");
  std::string msg;
  REQUIRE(h.a->flush(true, &msg) == 0);
  check_placement(*h.a, 0, h.model);
  h.a->quiesce();
  const Ino ino = h.a->ino();
  h.a.reset();
  promoted_once_then_member_back(h.m, ino, after, h.model);
  check_clean(h.m);
}

TEST_CASE("copy promotion in place: never over a copy that lags bytes the primary wrote back",
          "[array_file][copies][members][promotion]") {
  HeldArray h(313);
  write_row(*h.a, h.model, h.rng, 4);
  h.a->quiesce();  // before any catch-up runs
  std::string msg;
  REQUIRE(h.a->flush(true, &msg) == 0);  // row 4 is on the primary's device alone
  REQUIRE(h.a->info()["copies"][0]["state"] == "behind");
  h.write_after_the_loss_promotes_nothing();
}
