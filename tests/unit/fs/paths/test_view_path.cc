// View path resolution below A@ (fs/paths/view_path.h, docs/reference.md §5): every grammar
// row, listings, errnos and box selectors against numpy's semantics.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "fs/paths/view_path.h"

using namespace mmfs;
using namespace mmfs::fs;
using layouts::DimRange;
using layouts::Selection;

namespace {

const std::vector<std::uint64_t> kShape = {4, 5, 6};
constexpr std::uint32_t kItem = 8;

std::vector<std::string> split(const std::string& path) {
  std::vector<std::string> out;
  if (path.empty()) return out;
  std::size_t start = 0;
  for (;;) {
    auto slash = path.find('/', start);
    out.push_back(path.substr(start, slash - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return out;
}

ViewNode resolve(const std::string& path, const std::vector<std::uint64_t>& shape = kShape,
                 std::uint32_t itemsize = kItem) {
  INFO("path A@/" << path);
  auto r = resolve_view(split(path), shape, itemsize);
  if (auto* e = std::get_if<PathError>(&r)) FAIL("unexpected error " << e->error << ": " << e->message);
  return std::get<ViewNode>(r);
}

PathError failure(const std::string& path, const std::vector<std::uint64_t>& shape = kShape,
                  std::uint32_t itemsize = kItem) {
  INFO("path A@/" << path);
  auto r = resolve_view(split(path), shape, itemsize);
  if (std::holds_alternative<ViewNode>(r)) FAIL("resolved, but an error was expected");
  return std::get<PathError>(r);
}

int errno_of(const std::string& path, const std::vector<std::uint64_t>& shape = kShape,
             std::uint32_t itemsize = kItem) {
  return failure(path, shape, itemsize).error;
}

std::vector<std::string> L(std::initializer_list<const char*> names) {
  return std::vector<std::string>(names.begin(), names.end());
}

std::vector<std::string> range_names(std::uint64_t first, std::uint64_t last, const char* suffix = "") {
  std::vector<std::string> out;
  for (std::uint64_t i = first; i <= last; ++i) out.push_back(std::to_string(i) + suffix);
  return out;
}

// A Dir's names as a reader of the directory sees them: its listing, then
// its numbered names spelled.
std::vector<std::string> names(const ViewNode& n) {
  std::vector<std::string> out = n.listing;
  for (std::uint64_t i = 0; i < n.numbered; ++i) out.push_back(std::to_string(i));
  return out;
}

Selection box(const std::string& sel, const std::vector<std::uint64_t>& shape) {
  INFO("selector " << sel);
  auto r = parse_box(sel, shape);
  if (auto* e = std::get_if<PathError>(&r)) FAIL("unexpected error " << e->error << ": " << e->message);
  return std::get<Selection>(r);
}

int box_errno(const std::string& sel, const std::vector<std::uint64_t>& shape) {
  INFO("selector " << sel);
  auto r = parse_box(sel, shape);
  if (std::holds_alternative<Selection>(r)) FAIL("parsed, but an error was expected");
  return std::get<PathError>(r).error;
}

using Shape = std::vector<std::uint64_t>;

bool same_dims(const Selection& a, const Selection& b) {
  if (a.dims().size() != b.dims().size()) return false;
  for (std::size_t i = 0; i < a.dims().size(); ++i) {
    const DimRange &x = a.dims()[i], &y = b.dims()[i];
    if (x.start != y.start || x.stop != y.stop || x.step != y.step || x.fixed != y.fixed) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("A@ lists its views; info is a file", "[view_path]") {
  auto top = resolve("");
  CHECK(top.kind == ViewKind::Dir);
  CHECK(top.listing == L({"info", "slice", "box", "plod", "query", "lbn", "plan", "zarr"}));
  CHECK_FALSE(top.data);

  auto info = resolve("info");
  CHECK(info.kind == ViewKind::Info);
  CHECK(info.listing.empty());
  CHECK(errno_of("info/x") == ENOTDIR);

  CHECK(errno_of("foo") == ENOENT);
  CHECK(errno_of("Info") == ENOENT);
  auto e = failure("nonsense");
  CHECK_THAT(e.message, Catch::Contains("nonsense") && Catch::Contains("slice"));
}

TEST_CASE("slice/D/I: listings, the hyperplane, canonical spelling, errors", "[view_path]") {
  auto s = resolve("slice");
  CHECK(s.kind == ViewKind::Dir);
  CHECK(s.listing == L({"0", "1", "2"}));
  CHECK(names(resolve("slice/1")) == L({"0", "1", "2", "3", "4"}));
  CHECK(names(resolve("slice/2")) == range_names(0, 5));
  // A dimension's indices are a count, not spelled (there may be billions),
  // and lookups need none.
  const std::vector<std::uint64_t> huge{std::uint64_t(1) << 40, 2};
  const ViewNode wide = resolve("slice/0", huge);
  CHECK(wide.listing.empty());
  CHECK(wide.numbered == std::uint64_t(1) << 40);
  CHECK(resolve("slice/1", huge).numbered == 2);
  auto unlisted = resolve_view(split("slice/0"), huge, kItem, false);
  REQUIRE(std::holds_alternative<ViewNode>(unlisted));
  CHECK(std::get<ViewNode>(unlisted).numbered == 0);
  CHECK(resolve("slice").numbered == 0);  // dimension numbers are few: spelled

  auto f = resolve("slice/1/3");
  REQUIRE(f.kind == ViewKind::Data);
  REQUIRE(f.data);
  CHECK(f.data->plod_bytes == 0);
  CHECK(f.data->spelling == "slice/1/3");
  CHECK(same_dims(f.data->selection, Selection::slice(kShape, 1, 3)));
  CHECK(f.data->selection.result_shape() == Shape{4, 6});
  CHECK(f.data->bytes(kItem) == 4 * 6 * 8);
  CHECK(resolve("slice/01/003").data->spelling == "slice/1/3");
  CHECK(resolve("slice/0/3").data->selection.result_shape() == Shape{5, 6});
  CHECK(resolve("slice/2/5").data->selection.result_shape() == Shape{4, 5});

  CHECK(errno_of("slice/3") == ERANGE);
  CHECK(errno_of("slice/3/0") == ERANGE);
  CHECK(errno_of("slice/99999999999999999999999") == ERANGE);  // overflows 64 bits
  for (const char* bad : {"x", "-1", "+1", " 1", "1 ", "", "1x", "0x1", "1.0"}) {
    INFO("dimension '" << bad << "'");
    CHECK(errno_of(std::string("slice/") + bad) == EINVAL);
  }
  CHECK(errno_of("slice/1/5") == ERANGE);
  CHECK(errno_of("slice/1/18446744073709551615") == ERANGE);
  CHECK(errno_of("slice/1/18446744073709551616") == ERANGE);
  CHECK(errno_of("slice/1/-3") == EINVAL);
  CHECK(errno_of("slice/1/three") == EINVAL);
  CHECK(errno_of("slice/1/3/x") == ENOTDIR);
  CHECK(errno_of("slice/1/3/0/0") == ENOTDIR);

  auto e = failure("slice/7");
  CHECK_THAT(e.message, Catch::Contains("slice/7") && Catch::Contains("0..2"));
  e = failure("slice/1/9");
  CHECK_THAT(e.message, Catch::Contains("slice/1/9") && Catch::Contains("0..4"));
  e = failure("slice/1/-3");
  CHECK_THAT(e.message, Catch::Contains("negative"));
  CHECK(e.message.find('\n') == std::string::npos);
}

TEST_CASE("box/SEL: files named by free-form selectors", "[view_path]") {
  auto b = resolve("box");
  CHECK(b.kind == ViewKind::Dir);
  CHECK(b.listing.empty());

  auto f = resolve("box/:,2,1:6:2");
  REQUIRE(f.kind == ViewKind::Data);
  CHECK(f.data->selection.result_shape() == Shape{4, 3});  // a[:, 2, 1:6:2]
  CHECK(f.data->spelling == "box/0:4,2,1:6:2");
  CHECK(f.data->plod_bytes == 0);
  CHECK(f.data->bytes(kItem) == 12 * 8);

  CHECK(errno_of("box/:,:") == EINVAL);
  CHECK(errno_of("box/4,:,:") == ERANGE);
  CHECK(errno_of("box/:,:,:/x") == ENOTDIR);
  auto e = failure("box/0:9,:,:");
  CHECK(e.error == ERANGE);
  CHECK_THAT(e.message, Catch::Contains("box/0:9,:,:") && Catch::Contains("'0:9'") && Catch::Contains("size 4"));
}

TEST_CASE("plod/K is the whole array, plod/K@ holds its slices and boxes", "[view_path]") {
  auto p = resolve("plod");
  CHECK(p.kind == ViewKind::Dir);
  auto expected = range_names(1, 8);
  auto at = range_names(1, 8, "@");
  expected.insert(expected.end(), at.begin(), at.end());
  CHECK(p.listing == expected);
  CHECK(resolve("plod", {10}, 2).listing == L({"1", "2", "1@", "2@"}));

  auto whole = resolve("plod/3");
  REQUIRE(whole.kind == ViewKind::Data);
  CHECK(whole.data->plod_bytes == 3);
  CHECK(whole.data->spelling == "plod/3");
  CHECK(same_dims(whole.data->selection, Selection::all(kShape)));
  CHECK(whole.data->bytes(kItem) == 120 * 8);
  CHECK(resolve("plod/8").data->plod_bytes == 8);
  CHECK(resolve("plod/1").data->plod_bytes == 1);
  CHECK(resolve("plod/003").data->spelling == "plod/3");

  auto views = resolve("plod/3@");
  CHECK(views.kind == ViewKind::Dir);
  CHECK(views.listing == L({"slice", "box", "query"}));
  CHECK(resolve("plod/3@/slice").listing == L({"0", "1", "2"}));
  CHECK(names(resolve("plod/3@/slice/2")) == range_names(0, 5));
  CHECK(resolve("plod/3@/box").listing.empty());

  auto sl = resolve("plod/3@/slice/1/2");
  REQUIRE(sl.kind == ViewKind::Data);
  CHECK(sl.data->plod_bytes == 3);
  CHECK(sl.data->spelling == "plod/3@/slice/1/2");
  CHECK(same_dims(sl.data->selection, Selection::slice(kShape, 1, 2)));
  auto bx = resolve("plod/3@/box/0:4,2,:");
  CHECK(bx.data->plod_bytes == 3);
  CHECK(bx.data->spelling == "plod/3@/box/0:4,2,0:6");
  CHECK(bx.data->selection.result_shape() == Shape{4, 6});

  CHECK(errno_of("plod/0") == ERANGE);
  CHECK(errno_of("plod/9") == ERANGE);
  CHECK(errno_of("plod/9@") == ERANGE);
  CHECK(errno_of("plod/0@/slice") == ERANGE);
  CHECK(errno_of("plod/5", {10}, 4) == ERANGE);
  CHECK(errno_of("plod/99999999999999999999") == ERANGE);
  for (const char* bad : {"x", "@", "3@@", "-3", "+3", "3 ", "", "@3", "3@x"}) {
    INFO("K '" << bad << "'");
    CHECK(errno_of(std::string("plod/") + bad) == EINVAL);
  }
  CHECK(errno_of("plod/3/slice") == ENOTDIR);
  CHECK(errno_of("plod/3/slice/1/42") == ENOTDIR);
  CHECK(errno_of("plod/3@/plod") == ENOENT);
  CHECK(resolve("plod/3@/query").kind == ViewKind::Dir);
  CHECK(resolve("plod/3@/query/>3/values").query->plod_bytes == 3);
  CHECK(errno_of("plod/3@/info") == ENOENT);
  CHECK(errno_of("plod/3@/slice/3") == ERANGE);
  CHECK(errno_of("plod/3@/slice/1/5") == ERANGE);
  CHECK(errno_of("plod/3@/slice/1/2/x") == ENOTDIR);
  CHECK(errno_of("plod/3@/box/:") == EINVAL);
  CHECK(errno_of("plod/3@/box/:,:,:/x") == ENOTDIR);
  CHECK_THAT(failure("plod/9").message, Catch::Contains("1 <= K <= 8"));
}

TEST_CASE("lbn/I0,I1,...: the element's coordinates", "[view_path]") {
  auto d = resolve("lbn");
  CHECK(d.kind == ViewKind::Dir);
  CHECK(d.listing.empty());

  auto f = resolve("lbn/3,4,5");
  CHECK(f.kind == ViewKind::Lbn);
  CHECK(f.coords == Shape{3, 4, 5});
  CHECK_FALSE(f.data);
  CHECK(resolve("lbn/0,0,0").coords == Shape{0, 0, 0});
  CHECK(resolve("lbn/7", {10}).coords == Shape{7});

  CHECK(errno_of("lbn/1,2") == EINVAL);
  CHECK(errno_of("lbn/1,2,3,4") == EINVAL);
  CHECK(errno_of("lbn/4,0,0") == ERANGE);
  CHECK(errno_of("lbn/0,5,0") == ERANGE);
  CHECK(errno_of("lbn/0,0,6") == ERANGE);
  CHECK(errno_of("lbn/0,0,99999999999999999999") == ERANGE);
  CHECK(errno_of("lbn/1,x,3") == EINVAL);
  CHECK(errno_of("lbn/1,,3") == EINVAL);
  CHECK(errno_of("lbn/1,-2,3") == EINVAL);
  CHECK(errno_of("lbn/1,2,3,") == EINVAL);
  CHECK(errno_of("lbn/") == EINVAL);
  CHECK(errno_of("lbn/1, 2,3") == EINVAL);
  CHECK(errno_of("lbn/1,2,3/x") == ENOTDIR);
  CHECK_THAT(failure("lbn/1,2").message, Catch::Contains("2 coordinates") && Catch::Contains("3 dimensions"));
}

TEST_CASE("plan/VIEW mirrors the data views; its files are plans", "[view_path]") {
  auto p = resolve("plan");
  CHECK(p.kind == ViewKind::Dir);
  CHECK(p.listing == L({"slice", "box", "plod", "query", "zarr"}));
  CHECK(resolve("plan/slice").listing == L({"0", "1", "2"}));
  CHECK(names(resolve("plan/slice/1")) == range_names(0, 4));
  CHECK(resolve("plan/box").listing.empty());
  CHECK(resolve("plan/plod").listing == resolve("plod").listing);
  CHECK(resolve("plan/plod/2@").listing == L({"slice", "box", "query"}));

  auto sl = resolve("plan/slice/1/3");
  REQUIRE(sl.kind == ViewKind::Plan);
  REQUIRE(sl.data);
  CHECK(sl.data->spelling == "slice/1/3");
  CHECK(same_dims(sl.data->selection, Selection::slice(kShape, 1, 3)));
  auto bx = resolve("plan/box/0:3,:,5");
  CHECK(bx.kind == ViewKind::Plan);
  CHECK(bx.data->spelling == "box/0:3,0:5,5");
  CHECK(bx.data->selection.result_shape() == Shape{3, 5});
  auto pl = resolve("plan/plod/2");
  CHECK(pl.kind == ViewKind::Plan);
  CHECK(pl.data->plod_bytes == 2);
  CHECK(pl.data->spelling == "plod/2");
  auto pls = resolve("plan/plod/2@/box/1,1,1:2");
  CHECK(pls.kind == ViewKind::Plan);
  CHECK(pls.data->plod_bytes == 2);
  CHECK(pls.data->spelling == "plod/2@/box/1,1,1:2");
  CHECK(pls.data->selection.result_shape() == Shape{1});

  CHECK(errno_of("plan/info") == ENOENT);
  CHECK(errno_of("plan/lbn") == ENOENT);
  CHECK(errno_of("plan/plan") == ENOENT);
  CHECK(errno_of("plan/foo") == ENOENT);
  CHECK(errno_of("plan/slice/9") == ERANGE);
  CHECK(errno_of("plan/slice/x") == EINVAL);
  CHECK(errno_of("plan/slice/1/3/x") == ENOTDIR);
  CHECK(errno_of("plan/box/1:1,:,:") == EINVAL);
  CHECK(errno_of("plan/plod/9") == ERANGE);
  CHECK(errno_of("plan/plod/2/x") == ENOTDIR);
  CHECK(resolve("plan/query").kind == ViewKind::Dir);
  auto pq = resolve("plan/query/>3/values");
  CHECK(pq.kind == ViewKind::Plan);
  REQUIRE(pq.query);
  CHECK(pq.query->spelling == "query/>3/values");
  CHECK(resolve("plan/box/0:2,:,1@/query/<0/count").query->box.has_value());
}

TEST_CASE("query: conditions, outputs, boxes and PLoD", "[view_path]") {
  auto q = resolve("query");
  CHECK(q.kind == ViewKind::Dir);
  CHECK(q.listing.empty());
  CHECK(resolve("query/>3").listing == L({"count", "coords", "values", "mask"}));
  auto c = resolve("query/>3&<5|b==1/coords");
  REQUIRE(c.kind == ViewKind::Query);
  REQUIRE(c.query);
  CHECK(c.query->output == QueryView::Output::Coords);
  CHECK(c.query->condition_text == ">3&<5|b==1");
  CHECK(!c.query->box);
  CHECK(c.query->plod_bytes == 0);
  for (const char* out : {"count", "values", "mask"}) CHECK(resolve(std::string("query/>3/") + out).kind == ViewKind::Query);
  CHECK(errno_of("query/>3/sum") == ENOENT);
  CHECK(errno_of("query/>3/count/x") == ENOTDIR);
  CHECK(errno_of("query/>>3") == EINVAL);
  CHECK(errno_of("query/(>3") == EINVAL);
  CHECK_THAT(failure("query/>3&").message, Catch::Contains("position"));
  // box/SEL@: the box's query views; box/SEL stays a file.
  CHECK(resolve("box/0:2,:,1@").listing == L({"query"}));
  auto b = resolve("box/0:2,:,1@/query/<0/values");
  REQUIRE(b.query);
  REQUIRE(b.query->box);
  CHECK(box_spelling(*b.query->box) == "0:2,0:5,1");
  CHECK(b.query->spelling == "box/0:2,0:5,1@/query/<0/values");
  CHECK(errno_of("box/0:2,:,1@/slice") == ENOENT);
  CHECK(errno_of("box/0:9,:,1@/query/<0/values") == ERANGE);
  CHECK(errno_of("box/0:2,:,1/query") == ENOTDIR);
}

TEST_CASE("table views of a directory", "[view_path]") {
  auto top = resolve_table_view(std::vector<std::string>{}, 100);
  auto* d = std::get_if<ViewNode>(&top);
  REQUIRE(d);
  CHECK(d->listing == L({"info", "rows", "plan", "query", "zarr"}));
  auto r = resolve_table_view(split("query/K2==1&K4>2/count"), 100);
  auto* n = std::get_if<ViewNode>(&r);
  REQUIRE(n);
  CHECK(n->kind == ViewKind::Query);
  CHECK(n->query->output == QueryView::Output::Count);
  CHECK(std::get<PathError>(resolve_table_view(split("query/K2==1/values"), 100)).error == ENOENT);
  CHECK(std::get<PathError>(resolve_table_view(split("slice"), 100)).error == ENOENT);
  CHECK(std::get<PathError>(resolve_table_view(split("query/K2=1/count"), 100)).error == EINVAL);
}

TEST_CASE("table rows, info and plan views", "[view_path]") {
  auto rows = [](const char* path, std::uint64_t records = 100) {
    return resolve_table_view(split(path), records);
  };
  auto range = [&](const char* path) {
    auto r = rows(path);
    REQUIRE(std::holds_alternative<ViewNode>(r));
    const ViewNode& n = std::get<ViewNode>(r);
    return std::tuple(n.kind, n.row_first, n.row_count);
  };
  CHECK(range("rows/10:20") == std::tuple(ViewKind::Rows, 10ull, 10ull));
  CHECK(range("rows/90:") == std::tuple(ViewKind::Rows, 90ull, 10ull));
  CHECK(range("rows/:") == std::tuple(ViewKind::Rows, 0ull, 100ull));
  CHECK(range("rows/7") == std::tuple(ViewKind::Rows, 7ull, 1ull));
  CHECK(range("plan/rows/0:5") == std::tuple(ViewKind::Plan, 0ull, 5ull));
  CHECK(std::get<ViewNode>(rows("info")).kind == ViewKind::Info);
  CHECK(std::get<ViewNode>(rows("rows")).kind == ViewKind::Dir);
  CHECK(std::get<ViewNode>(rows("plan")).listing == L({"rows"}));
  auto errno_of = [&](const char* path, std::uint64_t records = 100) {
    return std::get<PathError>(rows(path, records)).error;
  };
  CHECK(errno_of("rows/0:101") == ERANGE);
  CHECK(errno_of("rows/100") == ERANGE);
  CHECK(errno_of("rows/5:5") == EINVAL);
  CHECK(errno_of("rows/0:10:2") == EINVAL);
  CHECK(errno_of("rows/0:10,1") == EINVAL);
  CHECK(errno_of("rows/x") == EINVAL);
  CHECK(errno_of("rows/0:5/x") == ENOTDIR);
  CHECK(errno_of("info/x") == ENOTDIR);
  CHECK(errno_of("plan/query") == ENOENT);
  CHECK(errno_of("rows/0", 0) == ERANGE);  // a directory without a table has no records
}

TEST_CASE("resolve_view without listings", "[view_path]") {
  auto r = resolve_view(split("slice/2"), kShape, kItem, false);
  REQUIRE(std::holds_alternative<ViewNode>(r));
  CHECK(std::get<ViewNode>(r).kind == ViewKind::Dir);
  CHECK(std::get<ViewNode>(r).listing.empty());
  auto f = resolve_view(split("slice/2/1"), kShape, kItem, false);
  REQUIRE(std::holds_alternative<ViewNode>(f));
  CHECK(std::get<ViewNode>(f).data->spelling == "slice/2/1");
  // A dimension of 10^12: no listing is built (it would not fit in memory).
  const Shape huge = {1000000000000ull, 2};
  auto h = resolve_view(split("slice/0"), huge, kItem, false);
  REQUIRE(std::holds_alternative<ViewNode>(h));
  CHECK(std::get<ViewNode>(h).listing.empty());
  CHECK(resolve("slice/0/999999999999", huge).data->selection.result_shape() == Shape{2});
  CHECK(resolve("box/999999999990::3,:", huge).data->selection.result_shape() == Shape{4, 2});
}

TEST_CASE("parse_box: numpy basic indexing, hand-computed result shapes", "[view_path]") {
  const Shape s = {10, 20, 30};
  // np.empty((10, 20, 30))[SEL].shape
  CHECK(box(":,:,:", s).result_shape() == Shape{10, 20, 30});
  CHECK(box("5,:,:", s).result_shape() == Shape{20, 30});
  CHECK(box("5,6,7", s).result_shape() == Shape{});
  CHECK(box("5,6,7", s).elements() == 1);
  CHECK(box("2:8,3,::4", s).result_shape() == Shape{6, 8});      // 0,4,...,28
  CHECK(box("1:9:3,0:20:7,29", s).result_shape() == Shape{3, 3});  // 1,4,7 / 0,7,14
  CHECK(box("7:,:5,10::10", s).result_shape() == Shape{3, 5, 2});  // 7..9 / 0..4 / 10,20
  CHECK(box("::3,::,:", s).result_shape() == Shape{4, 20, 30});     // 0,3,6,9
  CHECK(box("0:10:100,19:20,0:1", s).result_shape() == Shape{1, 1, 1});
  CHECK(box("9:10,19,29", s).result_shape() == Shape{1});
  CHECK(box("1:10:2,2:19:,3:30:9", s).result_shape() == Shape{5, 17, 3});  // 1..9 odd / 2..18 / 3,12,21
  CHECK(box("0:18446744073709551615:18446744073709551615,0,0", Shape{18446744073709551615ull, 1, 1})
            .result_shape() == Shape{1});

  // The DimRanges, normalized: stop one past the last element.
  auto sel = box("1:9:3,0:20:7,29", s);
  REQUIRE(sel.dims().size() == 3);
  CHECK(sel.dims()[0].start == 1);
  CHECK(sel.dims()[0].stop == 8);
  CHECK(sel.dims()[0].step == 3);
  CHECK_FALSE(sel.dims()[0].fixed);
  CHECK(sel.dims()[1].start == 0);
  CHECK(sel.dims()[1].stop == 15);
  CHECK(sel.dims()[1].step == 7);
  CHECK(sel.dims()[2].start == 29);
  CHECK(sel.dims()[2].stop == 30);
  CHECK(sel.dims()[2].fixed);
  CHECK(box_spelling(sel) == "1:8:3,0:15:7,29");
  CHECK(same_dims(box(box_spelling(sel), s), sel));
  CHECK(box_spelling(box(":,::1,5:6:4", s)) == "0:10,0:20,5:6");
  CHECK(box_spelling(box("007,:,:", s)) == "7,0:20,0:30");
}

TEST_CASE("parse_box: every start/stop/step of a small dimension selects numpy's elements", "[view_path]") {
  const Shape s = {7};
  for (std::uint64_t a = 0; a < 7; ++a)
    for (std::uint64_t b = a + 1; b <= 7; ++b)
      for (std::uint64_t step = 1; step <= 8; ++step) {
        std::vector<std::uint64_t> expected;  // list(range(a, b, step))
        for (std::uint64_t i = a; i < b; i += step) expected.push_back(i);
        const std::string text = std::to_string(a) + ":" + std::to_string(b) + ":" + std::to_string(step);
        INFO(text);
        auto sel = box(text, s);
        const DimRange& r = sel.dims()[0];
        std::vector<std::uint64_t> got;
        for (std::uint64_t i = r.start; i < r.stop; i += r.step) got.push_back(i);
        CHECK(got == expected);
        CHECK(r.count() == expected.size());
        CHECK(sel.result_shape() == Shape{expected.size()});
        CHECK(same_dims(box(box_spelling(sel), s), sel));
      }
}

TEST_CASE("parse_box: errors", "[view_path]") {
  const Shape s = {10, 20, 30};
  // Out of range.
  CHECK(box_errno("10,:,:", s) == ERANGE);
  CHECK(box_errno("10:,:,:", s) == ERANGE);
  CHECK(box_errno("10:11,:,:", s) == ERANGE);
  CHECK(box_errno(":11,:,:", s) == ERANGE);
  CHECK(box_errno(":,:,0:31", s) == ERANGE);
  CHECK(box_errno(":,:,99999999999999999999", s) == ERANGE);
  // Empty selections, zero steps.
  CHECK(box_errno("5:5,:,:", s) == EINVAL);
  CHECK(box_errno("6:5,:,:", s) == EINVAL);
  CHECK(box_errno(":0,:,:", s) == EINVAL);
  CHECK(box_errno("::0,:,:", s) == EINVAL);
  CHECK(box_errno("1:5:0,:,:", s) == EINVAL);
  // Item counts.
  CHECK(box_errno(":,:", s) == EINVAL);
  CHECK(box_errno(":,:,:,:", s) == EINVAL);
  CHECK(box_errno("", s) == EINVAL);
  CHECK(box_errno(",:,:", s) == EINVAL);
  CHECK(box_errno(":,:,", s) == EINVAL);
  // Malformed numbers and items.
  for (const char* bad : {"-1,:,:", "-1:,:,:", ":-1,:,:", "::-1,:,:", "+1,:,:", "1:2:+1,:,:", " 1,:,:", "1 ,:,:",
                          "a,:,:", "1:2:3:4,:,:", ":::,:,:", "1.5,:,:", "0x1,:,:", "1;2,:,:"}) {
    INFO(bad);
    CHECK(box_errno(bad, s) == EINVAL);
  }
  auto r = parse_box("0:10,5:5,:", s);
  REQUIRE(std::holds_alternative<PathError>(r));
  const std::string msg = std::get<PathError>(r).message;
  CHECK_THAT(msg, Catch::Contains("dimension 1") && Catch::Contains("'5:5'") && Catch::Contains("empty") &&
                      Catch::Contains("A:B:STEP"));
  CHECK(msg.find('\n') == std::string::npos);
  r = parse_box("::0,:,:", s);
  CHECK_THAT(std::get<PathError>(r).message, Catch::Contains("step"));
}

TEST_CASE("parse_number is strict", "[view_path]") {
  std::uint64_t v = 7;
  CHECK(parse_number("0", v) == NumberStatus::Ok);
  CHECK(v == 0);
  CHECK(parse_number("18446744073709551615", v) == NumberStatus::Ok);
  CHECK(v == 18446744073709551615ull);
  CHECK(parse_number("18446744073709551616", v) == NumberStatus::TooLarge);
  for (const char* bad : {"", "-0", "+1", " 1", "1 ", "1a", "0x10", "1e3", "١"}) {
    INFO(bad);
    CHECK(parse_number(bad, v) == NumberStatus::Malformed);
  }
}

TEST_CASE("zarr: the array in its natural chunks or in any chunk shape, chunk files as boxes", "[view_path][zarr]") {
  const std::vector<std::uint64_t> natural = {2, 5, 4};
  auto zresolve = [&](const std::string& path) {
    INFO("path A@/" << path);
    auto r = resolve_view(split(path), kShape, kItem, true, natural);
    if (auto* e = std::get_if<PathError>(&r)) FAIL("unexpected error " << e->error << ": " << e->message);
    return std::get<ViewNode>(r);
  };
  auto zerrno = [&](const std::string& path) {
    INFO("path A@/" << path);
    auto r = resolve_view(split(path), kShape, kItem, true, natural);
    if (std::holds_alternative<ViewNode>(r)) FAIL("resolved, but an error was expected");
    return std::get<PathError>(r).error;
  };
  CHECK(zresolve("zarr").listing == L({"zarr.json", "c"}));
  ViewNode meta = zresolve("zarr/zarr.json");
  CHECK(meta.kind == ViewKind::ZarrMeta);
  CHECK(meta.chunk_shape == natural);
  CHECK(names(zresolve("zarr/c")) == range_names(0, 1));   // 4 / 2
  CHECK(names(zresolve("zarr/c/1")) == range_names(0, 0));  // 5 / 5
  CHECK(names(zresolve("zarr/c/1/0")) == range_names(0, 1));  // 6 / 4, the last one cut
  ViewNode inner = zresolve("zarr/c/1/0/0");
  REQUIRE(inner.kind == ViewKind::Data);
  CHECK(inner.data->selection.dims()[0].start == 2);
  CHECK(inner.data->selection.dims()[0].stop == 4);
  CHECK(inner.data->selection.elements() == 2 * 5 * 4);
  ViewNode edge = zresolve("zarr/c/1/0/1");
  REQUIRE(edge.kind == ViewKind::ZarrChunk);
  CHECK(edge.chunk_shape == natural);
  CHECK(edge.data->selection.dims()[2].start == 4);
  CHECK(edge.data->selection.dims()[2].stop == 6);  // padded to 4 by the daemon
  CHECK(edge.data->selection.result_shape() == std::vector<std::uint64_t>{2, 5, 2});

  // A chunk shape of the reader's.
  ViewNode own = zresolve("zarr/3,3,3/zarr.json");
  CHECK(own.chunk_shape == std::vector<std::uint64_t>{3, 3, 3});
  CHECK(names(zresolve("zarr/3,3,3/c/1")) == range_names(0, 1));
  CHECK(zresolve("zarr/3,3,3/c/0/0/1").kind == ViewKind::Data);      // 3:6 of 6: whole
  CHECK(zresolve("zarr/3,3,3/c/1/0/0").kind == ViewKind::ZarrChunk);  // 3:4 of 3:6
  CHECK(zresolve("zarr/9,9,9/c/0/0/0").kind == ViewKind::ZarrChunk);  // larger than the array
  // A plan of a chunk is the plan of its box, edge or not.
  ViewNode plan = zresolve("plan/zarr/3,3,3/c/1/0/0");
  CHECK(plan.kind == ViewKind::Plan);
  CHECK(plan.data->selection.elements() == 1 * 3 * 3);
  // Without a natural chunk: the whole array is one chunk.
  auto whole = resolve_view(split("zarr/zarr.json"), kShape, kItem);
  CHECK(std::get<ViewNode>(whole).chunk_shape == kShape);

  CHECK(zerrno("zarr/3,3") == ENOENT);          // not one size per dimension
  CHECK(zerrno("zarr/3,0,3/zarr.json") == EINVAL);
  CHECK(zerrno("zarr/3,x,3/c") == ENOENT);  // no chunk shape at all (as .zarray, which readers probe for)
  CHECK(zerrno("zarr/.zarray") == ENOENT);
  CHECK(zerrno("zarr/3,,3/c") == EINVAL);
  CHECK(zerrno("zarr/4096,4096,4096/c") == EINVAL);  // a chunk over 256 MiB
  CHECK(zerrno("zarr/c/2") == ERANGE);
  CHECK(zerrno("zarr/c/0/0/2") == ERANGE);
  CHECK(zerrno("zarr/c/0/0/0/0") == ENOTDIR);
  CHECK(zerrno("zarr/zarr.json/x") == ENOTDIR);
  CHECK(zerrno("zarr/other") == ENOENT);
  CHECK(zerrno("plan/zarr/zarr.json") == ENOENT);
}

TEST_CASE("zarr: a chunk thinner than the cells is read through the cells' enclosing box", "[view_path][zarr]") {
  const std::vector<std::uint64_t> shape = {48, 40, 24};
  const std::vector<std::uint64_t> cell = {8, 8, 8};
  auto data = [&](const std::string& path) {
    INFO("path A@/" << path);
    auto r = resolve_view(split(path), shape, 8, true, cell);
    if (auto* e = std::get_if<PathError>(&r)) FAIL("unexpected error " << e->error << ": " << e->message);
    REQUIRE(std::get<ViewNode>(r).data);
    return *std::get<ViewNode>(r).data;
  };
  auto ranges = [](const DataView& v) {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
    for (const auto& d : v.selection.dims()) out.emplace_back(d.start, d.stop);
    return out;
  };
  using R = std::vector<std::pair<std::uint64_t, std::uint64_t>>;
  // One row of dimension 0: its layer of cells, whole along the others; every chunk of the layer has the same.
  DataView row = data("zarr/1,40,24/c/13/0/0");
  CHECK(ranges(row) == R{{13, 14}, {0, 40}, {0, 24}});
  REQUIRE(row.within);
  CHECK(ranges(*row.within) == R{{8, 16}, {0, 40}, {0, 24}});
  CHECK(row.within->spelling == "box/8:16,0:40,0:24#zarr/1,40,24");
  CHECK(row.within->regrid == std::vector<std::uint64_t>{1, 40, 24});
  CHECK_FALSE(row.within->within);
  CHECK(data("zarr/1,40,24/c/9/0/0").within->spelling == row.within->spelling);
  // Thin along the last dimension, and along two.
  CHECK(data("zarr/48,40,1/c/0/0/23").within->spelling == "box/0:48,0:40,16:24#zarr/48,40,1");
  CHECK(data("zarr/2,40,1/c/3/0/5").within->spelling == "box/0:8,0:40,0:8#zarr/2,40,1");
  // Aligned to the cells: read itself; the natural chunks too. A plan is of
  // the chunk's own box, and knows the enclosing one (to say how the read goes).
  CHECK_FALSE(data("zarr/8,8,8/c/1/1/1").within);
  CHECK_FALSE(data("zarr/16,40,24/c/1/0/0").within);
  CHECK_FALSE(data("zarr/c/0/0/0").within);
  CHECK(data("plan/zarr/1,40,24/c/13/0/0").spelling == data("zarr/1,40,24/c/13/0/0").spelling);
  CHECK(data("plan/zarr/1,40,24/c/13/0/0").within->spelling == row.within->spelling);
  // Across a boundary between layers of cells: no neighbour would share its box.
  CHECK_FALSE(data("zarr/3,40,24/c/2/0/0").within);  // rows 6..9
  CHECK(data("zarr/3,40,24/c/1/0/0").within->spelling == "box/0:8,0:40,0:24#zarr/3,40,24");  // rows 3..6
  // The edge: the enclosing box stops at the array's end.
  CHECK(data("zarr/5,40,24/c/9/0/0").within->spelling == "box/40:48,0:40,0:24#zarr/5,40,24");  // rows 45..48
  // No larger than kMaxZarrWithinBytes.
  const std::vector<std::uint64_t> big = {64, 4096, 4096};  // a layer of 8 cells: 1 GiB
  auto r = resolve_view(split("zarr/1,4096,4096/c/0/0/0"), big, 8, true, cell);
  REQUIRE(std::holds_alternative<ViewNode>(r));
  CHECK_FALSE(std::get<ViewNode>(r).data->within);
}
