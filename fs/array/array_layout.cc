#include "fs/array/array_layout.h"

#include "layouts/capsule.h"
#include "layouts/cell_grid.h"

namespace mmfs::fs {

using layouts::CellGrid;

std::unique_ptr<layouts::Layout> make_array_layout(const geom::Geometry& geometry, const ArraySchema& schema) {
  const bool staging = schema.layout == "mloc";
  std::vector<std::uint32_t> order = staging ? std::vector<std::uint32_t>{} : schema.order;
  if (order.empty()) order = CellGrid::default_order(schema.shape.size());
  std::vector<std::uint64_t> cell = staging ? std::vector<std::uint64_t>{} : schema.cell;
  if (cell.empty())
    cell = schema.layout == "capsule"
               ? layouts::CapsuleLayout::default_cell(schema.shape, schema.dtype.itemsize, geometry.sector_size())
               : CellGrid::default_cell(schema.shape, schema.dtype.itemsize,
                                        CellGrid::default_cell_bytes(geometry.sector_size()), order);
  CellGrid grid(schema.shape, schema.dtype.itemsize, cell, order);
  if (const auto& t = schema.table_part)  // an attribute of a table: its blocks of the table's capsules
    return std::make_unique<layouts::CapsuleLayout>(
        geometry, std::move(grid), layouts::CapsulePart{t->capsule_blocks, t->first_block, t->cells_per_capsule});
  return layouts::make_layout(staging ? "naive" : schema.layout, geometry, std::move(grid),
                              staging ? std::vector<std::uint64_t>{} : schema.basic_cube);
}

}  // namespace mmfs::fs
