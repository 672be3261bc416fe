// Encoding an mloc image (MlocImage::encode, fs/mloc/mloc_image.h): two passes
// over the array's rows, the bins and then the units, written to fresh extents
// through a window and flushed; nothing is committed here.
#include "fs/mloc/mloc_image.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>

#include "fs/mloc/mloc_brick_cache.h"
#include "fs/mloc/mloc_internal.h"
#include "fs/mloc/mloc_spill.h"
#include "layouts/cell_copy.h"
#include "layouts/layout.h"
#include "layouts/merge_gap.h"
#include "util/align.h"
#include "util/coding.h"

namespace mmfs::fs {

using layouts::MlocCatalog;
using layouts::MlocDirectory;
using layouts::MlocGrid;

namespace {

// The encoder's output window.
constexpr std::uint64_t kWriteWindow = 32ull << 20;

}  // namespace

int MlocImage::encode(const MlocParams& params, const RowReader& read, SpaceSource& allocator, SectorIo& io,
                      std::unique_ptr<MlocImage>* out, std::string* message) {
  const std::uint32_t item = indexes::itemsize(params.type);
  const bool f64 = params.type == indexes::ValueType::F64;
  std::vector<std::uint64_t> chunk = params.chunk.empty() ? MlocGrid::default_chunk(params.shape, item) : params.chunk;
  const auto& S = params.shape;
  const std::size_t n = S.size();
  std::uint64_t elements = 1;
  for (auto s : S) elements *= s;
  const std::uint64_t row_elems = elements / S[0];
  const std::uint64_t slab_rows = std::min(chunk[0], S[0]);
  AlignedBuffer slab(slab_rows * row_elems * item, AlignedBuffer::Uninitialized{});

  // Pass 1: the bins.
  auto spec = indexes::parse_bin_spec(params.bins);
  if (auto* why = std::get_if<std::string>(&spec)) {
    *message = "user.mmfs.bins: " + *why;
    return EINVAL;
  }
  indexes::BinningBuilder bb(params.type, std::get<indexes::BinSpec>(spec), elements);
  for (std::uint64_t r0 = 0; r0 < S[0]; r0 += slab_rows) {
    std::uint64_t rows = std::min(slab_rows, S[0] - r0);
    if (int r = read(r0, rows, slab.data(), message)) return r;
    bb.add(slab.data(), rows * row_elems);
  }
  auto binned = bb.finish();
  if (auto* why = std::get_if<std::string>(&binned)) {
    *message = "mloc bins: " + *why;
    return EINVAL;
  }
  indexes::Binning binning = std::get<indexes::Binning>(std::move(binned));
  std::optional<MlocGrid> grid;
  try {
    grid.emplace(S, item, f64, chunk, binning.bins(), params.priority);
  } catch (const std::exception& e) {
    *message = fmt::format("mloc: {}", e.what());
    return EINVAL;
  }
  const MlocGrid& g = *grid;
  layouts::CellGrid cells(S, item, g.chunk(), layouts::CellGrid::default_order(n));
  const std::uint64_t brick_n = g.brick_elements(), brick_bytes = brick_n * item;
  const std::size_t G = g.groups().size();

  // Pass 2: the units, packed.
  MlocDirectory dir;
  dir.shape = S;
  dir.chunk = g.chunk();
  dir.itemsize = item;
  dir.float64 = f64;
  dir.priority = params.priority;
  dir.bins = g.bins();
  dir.zstd_level = params.zstd_level;
  dir.value_type = std::uint32_t(params.type);
  dir.bin_lower = binning.lower();
  dir.positions.resize(std::size_t(g.bins()) * g.chunks());
  dir.units.resize(g.units());
  // The pieces go to the device a slab at a time, keyed by their place in
  // the image: the position lists (by entry), then the units (by unit).
  MlocSpill spill(allocator, io);
  const std::uint64_t unit_key0 = dir.positions.size();
  const std::uint64_t slab_chunks = g.chunks() / g.chunk_grid()[0];
  std::vector<AlignedBuffer> bricks(slab_chunks);
  // Per thread of on_two_threads (even chunks here, odd ones on the other):
  // a brick's bins and its split, reused from chunk to chunk.
  struct Scratch {
    std::vector<std::uint32_t> bins;
    layouts::MlocChunkSplit split;
    std::vector<MlocSpill::Piece> pieces;  // of this slab
  } scratch[2];
  for (std::uint64_t r0 = 0; r0 < S[0]; r0 += slab_rows) {
    std::uint64_t rows = std::min(slab_rows, S[0] - r0);
    if (int r = read(r0, rows, slab.data(), message)) return r;
    const std::uint64_t first_cell = (r0 / g.chunk()[0]) * slab_chunks;
    for (auto& b : bricks)
      if (b.size() != brick_bytes) b = AlignedBuffer(brick_bytes);
    layouts::for_each_cell_segment(cells, r0 * row_elems * item, rows * row_elems * item,
                                   [&](std::uint64_t cell, std::span<const std::uint64_t>, std::uint64_t in_cell,
                                       std::uint64_t in_range, std::uint64_t bytes) {
                                     std::memcpy(bricks[cell - first_cell].data() + in_cell, slab.data() + in_range,
                                                 bytes);
                                   });
    mloc_detail::on_two_threads(slab_chunks, [&](std::size_t i) {
      std::vector<std::uint64_t> cc(n);
      std::uint64_t linear = first_cell + i;
      for (std::size_t d = n; d-- > 0;) {
        cc[d] = linear % g.chunk_grid()[d];
        linear /= g.chunk_grid()[d];
      }
      const std::uint64_t rank = g.rank_of(cc);
      std::vector<std::uint32_t>& bins = scratch[i % 2].bins;
      bins.resize(brick_n);
      binning.bins_of(bricks[i].data(), brick_n, bins.data());
      layouts::mloc_mark_padding(g, rank, bins.data());
      layouts::MlocChunkSplit& split = scratch[i % 2].split;
      layouts::mloc_split_chunk(g, bricks[i].data(), brick_n, bins.data(), &split);
      for (std::uint32_t b = 0; b < g.bins(); ++b) {
        const std::uint64_t e = g.position_entry(b, rank);
        // A bin the chunk has no values of: nothing stored, every entry
        // zero (the directory then leaves it out; no read asks for it).
        if (split.positions[b].empty()) continue;
        auto raw = layouts::mloc_encode_positions(split.positions[b]);
        std::vector<MlocSpill::Piece>& pieces = scratch[i % 2].pieces;
        const std::vector<std::byte>& list = pieces.emplace_back(MlocSpill::Piece{e, layouts::mloc_pack(raw, params.zstd_level)}).bytes;
        dir.positions[e] = {std::uint32_t(split.positions[b].size()), std::uint32_t(raw.size()),
                            std::uint32_t(list.size()), layouts::mloc_checksum(list)};
        for (std::size_t k = 0; k < G; ++k) {
          const std::uint64_t u = g.unit(b, std::uint32_t(k), rank);
          const std::vector<std::byte>& unit =
              pieces.emplace_back(MlocSpill::Piece{unit_key0 + u, layouts::mloc_pack(split.planes[b * G + k], params.zstd_level)}).bytes;
          dir.units[u] = {std::uint32_t(unit.size()), layouts::mloc_checksum(unit)};
        }
      }
    });
    std::vector<MlocSpill::Piece>& pieces = scratch[0].pieces;
    pieces.insert(pieces.end(), std::make_move_iterator(scratch[1].pieces.begin()),
                  std::make_move_iterator(scratch[1].pieces.end()));
    scratch[1].pieces.clear();
    if (int r = spill.add_run(pieces, message)) return r;
  }
  const std::uint32_t ss = io.sector_size();
  dir.locate(ss);
  std::string header = dir.encode();

  // The image, written whole to fresh extents.
  std::vector<Extent> extents;
  layouts::SpaceRequest req;
  req.sectors = util::div_up(dir.image_bytes, ss);
  int allocated = allocator.allocate(req, &extents);
  if (allocated == ENOSPC && spill.runs() != spill.runs_in_memory()) {
    // No room beside the pieces' temporary sectors: the pieces come into
    // memory (as large as the image) and free them.
    if (int r = spill.hold_all(message)) return r;
    allocated = allocator.allocate(req, &extents);
  }
  if (int r = allocated) {
    *message = fmt::format("the mloc image needs {} MiB on the device; {} MiB are free", req.sectors * ss >> 20,
                           allocator.free_sectors() * ss >> 20);
    return r;
  }
  std::unique_ptr<MlocImage> m(new MlocImage(io));
  m->extents_ = std::move(extents);
  AlignedBuffer window(kWriteWindow);
  std::uint64_t window_start = 0, filled = 0;
  auto flush_window = [&]() -> int {
    if (filled == 0) return 0;
    std::uint64_t bytes = util::align_up(filled, ss);
    std::memset(window.data() + filled, 0, bytes - filled);
    std::vector<Piece> span{{window_start, bytes, 0}};
    std::vector<std::pair<geom::Lbn, std::uint64_t>> runs;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
    m->sector_runs(span, &runs, &spans);
    std::vector<SectorRun> w;
    std::byte* src = window.data();
    for (auto [lbn, s] : runs) {
      w.push_back({lbn, s, src});
      src += s * ss;
    }
    window_start += bytes;
    filled = 0;
    return io.write(w);
  };
  auto append = [&](const std::byte* p, std::uint64_t bytes) -> int {
    while (bytes > 0) {
      std::uint64_t take = std::min(bytes, kWriteWindow - filled);
      std::memcpy(window.data() + filled, p, take);
      filled += take;
      p += take;
      bytes -= take;
      if (filled == kWriteWindow)
        if (int r = flush_window()) return r;
    }
    return 0;
  };
  int r = append(reinterpret_cast<const std::byte*>(header.data()), header.size());
  std::vector<std::byte> pad(dir.positions_start - header.size());
  if (!r) r = append(pad.data(), pad.size());
  if (!r) r = spill.merge([&](std::span<const std::byte> piece) { return append(piece.data(), piece.size()); }, message);
  if (!r) r = flush_window();
  if (!r) r = io.flush();
  if (r) {
    m->release(allocator);
    *message = "writing the mloc image failed";
    return r;
  }
  m->grid_.emplace(std::move(g));
  m->cells_.emplace(S, item, m->grid_->chunk(), layouts::CellGrid::default_order(n));
  m->binning_.emplace(std::move(binning));
  m->header_hash_ = XXH3_64bits(header.data(), header.size());
  auto kept = std::make_shared<const std::string>(std::move(header));
  m->dir_ = MlocCatalog::decode(*kept, ss, kept);
  if (!m->dir_) {  // a bug of the encoder: the image is not committed
    m->release(allocator);
    *message = "mloc: the encoder wrote a directory it cannot read";
    return EIO;
  }
  m->choose_merge_gap();
  *out = std::move(m);
  return 0;
}

}  // namespace mmfs::fs
