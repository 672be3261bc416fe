// Answering query views (fs/array/query.h): every output format, a box
// before the query, PLoD values, a condition over two arrays, and its errors,
// each against a brute-force evaluation of the same data; on arrays with a
// bitmap index, without one (a scan) and on a sealed mloc image.
#include <catch2/catch.hpp>

#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include <roaring/roaring.hh>

#include "fs/array/query.h"
#include "indexes/bitmap.h"
#include "indexes/condition.h"
#include "tests/unit/support/array_test_support.h"
#include "tests/unit/support/fs_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;
using namespace mmfs::fs::testing::arrays;

namespace {

constexpr std::uint64_t kRows = 40, kCols = 30;
using Values = std::vector<std::int32_t>;
using Truth = std::function<bool(std::int32_t self, std::int32_t b)>;

std::shared_ptr<ArrayFile> array_of(const Mount& m, const std::string& name, const std::string& layout,
                                    const std::string& index, const Values& v) {
  ArraySchema s = make_schema({kRows, kCols}, "int32", layout);
  s.index = index;
  auto a = create_array(m, name, s);
  std::string msg;
  REQUIRE(a->write(0, reinterpret_cast<const std::byte*>(v.data()), v.size() * 4, &msg) == 0);
  INFO(msg);
  REQUIRE(a->settle(&msg) == 0);
  return a;
}

QueryView view_of(const std::string& text, QueryView::Output output) {
  auto parsed = indexes::parse_condition(text);
  REQUIRE(std::holds_alternative<indexes::Condition>(parsed));
  QueryView q;
  q.condition = std::get<indexes::Condition>(parsed);
  q.condition_text = text;
  q.output = output;
  q.spelling = "query/" + text;
  return q;
}

int run(const QueryView& q, const QueryArrays& arrays, QueryOutcome* out, std::string* msg, bool model = false) {
  return run_query(q, arrays, model, out, msg);
}

std::vector<std::uint64_t> u64s(const std::string& bytes) {
  std::vector<std::uint64_t> v(bytes.size() / 8);
  if (!v.empty()) std::memcpy(v.data(), bytes.data(), v.size() * 8);  // never memcpy a null pointer
  return v;
}

}  // namespace

TEST_CASE("query: every output equals a brute-force evaluation, with and without an index, on an mloc image",
          "[query]") {
  const auto g = toy_disk();
  Mount m = mount(formatted(*g));
  std::mt19937_64 rng(42);
  Values av(kRows * kCols), bv(kRows * kCols);
  for (auto& x : av) x = std::int32_t(rng() % 100);
  for (auto& x : bv) x = std::int32_t(rng() % 100);

  const std::vector<std::pair<std::string, Truth>> conditions{
      {">50&<70", [](std::int32_t a, std::int32_t) { return a > 50 && a < 70; }},
      {"==3|==97|in[10,12]", [](std::int32_t a, std::int32_t) { return a == 3 || a == 97 || (a >= 10 && a <= 12); }},
      {"!(<10)&!=42", [](std::int32_t a, std::int32_t) { return a >= 10 && a != 42; }},
      {"b>40&<30", [](std::int32_t a, std::int32_t b) { return b > 40 && a < 30; }},
      {"<0", [](std::int32_t, std::int32_t) { return false; }},
  };
  struct Setup {
    const char* layout;
    const char* index;
  };
  for (const Setup setup : {Setup{"naive", "none"}, Setup{"multimap", "e1"}, Setup{"hilbert", "range"},
                            Setup{"mloc", "none"}}) {
    const std::string tag = std::string(setup.layout) + "-" + setup.index;
    auto a = array_of(m, "a-" + tag, setup.layout, setup.index, av);
    auto b = array_of(m, "b-" + tag, "naive", "none", bv);
    QueryArrays arrays;
    arrays.self = a;
    arrays.named["b"] = b;
    for (const auto& [text, truth] : conditions) {
      INFO(tag << " condition " << text);
      std::vector<std::uint64_t> want_rows;
      std::string want_values;
      for (std::uint64_t i = 0; i < av.size(); ++i)
        if (truth(av[i], bv[i])) {
          want_rows.push_back(i);
          want_values.append(reinterpret_cast<const char*>(&av[i]), 4);
        }
      QueryOutcome out;
      std::string msg;
      REQUIRE(run(view_of(text, QueryView::Output::Count), arrays, &out, &msg) == 0);
      CHECK(out.content == std::to_string(want_rows.size()) + "\n");
      REQUIRE(run(view_of(text, QueryView::Output::Coords), arrays, &out, &msg) == 0);
      CHECK(u64s(out.content) == want_rows);
      REQUIRE(run(view_of(text, QueryView::Output::Values), arrays, &out, &msg) == 0);
      CHECK(out.content == want_values);
      REQUIRE(run(view_of(text, QueryView::Output::Mask), arrays, &out, &msg) == 0);
      // Rows below 2^32: CRoaring's 32-bit portable format, as pyroaring reads it.
      const Roaring mask = Roaring::readSafe(out.content.data(), out.content.size());
      CHECK(mask.getSizeInBytes(true) == out.content.size());
      std::vector<std::uint32_t> got(mask.cardinality());
      mask.toUint32Array(got.data());
      CHECK(std::vector<std::uint64_t>(got.begin(), got.end()) == want_rows);
      // The plan of the same query: what was matched and how it was answered.
      REQUIRE(run(view_of(text, QueryView::Output::Count), arrays, &out, &msg, true) == 0);
      CHECK(out.plan["matches"].get<std::uint64_t>() == want_rows.size());
      CHECK(out.plan["modeled_ms"].get<double>() >= 0);
    }
  }
}

TEST_CASE("query: a box before the query keeps indices into the array; PLoD values keep the leading bytes",
          "[query]") {
  const auto g = toy_disk();
  Mount m = mount(formatted(*g));
  std::mt19937_64 rng(3);
  Values av(kRows * kCols);
  for (auto& x : av) x = std::int32_t(rng() % 100000) - 50000;
  for (const char* index : {"none", "bn"}) {
    INFO("index " << index);
    auto a = array_of(m, std::string("a-") + index, "zorder", index, av);
    QueryArrays arrays;
    arrays.self = a;
    QueryView q = view_of(">-1000", QueryView::Output::Coords);
    q.box = layouts::Selection({{5, 21, 1, false}, {3, 18, 2, false}});
    QueryOutcome out;
    std::string msg;
    REQUIRE(run(q, arrays, &out, &msg) == 0);
    std::vector<std::uint64_t> want;
    for (std::uint64_t r = 5; r < 21; ++r)
      for (std::uint64_t c = 3; c < 18; c += 2)
        if (av[r * kCols + c] > -1000) want.push_back(r * kCols + c);
    std::sort(want.begin(), want.end());
    CHECK(u64s(out.content) == want);

    QueryView p = view_of(">-1000", QueryView::Output::Values);
    p.plod_bytes = 2;  // an int32 keeps its two most significant bytes, the rest zeros
    REQUIRE(run(p, arrays, &out, &msg) == 0);
    std::string want_values;
    for (std::uint64_t i = 0; i < av.size(); ++i)
      if (av[i] > -1000) {
        const std::uint32_t kept = std::uint32_t(av[i]) & 0xFFFF0000u;
        want_values.append(reinterpret_cast<const char*>(&kept), 4);
      }
    CHECK(out.content == want_values);
  }
}

TEST_CASE("query: errors name what is wrong and answer nothing", "[query]") {
  const auto g = toy_disk();
  Mount m = mount(formatted(*g));
  Values av(kRows * kCols, 1);
  auto a = array_of(m, "a", "naive", "none", av);
  ArraySchema other = make_schema({kRows, kCols + 1}, "int32", "naive");
  auto wide = create_array(m, "wide", other);

  QueryOutcome out;
  std::string msg;
  SECTION("an atom without a name in a directory's query") {
    QueryArrays table;
    table.table = true;
    table.named["a"] = a;
    CHECK(run(view_of("a>0&<5", QueryView::Output::Count), table, &out, &msg) == EINVAL);
    CHECK(!msg.empty());
  }
  SECTION("arrays of different shapes") {
    QueryArrays arrays;
    arrays.self = a;
    arrays.named["wide"] = wide;
    CHECK(run(view_of("wide>0", QueryView::Output::Count), arrays, &out, &msg) == EINVAL);
    CHECK(msg.find("shape") != std::string::npos);
  }
  CHECK(out.content.empty());
}
