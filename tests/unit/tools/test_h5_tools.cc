// The pure parts of mmfs-import/mmfs-export (tools/h5/): argument splitting,
// SRC view paths, chunk choice, the progress line and the pipeline.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tools/h5/array_source.h"
#include "tools/h5/chunk_choice.h"
#include "tools/h5/h5_spec.h"
#include "tools/h5/pipeline.h"
#include "tools/h5/progress.h"
#include "tools/h5/tool_error.h"

using namespace mmfs::h5;
using Shape = std::vector<std::uint64_t>;

TEST_CASE("import SOURCE: whole existing file, else split at the last ':/'", "[h5]") {
  std::set<std::string> files = {"data.h5", "odd:/name.h5"};
  auto exists = [&](const std::string& p) { return files.count(p) > 0; };
  auto s = split_import_source("data.h5", exists);
  CHECK(s.file == "data.h5");
  CHECK(s.object.empty());
  s = split_import_source("data.h5:/g/ds", exists);
  CHECK(s.file == "data.h5");
  CHECK(s.object == "/g/ds");
  s = split_import_source("odd:/name.h5", exists);  // exists: taken whole
  CHECK(s.file == "odd:/name.h5");
  CHECK(s.object.empty());
  s = split_import_source("odd:/name.h5:/x", exists);
  CHECK(s.file == "odd:/name.h5");
  CHECK(s.object == "/x");
  s = split_import_source("a:b.h5:/g/", exists);  // ':' not followed by '/' stays in the name
  CHECK(s.file == "a:b.h5");
  CHECK(s.object == "/g");
  s = split_import_source("data.h5:/", exists);
  CHECK(s.object == "/");
  s = split_import_source("missing.h5", exists);
  CHECK(s.file == "missing.h5");
  CHECK(s.object.empty());
}

TEST_CASE("export DEST: FILE.h5:/PATH", "[h5]") {
  auto d = split_export_dest("out.h5:/a/b");
  REQUIRE(d);
  CHECK(d->file == "out.h5");
  CHECK(d->object == "/a/b");
  d = split_export_dest("x:/y.h5:/z/");
  REQUIRE(d);
  CHECK(d->file == "x:/y.h5");
  CHECK(d->object == "/z");
  CHECK_FALSE(split_export_dest("out.h5"));
  CHECK_FALSE(split_export_dest("out.h5:/"));
  CHECK_FALSE(split_export_dest(":/a"));
  CHECK(object_basename("/a/b") == "b");
  CHECK(object_basename("/b") == "b");
}

TEST_CASE("export SRC: the array is the first X@ whose X is an array file", "[h5]") {
  std::set<std::string> arrays = {"/mnt/a", "/mnt/d/b", "rel"};
  auto is_array = [&](const std::string& p) { return arrays.count(p) > 0; };
  auto s = split_view_path("/mnt/a", is_array);
  REQUIRE(s);
  CHECK(s->array == "/mnt/a");
  CHECK(s->components.empty());
  CHECK_FALSE(s->through_view);

  s = split_view_path("/mnt/a@/plod/3@/box/1:4,:", is_array);
  REQUIRE(s);
  CHECK(s->array == "/mnt/a");
  CHECK(s->components == std::vector<std::string>{"plod", "3@", "box", "1:4,:"});
  CHECK(s->through_view);

  s = split_view_path("/mnt//d/b@/slice/0/1/", is_array);
  REQUIRE(s);
  CHECK(s->array == "/mnt/d/b");
  CHECK(s->components == std::vector<std::string>{"slice", "0", "1"});

  s = split_view_path("rel@", is_array);
  REQUIRE(s);
  CHECK(s->array == "rel");
  CHECK(s->components.empty());
  CHECK(s->through_view);

  CHECK_FALSE(split_view_path("/mnt/c@/slice/0/1", is_array));
  CHECK_FALSE(split_view_path("/mnt/plain", is_array));
}

TEST_CASE("auto chunks: about 1 MiB, shaped like the dataset, within its dimensions", "[h5]") {
  CHECK(auto_chunks(Shape{10, 10}, 8) == Shape{10, 10});  // small: one chunk
  CHECK(auto_chunks(Shape{100000, 10}, 8) == Shape{12500, 10});
  CHECK(auto_chunks(Shape{1000, 1000, 1000}, 4) == Shape{63, 63, 63});
  CHECK(auto_chunks(Shape{1ull << 40}, 1) == Shape{1 << 20});
  CHECK(auto_chunks(Shape{}, 8).empty());
  const std::uint64_t big = 1ull << 62;
  for (const Shape& shape : {Shape{3, 5000, 7000}, Shape{1, 1, 1 << 30}, Shape{big, big}, Shape{17, 13, 11, 7, 5}}) {
    for (std::uint32_t itemsize : {1u, 8u}) {
      CAPTURE(shape, itemsize);
      auto c = auto_chunks(shape, itemsize);
      REQUIRE(c.size() == shape.size());
      unsigned __int128 bytes = itemsize;
      for (std::size_t d = 0; d < c.size(); ++d) {
        CHECK(c[d] >= 1);
        CHECK(c[d] <= shape[d]);
        bytes *= c[d];
      }
      CHECK(bytes <= kAutoChunkBytes);
    }
  }
}

TEST_CASE("--chunks: parsing and checks against the dataset", "[h5]") {
  CHECK(parse_chunk_option("auto")->kind == ChunkOption::Auto);
  CHECK(parse_chunk_option("contiguous")->kind == ChunkOption::Contiguous);
  auto e = parse_chunk_option("10,20,5");
  REQUIRE(e);
  CHECK(e->chunks == Shape{10, 20, 5});
  for (const char* bad : {"", "0", "1,,2", "1,", "-1", "a", "1.5", "Auto"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_chunk_option(bad));
  }
  const Shape shape{30, 40};
  CHECK(choose_chunks(*parse_chunk_option("contiguous"), shape, 8).empty());
  CHECK(choose_chunks(*parse_chunk_option("auto"), shape, 8) == shape);
  CHECK(choose_chunks(*parse_chunk_option("5,40"), shape, 8) == Shape{5, 40});
  CHECK_THROWS_AS(choose_chunks(*parse_chunk_option("5"), shape, 8), ToolError);
  CHECK_THROWS_AS(choose_chunks(*parse_chunk_option("31,1"), shape, 8), ToolError);
  CHECK_THROWS_AS(choose_chunks(*parse_chunk_option("1"), Shape{}, 8), ToolError);
  CHECK(choose_chunks(*parse_chunk_option("auto"), Shape{}, 8).empty());
  CHECK_THROWS_AS(choose_chunks(*parse_chunk_option("65536,65536"), Shape{65536, 65536}, 1), ToolError);
}

TEST_CASE("progress line: bar, percentage, sizes, rate, ETA, width", "[h5]") {
  std::string l = progress_line("/g/ds", 50'000'000, 100'000'000, 1.0, 200);
  CHECK(l == "/g/ds [##########----------]  50%  50.0/100.0 MB  50.0 MB/s  ETA 0:01");
  l = progress_line("/g/ds", 0, 100'000'000, 0.05, 200);
  CHECK(l.find("-- MB/s  ETA --") != std::string::npos);
  l = progress_line("/g/ds", 100'000'000, 100'000'000, 125.0, 200);
  CHECK(l.find("100%") != std::string::npos);
  CHECK(l.find("in 2:05") != std::string::npos);
  l = progress_line("/g/ds", 1'000'000, 100'001'000'000, 1.0, 200);
  CHECK(l.find("ETA 27:46:40") != std::string::npos);
  // A long label is shortened from the left to fit.
  l = progress_line(std::string(100, 'x') + "/end", 1, 2, 1.0, 79);
  CHECK(l.size() <= 79);
  CHECK(l.rfind("...", 0) == 0);
  CHECK(l.find("/end [") != std::string::npos);
  CHECK_FALSE(progress_wanted(1, true));
  CHECK(progress_wanted(1, false));
  CHECK_FALSE(progress_wanted(-1, false));
}

TEST_CASE("pipeline: items in order, two buffers alternating, either side on the caller", "[h5]") {
  for (CallerRuns caller : {CallerRuns::Producer, CallerRuns::Consumer}) {
    std::vector<std::byte> a(8), b(8);
    std::vector<std::uint64_t> seen;
    const auto main_id = std::this_thread::get_id();
    bool producer_on_main = true, consumer_on_main = true;
    run_pipeline(
        100, a, b,
        [&](std::uint64_t i, std::span<std::byte> buf) {
          producer_on_main = producer_on_main && std::this_thread::get_id() == main_id;
          CHECK(buf.data() == (i % 2 ? b.data() : a.data()));
          std::memcpy(buf.data(), &i, sizeof i);
        },
        [&](std::uint64_t i, std::span<std::byte> buf) {
          consumer_on_main = consumer_on_main && std::this_thread::get_id() == main_id;
          std::uint64_t v = 0;
          std::memcpy(&v, buf.data(), sizeof v);
          CHECK(v == i);
          seen.push_back(v);
        },
        caller);
    CHECK(seen.size() == 100);
    CHECK(producer_on_main == (caller == CallerRuns::Producer));
    CHECK(consumer_on_main == (caller == CallerRuns::Consumer));
  }
}

TEST_CASE("pipeline: an exception on either side stops both and is rethrown", "[h5]") {
  for (CallerRuns caller : {CallerRuns::Producer, CallerRuns::Consumer}) {
    for (bool fail_in_producer : {true, false}) {
      std::vector<std::byte> a(1), b(1);
      std::atomic<std::uint64_t> produced{0}, consumed{0};
      auto run = [&] {
        run_pipeline(
            1000, a, b,
            [&](std::uint64_t i, std::span<std::byte>) {
              if (fail_in_producer && i == 10) throw std::runtime_error("producer failed");
              ++produced;
            },
            [&](std::uint64_t i, std::span<std::byte>) {
              if (!fail_in_producer && i == 10) throw std::runtime_error("consumer failed");
              ++consumed;
            },
            caller);
      };
      CHECK_THROWS_WITH(run(), fail_in_producer ? "producer failed" : "consumer failed");
      CHECK(produced <= 12);
      CHECK(consumed <= 10);
    }
  }
  // Nothing to move: nothing called.
  std::vector<std::byte> a(1), b(1);
  run_pipeline(
      0, a, b, [](std::uint64_t, std::span<std::byte>) { FAIL("called"); },
      [](std::uint64_t, std::span<std::byte>) { FAIL("called"); }, CallerRuns::Producer);
}

TEST_CASE("export SRC: a box of a view as a box view of the array", "[h5]") {
  using mmfs::layouts::DimRange;
  using mmfs::layouts::Selection;
  ArraySource src;
  src.array = "/mnt/a";
  src.array_shape = {200, 300, 400};
  // The array itself.
  src.selection = Selection::all(src.array_shape);
  CHECK(box_view_path(src, Shape{16, 0, 0}, Shape{16, 32, 400}) == "box/16:32,0:32,0:400");
  // A strided box with a fixed middle dimension (A@/box/3:190:4,5,1:400:3),
  // through PLoD: SRC is 47x133; its box (2..4, 10..10) is array rows 11, 15
  // and column 31 (step 1 once a single element is left).
  src.selection = Selection({DimRange{3, 188, 4, false}, DimRange{5, 6, 1, true}, DimRange{1, 398, 3, false}});
  src.plod_bytes = 3;
  CHECK(box_view_path(src, Shape{2, 10}, Shape{2, 1}) == "plod/3@/box/11:16:4,5,31:32");
  src.plod_bytes = 0;
  CHECK(box_view_path(src, Shape{0, 0}, Shape{47, 133}) == "box/3:188:4,5,1:398:3");
}
