// Queries and the bitmap index around cells lost with a member
// (ArrayFile::check_query_scope, read_slab_around_lost_locked, the fill's
// notes, an index on the lost member built again at the open): a query
// whose scope holds a lost cell fails with EIO and the reason, as a read of
// it does, and one whose box avoids every lost cell is answered, equal to a
// brute-force count of the array's bytes. The index is built and kept
// around lost cells (a partial write dropped from one does not fail the
// flushes after it), and a cell filled from a copy, or written whole,
// counts with the values it holds. On the crossed-lags array of
// crossed_lags_test_support.h, indexed.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "fs/array/query.h"
#include "indexes/condition.h"
#include "tests/unit/support/crossed_lags_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;
using namespace mmfs::fs::testing::arrays;
using namespace mmfs::fs::testing::members;

namespace {

constexpr std::uint64_t kRows = 96, kCols = 80, kDepth = 48;
constexpr std::int32_t kBelow = 50;     // the array's values are in [0, kBelow)
constexpr std::int32_t kDropped = 777;  // written only by the writes a lost cell drops

// A box of whole rows of dimension 0: rows start, start+step, ... < stop.
layouts::Selection rows_box(std::uint64_t start, std::uint64_t stop, std::uint64_t step = 1) {
  return layouts::Selection({{start, stop, step, false}, {0, kCols, 1, false}, {0, kDepth, 1, false}});
}

// `A@/[box/SEL@/]query/==V/count`.
int count_equal(const std::shared_ptr<ArrayFile>& a, std::int32_t v, const std::optional<layouts::Selection>& box,
                std::uint64_t* count, std::string* message) {
  const std::string text = "==" + std::to_string(v);
  auto parsed = indexes::parse_condition(text);
  REQUIRE(std::holds_alternative<indexes::Condition>(parsed));
  QueryView q;
  q.condition = std::get<indexes::Condition>(parsed);
  q.condition_text = text;
  q.output = QueryView::Output::Count;
  q.spelling = "query/" + text;
  q.box = box;
  QueryArrays arrays;
  arrays.self = a;
  QueryOutcome out;
  message->clear();
  if (int r = run_query(q, arrays, false, &out, message)) return r;
  *count = std::stoull(out.content);
  return 0;
}

std::uint64_t brute_count(const Bytes& model, std::int32_t v, std::uint64_t start, std::uint64_t stop,
                          std::uint64_t step = 1) {
  std::uint64_t n = 0;
  for (std::uint64_t row = start; row < stop; row += step)
    for (std::uint64_t i = 0; i < kCols * kDepth; ++i) {
      std::int32_t x = 0;
      std::memcpy(&x, model.data() + row * kCrossedRowBytes + i * 4, 4);
      n += x == v;
    }
  return n;
}

// Counts of several values over rows [start, stop) by `step` equal the model's.
void counts_match(const std::shared_ptr<ArrayFile>& a, const Bytes& model, std::uint64_t start, std::uint64_t stop,
                  std::uint64_t step = 1) {
  for (std::int32_t v : {0, 7, kBelow - 1, kDropped}) {
    std::uint64_t got = 0;
    std::string msg;
    const int rc = count_equal(a, v, rows_box(start, stop, step), &got, &msg);
    INFO("==" << v << " over rows " << start << ":" << stop << ":" << step << ": " << msg);
    REQUIRE(rc == 0);
    CHECK(got == brute_count(model, v, start, stop, step));
  }
}

// The query fails with EIO naming `cell`, the first lost cell it meets.
void fails_as_lost(const std::shared_ptr<ArrayFile>& a, const std::optional<layouts::Selection>& box,
                   std::uint64_t cell = 40) {
  std::uint64_t got = 0;
  std::string msg;
  CHECK(count_equal(a, 7, box, &got, &msg) == EIO);
  CHECK(msg.find(fmt::format("cell {} was lost with a failed member", cell)) != std::string::npos);
  CHECK(msg.find("the query's answer depends on its values") != std::string::npos);
}

// Writes `count` elements of kDropped into row `row` from element `first`,
// then `tail` bytes of kDropped's bytes (a part of the next element): a
// write that covers neither the row's cell nor its last element.
void write_dropped(ArrayFile& a, std::uint64_t row, std::uint64_t first, std::size_t count, std::size_t tail) {
  Bytes bytes(count * 4 + tail);
  for (std::size_t i = 0; i < bytes.size(); i += 4) {
    const std::int32_t v = kDropped;
    std::memcpy(bytes.data() + i, &v, std::min<std::size_t>(4, bytes.size() - i));
  }
  REQUIRE(write_file(a, row * kCrossedRowBytes + first * 4, bytes) == 0);
}

// A flush that writes back the dropped write: 0 when not durable; the
// fsync then reports the drop once, and the next one is clean.
void flushes_report_the_drop_once(ArrayFile& a) {
  std::string msg;
  CHECK(a.flush(false, &msg) == 0);
  INFO(msg);
  CHECK(a.flush(true, &msg) == EIO);
  CHECK(msg.find("only in part") != std::string::npos);
  CHECK(a.flush(true, &msg) == 0);
}

}  // namespace

TEST_CASE("lost cells and queries: a query over a lost cell fails as its read does; around it the index answers, "
          "and it is built and kept without the cell",
          "[array_file][copies][members][lost][query]") {
  CrossedLags h(433, nullptr, "e1", kBelow);
  const Ino ino = h.a->ino();
  h.a.reset();
  auto a = reopen_array(h.m, ino, h.survivors(), lose({h.primary_member}));
  REQUIRE(a->has_index());  // it lay on the lost member too: built again from the data at the open
  CHECK(h.m.promoted.back().find("bitmap index lay on the lost member: it was built again") != std::string::npos);
  REQUIRE(a->info()["lost_cells"] == 1);  // cell 40 (row 40); cell 4 was filled from copy 2
  REQUIRE(a->info()["first_lost_cell"] == 40);

  // The whole array, and any box that meets row 40, strided ones included.
  fails_as_lost(a, std::nullopt);
  fails_as_lost(a, rows_box(38, 42));
  fails_as_lost(a, rows_box(1, kRows, 3));  // 1, 4, ..., 40, ...
  // Boxes that avoid it are answered, and equal the array's bytes.
  counts_match(a, h.model, 0, 40);
  counts_match(a, h.model, 41, kRows);
  counts_match(a, h.model, 0, kRows, 3);  // 0, 3, ..., 39, 42, ...: never 40

  // A write into the lost cell that does not cover it is dropped, element
  // parts included (their values would not read back to note): every
  // flush after it still succeeds but the first durable one, which says so.
  write_dropped(*a, 40, 100, 2, 2);
  flushes_report_the_drop_once(*a);
  counts_match(a, h.model, 0, 40);
  counts_match(a, h.model, 41, kRows);

  // The index built again from the data (other bins): the lost cell is
  // passed over, every other cell read.
  ArraySchema rebinned = a->schema();
  rebinned.bins = "edges:5,10,20,30,40";
  std::string msg;
  {
    const int rc = a->change_schema(rebinned, &msg);
    INFO(msg);
    REQUIRE(rc == 0);
  }
  fails_as_lost(a, std::nullopt);
  counts_match(a, h.model, 0, 40);
  counts_match(a, h.model, 41, kRows);
  rebinned.bins = "exact";
  REQUIRE(a->change_schema(rebinned, &msg) == 0);

  // Row 40 written whole: nothing is lost, and the whole array counts as
  // its bytes do, before and after the array is opened again.
  h.write_row(*a, 40);
  REQUIRE(a->flush(true, &msg) == 0);
  CHECK_FALSE(a->info().contains("lost_cells"));
  counts_match(a, h.model, 0, kRows);
  a = reopen(h.m, a);
  counts_match(a, h.model, 0, kRows);
  std::uint64_t whole = 0;
  REQUIRE(count_equal(a, 7, std::nullopt, &whole, &msg) == 0);
  CHECK(whole == brute_count(h.model, 7, 0, kRows));
  a->quiesce();
  a.reset();
  check_clean(h.m);
}

TEST_CASE("lost cells and queries: an index built while cells were lost counts a cell filled from a copy "
          "afterwards with the copy's values",
          "[array_file][copies][members][lost][query]") {
  CrossedLags h(439, nullptr, "e1", kBelow);
  const Ino ino = h.a->ino();
  // Cells 4 and 40 are lost, neither filled, and the index (on the lost
  // member) is built again with zeros for them.
  std::shared_ptr<ArrayFile> a = h.open_degraded_copy2_unreadable();
  std::string msg;
  REQUIRE(a->info()["lost_cells"] == 2);
  CHECK(std::count_if(h.m.promoted.begin(), h.m.promoted.end(), [](const std::string& m) {
          return m.find("bitmap index lay on the lost member: it was built again") != std::string::npos;
        }) == 1);
  fails_as_lost(a, rows_box(0, 41), 4);  // (reads of the new index may meet copy 2's failing member)
  a->quiesce();
  a.reset();

  // Every member back: catch_up fills cell 4 from copy 2, and notes its
  // values in the index with its checksums.
  a = reopen_array(h.m, ino, {0, 1, 2, 3}, nullptr);
  {
    const int rc = a->catch_up(&msg);
    INFO(msg);
    REQUIRE(rc == 0);
  }
  REQUIRE(h.m.healed.size() == 1);
  REQUIRE(a->info()["lost_cells"] == 1);
  counts_match(a, h.model, 0, 40);
  // As committed with the fill: the same after the array is opened again.
  a = reopen(h.m, a);
  counts_match(a, h.model, 0, 40);
  counts_match(a, h.model, 41, kRows);
  a->quiesce();
  a.reset();
  check_clean(h.m);
}
