// Which layout and cell an array gets when user.mmfs.layout is not set:
// chosen from the volume's geometry, with the reason A@/info
// shows. An explicit user.mmfs.layout always wins. The daemon stores the
// choice with the array's schema when the array is created (the cell too, as
// user.mmfs.cell), so a later change of this rule never moves an array.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "geometry/geometry.h"
#include "layouts/cell_grid.h"

namespace mmfs::layouts {

struct DefaultLayout {
  std::string layout;           // a layout name of docs/reference.md §4
  std::uint32_t cell_bytes = 0; // >0: a cell of this size shaped like the array; 0: the layout's own default cell
  std::string rule;             // why, one line (A@/info "layout_rule")
};

// Measured on this project's flash-backed VM disk (mmfs-bench real, -g ssd,
// docs/benchmarks/flash-default-layout.md).
inline constexpr const char* kFlashLayout = "hilbert";
inline constexpr std::uint32_t kFlashCellBytes = 8192;

DefaultLayout default_layout(const geom::Geometry& geometry);

// The cell the rule gives an array of `shape`.
std::vector<std::uint64_t> default_cell(const DefaultLayout& rule, const geom::Geometry& geometry,
                                        std::span<const std::uint64_t> shape, std::uint32_t itemsize,
                                        std::span<const std::uint32_t> order);

}  // namespace mmfs::layouts
