#include "layouts/selection.h"

namespace mmfs::layouts {

Selection Selection::all(std::span<const std::uint64_t> shape) {
  std::vector<DimRange> d;
  for (std::uint64_t s : shape) d.push_back({0, s, 1, false});
  return Selection(std::move(d));
}

Selection Selection::slice(std::span<const std::uint64_t> shape, std::size_t dim, std::uint64_t index) {
  Selection s = all(shape);
  s.dims_[dim] = {index, index + 1, 1, true};
  return s;
}

Selection Selection::beam(std::span<const std::uint64_t> shape, std::span<const std::uint64_t> at,
                          std::size_t free_dim) {
  std::vector<DimRange> d;
  for (std::size_t i = 0; i < shape.size(); ++i)
    d.push_back(i == free_dim ? DimRange{0, shape[i], 1, false} : DimRange{at[i], at[i] + 1, 1, true});
  return Selection(std::move(d));
}

Selection Selection::box(std::span<const std::uint64_t> lo, std::span<const std::uint64_t> hi) {
  std::vector<DimRange> d;
  for (std::size_t i = 0; i < lo.size(); ++i) d.push_back({lo[i], hi[i], 1, false});
  return Selection(std::move(d));
}

std::uint64_t Selection::elements() const {
  std::uint64_t n = 1;
  for (const DimRange& r : dims_) n *= r.count();
  return n;
}

std::vector<std::uint64_t> Selection::result_shape() const {
  std::vector<std::uint64_t> s;
  for (const DimRange& r : dims_)
    if (!r.fixed) s.push_back(r.count());
  return s;
}

std::vector<std::uint64_t> cells_touched(const DimRange& r, std::uint64_t cell) {
  std::vector<std::uint64_t> out;
  if (r.count() == 0) return out;
  if (r.step <= cell) {
    // Every cell between the first and the last element is touched.
    std::uint64_t last = r.start + (r.count() - 1) * r.step;
    for (std::uint64_t c = r.start / cell; c <= last / cell; ++c) out.push_back(c);
    return out;
  }
  for (std::uint64_t i = r.start; i < r.stop; i += r.step) out.push_back(i / cell);  // distinct: step > cell
  return out;
}

}  // namespace mmfs::layouts
