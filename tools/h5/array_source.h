// mmfs-export's SRC: an array file, or a data view of one (docs/reference.md §5,
// fs/paths/view_path.h), found and checked through the mount only.
//
// The array is the first path component `X@` whose prefix X is a file with
// user.mmfs.shape (so `a@/plod/3@/box/1:4,:` finds `a`, not `a@/plod/3`);
// the components after it are resolved with fs::resolve_view against the
// array's shape and dtype, exactly as the daemon resolves them, which gives
// the view's shape without reading it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fs/array/array_schema.h"
#include "layouts/selection.h"

namespace mmfs::h5 {

struct ViewPathSplit {
  std::string array;                    // the array file's path
  std::vector<std::string> components;  // after `array@`; empty when SRC is the array itself
  bool through_view = false;            // SRC went through `array@`
};

// Pure: `is_array(path)` says whether a path is an array file. nullopt when
// SRC is neither an array file nor below one's `@`.
std::optional<ViewPathSplit> split_view_path(const std::string& src,
                                             const std::function<bool(const std::string&)>& is_array);

struct ArraySource {
  std::string path;                        // SRC as given
  std::string array;                       // the array file
  bool is_view = false;
  std::vector<std::uint64_t> array_shape;  // the array's
  fs::Dtype dtype;
  std::vector<std::uint64_t> shape;        // SRC's: the view's result shape (empty: a scalar)
  std::uint64_t bytes = 0;                 // SRC's size
  // What SRC selects of the array (everything for the array file itself),
  // and the bytes a PLoD view keeps per element (0: whole elements).
  layouts::Selection selection{{}};
  std::uint32_t plod_bytes = 0;
};

// The view path, below `src.array@`, of the part of SRC that is the box
// `start`/`count` of SRC's own shape: "box/SEL" or "plod/K@/box/SEL", where
// SEL selects in the array the elements SRC has at those positions (so the
// daemon returns exactly the box's C-order bytes). REQUIRES a rank >= 1.
std::string box_view_path(const ArraySource& src, std::span<const std::uint64_t> start,
                          std::span<const std::uint64_t> count);

// Finds and checks SRC: EINVAL (with "Invalid argument" in the message) for
// plain files, directories, info/lbn/plan views and view directories; the
// view's own errno (ERANGE, EINVAL, ENOENT) for a malformed view path; EIO when
// SRC's size is not its shape's. Throws ToolError.
ArraySource resolve_source(const std::string& src);

}  // namespace mmfs::h5
