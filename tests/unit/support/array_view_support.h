// Helpers of the array-file tests: a byte model of the array, an array filled
// with random bytes, views resolved from path components, reads of a view
// checked against the model's extraction (whole, in pieces, and without a
// copy).
#pragma once

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "fs/array/array_file.h"
#include "fs/array/array_schema.h"
#include "fs/paths/view_path.h"
#include "tests/unit/support/array_test_support.h"
#include "tests/unit/support/fs_test_support.h"

namespace mmfs::fs::testing::arrays {

// Reads `length` bytes at `offset` of the array file; REQUIREs success.
inline Bytes read_file(ArrayFile& a, std::uint64_t offset, std::size_t length) {
  Bytes out(length, 0xAA);
  std::size_t got = 0;
  std::string msg;
  int r = a.read(offset, length, reinterpret_cast<std::byte*>(out.data()), &got, &msg);
  INFO("read " << length << " at " << offset << ": " << msg);
  REQUIRE(r == 0);
  out.resize(got);
  return out;
}

inline Bytes read_all(ArrayFile& a) { return read_file(a, 0, a.size()); }

inline int write_file(ArrayFile& a, std::uint64_t offset, const Bytes& data) {
  std::string msg;
  return a.write(offset, reinterpret_cast<const std::byte*>(data.data()), data.size(), &msg);
}

// A new array `name` of `s` on `m` filled with random bytes from `rng`, flushed.
inline std::shared_ptr<ArrayFile> create_random(const Mount& m, const std::string& name, const ArraySchema& s,
                                                std::mt19937_64& rng) {
  auto a = create_array(m, name, s);
  REQUIRE(write_file(*a, 0, random_bytes(rng, a->size())) == 0);
  std::string msg;
  REQUIRE(a->flush(true, &msg) == 0);
  return a;
}

// ---- Views: our own selector description and a brute-force extraction ----

struct Sel {
  bool fixed = false;
  std::uint64_t start = 0, stop = 0, step = 1;  // fixed: start is the index
};

// C-order bytes of the selection of `model` (an array of `shape`, `itemsize`).
inline Bytes extract(const Bytes& model, const std::vector<std::uint64_t>& shape, std::uint32_t itemsize,
              const std::vector<Sel>& sel) {
  const std::size_t n = shape.size();
  std::vector<std::uint64_t> count(n);
  for (std::size_t d = 0; d < n; ++d)
    count[d] = sel[d].fixed ? 1 : (sel[d].stop > sel[d].start ? (sel[d].stop - sel[d].start + sel[d].step - 1) / sel[d].step : 0);
  Bytes out;
  for (auto c : count)
    if (c == 0) return out;
  std::vector<std::uint64_t> idx(n, 0);
  for (;;) {
    std::uint64_t linear = 0;
    for (std::size_t d = 0; d < n; ++d) {
      std::uint64_t x = sel[d].fixed ? sel[d].start : sel[d].start + idx[d] * sel[d].step;
      linear = linear * shape[d] + x;
    }
    out.insert(out.end(), model.begin() + std::ptrdiff_t(linear * itemsize),
               model.begin() + std::ptrdiff_t((linear + 1) * itemsize));
    std::size_t d = n;
    for (;;) {
      if (d == 0) return out;
      --d;
      if (++idx[d] < count[d]) break;
      idx[d] = 0;
    }
  }
}

// docs/reference.md §5 PLoD, written out from docs/reference.md text: keep the K most significant
// (last, little-endian) bytes; for float64 the most significant dropped byte
// becomes 0x7F and the ones below 0xFF; zeros for other dtypes.
inline Bytes plod(Bytes v, std::uint32_t itemsize, bool float64, std::uint32_t keep) {
  std::uint32_t drop = itemsize - keep;
  for (std::size_t e = 0; e < v.size(); e += itemsize)
    for (std::uint32_t b = 0; b < drop; ++b)
      v[e + b] = float64 ? (b == drop - 1 ? 0x7F : 0xFF) : 0x00;
  return v;
}

inline std::string spell(const std::vector<Sel>& sel) {
  std::string s;
  for (std::size_t d = 0; d < sel.size(); ++d) {
    if (d) s += ",";
    if (sel[d].fixed) s += std::to_string(sel[d].start);
    else s += fmt::format("{}:{}:{}", sel[d].start, sel[d].stop, sel[d].step);
  }
  return s;
}

inline std::vector<Sel> random_box(std::mt19937_64& rng, const std::vector<std::uint64_t>& shape) {
  std::vector<Sel> sel(shape.size());
  for (std::size_t d = 0; d < shape.size(); ++d) {
    Sel& s = sel[d];
    if (rng() % 4 == 0) {
      s.fixed = true;
      s.start = rng() % shape[d];
    } else {
      s.start = rng() % shape[d];
      s.stop = s.start + 1 + rng() % (shape[d] - s.start);
      s.step = 1 + rng() % 4;
    }
  }
  return sel;
}

inline DataView resolve(const std::vector<std::string>& comps, const ArraySchema& s) {
  auto r = resolve_view(comps, s.shape, s.dtype.itemsize, false);
  if (auto* e = std::get_if<PathError>(&r)) FAIL("view did not resolve: " << e->message);
  auto& node = std::get<ViewNode>(r);
  REQUIRE(node.kind == ViewKind::Data);
  REQUIRE(node.data);
  return *node.data;
}

inline Bytes read_view_bytes(ArrayFile& a, const DataView& v, std::uint64_t offset, std::size_t length) {
  Bytes out(length, 0xAA);
  std::size_t got = 0;
  std::string msg;
  int r = a.read_view(v, offset, length, reinterpret_cast<std::byte*>(out.data()), &got, &msg);
  INFO("view " << v.spelling << ": " << msg);
  REQUIRE(r == 0);
  out.resize(got);
  return out;
}

// Checks one view in full and in a few random pieces against `expect`.
inline void check_view(ArrayFile& a, const DataView& v, const Bytes& expect, std::mt19937_64& rng) {
  INFO("view " << v.spelling);
  REQUIRE(v.bytes(a.schema().dtype.itemsize) == expect.size());
  CHECK(bytes_diff(read_view_bytes(a, v, 0, expect.size() + 7), expect) == "");
  for (int i = 0; i < 3 && !expect.empty(); ++i) {
    std::uint64_t off = rng() % expect.size();
    std::size_t len = 1 + rng() % (expect.size() - off);
    Bytes part(expect.begin() + std::ptrdiff_t(off), expect.begin() + std::ptrdiff_t(off + len));
    CHECK(bytes_diff(read_view_bytes(a, v, off, len), part) == "");
  }
  CHECK(read_view_bytes(a, v, expect.size(), 10).empty());
  // view_span: the same bytes without a copy when they lie in one chunk.
  if (!expect.empty()) {
    std::uint64_t off = rng() % expect.size();
    std::size_t len = 1 + rng() % (expect.size() - off);
    std::shared_ptr<const AlignedBuffer> keep;
    const std::byte* data = nullptr;
    std::size_t got = 0;
    std::string msg;
    REQUIRE(a.view_span(v, off, len, &keep, &data, &got, &msg) == 0);
    if (data != nullptr) {
      REQUIRE(got == len);
      REQUIRE(keep);
      CHECK(std::memcmp(data, expect.data() + off, len) == 0);
    }
  }
}

inline void check_views(ArrayFile& a, const ArraySchema& s, const Bytes& model, std::mt19937_64& rng) {
  const auto& shape = s.shape;
  const std::uint32_t I = s.dtype.itemsize;
  const bool f64 = s.dtype.name == "float64";
  // Every slice dimension, a random index (and the edges).
  for (std::size_t d = 0; d < shape.size(); ++d) {
    for (std::uint64_t i : {std::uint64_t(0), rng() % shape[d], shape[d] - 1}) {
      std::vector<Sel> sel(shape.size());
      for (std::size_t e = 0; e < shape.size(); ++e) sel[e] = Sel{false, 0, shape[e], 1};
      sel[d] = Sel{true, i, i + 1, 1};
      check_view(a, resolve({"slice", std::to_string(d), std::to_string(i)}, s), extract(model, shape, I, sel), rng);
    }
  }
  // Random boxes, and the whole array spelled as a box of ':'.
  for (int k = 0; k < 6; ++k) {
    auto sel = random_box(rng, shape);
    check_view(a, resolve({"box", spell(sel)}, s), extract(model, shape, I, sel), rng);
  }
  {
    std::string all;
    for (std::size_t d = 0; d < shape.size(); ++d) all += d ? ",:" : ":";
    check_view(a, resolve({"box", all}, s), model, rng);
  }
  // PLoD: the whole array, and composed with a slice and a box.
  for (std::uint32_t K = 1; K <= I; ++K) {
    check_view(a, resolve({"plod", std::to_string(K)}, s), plod(model, I, f64, K), rng);
    auto sel = random_box(rng, shape);
    check_view(a, resolve({"plod", fmt::format("{}@", K), "box", spell(sel)}, s),
               plod(extract(model, shape, I, sel), I, f64, K), rng);
    std::size_t d = rng() % shape.size();
    std::uint64_t i = rng() % shape[d];
    std::vector<Sel> sl(shape.size());
    for (std::size_t e = 0; e < shape.size(); ++e) sl[e] = Sel{false, 0, shape[e], 1};
    sl[d] = Sel{true, i, i + 1, 1};
    check_view(a, resolve({"plod", fmt::format("{}@", K), "slice", std::to_string(d), std::to_string(i)}, s),
               plod(extract(model, shape, I, sl), I, f64, K), rng);
  }
}


}  // namespace mmfs::fs::testing::arrays
