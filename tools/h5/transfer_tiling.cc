#include "tools/h5/transfer_tiling.h"

#include <algorithm>
#include <stdexcept>

namespace mmfs::h5 {

namespace {

std::uint64_t mul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) throw std::invalid_argument("array size does not fit in 64 bits");
  return r;
}

std::uint64_t product(const std::vector<std::uint64_t>& v) {
  std::uint64_t p = 1;
  for (auto x : v) p = mul(p, x);
  return p;
}

}  // namespace

std::uint64_t Box::elements() const {
  std::uint64_t p = 1;
  for (auto c : count) p *= c;
  return p;
}

TransferTiling::TransferTiling(std::span<const std::uint64_t> shape, std::uint32_t itemsize,
                               std::span<const std::uint64_t> chunk, std::uint64_t budget_bytes)
    : shape_(shape.begin(), shape.end()), itemsize_(itemsize) {
  if (chunk.size() != shape.size()) throw std::invalid_argument("chunk rank differs from the array's");
  if (itemsize == 0) throw std::invalid_argument("itemsize 0");
  const std::size_t n = shape.size();
  for (std::size_t d = 0; d < n; ++d)
    if (shape[d] == 0 || chunk[d] == 0) throw std::invalid_argument("a dimension or chunk length is 0");
  total_bytes_ = mul(product(shape_), itemsize);

  stride_.assign(n, 1);
  for (std::size_t d = n; d-- > 1;) stride_[d - 1] = stride_[d] * shape_[d];

  // Start from one chunk, widen from the last dimension backwards (see the header).
  box_.resize(n);
  for (std::size_t d = 0; d < n; ++d) box_[d] = std::min(chunk[d], shape[d]);
  const std::uint64_t budget_elements = std::max<std::uint64_t>(1, budget_bytes / itemsize);
  for (std::size_t d = n; d-- > 0;) {
    const std::uint64_t others = product(box_) / box_[d];  // elements of one slice across d
    if (shape_[d] <= budget_elements / others) {
      box_[d] = shape_[d];  // the whole dimension fits: keep widening earlier ones
      continue;
    }
    const std::uint64_t step = std::min(chunk[d], shape_[d]);
    const std::uint64_t chunks = budget_elements / others / step;
    if (chunks > 1) box_[d] = std::min(chunks * step, shape_[d]);
    break;  // this dimension is not whole: widening earlier ones would cut runs
  }

  grid_.resize(n);
  box_count_ = 1;
  for (std::size_t d = 0; d < n; ++d) {
    grid_[d] = (shape_[d] + box_[d] - 1) / box_[d];
    box_count_ *= grid_[d];
  }
}

Box TransferTiling::box(std::uint64_t index) const {
  if (index >= box_count_) throw std::out_of_range("box index beyond the tiling");
  const std::size_t n = shape_.size();
  Box b{std::vector<std::uint64_t>(n), std::vector<std::uint64_t>(n)};
  for (std::size_t d = n; d-- > 0;) {
    const std::uint64_t g = index % grid_[d];
    index /= grid_[d];
    b.start[d] = g * box_[d];
    b.count[d] = std::min(box_[d], shape_[d] - b.start[d]);
  }
  return b;
}

std::uint64_t TransferTiling::max_box_bytes() const { return product(box_) * itemsize_; }

int TransferTiling::split_dim(const Box& b) const {
  for (std::size_t d = shape_.size(); d-- > 0;)
    if (b.count[d] != shape_[d]) return static_cast<int>(d);
  return -1;
}

std::uint64_t TransferTiling::run_length(const Box& b) const {
  const int k = split_dim(b);
  if (k < 0) return total_bytes_;
  return b.count[static_cast<std::size_t>(k)] * stride_[static_cast<std::size_t>(k)] * itemsize_;
}

std::uint64_t TransferTiling::run_count(const Box& b) const {
  const int k = split_dim(b);
  std::uint64_t runs = 1;
  for (int d = 0; d < k; ++d) runs *= b.count[static_cast<std::size_t>(d)];
  return runs;
}

std::vector<Run> TransferTiling::runs(const Box& b) const {
  std::vector<Run> out;
  for_each_run(b, [&](const Run& r) { out.push_back(r); });
  return out;
}

}  // namespace mmfs::h5
