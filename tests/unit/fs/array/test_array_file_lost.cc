// Cells lost with a member that another copy holds
// (ArrayFile::fill_lost_from_copies_locked): an array with two copies whose
// lags cross when the primary's member dies. The copy lagging least is
// promoted and its lagging cells recorded lost; those the other copy had
// caught up on are read from it and written back into the new primary, and
// only the cells no surviving copy holds stay lost. Both ways a promotion
// happens: at a degraded open, and in place under a loaded array at its next
// write. On the RAID 0 volume of four in-memory members of
// member_sets_test_support.h.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "fs/array/array_file.h"
#include "fs/meta/keys.h"
#include "tests/unit/support/crossed_lags_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;
using namespace mmfs::fs::testing::arrays;
using namespace mmfs::fs::testing::members;

namespace {

constexpr std::uint64_t kRowBytes = kCrossedRowBytes;

// `a`, promoted from copy 1 (cells 4 and 40 lagging): cell 4 was filled
// from copy 2 and reads the array's bytes; cell 40 is lost (EIO naming
// why) until written whole; the rows around it read.
void only_the_cell_no_copy_holds_is_lost(CrossedLags& h, ArrayFile& a) {
  REQUIRE(h.m.promoted.size() == 1);
  CHECK(h.m.promoted[0].find("2 cell(s) the copy had not caught up on (cell 4 first)") != std::string::npos);
  REQUIRE(h.m.healed.size() == 1);
  CHECK(h.m.healed[0].find("1 cell(s) lost with a failed member (cell 4 first) were filled") != std::string::npos);
  CHECK(h.m.healed[0].find("1 from copy 2") != std::string::npos);
  CHECK(h.m.healed[0].find("1 remain lost") != std::string::npos);
  const nlohmann::json info = a.info();
  CHECK(info["layout"] == "naive");
  CHECK(info["lost_cells"] == 1);
  CHECK(info["first_lost_cell"] == 40);
  std::string msg;
  int error = 0;
  const Bytes row4 = read_row(a, 4, &error, &msg);
  INFO(msg);
  CHECK(error == 0);
  CHECK(bytes_diff(row4, Bytes(h.model.begin() + 4 * kRowBytes, h.model.begin() + 5 * kRowBytes)) == "");
  read_row(a, 40, &error, &msg);
  CHECK(error == EIO);
  CHECK(msg.find("lost with a failed member") != std::string::npos);
  for (std::uint64_t row : {39, 41}) {
    const Bytes got = read_row(a, row, &error, &msg);
    CHECK(error == 0);
    CHECK(bytes_diff(got, Bytes(h.model.begin() + std::ptrdiff_t(row * kRowBytes),
                                h.model.begin() + std::ptrdiff_t((row + 1) * kRowBytes))) == "");
  }
  // The record holds the one cell still lost, durable.
  const auto stored = h.m.vol->metadata().store().get(keys::lost_cells(a.ino()));
  REQUIRE(stored);
  // Row 40 written whole: nothing is lost, and every placement on the
  // survivors catches up to the array's bytes.
  h.write_row(a, 40);
  REQUIRE(a.flush(true, &msg) == 0);
  CHECK_FALSE(a.info().contains("lost_cells"));
  CHECK_FALSE(h.m.vol->metadata().store().get(keys::lost_cells(a.ino())));
  CHECK(bytes_diff(read_all(a), h.model) == "");
}

// Every member back, as after mmfsck --rebuild (no member lost, so no fill
// at the open): the catch-up brings every placement to the array's bytes.
void every_member_back(CrossedLags& h, Ino ino) {
  auto a = reopen_array(h.m, ino, {0, 1, 2, 3}, nullptr);
  std::string msg;
  const int rc = a->catch_up(&msg);
  INFO(msg);
  REQUIRE(rc == 0);
  for (std::size_t k = 0; k < 3; ++k) check_placement(*a, k, h.model);
  a->quiesce();
  a.reset();
  check_clean(h.m);
}

}  // namespace

TEST_CASE("lost cells filled from another copy: at a degraded open, the promoted copy's lag another copy holds is "
          "read from it",
          "[array_file][copies][members][promotion][lost]") {
  CrossedLags h(419);
  const Ino ino = h.a->ino();
  h.a.reset();
  auto a = reopen_array(h.m, ino, h.survivors(), lose({h.primary_member}));
  only_the_cell_no_copy_holds_is_lost(h, *a);
  // Opened again: nothing more to fill, nothing more promoted.
  a = reopen(h.m, a);
  CHECK(h.m.promoted.size() == 1);
  CHECK(h.m.healed.size() == 1);
  CHECK(bytes_diff(read_all(*a), h.model) == "");
  a->quiesce();
  a.reset();
  every_member_back(h, ino);
}

TEST_CASE("lost cells filled from another copy: promoted in place at the next write, the lag another copy holds "
          "is read from it before the write lands",
          "[array_file][copies][members][promotion][lost]") {
  auto lost = std::make_shared<std::vector<std::uint32_t>>();
  CrossedLags h(421, [lost](std::uint32_t x) { return std::find(lost->begin(), lost->end(), x) != lost->end(); });
  lost->push_back(h.primary_member);
  h.m.lose(int(h.primary_member));
  // A write into cell 4 that does not cover it: it lands on the bytes
  // filled from copy 2 (were the cell still lost, it would be dropped).
  const Bytes element(4, 0x5a);
  std::copy(element.begin(), element.end(), h.model.begin() + std::ptrdiff_t(4 * kRowBytes + 8));
  REQUIRE(write_file(*h.a, 4 * kRowBytes + 8, element) == 0);
  std::string msg;
  REQUIRE(h.a->flush(true, &msg) == 0);
  only_the_cell_no_copy_holds_is_lost(h, *h.a);
  const Ino ino = h.a->ino();
  h.a->quiesce();
  h.a.reset();
  every_member_back(h, ino);
}

TEST_CASE("lost cells filled from another copy: a copy that does not read gives nothing; catch_up fills the cell "
          "once it reads",
          "[array_file][copies][members][lost]") {
  CrossedLags h(431);
  const Ino ino = h.a->ino();
  std::shared_ptr<ArrayFile> a = h.open_degraded_copy2_unreadable();
  std::string msg;
  REQUIRE(h.m.promoted.size() == 1);
  CHECK(h.m.healed.empty());
  CHECK(a->info()["lost_cells"] == 2);
  int error = 0;
  read_row(*a, 4, &error, &msg);
  CHECK(error == EIO);
  // Every member back (mmfsck --rebuild): no fill at the open, where no
  // member is lost; catch_up fills cell 4 from copy 2 first, then catches
  // the copies up. Cell 40 stays lost, and copy 2's cells over it behind.
  a->quiesce();
  a.reset();
  a = reopen_array(h.m, ino, {0, 1, 2, 3}, nullptr);
  CHECK(h.m.healed.empty());
  CHECK(a->info()["lost_cells"] == 2);
  {
    const int rc = a->catch_up(&msg);
    INFO(msg);
    REQUIRE(rc == 0);
  }
  REQUIRE(h.m.healed.size() == 1);
  CHECK(h.m.healed[0].find("1 from copy 2") != std::string::npos);
  const nlohmann::json info = a->info();
  CHECK(info["lost_cells"] == 1);
  CHECK(info["first_lost_cell"] == 40);
  CHECK(info["copies"][0]["state"] == "behind");
  CHECK(info["copies"][1]["state"] == "behind");
  const Bytes row4 = read_row(*a, 4, &error, &msg);
  CHECK(error == 0);
  CHECK(bytes_diff(row4, Bytes(h.model.begin() + 4 * kRowBytes, h.model.begin() + 5 * kRowBytes)) == "");
  read_row(*a, 40, &error, &msg);
  CHECK(error == EIO);
  a->quiesce();
  a.reset();
  check_clean(h.m);
}
