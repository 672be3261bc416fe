// Encoding an mloc image (fs/mloc/mloc_encode.cc, MlocImage::encode): two
// passes over the rows, a chunk row of dimension 0 at a time; a reader's
// error or malformed bins end it with nothing left allocated; the image
// lies in extents of its own, freed by release().
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "fs/mloc/mloc_image.h"
#include "tests/unit/support/array_test_support.h"
#include "tests/unit/support/fs_test_support.h"
#include "tests/unit/support/mloc_image_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;
using namespace mmfs::fs::testing::arrays;

namespace {

using namespace testing::mloc_images;

using Calls = std::vector<std::pair<std::uint64_t, std::uint64_t>>;

// Encodes `model`, recording each read (first row, rows); `fail_at` (a call
// number) makes that read fail with EIO.
int encode_logged(const Mount& m, const MlocParams& p, const Bytes& model, Calls* calls,
                  std::unique_ptr<MlocImage>* out, std::string* msg, int fail_at = -1) {
  const std::uint64_t row = model.size() / p.shape[0];
  auto reader = [&](std::uint64_t first, std::uint64_t rows, std::byte* dst, std::string* why) {
    if (int(calls->size()) == fail_at) {
      *why = "the rows are gone";
      return EIO;
    }
    calls->push_back({first, rows});
    std::memcpy(dst, model.data() + first * row, rows * row);
    return 0;
  };
  return MlocImage::encode(p, reader, m.vol->allocator(), *m.io, out, msg);
}

}  // namespace

TEST_CASE("mloc encode: two passes over the rows, a chunk row of dimension 0 at a time", "[mloc][encode]") {
  const auto g = toy_disk();
  Mount m = mount(formatted(*g));
  std::mt19937_64 rng(21);
  const std::vector<std::uint64_t> shape{23, 17, 6};
  const Bytes model = random_bytes(rng, 23 * 17 * 6 * 4);
  const MlocParams p = params_of(shape, "int32", "none", {8, 8, 4});
  Calls calls;
  std::unique_ptr<MlocImage> image;
  std::string msg;
  REQUIRE(encode_logged(m, p, model, &calls, &image, &msg) == 0);
  const Calls pass = {{0, 8}, {8, 8}, {16, 7}};  // the last chunk row is short
  Calls want = pass;
  want.insert(want.end(), pass.begin(), pass.end());
  CHECK(calls == want);
  CHECK(mmfs::fs::testing::bytes_diff(read(*image, all(shape), 4), model) == "");
  // A chunk taller than the array: one read a pass.
  calls.clear();
  const MlocParams tall = params_of(shape, "int32", "none", {32, 8, 4});
  REQUIRE(encode_logged(m, tall, model, &calls, &image, &msg) == 0);
  CHECK(calls == Calls{{0, 23}, {0, 23}});
}

TEST_CASE("mloc encode: a failed read or malformed bins end it with the reason and nothing allocated",
          "[mloc][encode]") {
  const auto g = toy_disk();
  Mount m = mount(formatted(*g));
  std::mt19937_64 rng(22);
  const std::vector<std::uint64_t> shape{40, 30};
  const Bytes model = random_bytes(rng, 40 * 30 * 8);
  const MlocParams p = params_of(shape, "float64", "none", {8, 16});
  const std::uint64_t free_before = m.vol->allocator().free_sectors();
  for (int fail_at : {0, 3, 5, 9}) {  // in the first pass (5 reads) or the second
    INFO("read " << fail_at << " fails");
    Calls calls;
    std::unique_ptr<MlocImage> image;
    std::string msg;
    CHECK(encode_logged(m, p, model, &calls, &image, &msg, fail_at) == EIO);
    CHECK(msg == "the rows are gone");
    CHECK_FALSE(image);
    CHECK(m.vol->allocator().free_sectors() == free_before);
  }
  MlocParams bad = p;
  bad.bins = "edges:2,1";
  Calls calls;
  std::unique_ptr<MlocImage> image;
  std::string msg;
  CHECK(encode_logged(m, bad, model, &calls, &image, &msg) == EINVAL);
  CHECK(msg.rfind("user.mmfs.bins: ", 0) == 0);
  CHECK(calls.empty());
  CHECK(m.vol->allocator().free_sectors() == free_before);
}

TEST_CASE("mloc encode: the image holds extents of its own until released", "[mloc][encode]") {
  const auto g = toy_disk();
  Mount m = mount(formatted(*g));
  std::mt19937_64 rng(23);
  const std::vector<std::uint64_t> shape{64, 64};
  const Bytes model = random_bytes(rng, 64 * 64 * 8);
  const std::uint64_t free_before = m.vol->allocator().free_sectors();
  for (const char* compress : {"none", "zstd"}) {
    INFO(compress);
    const MlocParams p = params_of(shape, "float64", compress, {16, 16});
    Calls calls;
    std::unique_ptr<MlocImage> image;
    std::string msg;
    REQUIRE(encode_logged(m, p, model, &calls, &image, &msg) == 0);
    std::uint64_t sectors = 0;
    for (const Extent& e : image->extents()) sectors += e.sectors;
    CHECK(sectors * 512 >= image->device_bytes());
    CHECK(m.vol->allocator().free_sectors() == free_before - sectors);
    CHECK(mmfs::fs::testing::bytes_diff(read(*image, all(shape), 8), model) == "");
    image->release(m.vol->allocator());
    CHECK(image->extents().empty());
    CHECK(m.vol->allocator().free_sectors() == free_before);
  }
}
