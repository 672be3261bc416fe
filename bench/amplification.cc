#include "bench/amplification.h"

#include <fmt/format.h>

#include "geometry/load.h"
#include "layouts/io_plan.h"

namespace mmfs::bench {

std::string run_amplification(const AmplificationOptions& opt) {
  auto g = geom::load_geometry(opt.profile);
  const std::size_t n = opt.shape.size();
  auto order = layouts::CellGrid::default_order(n);
  std::uint64_t per_sector = std::max<std::uint64_t>(1, g->sector_size() / opt.itemsize);
  // The two ends of the trade-off: bricks (the daemon's default fills 4 KiB;
  // one sector is the papers' cell), and a run along the primary dimension.
  const std::uint32_t default_bytes = layouts::CellGrid::default_cell_bytes(g->sector_size());
  std::vector<std::pair<std::string, std::vector<std::uint64_t>>> cells = {
      {fmt::format("brick of {} B (daemon default)", default_bytes),
       layouts::CellGrid::default_cell(opt.shape, opt.itemsize, default_bytes, order)},
  };
  if (default_bytes != g->sector_size())
    cells.push_back({"brick of one sector", layouts::CellGrid::default_cell(opt.shape, opt.itemsize, g->sector_size(), order)});
  std::vector<std::uint64_t> run(n, 1);
  run[order[0]] = std::min<std::uint64_t>(per_sector, opt.shape[order[0]]);
  cells.push_back({"run along primary", run});

  std::string md = fmt::format("Array {} of {}-byte elements on `{}`; slices at the middle index; read "
                               "amplification = bytes read / bytes useful; modeled ms from an idle device.\n\n",
                               layouts::join(opt.shape), opt.itemsize, opt.profile);
  md += "| cell | layout |";
  for (std::size_t d = 0; d < n; ++d) md += fmt::format(" slice/{} ampl. | slice/{} ms |", d, d);
  md += "\n|---|---|";
  for (std::size_t d = 0; d < n; ++d) md += "---|---|";
  md += "\n";
  for (const auto& [label, cell] : cells) {
    for (const std::string& name : opt.layouts) {
      auto layout = layouts::make_layout(name, *g, layouts::CellGrid(opt.shape, opt.itemsize, cell, order));
      layout->place(layouts::allocate_linear(*g, layout->space(), 0));
      md += fmt::format("| {} ({}) | {} |", label, layouts::join(cell), name);
      for (std::size_t d = 0; d < n; ++d) {
        auto plan = layouts::plan_selection(*layout, layouts::Selection::slice(opt.shape, d, opt.shape[d] / 2));
        layouts::model_plan(plan, *g);
        md += fmt::format(" {:.2f} | {:.0f} |", double(plan.bytes_read) / double(plan.bytes_useful), plan.modeled_ms);
      }
      md += "\n";
    }
  }
  return md;
}

}  // namespace mmfs::bench
