#include "layouts/mloc.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "layouts/cell_grid.h"
#include "layouts/curve_order.h"

namespace mmfs::layouts {

std::optional<MlocPriority> parse_mloc_priority(std::string_view text) {
  if (text.size() != 5 || text[1] != '-' || text[3] != '-') return std::nullopt;
  MlocPriority p{MlocLevel(text[0]), MlocLevel(text[2]), MlocLevel(text[4])};
  std::string seen;
  for (MlocLevel l : p) {
    if (l != MlocLevel::Value && l != MlocLevel::Precision && l != MlocLevel::Space) return std::nullopt;
    if (seen.find(char(l)) != std::string::npos) return std::nullopt;
    seen.push_back(char(l));
  }
  return p;
}

std::string mloc_priority_text(const MlocPriority& p) {
  return fmt::format("{}-{}-{}", char(p[0]), char(p[1]), char(p[2]));
}

std::vector<MlocByteGroup> mloc_byte_groups(std::uint32_t itemsize, bool float64) {
  std::vector<MlocByteGroup> g;
  std::uint32_t rank = 0;
  // float64: sign, exponent and the top 4 fraction bits in the first two
  // bytes (one byte alone would not even hold the whole exponent).
  if (float64 && itemsize == 8) {
    g.push_back({0, 2});
    rank = 2;
  }
  for (; rank < itemsize; ++rank) g.push_back({rank, 1});
  return g;
}

std::uint32_t mloc_groups_for_bytes(std::span<const MlocByteGroup> groups, std::uint32_t keep) {
  if (keep == 0) return std::uint32_t(groups.size());
  std::uint32_t n = 0;
  for (const MlocByteGroup& g : groups) {
    if (g.first_rank >= keep) break;
    ++n;
  }
  return n;
}

std::vector<std::uint64_t> MlocGrid::default_chunk(std::span<const std::uint64_t> shape, std::uint32_t itemsize) {
  std::vector<std::uint32_t> order = CellGrid::default_order(shape.size());
  return CellGrid::default_cell(shape, itemsize, std::uint32_t(kDefaultChunkBytes), order);
}

MlocGrid::MlocGrid(std::vector<std::uint64_t> shape, std::uint32_t itemsize, bool float64,
                   std::vector<std::uint64_t> chunk, std::uint32_t bins, MlocPriority priority)
    : shape_(std::move(shape)), chunk_(std::move(chunk)), itemsize_(itemsize), bins_(bins), priority_(priority) {
  if (shape_.empty() || shape_.size() > 16) throw std::invalid_argument("shape must have 1 to 16 dimensions");
  if (itemsize_ == 0 || itemsize_ > 8) throw std::invalid_argument("itemsize must be 1 to 8 bytes");
  groups_ = mloc_byte_groups(itemsize, float64);
  if (chunk_.size() != shape_.size())
    throw std::invalid_argument(fmt::format("chunk has {} dimensions, shape has {}", chunk_.size(), shape_.size()));
  if (bins_ == 0) throw std::invalid_argument("mloc needs at least one value bin");
  std::uint64_t per_chunk = 1;
  for (std::size_t d = 0; d < shape_.size(); ++d) {
    if (shape_[d] == 0 || chunk_[d] == 0) throw std::invalid_argument("shape and chunk extents must be positive");
    chunk_[d] = std::min(chunk_[d], shape_[d]);
    grid_.push_back((shape_[d] + chunk_[d] - 1) / chunk_[d]);
    chunks_ *= grid_.back();
    elements_ *= shape_[d];
    per_chunk *= chunk_[d];
  }
  brick_ = per_chunk;
  if (per_chunk >= kMaxChunkElements)
    throw std::invalid_argument(fmt::format("a chunk of {} elements is larger than mloc's {}", per_chunk,
                                            kMaxChunkElements));
  if (units() > kMaxUnits || units() / bins_ / groups_.size() != chunks_)
    throw std::invalid_argument(fmt::format("{} chunks x {} bins x {} byte groups are more than mloc's {} units: "
                                            "use a larger user.mmfs.chunk or fewer bins",
                                            chunks_, bins_, groups_.size(), kMaxUnits));
  HilbertOrder curve(grid_);
  rank_coords_.resize(chunks_ * dims());
  rank_of_linear_.resize(chunks_);
  curve.for_each([&](std::uint64_t rank, std::span<const std::uint64_t> c) {
    std::copy(c.begin(), c.end(), rank_coords_.begin() + rank * dims());
    std::uint64_t linear = 0;
    for (std::size_t d = 0; d < dims(); ++d) linear = linear * grid_[d] + c[d];
    rank_of_linear_[linear] = rank;
  });
  // Strides of the levels, the last named innermost.
  std::array<std::uint64_t, 3> extent{bins_, groups_.size(), chunks_};
  auto level_index = [](MlocLevel l) { return l == MlocLevel::Value ? 0 : l == MlocLevel::Precision ? 1 : 2; };
  std::uint64_t stride = 1;
  for (int i = 2; i >= 0; --i) {
    int l = level_index(priority_[i]);
    stride_[l] = stride;
    stride *= extent[l];
  }
}

std::uint64_t MlocGrid::rank_of(std::span<const std::uint64_t> chunk_coords) const {
  std::uint64_t linear = 0;
  for (std::size_t d = 0; d < dims(); ++d) {
    if (chunk_coords[d] >= grid_[d]) throw std::out_of_range("chunk coordinate outside the chunk grid");
    linear = linear * grid_[d] + chunk_coords[d];
  }
  return rank_of_linear_[linear];
}

void MlocGrid::chunk_box(std::uint64_t rank, std::uint64_t* lo, std::uint64_t* extent) const {
  auto c = coords_of(rank);
  for (std::size_t d = 0; d < dims(); ++d) {
    lo[d] = c[d] * chunk_[d];
    extent[d] = std::min(chunk_[d], shape_[d] - lo[d]);
  }
}

std::uint64_t MlocGrid::chunk_elements(std::uint64_t rank) const {
  auto c = coords_of(rank);
  std::uint64_t n = 1;
  for (std::size_t d = 0; d < dims(); ++d) n *= std::min(chunk_[d], shape_[d] - c[d] * chunk_[d]);
  return n;
}

std::uint64_t MlocGrid::unit(std::uint32_t bin, std::uint32_t group, std::uint64_t rank) const {
  return bin * stride_[0] + group * stride_[1] + rank * stride_[2];
}

}  // namespace mmfs::layouts
