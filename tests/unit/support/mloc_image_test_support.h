// Mloc images for the unit tests of fs/mloc/: parameters of an array,
// an image encoded from C-order bytes on a mounted volume, and selections
// read back from it.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fs/mloc/mloc_image.h"
#include "layouts/selection.h"
#include "tests/unit/support/array_test_support.h"
#include "tests/unit/support/fs_test_support.h"

namespace mmfs::fs::testing::mloc_images {

using arrays::Mount;

// The MlocParams of an array of `shape` and `dtype` (V-M-S, the default bins).
inline MlocParams params_of(const std::vector<std::uint64_t>& shape, const std::string& dtype,
                            const std::string& compress, std::vector<std::uint64_t> chunk = {}) {
  MlocParams p;
  std::string msg;
  const int r = mloc_params(shape, dtype, std::move(chunk), "V-M-S", compress, "", &p, &msg);
  INFO(msg);
  REQUIRE(r == 0);
  return p;
}

// Encodes `model` (C-order bytes) into a new image on the mount's volume.
inline std::unique_ptr<MlocImage> encode(const Mount& m, const MlocParams& p, const Bytes& model) {
  const std::uint64_t row = model.size() / p.shape[0];
  auto read = [&](std::uint64_t first, std::uint64_t rows, std::byte* out, std::string*) {
    std::memcpy(out, model.data() + first * row, rows * row);
    return 0;
  };
  std::unique_ptr<MlocImage> image;
  std::string msg;
  const int r = MlocImage::encode(p, read, m.vol->allocator(), *m.io, &image, &msg);
  INFO(msg);
  REQUIRE(r == 0);
  REQUIRE(image->holds_data());
  return image;
}

// The selection's elements read from the image (the leading `keep` bytes of each; 0: all).
inline Bytes read(const MlocImage& image, const layouts::Selection& sel, std::uint32_t itemsize,
                  std::uint32_t keep = 0, bool once = false) {
  Bytes out(sel.elements() * itemsize, 0xAA);
  std::uint64_t bytes_read = 0;
  std::string msg;
  const int r = image.read_selection(sel, keep, reinterpret_cast<std::byte*>(out.data()), &bytes_read, &msg, once);
  INFO(msg);
  REQUIRE(r == 0);
  return out;
}

inline layouts::Selection all(const std::vector<std::uint64_t>& shape) { return layouts::Selection::all(shape); }

}  // namespace mmfs::fs::testing::mloc_images
