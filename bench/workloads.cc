#include "bench/workloads.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>
#include <variant>

#include "fs/paths/view_path.h"

namespace mmfs::bench {
namespace {

std::string percent_label(double p) { return fmt::format("{:g}", p); }

std::string middle_slice(const std::vector<std::uint64_t>& shape, std::uint32_t d) {
  return fmt::format("slice/{}/{}", d, shape[d] / 2);
}

}  // namespace

std::vector<std::uint64_t> cube_edges(const std::vector<std::uint64_t>& shape, double p) {
  // nearbyint rounds half to even, as Python's round() in bench/mmfs_bench_real.py.
  std::vector<std::uint64_t> e(shape.size());
  for (std::size_t d = 0; d < shape.size(); ++d)
    e[d] = std::min<std::uint64_t>(shape[d], std::max<std::uint64_t>(1, std::uint64_t(std::nearbyint(p / 100.0 * double(shape[d])))));
  return e;
}

std::string random_cube_view(const std::vector<std::uint64_t>& shape, const std::vector<std::uint64_t>& edges,
                             std::mt19937_64& rng) {
  std::string sel;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    std::uint64_t lo = std::uniform_int_distribution<std::uint64_t>(0, shape[d] - edges[d])(rng);
    sel += fmt::format("{}{}:{}", d ? "," : "", lo, lo + edges[d]);
  }
  return "box/" + sel;
}

std::string random_beam_view(const std::vector<std::uint64_t>& shape, std::uint32_t dim, std::mt19937_64& rng) {
  std::string sel;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    std::uint64_t i = std::uniform_int_distribution<std::uint64_t>(0, shape[d] - 1)(rng);
    sel += (d ? "," : "") + (d == dim ? std::string(":") : std::to_string(i));
  }
  return "box/" + sel;
}

layouts::Selection resolve_selection(const std::string& view, const std::vector<std::uint64_t>& shape,
                                     std::uint32_t itemsize) {
  // "plan/VIEW" is what the daemon resolves for A@/plan/VIEW.
  std::vector<std::string> parts = {"plan"};
  std::size_t at = 0;
  while (at <= view.size()) {
    std::size_t slash = view.find('/', at);
    if (slash == std::string::npos) slash = view.size();
    parts.push_back(view.substr(at, slash - at));
    at = slash + 1;
  }
  auto node = fs::resolve_view(parts, shape, itemsize, false);
  if (auto* e = std::get_if<fs::PathError>(&node)) throw std::invalid_argument(fmt::format("view {}: {}", view, e->message));
  const auto& n = std::get<fs::ViewNode>(node);
  if (!n.data) throw std::invalid_argument(fmt::format("view {} is not a data view", view));
  return n.data->selection;
}

std::vector<Workload> make_workloads(const WorkloadOptions& opt) {
  const auto& shape = opt.shape;
  const std::uint32_t n = std::uint32_t(shape.size());
  if (opt.plod > opt.itemsize)
    throw std::invalid_argument(fmt::format("--plod {}: at most the itemsize, {}", opt.plod, opt.itemsize));
  std::mt19937_64 rng(opt.seed);
  std::vector<Workload> out;
  for (std::uint32_t d = 0; d < n; ++d) {
    Workload w{fmt::format("beam{}", d), "beam", d, std::nullopt, std::nullopt, true, {}, {}};
    for (unsigned r = 0; r < opt.runs; ++r) w.views.push_back(random_beam_view(shape, d, rng));
    out.push_back(std::move(w));
  }
  for (std::uint32_t d = 0; d < n; ++d)
    out.push_back({fmt::format("slice{}", d), "slice", d, std::nullopt, std::nullopt, false, {middle_slice(shape, d)}, {}});
  for (double p : opt.cubes) {
    if (!(p > 0 && p <= 100)) throw std::invalid_argument(fmt::format("cube {}%: p must be in (0, 100]", p));
    Workload w{"cube" + percent_label(p), "cube", std::nullopt, p, std::nullopt, true, {}, {}};
    auto edges = cube_edges(shape, p);
    for (unsigned r = 0; r < opt.runs; ++r) w.views.push_back(random_cube_view(shape, edges, rng));
    out.push_back(std::move(w));
  }
  std::string all;
  for (std::uint32_t d = 0; d < n; ++d) all += d ? ",:" : ":";
  out.push_back({"full", "full", std::nullopt, std::nullopt, std::nullopt, false, {"box/" + all}, {}});
  if (opt.plod) {
    const std::uint32_t k = opt.plod;
    out.push_back({fmt::format("plod{}-full", k), "plod", std::nullopt, std::nullopt, k, false,
                   {fmt::format("plod/{}", k)}, {}});
    out.push_back({fmt::format("plod{}-slice0", k), "plod", 0u, std::nullopt, k, false,
                   {fmt::format("plod/{}@/{}", k, middle_slice(shape, 0))}, {}});
  }
  for (Workload& w : out)
    for (const std::string& v : w.views) w.selections.push_back(resolve_selection(v, shape, opt.itemsize));
  return out;
}

}  // namespace mmfs::bench
