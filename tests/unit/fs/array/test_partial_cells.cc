// Partial-cell reads (plans chosen by cost): an array on a flash volume whose
// views read only the checksum blocks holding them, verify block by block,
// and equal the byte model, with damage outside the blocks read left unseen
// and damage inside them an EIO. Which blocks hold a selection is tested in
// tests/unit/layouts/test_cell_blocks.cc, the plans that read only those in
// tests/unit/layouts/test_io_plan.cc.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "fs/array/array_file.h"
#include "tests/unit/support/array_test_support.h"
#include "tests/unit/support/array_view_support.h"
#include "tests/unit/support/fs_test_support.h"
#include "tests/unit/support/layout_test_support.h"

using namespace mmfs;
using namespace mmfs::layouts;

namespace {

using fs::testing::RefDevice;
using namespace fs::testing::arrays;
using layouts::testing::small_ssd;

}  // namespace

TEST_CASE("array file: views on flash read only the blocks they need, verified block by block",
          "[partial_cells][array_file]") {
  auto g = small_ssd();
  std::mt19937_64 rng(4242);
  fs::MemoryDevice dev(16ull << 20, 512);
  {
    auto f = formatted(*g, 16ull << 20);
    dev.bytes() = f->bytes();
  }
  fs::ArraySchema s = make_schema({64, 64, 16}, "float64", "hilbert");
  s.cell = {16, 16, 4};
  Mount m = mount(std::unique_ptr<fs::BlockDevice>(new RefDevice(dev)));
  auto a = create_array(m, "part", s);
  Bytes model = random_bytes(rng, a->size());
  REQUIRE(write_file(*a, 0, model) == 0);
  std::string msg;
  REQUIRE(a->flush(true, &msg) == 0);
  REQUIRE(stored_schema(m, a->ino())->checksum_block == 4096);

  // The plan of a slice along dimension 0 reads one 4 KiB block of each of
  // its 16 cells, and the gaps between them the model finds cheaper to read
  // than another request; never the whole cells' 32 blocks.
  nlohmann::json plan;
  REQUIRE(a->plan(resolve({"slice", "0", "5"}, s), &plan, &msg) == 0);
  CHECK(plan.at("cell_reads") == "partial");
  CHECK(plan.at("bytes_read").get<std::uint64_t>() >= 16 * 4096);
  CHECK(plan.at("bytes_read").get<std::uint64_t>() < 32 * 4096);
  CHECK(plan.at("whole_cells_modeled_ms").get<double>() > plan.at("modeled_ms").get<double>());
  check_views(*a, s, model, rng);

  // Damage block 1 of cell (0, 0, 0): element (8, 0, 0) is its first.
  std::string where;
  REQUIRE(a->lbn_text(std::vector<std::uint64_t>{8, 0, 0}, &where, &msg) == 0);
  std::uint64_t lbn = 0, offset = 0;
  REQUIRE(std::sscanf(where.c_str(), "%lu %lu", &lbn, &offset) == 2);
  CHECK(offset == 0);
  const std::uint64_t byte = lbn * 4096 + offset;
  const std::uint64_t e = (8 * 64 + 0) * 16 + 0;
  REQUIRE(std::memcmp(dev.bytes().data() + byte, model.data() + e * 8, 8) == 0);
  dev.bytes()[byte + 5] ^= std::byte{0x01};
  auto b = open_stored(m, a->ino());  // nothing cached
  auto slice0 = [&](std::uint64_t i) {
    std::vector<Sel> sel = {{true, i, i + 1, 1}, {false, 0, 64, 1}, {false, 0, 16, 1}};
    return extract(model, s.shape, 8, sel);
  };
  // Slices 0..7 read block 0 of the cell only: the damage is not theirs.
  CHECK(bytes_diff(read_view_bytes(*b, resolve({"slice", "0", "3"}, s), 0, 64 * 16 * 8), slice0(3)) == "");
  // Slice 8 reads the damaged block; slices along the other dimensions read the whole cell.
  Bytes out(64 * 16 * 8);
  std::size_t got = 0;
  CHECK(b->read_view(resolve({"slice", "0", "8"}, s), 0, out.size(), reinterpret_cast<std::byte*>(out.data()), &got,
                     &msg) == EIO);
  CHECK_THAT(msg, Catch::Contains("checksum"));
  CHECK(b->read_view(resolve({"slice", "2", "0"}, s), 0, 64 * 64 * 8, reinterpret_cast<std::byte*>(out.data()),
                     &got, &msg) == EIO);
  Bytes all(model.size());
  CHECK(b->read(0, all.size(), reinterpret_cast<std::byte*>(all.data()), &got, &msg) == EIO);
  // Repaired: every view is whole again.
  dev.bytes()[byte + 5] ^= std::byte{0x01};
  auto c = open_stored(m, a->ino());
  check_views(*c, s, model, rng);
}
