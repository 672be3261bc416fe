// [fuzz] fs/paths/view_path: mutants of the paths below A@ and D@ (any
// user can type them) through resolve_view and resolve_table_view, the
// components cut at '/', and of box selectors through parse_box. A refused
// path gets ENOENT, EINVAL, ERANGE or ENOTDIR with a reason; a resolved one
// selects elements inside the shape, normalized, and its canonical spelling
// resolves to the same view; a parsed box re-spells (box_spelling) to itself.
#include <catch2/catch.hpp>

#include <cerrno>
#include <string>
#include <variant>
#include <vector>

#include "fs/paths/view_path.h"
#include "tests/unit/support/fuzz_support.h"
#include "tests/unit/support/path_test_support.h"

using namespace mmfs::fs;
using namespace mmfs::testing::fuzz;
using mmfs::layouts::DimRange;
using mmfs::layouts::Selection;

using mmfs::fs::testing::split_path;

namespace {

struct Array {
  std::vector<std::uint64_t> shape;
  std::uint32_t itemsize;
  std::vector<std::uint64_t> natural;
  std::size_t copies;
  bool listing;  // small enough to list every directory
};

const std::vector<Array> kArrays = {{{100, 200, 30}, 8, {10, 20, 5}, 2, true},
                                    {{1000}, 2, {64}, 0, true},
                                    {{7, 1, 5, 3}, 1, {2, 1, 5, 2}, 1, true},
                                    {{~0ull, 3}, 4, {}, 8, false}};

const std::vector<std::string> kPaths = {
    "", "info", "slice", "slice/0", "slice/1/42", "box", "box/0:4,2,1:30:7", "box/:,::3,5:", "plod", "plod/3",
    "plod/3@", "plod/3@/slice/2/4", "plod/2@/box/1:5:2,0,:", "query", "query/x>3&<5", "query/>0|!(<=2)/count",
    "box/0:2,1:3,4@/query/>0/values", "plan", "plan/slice/0/5", "plan/box/:,3,0", "plan/query/in[1,2]/mask",
    "plan/plod/2@/query/==7/coords", "lbn", "lbn/1,2,3", "zarr", "zarr/zarr.json", "zarr/c/0/1/0", "zarr/4,4,4/c/1/2/3",
    "plan/zarr/c/9/9/5", "copy", "copy/1", "copy/2@/lbn/0,0,0", "copy/0@/box/0:10,0,0", "plan/copy/1@/slice/2/29",
    "box/99,199,29", "slice/2/29"};

const std::vector<std::string> kTokens = {"/", "@", ",", ":", "::", "slice", "box", "plod", "query", "plan", "lbn",
                                          "zarr", "c", "copy", "info", "count", "values", "zarr.json", "..", "."};

// A selection as parse_box promises it: one range per dimension, inside the
// shape, stop one past the last element, a single element with step 1.
bool selection_ok(const Selection& s, const std::vector<std::uint64_t>& shape) {
  if (s.dims().size() != shape.size()) return false;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    const DimRange& r = s.dims()[d];
    if (r.step == 0 || r.start >= r.stop || r.stop > shape[d] || (r.stop - r.start - 1) % r.step != 0) return false;
    if ((r.fixed || r.count() == 1) && (r.step != 1 || r.stop != r.start + 1)) return false;
  }
  return true;
}

bool same_selection(const Selection& a, const Selection& b) {
  if (a.dims().size() != b.dims().size()) return false;
  for (std::size_t d = 0; d < a.dims().size(); ++d) {
    const DimRange &x = a.dims()[d], &y = b.dims()[d];
    if (x.start != y.start || x.stop != y.stop || x.step != y.step || x.fixed != y.fixed) return false;
  }
  return true;
}

bool inside(const Selection& inner, const Selection& outer) {
  if (inner.dims().size() != outer.dims().size()) return false;
  for (std::size_t d = 0; d < inner.dims().size(); ++d)
    if (inner.dims()[d].start < outer.dims()[d].start || inner.dims()[d].stop > outer.dims()[d].stop) return false;
  return true;
}

void check_node(Tally& tally, const ViewNode& n, const Array& a, const std::string& path) {
  const bool plan = n.kind == ViewKind::Plan;
  if (n.kind == ViewKind::Dir && !a.listing) tally.check(n.listing.empty(), "a listing nobody asked for", path);
  auto again = [&](const std::string& spelling) {
    return resolve_view(split_path((plan ? "plan/" : "") + spelling), a.shape, a.itemsize, false, a.natural, a.copies);
  };
  if (n.data) {
    const DataView& v = *n.data;
    tally.check(selection_ok(v.selection, a.shape), "a selection outside the shape or not normalized", path);
    tally.check(v.plod_bytes <= a.itemsize, "PLoD bytes beyond the itemsize", path);
    tally.check(v.copy >= -1 && v.copy <= int(a.copies), "a copy the array does not have", path);
    if (v.within)
      tally.check(inside(v.selection, v.within->selection) && selection_ok(v.within->selection, a.shape),
                  "a Zarr chunk's enclosing box does not enclose it", path);
    auto r = again(v.spelling);
    const auto* m = std::get_if<ViewNode>(&r);
    tally.check(m && m->data && same_selection(m->data->selection, v.selection) &&
                    m->data->plod_bytes == v.plod_bytes && m->data->copy == v.copy &&
                    (n.kind == ViewKind::ZarrChunk || v.within || m->data->spelling == v.spelling),
                "its spelling '" + v.spelling + "' resolves to another view", path);
  }
  if (n.query) {
    const QueryView& q = *n.query;
    auto r = again(q.spelling);
    const auto* m = std::get_if<ViewNode>(&r);
    tally.check(m && m->query && mmfs::indexes::same_tree(m->query->condition, q.condition) &&
                    m->query->output == q.output && m->query->plod_bytes == q.plod_bytes &&
                    m->query->box.has_value() == q.box.has_value() && m->query->spelling == q.spelling,
                "its spelling '" + q.spelling + "' resolves to another query", path);
    if (q.box) tally.check(selection_ok(*q.box, a.shape), "a query box outside the shape", path);
  }
  if (n.kind == ViewKind::Lbn) {
    bool ok = n.coords.size() == a.shape.size();
    for (std::size_t d = 0; ok && d < n.coords.size(); ++d) ok = n.coords[d] < a.shape[d];
    tally.check(ok, "LBN coordinates outside the shape", path);
  }
  if (n.kind == ViewKind::ZarrMeta || n.kind == ViewKind::ZarrChunk) {
    bool ok = n.chunk_shape.size() == a.shape.size();
    for (auto c : n.chunk_shape) ok = ok && c >= 1;
    tally.check(ok, "a Zarr chunk shape of the wrong rank or with a 0", path);
  }
}

}  // namespace

TEST_CASE("fuzz: resolve_view on mutated paths", "[fuzz][view_path]") {
  Mutator mutator(seed_of("resolve_view"), kPaths, kTokens, 1 << 12);
  Tally tally("resolve_view");
  for (std::size_t i = 0, n = iterations(20000); i < n; ++i) {
    const Array& a = kArrays[i % kArrays.size()];
    const std::string path = mutator.next();
    tally.run(path, [&] {
      auto r = resolve_view(split_path(path), a.shape, a.itemsize, a.listing, a.natural, a.copies);
      if (auto* e = std::get_if<PathError>(&r)) {
        tally.failed();
        tally.check(e->error == ENOENT || e->error == EINVAL || e->error == ERANGE || e->error == ENOTDIR,
                    "an errno outside ENOENT EINVAL ERANGE ENOTDIR: " + std::to_string(e->error), path);
        tally.check(!e->message.empty(), "an error without a message", path);
        return;
      }
      tally.parsed();
      const ViewNode& node = std::get<ViewNode>(r);
      check_node(tally, node, a, path);
      // A directory lists only names that resolve below it (a few of them).
      for (std::size_t k = 0; k < node.listing.size(); k += 1 + node.listing.size() / 3) {
        std::vector<std::string> below = split_path(path);
        below.push_back(node.listing[k]);
        auto child = resolve_view(below, a.shape, a.itemsize, false, a.natural, a.copies);
        tally.check(std::holds_alternative<ViewNode>(child), "it lists '" + node.listing[k] + "', which does not resolve",
                    path);
      }
    });
  }
  tally.finish();
}

TEST_CASE("fuzz: resolve_table_view on mutated paths", "[fuzz][view_path]") {
  const std::vector<std::string> paths = {"", "info", "rows", "rows/0:10", "rows/5", "rows/:", "rows/3:",
                                          "plan/rows/:7", "query", "query/a>1&b<2", "query/x in[0,9]/count",
                                          "query/!(y==3)/mask", "zarr"};
  Mutator mutator(seed_of("resolve_table_view"), paths, kTokens, 1 << 12);
  Tally tally("resolve_table_view");
  const std::uint64_t records[] = {0, 1, 10, 1000, ~0ull};
  for (std::size_t i = 0, n = iterations(8000); i < n; ++i) {
    const std::string path = mutator.next();
    const std::uint64_t rows = records[i % 5];
    tally.run(path, [&] {
      auto r = resolve_table_view(split_path(path), rows, true);
      if (auto* e = std::get_if<PathError>(&r)) {
        tally.failed();
        tally.check(e->error == ENOENT || e->error == EINVAL || e->error == ERANGE || e->error == ENOTDIR,
                    "an errno outside ENOENT EINVAL ERANGE ENOTDIR", path);
        tally.check(!e->message.empty(), "an error without a message", path);
        return;
      }
      tally.parsed();
      const ViewNode& v = std::get<ViewNode>(r);
      if (v.kind == ViewKind::Rows || v.kind == ViewKind::Plan)
        tally.check(v.row_count >= 1 && v.row_first < rows && v.row_count <= rows - v.row_first,
                    "a record range outside the table", path);
    });
  }
  tally.finish();
}

TEST_CASE("fuzz: parse_box on mutated selectors", "[fuzz][view_path]") {
  const std::vector<std::string> boxes = {"0:4,2,1:30:7", ":,::3,5:", "99,199,29", "1:2:3,4::5,:6:",
                                          "0:100:99,0:200:200,29"};
  Mutator mutator(seed_of("parse_box"), boxes, {",", ":", "::", "0", "1"}, 1 << 12);
  Tally tally("parse_box");
  const std::vector<std::vector<std::uint64_t>> shapes = {{100, 200, 30}, {1, 1, 1}, {~0ull, 1, 65536}};
  for (std::size_t i = 0, n = iterations(15000); i < n; ++i) {
    const std::string sel = mutator.next();
    const auto& shape = shapes[i % shapes.size()];
    tally.run(sel, [&] {
      auto r = parse_box(sel, shape);
      if (auto* e = std::get_if<PathError>(&r)) {
        tally.failed();
        tally.check((e->error == EINVAL || e->error == ERANGE) && !e->message.empty(), "a bad refusal", sel);
        return;
      }
      tally.parsed();
      const Selection& s = std::get<Selection>(r);
      tally.check(selection_ok(s, shape), "a box outside the shape or not normalized", sel);
      const std::string spelled = box_spelling(s);
      auto again = parse_box(spelled, shape);
      tally.check(std::holds_alternative<Selection>(again) && same_selection(std::get<Selection>(again), s) &&
                      box_spelling(std::get<Selection>(again)) == spelled,
                  "its spelling '" + spelled + "' reads back differently", sel);
    });
  }
  tally.finish();
}

TEST_CASE("fuzz: parse_number of paths on mutated numbers", "[fuzz][view_path]") {
  Mutator mutator(seed_of("fs::parse_number"), {"0", "42", "18446744073709551615", "007", "18446744073709551616"},
                  {}, 256);
  Tally tally("fs::parse_number");
  for (std::size_t i = 0, n = iterations(10000); i < n; ++i) {
    const std::string text = mutator.next();
    tally.run(text, [&] {
      // The oracle: digits only, not empty, at most 2^64 - 1.
      bool digits = !text.empty();
      unsigned __int128 want = 0;
      for (char c : text) {
        digits = digits && c >= '0' && c <= '9';
        if (digits && want <= ~std::uint64_t(0)) want = want * 10 + unsigned(c - '0');
      }
      std::uint64_t got = 7;
      const NumberStatus st = parse_number(text, got);
      if (st != NumberStatus::Ok) {
        tally.failed();
        tally.check(st == (digits ? NumberStatus::TooLarge : NumberStatus::Malformed) && got == 7,
                    "the wrong refusal, or the output changed", text);
        tally.check(!digits || want > ~std::uint64_t(0), "a number that fits refused", text);
        return;
      }
      tally.parsed();
      tally.check(digits && want == got, "a number other than its digits", text);
    });
  }
  tally.finish();
}

TEST_CASE("fuzz: resolve_view regressions", "[fuzz][view_path]") {
  // A plan's zarr directory listed zarr.json, which resolves to ENOENT under plan/.
  const std::vector<std::uint64_t> shape = {100, 200, 30}, natural = {10, 20, 5};
  for (const char* path : {"plan/zarr", "plan/zarr/4,4,4", "zarr", "zarr/4,4,4"}) {
    auto r = resolve_view(split_path(path), shape, 8, true, natural, 0);
    REQUIRE(std::holds_alternative<ViewNode>(r));
    for (const std::string& name : std::get<ViewNode>(r).listing) {
      INFO(path << "/" << name);
      std::vector<std::string> below = split_path(path);
      below.push_back(name);
      CHECK(std::holds_alternative<ViewNode>(resolve_view(below, shape, 8, false, natural, 0)));
    }
  }
  auto plan = resolve_view(split_path("plan/zarr"), shape, 8, true, natural, 0);
  CHECK(std::get<ViewNode>(plan).listing == std::vector<std::string>{"c"});
}
