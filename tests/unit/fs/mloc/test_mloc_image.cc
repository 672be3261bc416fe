// An mloc image on the volume (fs/mloc/mloc_image.h), without an array file
// around it: encoded from rows, committed and loaded again, read whole, in
// selections and with PLoD, each against the rows it was made of; the
// element sectors it reports hold the elements; an empty image reads zeros;
// a compressed one has no element sectors; a flipped byte is EIO.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
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

}  // namespace

TEST_CASE("mloc image: committed, loaded again and read in selections, it gives back its rows", "[mloc]") {
  const auto g = toy_disk();
  Mount m = mount(formatted(*g));
  std::mt19937_64 rng(9);
  const std::vector<std::uint64_t> shape{23, 17, 6};
  const Bytes model = random_bytes(rng, 23 * 17 * 6 * 8);
  const MlocParams p = params_of(shape, "float64", "none", {8, 8, 4});
  auto image = encode(m, p, model);
  const Ino ino = new_file(m.md(), "image");
  WriteBatch batch;
  image->stage(ino, batch);
  REQUIRE(m.md().apply(batch, {}) == 0);

  std::unique_ptr<MlocImage> loaded;
  std::string msg;
  REQUIRE(MlocImage::load(m.md(), *m.io, ino, p, &loaded, &msg) == 0);
  REQUIRE(loaded);
  CHECK(loaded->extents() == image->extents());
  CHECK(loaded->device_bytes() == image->device_bytes());
  CHECK(loaded->grid().chunk() == std::vector<std::uint64_t>{8, 8, 4});

  CHECK(testing::bytes_diff(read(*loaded, all(shape), 8), model) == "");
  CHECK(testing::bytes_diff(read(*loaded, all(shape), 8, 0, true), model) == "");
  // A box across chunk edges, with a step, and a fixed index.
  const layouts::Selection box({{3, 20, 2, false}, {5, 5 + 1, 1, true}, {1, 6, 1, false}});
  Bytes want;
  for (std::uint64_t i = 3; i < 20; i += 2)
    for (std::uint64_t k = 1; k < 6; ++k) {
      const std::uint64_t e = (i * 17 + 5) * 6 + k;
      want.insert(want.end(), model.begin() + std::ptrdiff_t(e * 8), model.begin() + std::ptrdiff_t(e * 8 + 8));
    }
  CHECK(testing::bytes_diff(read(*loaded, box, 8), want) == "");
  CHECK(testing::bytes_diff(read(*loaded, box, 8, 0, true), want) == "");

  // PLoD: the leading `keep` bytes of each element are its own.
  const Bytes plod = read(*loaded, all(shape), 8, 3);
  for (std::uint64_t e = 0; e < model.size() / 8; ++e)
    for (std::uint32_t byte = 5; byte < 8; ++byte) REQUIRE(plod[e * 8 + byte] == model[e * 8 + byte]);

  // The plan reads from the image's own extents only.
  const layouts::IoPlan plan = loaded->plan(box, 0, *g);
  CHECK(plan.modeled_ms > 0);
  for (const auto& b : plan.batches)
    for (const auto& r : b.requests) {
      bool inside = false;
      for (const Extent& x : loaded->extents()) inside = inside || (r.lbn >= x.start && r.lbn < x.start + x.sectors);
      CHECK(inside);
    }
  CHECK(loaded->describe().value("sealed", true));
  CHECK(loaded->describe()["image_bytes"].get<std::uint64_t>() > 0);
}

TEST_CASE("mloc image: the sector an element is reported at holds its most significant byte", "[mloc]") {
  const auto g = toy_disk();
  MemoryDevice& dev = *new MemoryDevice(8ull << 20, 512);
  std::unique_ptr<MemoryDevice> owner(&dev);
  {
    FormatOptions opt;
    opt.meta_bytes = 4 << 20;
    std::string msg;
    REQUIRE(format_volume(dev, *g, opt, nullptr, &msg) == 0);
  }
  Mount m = mount(std::make_unique<RefDevice>(dev));
  std::mt19937_64 rng(4);
  const std::vector<std::uint64_t> shape{30, 20};
  const Bytes model = random_bytes(rng, 30 * 20 * 2);
  auto image = encode(m, params_of(shape, "uint16", "none"), model);
  for (int i = 0; i < 40; ++i) {
    const std::vector<std::uint64_t> coords{rng() % 30, rng() % 20};
    geom::Lbn lbn = 0;
    std::uint32_t offset = 0;
    std::string msg;
    REQUIRE(image->element_location(coords, &lbn, &offset, &msg) == 0);
    const std::uint64_t e = coords[0] * 20 + coords[1];
    CHECK(std::uint8_t(dev.bytes()[lbn * 512 + offset]) == model[e * 2 + 1]);  // little-endian: byte 1 leads
  }

  // A flipped byte of the image's last unit: EIO naming the checksum, never
  // other bytes. (The image is the concatenation of its extents.)
  std::uint64_t at = image->describe()["image_bytes"].get<std::uint64_t>() - 1;
  geom::Lbn sector = 0;
  for (const Extent& x : image->extents()) {
    if (at < x.sectors * 512) {
      sector = x.start + at / 512;
      break;
    }
    at -= x.sectors * 512;
  }
  dev.bytes()[sector * 512 + at % 512] ^= std::byte{0x40};
  Bytes out(model.size());
  std::uint64_t bytes_read = 0;
  std::string msg;
  std::unique_ptr<MlocImage> again;
  const Ino ino = new_file(m.md(), "flipped");
  WriteBatch batch;
  image->stage(ino, batch);
  REQUIRE(m.md().apply(batch, {}) == 0);
  REQUIRE(MlocImage::load(m.md(), *m.io, ino, params_of(shape, "uint16", "none"), &again, &msg) == 0);
  const int r = again->read_selection(all(shape), 0, reinterpret_cast<std::byte*>(out.data()), &bytes_read, &msg);
  CHECK(r == EIO);
  CHECK_THAT(msg, Catch::Contains("checksum"));
}

TEST_CASE("mloc image: an empty image reads zeros and has no sectors; a compressed one has no element sectors",
          "[mloc]") {
  const auto g = toy_disk();
  Mount m = mount(formatted(*g));
  const std::vector<std::uint64_t> shape{12, 10};
  std::unique_ptr<MlocImage> empty;
  std::string msg;
  REQUIRE(MlocImage::empty(params_of(shape, "int32", "none"), *m.io, &empty, &msg) == 0);
  CHECK(!empty->holds_data());
  CHECK(read(*empty, all(shape), 4) == Bytes(12 * 10 * 4, 0));
  geom::Lbn lbn = 0;
  std::uint32_t offset = 0;
  CHECK(empty->element_location(std::vector<std::uint64_t>{1, 1}, &lbn, &offset, &msg) == ENODATA);

  std::mt19937_64 rng(1);
  Bytes model(12 * 10 * 4);
  for (std::size_t i = 0; i < model.size(); i += 4) model[i] = std::uint8_t(rng() % 5);  // compressible
  auto packed = encode(m, params_of(shape, "int32", "zstd"), model);
  CHECK(testing::bytes_diff(read(*packed, all(shape), 4), model) == "");
  msg.clear();
  CHECK(packed->element_location(std::vector<std::uint64_t>{3, 4}, &lbn, &offset, &msg) == ENOTSUP);
  CHECK_THAT(msg, Catch::Contains("compress"));
}
