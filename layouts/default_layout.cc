#include "layouts/default_layout.h"

#include <fmt/format.h>

namespace mmfs::layouts {

DefaultLayout default_layout(const geom::Geometry& g) {
  switch (g.kind()) {
    case geom::DeviceKind::Flash:
      return {kFlashLayout, kFlashCellBytes,
              fmt::format("flash volume: {} with a cell of {} KiB shaped like the array, the layout and cell with "
                          "the fastest worst view measured on flash (docs/benchmarks/flash-default-layout.md)",
                          kFlashLayout, kFlashCellBytes / 1024)};
    default:
      return {"multimap", 0,
              "disk or MEMS volume: multimap, the layout of the MultiMap paper for devices with tracks and "
              "adjacent blocks, with one-sector cells"};
  }
}

std::vector<std::uint64_t> default_cell(const DefaultLayout& rule, const geom::Geometry& g,
                                        std::span<const std::uint64_t> shape, std::uint32_t itemsize,
                                        std::span<const std::uint32_t> order) {
  if (rule.cell_bytes == 0)
    return CellGrid::default_cell(shape, itemsize, CellGrid::default_cell_bytes(g.sector_size()), order);
  return CellGrid::proportional_cell(shape, itemsize, std::max(rule.cell_bytes, g.sector_size()), order);
}

}  // namespace mmfs::layouts
