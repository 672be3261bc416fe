// An array file's self-description (fs/array/array_file_info.cc): getfattr's
// text of each schema attribute, with the layout's choices where the schema
// left them open; A@/info's fields against the schema and the placement's
// extents; A@/lbn's sector and offset holding the element; A@/plan of a
// view.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstring>
#include <random>
#include <shared_mutex>
#include <string>
#include <vector>

#include "fs/array/array_file.h"
#include "tests/unit/support/array_test_support.h"
#include "tests/unit/support/array_view_support.h"
#include "tests/unit/support/fs_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;
using namespace mmfs::fs::testing::arrays;

TEST_CASE("array file info: attributes as getfattr shows them, the layout's choices where none was set",
          "[array_file_info]") {
  const auto g = toy_disk();
  Mount m = mount(formatted(*g));
  auto a = create_array(m, "a", make_schema({40, 30}, "float64", "naive"));
  CHECK(a->attr_text("shape") == "40,30");
  CHECK(a->attr_text("dtype") == "float64");
  CHECK(a->attr_text("layout") == "naive");
  CHECK(a->attr_text("order") == "1,0");
  CHECK(a->attr_text("cell") == "16,30");  // 512 float64: 4 KiB
  CHECK(a->attr_text("basic_cube") == "none");
  CHECK(a->attr_text("chunk") == "none");
  CHECK(a->attr_text("index") == "none");
  CHECK(a->attr_text("bins") == "100");
  CHECK(a->attr_text("compress") == "none");
  CHECK(a->attr_text("no_such_attribute").empty());
  ArraySchema s = make_schema({40, 30}, "int16", "multimap");
  s.cell = {4, 5};
  auto b = create_array(m, "b", s);
  CHECK(b->attr_text("cell") == "4,5");
  CHECK(b->attr_text("bins") == "exact");
  CHECK(b->attr_text("basic_cube") != "none");  // MultiMap's own choice
  auto c = create_array(m, "c", make_schema({40, 30}, "int16", "mloc"));
  CHECK(c->attr_text("bins") == "100");  // mloc bins equal-frequency whatever the dtype
}

TEST_CASE("array file info: A@/info's fields are the schema's and the placement's", "[array_file_info]") {
  const auto g = toy_disk();
  Mount m = mount(formatted(*g));
  ArraySchema s = make_schema({40, 30}, "float64", "hilbert");
  s.cell = {8, 8};
  std::mt19937_64 rng(3);
  auto a = create_random(m, "a", s, rng);
  const nlohmann::json j = a->info();
  CHECK(j["shape"] == nlohmann::json{40, 30});
  CHECK(j["dtype"] == "float64");
  CHECK(j["itemsize"] == 8);
  CHECK(j["layout"] == "hilbert");
  CHECK(j["order"] == nlohmann::json{1, 0});
  CHECK(j["cell"] == nlohmann::json{8, 8});
  CHECK(j["chunk"].is_null());
  CHECK(j["index"] == "none");
  CHECK(j["bytes"] == 40 * 30 * 8);
  std::vector<Extent> extents;
  {
    std::shared_lock lock(a->placement_mutex());
    extents = a->cells_locked()->layout().extents();
  }
  std::uint64_t sectors = 0;
  for (const Extent& e : extents) sectors += e.sectors;
  CHECK(j["extents"] == extents.size());
  CHECK(j["device_bytes"]["data"] == sectors * 512);
  CHECK(j["device_bytes"]["index"] == 0);
  CHECK_FALSE(j.contains("index_detail"));
}

TEST_CASE("array file info: A@/lbn names the sector and offset holding the element", "[array_file_info]") {
  const auto g = toy_disk();
  MemoryDevice dev(kToyDeviceBytes, 512);
  dev.bytes() = formatted(*g)->bytes();
  Mount m = mount(std::unique_ptr<BlockDevice>(new RefDevice(dev)));
  for (const char* layout : {"naive", "zorder", "multimap"}) {
    INFO(layout);
    auto a = create_array(m, layout, make_schema({13, 11, 7}, "int32", layout));
    std::mt19937_64 rng(4);
    const Bytes model = random_bytes(rng, a->size());
    REQUIRE(write_file(*a, 0, model) == 0);
    std::string msg;
    REQUIRE(a->flush(true, &msg) == 0);
    for (int k = 0; k < 25; ++k) {
      const std::vector<std::uint64_t> x{rng() % 13, rng() % 11, rng() % 7};
      std::string text;
      REQUIRE(a->lbn_text(x, &text, &msg) == 0);
      unsigned long long lbn = 0;
      unsigned offset = 0;
      char end = 0;
      REQUIRE(std::sscanf(text.c_str(), "%llu %u%c", &lbn, &offset, &end) == 3);
      CHECK(end == '\n');
      CHECK(offset % 4 == 0);
      CHECK(offset + 4 <= 512);
      const std::uint64_t e = (x[0] * 11 + x[1]) * 7 + x[2];
      CHECK(std::memcmp(dev.bytes().data() + lbn * 512 + offset, model.data() + e * 4, 4) == 0);
    }
  }
}

TEST_CASE("array file info: A@/plan of a view reads its bytes, in the chunks the read takes", "[array_file_info]") {
  const auto g = toy_disk();
  Mount m = mount(formatted(*g));
  const ArraySchema s = make_schema({64, 64}, "float64", "naive");
  std::mt19937_64 rng(5);
  auto a = create_random(m, "a", s, rng);
  std::string msg;
  for (const std::vector<std::string>& path :
       {std::vector<std::string>{"slice", "0", "5"}, std::vector<std::string>{"slice", "1", "63"}}) {
    const DataView v = resolve(path, s);
    nlohmann::json plan;
    REQUIRE(a->plan(v, &plan, &msg) == 0);
    INFO(plan.dump());
    CHECK(plan["bytes_useful"] == 64 * 8);
    CHECK(plan["bytes_read"].get<std::uint64_t>() >= 64 * 8);
    CHECK(plan["bytes_read"].get<std::uint64_t>() % 512 == 0);
    CHECK(plan["requests"].get<std::uint64_t>() >= 1);
    CHECK(plan["modeled_ms"].get<double>() > 0);
    if (plan.contains("chunks")) {
      CHECK(plan["chunks"].get<std::uint64_t>() >= 1);
      CHECK(plan["chunks"].get<std::uint64_t>() * plan["chunk_bytes"].get<std::uint64_t>() >= 64 * 8);
    }
  }
}
