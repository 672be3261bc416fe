// Queries on one array file (fs/array/array_file_query.cc) against brute
// force over an int16 model: the rows of a box; each atom's rows from one
// scan of the data (without an index) or from the index, inside a box and
// after unflushed writes; counts from the index header alone; the elements
// at given rows; an mloc image's values in one pass; the plans of a scan and
// of the cells holding some rows.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstring>
#include <optional>
#include <random>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

#include "fs/array/array_file.h"
#include "indexes/bitmap.h"
#include "indexes/values.h"
#include "layouts/selection.h"
#include "tests/unit/support/array_index_test_support.h"
#include "tests/unit/support/array_test_support.h"
#include "tests/unit/support/fs_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;
using namespace mmfs::fs::testing::arrays;
using namespace mmfs::fs::testing::array_indexes;
using indexes::CompareOp;

namespace {

constexpr std::uint64_t kRows = 30, kCols = 41;

// The keys of `x OP c` for int16 (fs::keys is the metadata's key namespace).
indexes::KeySet atom(CompareOp op, int c) { return mmfs::fs::testing::array_indexes::keys(op, c); }

// The rows of `data` (inside `box` when given) whose values have `k`.
std::vector<std::uint64_t> truth(const Values& data, const indexes::KeySet& k,
                                 const std::optional<layouts::Selection>& box = std::nullopt) {
  std::vector<std::uint64_t> out;
  for (std::uint64_t r = 0; r < data.size(); ++r) {
    if (box) {
      const std::uint64_t x[2] = {r / kCols, r % kCols};
      bool in = true;
      for (std::size_t d = 0; d < 2; ++d) {
        const layouts::DimRange& dr = box->dims()[d];
        in = in && x[d] >= dr.start && x[d] < dr.stop && (x[d] - dr.start) % dr.step == 0;
      }
      if (!in) continue;
    }
    if (indexes::contains(k, indexes::ValueType::I16, reinterpret_cast<const std::byte*>(&data[r]))) out.push_back(r);
  }
  return out;
}

}  // namespace

TEST_CASE("array file query: the rows of a box are its elements' C-order indices", "[array_file_query]") {
  std::mt19937_64 rng(3);
  const std::vector<std::uint64_t> shape{7, 5, 9};
  for (int k = 0; k < 200; ++k) {
    std::vector<layouts::DimRange> dims;
    for (std::uint64_t s : shape) {
      const std::uint64_t a = rng() % s;
      dims.push_back(rng() % 4 == 0 ? layouts::DimRange{a, a + 1, 1, true}
                                    : layouts::DimRange{a, a + 1 + rng() % (s - a), 1 + rng() % 3, false});
    }
    const layouts::Selection sel(dims);
    std::vector<std::uint64_t> want;
    for (std::uint64_t i = dims[0].start; i < dims[0].stop; i += dims[0].step)
      for (std::uint64_t j = dims[1].start; j < dims[1].stop; j += dims[1].step)
        for (std::uint64_t l = dims[2].start; l < dims[2].stop; l += dims[2].step) want.push_back((i * 5 + j) * 9 + l);
    CHECK(indexes::rows_of(selection_rows(sel, shape)) == want);
  }
}

TEST_CASE("array file query: without an index, one scan answers every atom exactly, inside a box too",
          "[array_file_query]") {
  const auto g = toy_disk();
  Mount m = mount(formatted(*g));
  std::mt19937_64 rng(7);
  auto a = create_array(m, "a", make_schema({kRows, kCols}, "int16", "naive"));
  Values data = random_values(rng, kRows * kCols);
  REQUIRE(write_values(*a, 0, data) == 0);  // not flushed: a query sees it anyway
  const std::vector<indexes::KeySet> atoms = {atom(CompareOp::Eq, 3), atom(CompareOp::Lt, -5), atom(CompareOp::Ge, 30)};
  for (const std::optional<layouts::Selection>& box :
       {std::optional<layouts::Selection>{}, std::optional<layouts::Selection>(layouts::Selection(
                                                  {{2, 25, 3, false}, {0, 41, 2, false}}))}) {
    std::vector<indexes::Estimate> est;
    QueryCost cost;
    std::string msg;
    REQUIRE(a->atom_estimates(atoms, box, &est, &cost, &msg) == 0);
    CHECK(cost.scanned);
    REQUIRE(est.size() == 3);
    for (std::size_t i = 0; i < atoms.size(); ++i) {
      INFO("atom " << i << (box ? " in the box" : ""));
      CHECK(indexes::rows_of(est[i].sure_rows()) == truth(data, atoms[i], box));
      CHECK(est[i].maybe.isEmpty());
    }
  }
  CHECK_FALSE(a->exact_count(atom(CompareOp::Eq, 3)));  // no index: no count without reading
  // The elements at some rows, in row order.
  indexes::Bitmap rows;
  for (std::uint64_t r : {0u, 40u, 41u, 600u, 1229u}) rows.add(std::uint64_t(r));
  std::string out, msg;
  QueryCost cost;
  REQUIRE(a->gather_rows(rows, &out, &cost, &msg) == 0);
  REQUIRE(out.size() == 5 * 2);
  std::vector<std::int16_t> got(5);
  std::memcpy(got.data(), out.data(), out.size());
  CHECK(got == std::vector<std::int16_t>{data[0], data[40], data[41], data[600], data[1229]});
  CHECK(a->mloc_query_output(atom(CompareOp::Eq, 3), true, &out, &cost, &msg) == ENOTSUP);
}

TEST_CASE("array file query: with an index, its rows and the header's counts; dirty cells wait for a flush",
          "[array_file_query]") {
  const auto g = toy_disk();
  Mount m = mount(formatted(*g));
  std::mt19937_64 rng(8);
  Values data = random_values(rng, kRows * kCols);
  auto a = create_with_values(m, "a", indexed(make_schema({kRows, kCols}, "int16", "naive"), "e1", "exact"),
                              data);
  std::string msg;
  const indexes::KeySet k = atom(CompareOp::Eq, 3);
  CHECK(a->exact_count(k) == truth(data, k).size());
  std::vector<indexes::Estimate> est;
  QueryCost cost;
  REQUIRE(a->atom_estimates({k}, std::nullopt, &est, &cost, &msg) == 0);
  CHECK_FALSE(cost.scanned);
  CHECK(indexes::rows_of(est[0].sure_rows()) == truth(data, k));
  // A write not yet flushed: the header's count no longer answers; a query flushes first.
  const Values three(5, 3);
  REQUIRE(write_values(*a, 100, three) == 0);
  std::copy(three.begin(), three.end(), data.begin() + 100);
  CHECK_FALSE(a->exact_count(k));
  REQUIRE(a->atom_estimates({k}, std::nullopt, &est, &cost, &msg) == 0);
  const indexes::Bitmap& sure = est[0].sure_rows();
  const std::vector<std::uint64_t> want = truth(data, k);
  CHECK(indexes::is_subset(sure, [&] {
    indexes::Bitmap b;
    for (std::uint64_t r : want) b.add(r);
    return b;
  }()));
  for (std::uint64_t r : want) CHECK((sure.contains(r) || est[0].maybe.contains(r)));
}

TEST_CASE("array file query: a sealed mloc image gives the matching values in row order in one pass",
          "[array_file_query]") {
  const auto g = toy_disk();
  Mount m = mount(formatted(*g));
  std::mt19937_64 rng(9);
  auto a = create_array(m, "a", make_schema({kRows, kCols}, "int16", "mloc"));
  Values data = random_values(rng, kRows * kCols);
  REQUIRE(write_values(*a, 0, data) == 0);
  std::string msg;
  REQUIRE(a->settle(&msg) == 0);
  for (int c : {-20, 0, 3, 19}) {
    const indexes::KeySet k = atom(CompareOp::Le, c);
    std::string values, coords;
    QueryCost cost;
    REQUIRE(a->mloc_query_output(k, true, &values, &cost, &msg) == 0);
    REQUIRE(a->mloc_query_output(k, false, &coords, &cost, &msg) == 0);
    const std::vector<std::uint64_t> rows = truth(data, k);
    REQUIRE(values.size() == rows.size() * 2);
    REQUIRE(coords.size() == rows.size() * 8);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      std::int16_t v;
      std::uint64_t r;
      std::memcpy(&v, values.data() + 2 * i, 2);
      std::memcpy(&r, coords.data() + 8 * i, 8);
      CHECK(r == rows[i]);
      CHECK(v == data[rows[i]]);
    }
  }
}

TEST_CASE("array file query: the plans of a scan and of the cells holding some rows", "[array_file_query]") {
  const auto g = toy_disk();
  Mount m = mount(formatted(*g));
  ArraySchema s = make_schema({kRows, kCols}, "int16", "naive");
  s.cell = {8, 8};  // 4 x 6 cells
  std::mt19937_64 rng(10);
  auto a = create_with_values(m, "a", s, random_values(rng, kRows * kCols));
  CHECK(a->scan_plan(std::nullopt).cells == 4 * 6);
  CHECK(a->scan_plan(layouts::Selection({{0, 8, 1, false}, {0, 41, 1, false}})).cells == 6);
  CHECK(a->scan_plan(layouts::Selection({{9, 10, 1, true}, {17, 18, 1, true}})).cells == 1);
  indexes::Bitmap rows;
  rows.add(std::uint64_t(0));              // cell (0, 0)
  rows.add(std::uint64_t(1));              // the same cell
  rows.add(std::uint64_t(29 * kCols + 40));  // the last cell (3, 5)
  const layouts::IoPlan p = a->rows_plan(rows);
  CHECK(p.cells == 2);
  std::uint64_t sectors = 0;
  for (const auto& b : p.batches)
    for (const auto& r : b.requests) sectors += r.sectors;
  std::shared_lock lock(a->placement_mutex());
  CHECK(sectors == 2 * a->cells_locked()->layout().sectors_per_cell());
}
