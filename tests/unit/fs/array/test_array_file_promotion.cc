// A copy promoted in place under an array already loaded when a member is
// lost while the volume runs (ArrayFile::promote_in_place_locked): at the
// array's next write, when its primary lies on the lost member; the bytes the
// primary's dirty cells hold are carried over to it, and the cells it lags
// of bytes the primary had written back are lost with the member (as at a
// degraded open, which records them too). On a RAID 0 volume of four in-memory
// members; the member's loss is what the array's context tells (the volume
// records it while it runs), its reads failing too.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "fs/array/array_file.h"
#include "fs/meta/keys.h"
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

namespace {

// Row 4 of `h` written and written back, its copy not caught up: those bytes
// are on the primary's device alone.
void row_4_on_the_primary_alone(HeldArray& h) {
  write_row(*h.a, h.model, h.rng, 4);
  h.a->quiesce();  // before any catch-up runs
  std::string msg;
  REQUIRE(h.a->flush(true, &msg) == 0);
  REQUIRE(h.a->info()["copies"][0]["state"] == "behind");
}

// `a` (promoted with cells lost) reads `model` everywhere but in its lost
// cells, which read as errors naming why; then, the whole array written
// again, everything reads and nothing is lost.
void lost_cells_read_as_errors_until_written_whole(ArrayFile& a, Bytes& model, const std::vector<std::uint64_t>& rows) {
  const nlohmann::json info = a.info();
  REQUIRE(info.contains("lost_cells"));
  CHECK(info["lost_cells"].get<std::uint64_t>() > 0);
  std::string msg;
  Bytes out(kRowBytes);
  std::byte* into = reinterpret_cast<std::byte*>(out.data());
  std::size_t got = 0;
  for (std::uint64_t row : rows) {
    INFO("row " << row);
    CHECK(a.read(row * kRowBytes, kRowBytes, into, &got, &msg) == EIO);
    CHECK(msg.find("lost with a failed member") != std::string::npos);
  }
  // Rows of other cells read.
  const std::uint64_t cell_rows = info["cell"][0].get<std::uint64_t>();
  REQUIRE(cell_rows < 48);
  for (std::uint64_t row : {rows[0] / cell_rows * cell_rows + cell_rows, std::uint64_t{95}}) {
    INFO(msg);
    REQUIRE(a.read(row * kRowBytes, kRowBytes, into, &got, &msg) == 0);
    CHECK(std::equal(out.begin(), out.end(), model.begin() + std::ptrdiff_t(row * kRowBytes)));
  }
  // A scrub reads every other cell and says how many are lost.
  std::atomic<bool> stop{false};
  std::uint64_t repaired = 0;
  CHECK(a.repair_placements(stop, &repaired, &msg) == EIO);
  CHECK(msg.find(fmt::format("{} cell(s) were lost with a failed member", info["lost_cells"].get<std::uint64_t>())) !=
        std::string::npos);
  CHECK(msg.find("every other cell read clean") != std::string::npos);
  CHECK(repaired == 0);
  // A lost cell written in part: the write-back drops it and says so; it
  // stays lost.
  const Bytes element(4, 0x5a);
  REQUIRE(write_file(a, rows[0] * kRowBytes + 8, element) == 0);
  CHECK(a.flush(false, &msg) == 0);  // a flusher's tick: kept for the next fsync
  CHECK(a.flush(true, &msg) == EIO);
  CHECK(msg.find("only in part") != std::string::npos);
  CHECK(a.flush(true, &msg) == 0);  // told once
  CHECK(a.read(rows[0] * kRowBytes, kRowBytes, into, &got, &msg) == EIO);
  // Written whole: the array's bytes again everywhere.
  REQUIRE(write_file(a, 0, model) == 0);
  REQUIRE(a.flush(true, &msg) == 0);
  CHECK_FALSE(a.info().contains("lost_cells"));
  CHECK(bytes_diff(read_all(a), model) == "");
}

}  // namespace

TEST_CASE("copy promotion in place: a copy that lags bytes the primary wrote back is promoted, those cells lost",
          "[array_file][copies][members][promotion]") {
  HeldArray h(313);
  row_4_on_the_primary_alone(h);
  h.later.lose(h.m, 0);
  write_row(*h.a, h.model, h.rng, 60);  // the next write promotes
  REQUIRE(h.m.promoted.size() == 1);
  CHECK(h.m.promoted[0].find("were lost with the member") != std::string::npos);
  const ArraySchema after = h.a->schema();
  CHECK(after.members == std::vector<std::uint32_t>{1, 3});
  CHECK(*stored_schema_of(h.m, h.a->ino()) == after);
  std::string msg;
  REQUIRE(h.a->flush(true, &msg) == 0);  // row 60 is written
  lost_cells_read_as_errors_until_written_whole(*h.a, h.model, {4});
  h.a->quiesce();
  const Ino ino = h.a->ino();
  h.a.reset();
  promoted_once_then_member_back(h.m, ino, after, h.model);
  check_clean(h.m);
}

TEST_CASE("copy promotion at a degraded open: a copy that lags is promoted, its lagging cells lost and recorded",
          "[array_file][copies][members][promotion]") {
  HeldArray h(317);
  row_4_on_the_primary_alone(h);
  const Ino ino = h.a->ino();
  h.a.reset();
  auto a = reopen_array(h.m, ino, {1, 2, 3}, lose({0}));
  REQUIRE(h.m.promoted.size() == 1);
  CHECK(h.m.promoted[0].find("were lost with the member") != std::string::npos);
  const ArraySchema after = a->schema();
  CHECK(after.members == std::vector<std::uint32_t>{1, 3});
  const std::uint64_t lost = a->info()["lost_cells"].get<std::uint64_t>();
  CHECK(lost > 0);
  // The record outlives the array's load: opened again, the same cells are lost.
  a = reopen(h.m, a);
  CHECK(a->info()["lost_cells"].get<std::uint64_t>() == lost);
  CHECK(h.m.promoted.size() == 1);
  lost_cells_read_as_errors_until_written_whole(*a, h.model, {4});
  CHECK_FALSE(h.m.vol->metadata().store().get(keys::lost_cells(ino)));
  a->quiesce();
  a.reset();
  promoted_once_then_member_back(h.m, ino, after, h.model);
  check_clean(h.m);
}

TEST_CASE("copy promotion in place: truncate and relayout after the loss", "[array_file][copies][members][promotion]") {
  HeldArray h(401);
  h.later.lose(h.m, 0);
  std::string msg;
  SECTION("truncate to zero, then a write") {
    INFO(msg);
    REQUIRE(h.a->zero(&msg) == 0);
    std::fill(h.model.begin(), h.model.end(), std::uint8_t{0});
    CHECK(bytes_diff(read_all(*h.a), h.model) == "");
    write_row(*h.a, h.model, h.rng, 9);
    REQUIRE(h.a->flush(true, &msg) == 0);
    CHECK(bytes_diff(read_all(*h.a), h.model) == "");
  }
  SECTION("relayout of the primary") {
    ArraySchema next = h.a->schema();
    next.layout = "hilbert";
    next.cell.clear();
    const int rc = h.a->change_schema(next, &msg);
    INFO(msg);
    REQUIRE(rc == 0);
    CHECK(bytes_diff(read_all(*h.a), h.model) == "");
    write_row(*h.a, h.model, h.rng, 9);
    REQUIRE(h.a->flush(true, &msg) == 0);
    CHECK(bytes_diff(read_all(*h.a), h.model) == "");
  }
  INFO(msg);
  for (const auto& p : h.m.promoted) UNSCOPED_INFO(p);
  CHECK(h.m.members_of(h.m.vol->metadata().extents(h.a->ino())).count(0) == 0);
  h.a->quiesce();
  const Ino ino = h.a->ino();
  h.a.reset();
  with_every_member_back(h.m, ino, h.model);
  check_clean(h.m);
}
