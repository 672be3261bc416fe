// An array with two copies whose lags cross, on the RAID 0 volume of four
// in-memory members of member_sets_test_support.h: when the primary's member
// dies, the copy lagging least is promoted and its lagging cells recorded
// lost, of which another copy still holds some (fs/array/array_file_lost.cc).
// Shared by the tests of the fill (test_array_file_lost.cc) and of queries
// and the index around the cells that stay lost (test_array_file_lost_query.cc).
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "fs/array/array_file.h"
#include "tests/unit/support/member_sets_test_support.h"

namespace mmfs::fs::testing::members {

// The array is int32 of shape 96x80x48; one row of dimension 0 is this many bytes.
inline constexpr std::uint64_t kCrossedRowBytes = 80 * 48 * 4;

// Copy 1 keeps one row of dimension 0 per cell, copy 2 cells of 8 rows: a
// row written leaves copy 1 one cell behind and copy 2 sixty. `index`: the
// array's user.mmfs.index.
inline ArraySchema crossed_schema(const std::string& index = "none") {
  ArraySchema s = with_copies(make_schema({96, 80, 48}, "int32", "zorder"), "naive:cell=1,80,48;hilbert:cell=8,8,8");
  s.index = index;
  return s;
}

// The array of crossed_schema() on `m`, written whole, with the lags
// crossed: row 4 written back, then copy 2 caught up (through a view read of
// it alone), then row 40 written back. Copy 1 lags cells 4 and 40, copy 2
// the 60 cells of rows 40..47 only. No catch-up runs in the background.
// Values are random bytes, or with `values_below` > 0 int32s in
// [0, values_below) (an index's exact bins stay few).
struct CrossedLags {
  Striped m;
  std::mt19937_64 rng;
  Bytes model;
  std::shared_ptr<ArrayFile> a;
  std::uint32_t primary_member = 0;
  std::int32_t values_below = 0;

  explicit CrossedLags(std::uint64_t seed, MemberLost lost_later = nullptr, const std::string& index = "none",
                       std::int32_t values_below_ = 0)
      : rng(seed), values_below(values_below_) {
    m.lost = std::move(lost_later);
    a = filled(m, "crossed", crossed_schema(index), rng, &model);
    std::string msg;
    if (values_below > 0) {
      model = values(model.size() / 4);
      REQUIRE(write_file(*a, 0, model) == 0);
      REQUIRE(a->flush(true, &msg) == 0);
      REQUIRE(a->catch_up(&msg) == 0);
    }
    a->quiesce();
    const ArraySchema s = a->schema();
    // Each placement on members of its own: the primary's loss costs neither copy.
    REQUIRE(s.copies.size() == 2);
    REQUIRE_FALSE(s.members.empty());
    primary_member = s.members.front();
    for (const CopySpec& c : s.copies)
      REQUIRE(std::find(c.members.begin(), c.members.end(), primary_member) == c.members.end());
    write_row(*a, 4);
    REQUIRE(a->flush(true, &msg) == 0);
    CHECK(bytes_diff(view_bytes(*a, {"copy", "2@", "slice", "0", "4"}), row_of(4)) == "");
    write_row(*a, 40);
    REQUIRE(a->flush(true, &msg) == 0);
    const nlohmann::json info = a->info();
    REQUIRE(info["copies"][0]["state"] == "behind");
    REQUIRE(info["copies"][1]["state"] == "behind");
    REQUIRE(info["copies"][0]["cells_behind"] == 2);
    REQUIRE(info["copies"][1]["cells_behind"] == 60);
  }

  // `count` elements' bytes, as the constructor's values.
  Bytes values(std::size_t count) {
    if (values_below <= 0) return random_bytes(rng, count * 4);
    Bytes out(count * 4);
    for (std::size_t i = 0; i < count; ++i) {
      const std::int32_t v = std::int32_t(rng() % std::uint64_t(values_below));
      std::memcpy(out.data() + i * 4, &v, 4);
    }
    return out;
  }
  // Row `row` of dimension 0 written whole with new values, in the model too.
  void write_row(ArrayFile& to, std::uint64_t row) {
    const Bytes bytes = values(kCrossedRowBytes / 4);
    std::copy(bytes.begin(), bytes.end(), model.begin() + std::ptrdiff_t(row * kCrossedRowBytes));
    REQUIRE(write_file(to, row * kCrossedRowBytes, bytes) == 0);
  }
  Bytes row_of(std::uint64_t row) const {
    return Bytes(model.begin() + std::ptrdiff_t(row * kCrossedRowBytes),
                 model.begin() + std::ptrdiff_t((row + 1) * kCrossedRowBytes));
  }
  // `a` let go, then opened again on a degraded volume without the
  // primary's member while copy 2's member fails every read: the promotion
  // happens, and no lost cell is filled (copy 2 does not read).
  std::shared_ptr<ArrayFile> open_degraded_copy2_unreadable() {
    const Ino ino = a->ino();
    const std::vector<std::uint32_t> copy2_members = a->schema().copies[1].members;
    REQUIRE_FALSE(copy2_members.empty());
    a->quiesce();
    a.reset();
    m.reopen(survivors());
    m.lost = lose({primary_member});
    m.lose(int(copy2_members.front()));
    std::shared_ptr<ArrayFile> opened;
    std::string msg;
    const int rc = ArrayFile::open(m.ctx(), ino, *stored_schema_of(m, ino), &opened, &msg);
    INFO(msg);
    REQUIRE(rc == 0);
    return opened;
  }
  // The member sets without the primary's member: a degraded mount's.
  std::vector<std::size_t> survivors() const {
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < 4; ++i)
      if (i != primary_member) out.push_back(i);
    return out;
  }
};

inline Bytes read_row(ArrayFile& a, std::uint64_t row, int* error, std::string* message) {
  Bytes out(kCrossedRowBytes);
  std::size_t got = 0;
  *error = a.read(row * kCrossedRowBytes, kCrossedRowBytes, reinterpret_cast<std::byte*>(out.data()), &got, message);
  return out;
}

}  // namespace mmfs::fs::testing::members
