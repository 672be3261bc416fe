// Cells lost with a failed member (ArrayState::set_lost, docs/copies-on-
// members.md "Cells lost with a member"), straight over an in-memory device:
// a lost cell reads as damage naming why, even where its stored bytes match
// their checksums or it never held data; a write-back of one written only in
// part drops it and reports it, and writes the other cells; one written whole
// is the array's again; the record is staged only when the set changes;
// clear() and the torn-rewrite settling leave nothing lost wrongly.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cerrno>
#include <random>
#include <string>
#include <vector>

#include "fs/array/array_state.h"
#include "fs/array/behind_record.h"
#include "fs/device/sector_io.h"
#include "fs/meta/cell_checksums.h"
#include "fs/meta/keys.h"
#include "layouts/layout.h"
#include "tests/unit/support/fs_test_support.h"
#include "tests/unit/support/selection_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;

namespace {

using layouts::CellGrid;
using layouts::Selection;

constexpr Ino kIno = 7;

struct Lost {
  std::unique_ptr<geom::Geometry> g = testing::toy_disk();
  MemoryDevice dev{8 << 20, 512};
  SectorIo io{dev, *g};
  CellGrid grid{{20, 30}, 8, {4, 4}, {1, 0}};  // 128-byte cells, one sector each, ragged at the edges
  std::unique_ptr<ArrayState> st;
  std::vector<std::byte> model;
  Lost() {
    auto layout = layouts::make_layout("zorder", *g, grid);
    layout->place(layouts::allocate_linear(*g, layout->space(), 64));
    st = std::make_unique<ArrayState>(std::move(layout), CellChecksums::fresh(kIno, grid.cells()),
                                      CellChecksums::fresh(kIno, grid.cells(), 'a'), io);
    std::mt19937_64 rng(41);
    model.resize(st->bytes());
    for (auto& b : model) b = std::byte(rng());
  }
  std::uint64_t cell(std::uint64_t i, std::uint64_t j) const { return grid.linear(std::vector<std::uint64_t>{i, j}); }
  // The selection read; EIO with *bad set on a cell that did not read.
  int read(const Selection& sel, std::vector<std::byte>* out, std::uint64_t* bad) {
    out->assign(sel.elements() * 8, std::byte{0});
    return st->read_selection(sel, out->data(), bad);
  }
  // Writes the model's bytes of cell `c`'s element box.
  void write_cell(std::uint64_t c, std::vector<std::byte>& into_model, std::byte fill) {
    const std::vector<layouts::DimRange> box = grid.element_box(c);
    for (std::uint64_t i = box[0].start; i < box[0].stop; ++i) {
      const std::uint64_t at = (i * 30 + box[1].start) * 8, n = box[1].count() * 8;
      std::fill_n(into_model.begin() + std::ptrdiff_t(at), n, fill);
      st->write_bytes(at, into_model.data() + at, n);
    }
  }
};

Roaring cells_of(std::initializer_list<std::uint32_t> c) {
  Roaring r;
  for (std::uint32_t x : c) r.add(x);
  return r;
}

// The lost-cells record `batch` stages: "put:<record>", "del", or "" for none.
std::string staged(const WriteBatch& batch) {
  std::string out;
  for (const WriteBatch::Op& op : batch.ops())
    if (op.key == keys::lost_cells(kIno)) out = op.is_put ? "put:" + op.value : "del";
  return out;
}

}  // namespace

TEST_CASE("array state lost cells: a lost cell reads as an error naming why, written or not", "[array_state][lost]") {
  Lost t;
  std::uint64_t bad = 0;
  t.st->write_bytes(0, t.model.data(), t.model.size() / 2);  // rows 0..9 hold data, rows 10..19 never did
  REQUIRE(t.st->write_back(&bad, nullptr) == 0);
  const std::uint64_t written = t.cell(1, 2), never = t.cell(4, 3);
  t.st->set_lost(cells_of({std::uint32_t(written), std::uint32_t(never)}));
  CHECK(t.st->is_lost(written));
  CHECK_FALSE(t.st->is_lost(t.cell(0, 0)));
  std::vector<std::byte> out;

  // Its stored bytes still match their checksums: read anyway as lost.
  CHECK(t.read(Selection::all(t.grid.shape()), &out, &bad) == EIO);
  CHECK(bad == written);
  CHECK(t.st->failure_message(bad).find("lost with a failed member") != std::string::npos);
  CHECK(t.st->failure_message(t.cell(0, 0)).find("failed its checksum") != std::string::npos);
  // One element of it, through the whole-cell path and the general one.
  CHECK(t.read(Selection(t.grid.element_box(written)), &out, &bad) == EIO);
  CHECK(t.read(Selection({{5, 6, 1, false}, {9, 10, 1, false}}), &out, &bad) == EIO);
  // A cell that never held data reads as lost, not as zeros.
  CHECK(t.read(Selection(t.grid.element_box(never)), &out, &bad) == EIO);
  CHECK(bad == never);
  // A query's whole cells too.
  ArrayState::CellReads reads;
  const std::vector<std::uint64_t> both = {t.cell(0, 0), written};
  CHECK(t.st->read_cells(both, &reads, &bad, nullptr) == EIO);
  CHECK(bad == written);
  // The cells beside them read as written.
  const Selection beside({{0, 8, 1, false}, {0, 8, 1, false}});
  REQUIRE(t.read(beside, &out, &bad) == 0);
  CHECK(out == layouts::testing::brute(t.grid, t.model, beside));
}

TEST_CASE("array state lost cells: written in part, dropped and reported; written whole, the array's again",
          "[array_state][lost]") {
  Lost t;
  std::uint64_t bad = 0;
  t.st->write_bytes(0, t.model.data(), t.model.size());
  REQUIRE(t.st->write_back(&bad, nullptr) == 0);
  const std::uint64_t a = t.cell(2, 2), b = t.cell(3, 5), c = t.cell(4, 7);  // c: ragged, 4x2 elements
  t.st->set_lost(cells_of({std::uint32_t(a), std::uint32_t(b), std::uint32_t(c)}));
  WriteBatch nothing;
  t.st->stage_lost(kIno, nothing);
  CHECK(staged(nothing) == "");  // as recorded: nothing to stage

  // Cell a written in part (one element), b whole, and a cell that is not
  // lost in part: a is dropped, the others written.
  std::vector<std::byte> model = t.model;
  const std::uint64_t in_a = (9 * 30 + 9) * 8;
  std::fill_n(model.begin() + std::ptrdiff_t(in_a), 8, std::byte{0xa1});
  t.st->write_bytes(in_a, model.data() + in_a, 8);
  t.write_cell(b, model, std::byte{0xb2});
  const std::uint64_t in_other = (0 * 30 + 1) * 8;
  std::fill_n(model.begin() + std::ptrdiff_t(in_other), 8, std::byte{0xc3});
  t.st->write_bytes(in_other, model.data() + in_other, 8);
  REQUIRE(t.st->write_back(&bad, nullptr) == 0);
  CHECK_FALSE(t.st->has_dirty());
  CHECK(t.st->take_dropped_lost() == std::vector<std::uint64_t>{a});
  CHECK(t.st->take_dropped_lost().empty());  // reported once
  CHECK(t.st->is_lost(a));
  CHECK_FALSE(t.st->is_lost(b));
  WriteBatch batch;
  t.st->stage_lost(kIno, batch);
  Roaring recorded;
  REQUIRE(staged(batch).rfind("put:", 0) == 0);
  REQUIRE(decode_lost(staged(batch).substr(4), &recorded));
  CHECK(recorded == cells_of({std::uint32_t(a), std::uint32_t(c)}));
  WriteBatch again;
  t.st->stage_lost(kIno, again);
  CHECK(staged(again) == "");  // unchanged since

  std::vector<std::byte> out;
  REQUIRE(t.read(Selection(t.grid.element_box(b)), &out, &bad) == 0);
  CHECK(out == layouts::testing::brute(t.grid, model, Selection(t.grid.element_box(b))));
  REQUIRE(t.read(Selection({{0, 1, 1, false}, {0, 4, 1, false}}), &out, &bad) == 0);
  CHECK(out == layouts::testing::brute(t.grid, model, Selection({{0, 1, 1, false}, {0, 4, 1, false}})));
  CHECK(t.read(Selection(t.grid.element_box(a)), &out, &bad) == EIO);

  // The ragged lost cell written whole in several pieces, then a: none lost.
  t.write_cell(c, model, std::byte{0xd4});
  t.write_cell(a, model, std::byte{0xe5});
  REQUIRE(t.st->write_back(&bad, nullptr) == 0);
  CHECK(t.st->take_dropped_lost().empty());
  CHECK(t.st->lost().isEmpty());
  WriteBatch last;
  t.st->stage_lost(kIno, last);
  CHECK(staged(last) == "del");
  REQUIRE(t.read(Selection::all(t.grid.shape()), &out, &bad) == 0);
  CHECK(out == model);
}

TEST_CASE("array state lost cells: clear() and a torn rewrite's settling", "[array_state][lost]") {
  Lost t;
  std::uint64_t bad = 0;
  t.st->write_bytes(0, t.model.data(), t.model.size());
  REQUIRE(t.st->write_back(&bad, nullptr) == 0);
  const std::uint64_t a = t.cell(1, 1);
  t.st->set_lost(cells_of({std::uint32_t(a)}));
  // An alternative left by a rewrite a crash cut: a lost cell is not
  // accepted as whatever it holds.
  t.st->alternatives().set_alternative(a, std::vector<std::byte>(t.grid.cell_bytes(), std::byte{9}));
  std::uint64_t settled = 0;
  REQUIRE(t.st->settle_torn_rewrites(&settled) == 0);
  CHECK(settled == 0);
  CHECK(t.st->is_lost(a));
  std::vector<std::byte> out;
  CHECK(t.read(Selection(t.grid.element_box(a)), &out, &bad) == EIO);

  // Truncated to nothing: every cell reads as zeros, none lost, the record dropped.
  t.st->clear();
  CHECK_FALSE(t.st->is_lost(a));
  WriteBatch batch;
  t.st->stage_lost(kIno, batch);
  CHECK(staged(batch) == "del");
  REQUIRE(t.read(Selection::all(t.grid.shape()), &out, &bad) == 0);
  CHECK(std::all_of(out.begin(), out.end(), [](std::byte x) { return x == std::byte{0}; }));
}
