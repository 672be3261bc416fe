// The mloc encoder's temporary runs (fs/mloc/mloc_spill.h): pieces come back in
// key order across runs, byte for byte, through windows smaller and larger
// than a piece; runs with no room stay in memory; hold_all frees the
// temporary sectors; every temporary sector is free again afterwards.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "fs/meta/allocator.h"
#include "fs/device/fault_device.h"
#include "fs/mloc/mloc_image.h"
#include "fs/mloc/mloc_spill.h"
#include "fs/device/sector_io.h"
#include "tests/unit/support/fs_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;
using layouts::Selection;

namespace {

struct Rig {
  std::unique_ptr<geom::Geometry> g = testing::toy_disk();  // 2000 tracks of 8 sectors of 512 B: 8 MB
  MemoryDevice device{8ull << 20, 512};
  SectorIo io{device, *g};
  Allocator allocator;
  explicit Rig(geom::Lbn end = 16000) : allocator(*g, 0, end) {}
};

// Random runs of pieces with unique keys; `expected` collects every piece by key.
std::vector<std::vector<MlocSpill::Piece>> make_runs(std::mt19937_64& rng, std::size_t runs, std::size_t per_run,
                                                     std::size_t max_bytes,
                                                     std::map<std::uint64_t, std::vector<std::byte>>* expected) {
  std::vector<std::uint64_t> keys(runs * per_run);
  for (std::size_t i = 0; i < keys.size(); ++i) keys[i] = i * 4 + rng() % 3;  // unique, with gaps, never 3 mod 4
  std::shuffle(keys.begin(), keys.end(), rng);
  std::vector<std::vector<MlocSpill::Piece>> out(runs);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    std::vector<std::byte> bytes(rng() % (max_bytes + 1));  // empty pieces too
    for (auto& b : bytes) b = std::byte(rng());
    (*expected)[keys[i]] = bytes;
    out[i % runs].push_back({keys[i], std::move(bytes)});
  }
  return out;
}

// Adds every run; each must go in.
void add_all(MlocSpill& spill, std::vector<std::vector<MlocSpill::Piece>>& runs) {
  std::string message;
  for (auto& r : runs) {
    REQUIRE(spill.add_run(r, &message) == 0);
    CHECK(r.empty());
  }
}

std::vector<std::byte> merged(MlocSpill& spill) {
  std::vector<std::byte> out;
  std::string message;
  REQUIRE(spill.merge([&](std::span<const std::byte> b) {
    out.insert(out.end(), b.begin(), b.end());
    return 0;
  }, &message) == 0);
  return out;
}

std::vector<std::byte> concatenated(const std::map<std::uint64_t, std::vector<std::byte>>& expected) {
  std::vector<std::byte> out;
  for (const auto& [k, v] : expected) out.insert(out.end(), v.begin(), v.end());
  return out;
}

}  // namespace

TEST_CASE("mloc spill: pieces merge back in key order, byte for byte", "[mloc]") {
  std::mt19937_64 rng(31);
  // Small pieces (many per 4 MiB read window), and one larger than a window.
  for (bool large : {false, true}) {
    INFO((large ? "with" : "without") << " a piece larger than a read window");
    Rig rig;
    const std::uint64_t free_before = rig.allocator.free_sectors();
    std::map<std::uint64_t, std::vector<std::byte>> expected;
    auto runs = make_runs(rng, 5, 400, 700, &expected);
    if (large) {
      std::vector<std::byte> big((9u << 19) + 123);  // 4.5 MiB and a bit
      for (auto& b : big) b = std::byte(rng());
      expected[667] = big;  // 3 mod 4: between the small pieces' keys, none of them
      runs[2].push_back({667, std::move(big)});
    }
    {
      MlocSpill spill(rig.allocator, rig.io);
      add_all(spill, runs);
      CHECK(spill.runs() == 5);
      CHECK(spill.runs_in_memory() == 0);
      CHECK(rig.allocator.free_sectors() < free_before);
      const auto got = merged(spill);
      REQUIRE(got.size() == concatenated(expected).size());
      CHECK((got == concatenated(expected)));
    }
    CHECK(rig.allocator.free_sectors() == free_before);  // the temporary sectors are free again
  }
}

TEST_CASE("mloc spill: many runs (an array of many slabs) merge in key order", "[mloc]") {
  std::mt19937_64 rng(35);
  Rig rig;
  std::map<std::uint64_t, std::vector<std::byte>> expected;
  auto runs = make_runs(rng, 600, 5, 1500, &expected);
  MlocSpill spill(rig.allocator, rig.io);
  add_all(spill, runs);
  CHECK(spill.runs_in_memory() == 0);
  CHECK((merged(spill) == concatenated(expected)));
}

TEST_CASE("mloc spill: a run with no room stays in memory; hold_all frees the sectors", "[mloc]") {
  std::mt19937_64 rng(32);
  // Room for about one run of 400 pieces of up to 2 KiB (~400 KB).
  Rig rig(1000);
  const std::uint64_t free_before = rig.allocator.free_sectors();
  std::map<std::uint64_t, std::vector<std::byte>> expected;
  auto runs = make_runs(rng, 4, 300, 2048, &expected);
  MlocSpill spill(rig.allocator, rig.io);
  add_all(spill, runs);
  CHECK(spill.runs_in_memory() >= 1);
  CHECK(spill.runs_in_memory() < 4);
  CHECK((merged(spill) == concatenated(expected)));
  std::string message;
  REQUIRE(spill.hold_all(&message) == 0);
  CHECK(spill.runs_in_memory() == 4);
  CHECK(rig.allocator.free_sectors() == free_before);
  CHECK((merged(spill) == concatenated(expected)));
}

TEST_CASE("mloc spill: an error of the consumer stops the merge and is returned", "[mloc]") {
  std::mt19937_64 rng(33);
  Rig rig;
  std::map<std::uint64_t, std::vector<std::byte>> expected;
  auto runs = make_runs(rng, 2, 50, 3000, &expected);
  MlocSpill spill(rig.allocator, rig.io);
  add_all(spill, runs);
  std::string message;
  int calls = 0;
  CHECK(spill.merge([&](std::span<const std::byte>) { return ++calls == 7 ? EIO : 0; }, &message) == EIO);
  CHECK(calls == 7);
}

TEST_CASE("mloc spill: an image seals on a volume with room for it but not for it and its runs too", "[mloc]") {
  // 64 x 64 x 16 float64 (512 KiB), 16^3 chunks: 4 slabs, so 4 runs.
  const std::vector<std::uint64_t> shape{64, 64, 16};
  std::vector<double> data(64 * 64 * 16);
  std::mt19937_64 rng(34);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = double(i % 977) * 0.5 + double(rng() % 1000) * 1e-6;
  MlocParams params;
  params.shape = shape;
  params.chunk = {16, 16, 16};
  params.bins = "100";
  const std::uint64_t row_bytes = 64 * 16 * 8;
  RowReader read = [&](std::uint64_t row, std::uint64_t rows, std::byte* out, std::string*) {
    std::memcpy(out, reinterpret_cast<const std::byte*>(data.data()) + row * row_bytes, rows * row_bytes);
    return 0;
  };
  std::uint64_t image_sectors = 0;
  {
    Rig rig;
    std::unique_ptr<MlocImage> image;
    std::string message;
    const int r = MlocImage::encode(params, read, rig.allocator, rig.io, &image, &message);
    INFO(message);
    REQUIRE(r == 0);
    image_sectors = image->device_bytes() / 512;
  }
  // Room for the image and half of it again: the runs take most of that,
  // the image then finds no room until they come into memory.
  Rig rig(image_sectors * 3 / 2);
  const std::uint64_t free_before = rig.allocator.free_sectors();
  std::unique_ptr<MlocImage> image;
  std::string message;
  REQUIRE(MlocImage::encode(params, read, rig.allocator, rig.io, &image, &message) == 0);
  CHECK(rig.allocator.free_sectors() == free_before - image_sectors);  // only the image's sectors are taken
  std::vector<double> back(data.size());
  std::uint64_t bytes = 0;
  REQUIRE(image->read_selection(Selection::all(shape), 0, reinterpret_cast<std::byte*>(back.data()), &bytes,
                                &message, true) == 0);
  CHECK((back == data));
}
