#include "bench/baselines.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "bench/fresh_allocation.h"
#include "layouts/io_plan.h"
#include "layouts/layout.h"

namespace mmfs::bench {
namespace {

// One request never spans more than this (Request::sectors is 32 bits).
constexpr std::uint64_t kMaxRequestSectors = 1ull << 30;

// Indices a range selects, ascending.
std::vector<std::uint64_t> indices(const layouts::DimRange& r) {
  std::vector<std::uint64_t> v;
  v.reserve(r.count());
  for (std::uint64_t i = r.start; i < r.stop; i += r.step) v.push_back(i);
  return v;
}

class ContiguousTarget final : public Target {
 public:
  ContiguousTarget(const geom::Geometry& geometry, std::vector<std::uint64_t> shape, std::uint32_t itemsize,
                   geom::Lbn first_lbn)
      : geometry_(geometry), shape_(std::move(shape)), itemsize_(itemsize), page_(library_page_bytes(geometry)) {
    std::uint64_t bytes = itemsize_;
    for (std::uint64_t s : shape_) bytes *= s;
    pages_ = (bytes + page_ - 1) / page_;
    layouts::SpaceRequest req;
    req.shape = layouts::SpaceShape::Runs;
    req.sectors = (pages_ * page_ + geometry.sector_size() - 1) / geometry.sector_size();
    extents_ = allocate_fresh(geometry, req, first_lbn);
  }
  std::string name() const override { return "contiguous"; }
  std::string kind() const override { return "baseline"; }
  std::string label() const override { return "contiguous (h5py contiguous / numpy memmap)"; }

  layouts::IoPlan plan(const layouts::Selection& selection) const override {
    layouts::IoPlan p;
    const std::uint32_t ss = geometry_.sector_size();
    for (const PageRun& run : contiguous_page_runs(shape_, itemsize_, page_, selection)) {
      p.cells += run.count;
      // File sectors [s, e) of the pages, mapped through the extents.
      std::uint64_t s = run.first * page_ / ss, e = ((run.first + run.count) * page_ + ss - 1) / ss;
      std::uint64_t base = 0;
      for (const layouts::Extent& x : extents_) {
        std::uint64_t lo = std::max(s, base), hi = std::min(e, base + x.sectors);
        for (std::uint64_t at = lo; at < hi;) {
          std::uint64_t n = std::min(hi - at, kMaxRequestSectors);
          p.batches.push_back({{geom::Request{x.start + (at - base), std::uint32_t(n)}}});
          ++p.requests;
          p.sectors += n;
          at += n;
        }
        base += x.sectors;
      }
    }
    p.bytes_read = p.sectors * ss;
    p.bytes_useful = selection.elements() * itemsize_;
    layouts::model_plan(p, geometry_);
    return p;
  }
  nlohmann::json describe() const override {
    return {{"model", "C-order bytes from one extent start; merged page runs, one request at a time, file order"},
            {"page_bytes", page_},
            {"unit", fmt::format("{} B page", page_)},
            {"first_lbn", extents_.front().start},
            {"extents", extents_.size()}};
  }

 private:
  const geom::Geometry& geometry_;
  std::vector<std::uint64_t> shape_;
  std::uint32_t itemsize_, page_;
  std::uint64_t pages_ = 0;
  std::vector<layouts::Extent> extents_;
};

class ChunkedTarget final : public Target {
 public:
  ChunkedTarget(const geom::Geometry& geometry, std::unique_ptr<layouts::Layout> chunks)
      : geometry_(geometry), chunks_(std::move(chunks)) {}
  std::string name() const override { return "chunked"; }
  std::string kind() const override { return "baseline"; }
  std::string label() const override {
    return fmt::format("chunked {} (h5py chunked / zarr)", layouts::join(chunks_->grid().cell()));
  }
  layouts::IoPlan plan(const layouts::Selection& selection) const override {
    layouts::PlanOptions library;
    library.order = layouts::IssueOrder::Lbn;  // file order: the chunks' C order
    library.queue_depth = 1;                    // synchronous reads
    layouts::IoPlan p = layouts::plan_selection(*chunks_, selection, library);
    layouts::model_plan(p, geometry_);
    return p;
  }
  nlohmann::json describe() const override {
    return {{"model", "whole chunks in C order of the chunk grid; contiguous chunks one request, one at a time"},
            {"chunk", chunks_->grid().cell()},
            {"chunk_bytes", chunks_->grid().cell_bytes()},
            {"unit", fmt::format("{} chunk", layouts::join(chunks_->grid().cell()))},
            {"first_lbn", chunks_->extents().front().start},
            {"extents", chunks_->extents().size()}};
  }

 private:
  const geom::Geometry& geometry_;
  std::unique_ptr<layouts::Layout> chunks_;
};

}  // namespace

std::uint32_t library_page_bytes(const geom::Geometry& geometry) {
  return std::max<std::uint32_t>(4096, geometry.sector_size());
}

std::vector<PageRun> contiguous_page_runs(const std::vector<std::uint64_t>& shape, std::uint32_t itemsize,
                                          std::uint32_t page_bytes, const layouts::Selection& selection) {
  const std::size_t n = shape.size();
  const auto& dims = selection.dims();
  if (dims.size() != n) throw std::invalid_argument("selection and shape differ in rank");
  std::vector<PageRun> runs;
  if (selection.elements() == 0) return runs;
  std::vector<std::uint64_t> stride(n, 1);  // in elements
  for (std::size_t d = n - 1; d > 0; --d) stride[d - 1] = stride[d] * shape[d];
  auto add = [&](std::uint64_t first_byte, std::uint64_t bytes) {
    std::uint64_t a = first_byte / page_bytes, b = (first_byte + bytes - 1) / page_bytes + 1;
    // Offsets ascend (C-order enumeration), so a run can only touch the last one.
    if (!runs.empty() && a <= runs.back().first + runs.back().count) {
      runs.back().count = std::max(runs.back().first + runs.back().count, b) - runs.back().first;
      return;
    }
    runs.push_back({a, b - a});
  };
  // Odometer over the leading dimensions; the last dimension gives the runs.
  std::vector<std::vector<std::uint64_t>> idx(n);
  for (std::size_t d = 0; d + 1 < n; ++d) idx[d] = indices(dims[d]);
  const layouts::DimRange& last = dims[n - 1];
  std::vector<std::size_t> at(n, 0);
  while (true) {
    std::uint64_t row = 0;
    for (std::size_t d = 0; d + 1 < n; ++d) row += idx[d][at[d]] * stride[d];
    if (last.step == 1) {
      add((row + last.start) * itemsize, last.count() * itemsize);
    } else {
      for (std::uint64_t i = last.start; i < last.stop; i += last.step) add((row + i) * itemsize, itemsize);
    }
    std::size_t d = n - 1;
    while (d > 0) {
      --d;
      if (++at[d] < idx[d].size()) break;
      at[d] = 0;
      if (d == 0) return runs;
    }
    if (n == 1) return runs;
  }
}

std::unique_ptr<Target> make_contiguous_target(const geom::Geometry& geometry, const std::vector<std::uint64_t>& shape,
                                               std::uint32_t itemsize, geom::Lbn first_lbn) {
  return std::make_unique<ContiguousTarget>(geometry, shape, itemsize, first_lbn);
}

std::vector<std::uint64_t> library_chunk(const std::vector<std::uint64_t>& shape, std::uint64_t edge) {
  std::vector<std::uint64_t> c(shape.size());
  for (std::size_t d = 0; d < shape.size(); ++d) c[d] = std::min(edge, shape[d]);
  return c;
}

std::unique_ptr<Target> make_chunked_target(const geom::Geometry& geometry, const std::vector<std::uint64_t>& shape,
                                            std::uint32_t itemsize, std::uint64_t chunk_edge, geom::Lbn first_lbn) {
  // The naive layout with the default order ranks cells in C order of the
  // grid: exactly the chunks' file order.
  auto layout = layouts::make_layout(
      "naive", geometry,
      layouts::CellGrid(shape, itemsize, library_chunk(shape, chunk_edge), layouts::CellGrid::default_order(shape.size())));
  layout->place(allocate_fresh(geometry, layout->space(), first_lbn));
  return std::make_unique<ChunkedTarget>(geometry, std::move(layout));
}

}  // namespace mmfs::bench
