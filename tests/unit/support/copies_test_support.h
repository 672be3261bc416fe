// Arrays with copies (fs/array/array_file_copies.cc) in unit tests: the
// schema with user.mmfs.copies set, a view read through any placement, every
// placement checked against the bytes written, an array filled and its
// copies current.
#pragma once

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "fs/array/array_file.h"
#include "fs/array/copy_spec.h"
#include "fs/paths/view_path.h"
#include "tests/unit/support/array_file_test_support.h"
#include "tests/unit/support/array_test_support.h"
#include "tests/unit/support/array_view_support.h"
#include "tests/unit/support/fs_test_support.h"

namespace mmfs::fs::testing::arrays {

inline ArraySchema with_copies(ArraySchema s, const char* copies) {
  const SchemaResult r = set_schema_attr(s, "copies", copies);
  INFO(r.message);
  REQUIRE(r.error == 0);
  return s;
}

// The view `components` of `a` (below A@), read in full; its errno into
// *error when given (else it must succeed).
inline Bytes view_bytes(ArrayFile& a, const std::vector<std::string>& components, int* error = nullptr) {
  const ArraySchema s = a.schema();
  auto r = resolve_view(components, s.shape, s.dtype.itemsize, false, {}, s.copies.size());
  if (auto* e = std::get_if<PathError>(&r)) FAIL("view did not resolve: " << e->message);
  const DataView v = *std::get<ViewNode>(r).data;
  Bytes out(v.bytes(s.dtype.itemsize));
  std::size_t got = 0;
  std::string msg;
  const int rc = a.read_view(v, 0, out.size(), reinterpret_cast<std::byte*>(out.data()), &got, &msg);
  if (error) *error = rc;
  else {
    INFO(msg);
    REQUIRE(rc == 0);
  }
  if (rc == 0) out.resize(got);
  return out;
}

// Every copy's whole array, slices along every dimension and a stepped box equal `model`.
inline void check_every_copy(ArrayFile& a, const Bytes& model) {
  const ArraySchema s = a.schema();
  const std::uint32_t I = s.dtype.itemsize;
  for (std::size_t k = 0; k <= s.copies.size(); ++k) {
    INFO("copy " << k);
    CHECK(bytes_diff(view_bytes(a, {"copy", std::to_string(k)}), model) == "");
    for (std::size_t d = 0; d < s.shape.size(); ++d) {
      std::vector<Sel> sel(s.shape.size());
      for (std::size_t e = 0; e < s.shape.size(); ++e) sel[e] = Sel{false, 0, s.shape[e], 1};
      sel[d] = Sel{true, s.shape[d] / 2, 0, 1};
      CHECK(bytes_diff(view_bytes(a, {"copy", fmt::format("{}@", k), "slice", std::to_string(d),
                                      std::to_string(s.shape[d] / 2)}),
                       extract(model, s.shape, I, sel)) == "");
    }
    std::vector<Sel> box(s.shape.size());
    for (std::size_t e = 0; e < s.shape.size(); ++e) box[e] = Sel{false, 1, s.shape[e], 2};
    CHECK(bytes_diff(view_bytes(a, {"copy", fmt::format("{}@", k), "box", spell(box)}),
                     extract(model, s.shape, I, box)) == "");
  }
  CHECK(bytes_diff(read_all(a), model) == "");
}

// An array `name` of schema `s` made with `ctx` (its hooks), filled with
// random bytes (returned in *model), durable and its copies current.
inline std::shared_ptr<ArrayFile> filled_with_copies(const Mount& m, const ArrayContext& ctx, const std::string& name,
                                              const ArraySchema& s, std::mt19937_64& rng, Bytes* model) {
  Inode n;
  new_file(m.md(), name, &n);
  std::shared_ptr<ArrayFile> a;
  std::string msg;
  REQUIRE(ArrayFile::create(ctx, n, s, nullptr, &a, &msg) == 0);
  *model = random_bytes(rng, a->size());
  REQUIRE(write_file(*a, 0, *model) == 0);
  REQUIRE(a->flush(true, &msg) == 0);
  REQUIRE(a->catch_up(&msg) == 0);
  return a;
}

inline bool all_current(const ArrayFile& a) {
  const nlohmann::json info = a.info();
  if (!info.contains("copies")) return true;
  for (const auto& c : info["copies"])
    if (c["state"] != "current") return false;
  return true;
}

}  // namespace mmfs::fs::testing::arrays
