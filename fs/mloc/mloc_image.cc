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

// Chunks decoded per device batch (bricks of all of them are held at once;
// two batches are in flight, one reading and one decoding). Smaller batches
// start decoding sooner, larger ones merge more units into one request:
// 32 MiB read a 2 GiB array fastest (docs/benchmarks/mmfs-bench-mloc.md).
constexpr std::uint64_t kBatchBrickBytes = 32ull << 20;

struct Record {
  std::uint64_t header_bytes = 0, header_hash = 0, image_bytes = 0;
};

std::string encode_record(const Record& r) {
  std::string s;
  util::append_le64(s, r.header_bytes);
  util::append_le64(s, r.header_hash);
  util::append_le64(s, r.image_bytes);
  return s;
}

std::optional<Record> decode_record(std::string_view s) {
  if (s.size() != 24) return std::nullopt;
  Record r;
  r.header_bytes = util::get_le64(s.data());
  r.header_hash = util::get_le64(s.data() + 8);
  r.image_bytes = util::get_le64(s.data() + 16);
  return r;
}

// The image's keys: its own, or (slot > 0) those of the array's mloc copy in that slot.
std::string record_key(Ino ino, std::uint8_t slot) {
  return slot ? keys::copy_mloc_record(ino, slot) : keys::mloc_record(ino);
}
std::string extents_key(Ino ino, std::uint8_t slot) {
  return slot ? keys::copy_extents(ino, slot) : keys::mloc_extents(ino);
}

}  // namespace

int mloc_params(std::vector<std::uint64_t> shape, std::string_view dtype, std::vector<std::uint64_t> chunk,
                std::string_view priority, std::string_view compress, std::string bins, MlocParams* out,
                std::string* message) {
  MlocParams p;
  p.shape = std::move(shape);
  p.chunk = std::move(chunk);
  auto t = indexes::value_type(dtype);
  if (!t) {
    *message = fmt::format("mloc: unknown dtype '{}'", dtype);
    return EINVAL;
  }
  p.type = *t;
  auto pr = layouts::parse_mloc_priority(priority);
  if (!pr) {
    *message = fmt::format("user.mmfs.priority: '{}' is not a permutation of V-M-S", priority);
    return EINVAL;
  }
  p.priority = *pr;
  if (compress == "none") {
    p.zstd_level = 0;
  } else if (compress == "zstd") {
    p.zstd_level = 3;
  } else if (compress.substr(0, 5) == "zstd:") {
    p.zstd_level = std::atoi(std::string(compress.substr(5)).c_str());
    if (p.zstd_level < 1 || p.zstd_level > 22) {
      *message = fmt::format("user.mmfs.compress: '{}' (zstd levels are 1 to 22)", compress);
      return EINVAL;
    }
  } else {
    *message = fmt::format("user.mmfs.compress: '{}' (none or zstd[:LEVEL])", compress);
    return EINVAL;
  }
  // MLOC bins equal-frequency by default (the paper's choice), whatever the dtype.
  p.bins = bins.empty() ? "100" : std::move(bins);
  *out = std::move(p);
  return 0;
}

MlocImage::MlocImage(SectorIo& io) : io_(io), cache_owner_(MlocBrickCache::new_owner()) {}

MlocImage::~MlocImage() { MlocBrickCache::shared().drop(cache_owner_); }

int MlocImage::empty(const MlocParams& params, SectorIo& io, std::unique_ptr<MlocImage>* out, std::string* message) {
  std::unique_ptr<MlocImage> m(new MlocImage(io));
  const std::uint32_t item = indexes::itemsize(params.type);
  std::vector<std::uint64_t> chunk = params.chunk.empty() ? MlocGrid::default_chunk(params.shape, item) : params.chunk;
  try {
    m->grid_.emplace(params.shape, item, params.type == indexes::ValueType::F64, chunk, 1, params.priority);
    m->cells_.emplace(params.shape, item, m->grid_->chunk(), layouts::CellGrid::default_order(params.shape.size()));
  } catch (const std::exception& e) {
    *message = fmt::format("mloc: {}", e.what());
    return EINVAL;
  }
  *out = std::move(m);
  return 0;
}

int MlocImage::load(Metadata& metadata, SectorIo& io, Ino ino, const MlocParams& params,
                    std::unique_ptr<MlocImage>* out, std::string* message, std::uint8_t slot,
                    const std::vector<Extent>* own) {
  out->reset();
  auto rec_bytes = metadata.store().get(record_key(ino, slot));
  if (!rec_bytes) return 0;
  auto rec = decode_record(*rec_bytes);
  auto ext_bytes = metadata.store().get(extents_key(ino, slot));
  std::optional<std::vector<Extent>> extents;
  if (ext_bytes) extents = decode_extents(*ext_bytes);
  if (!rec || !extents) {
    *message = "the mloc image's record or extent map is malformed (run mmfsck)";
    return EUCLEAN;
  }
  if (own) extents = *own;
  const std::uint32_t ss = io.sector_size();
  std::uint64_t sectors = 0;
  for (const Extent& e : *extents) sectors += e.sectors;
  if (rec->header_bytes == 0 || rec->image_bytes < rec->header_bytes || sectors * ss < rec->image_bytes) {
    *message = "the mloc image's record does not fit its extents (run mmfsck)";
    return EUCLEAN;
  }
  std::unique_ptr<MlocImage> m(new MlocImage(io));
  m->extents_ = std::move(*extents);
  // The directory: the image's first bytes.
  std::vector<Piece> pieces{{0, rec->header_bytes, 0}};
  AlignedBuffer buf;
  std::uint64_t got = 0;
  if (int r = m->fetch(pieces, &buf, &got, nullptr)) {
    *message = "reading the mloc image's directory failed";
    return r;
  }
  std::string_view header(reinterpret_cast<const char*>(buf.data()) + pieces[0].at, rec->header_bytes);
  if (XXH3_64bits(header.data(), header.size()) != rec->header_hash) {
    *message = "the mloc image's directory failed its checksum (the device returned other bytes than were written)";
    return EIO;
  }
  // Read in place: the catalog keeps the fetched bytes.
  auto dir = MlocCatalog::decode(header, ss, std::make_shared<AlignedBuffer>(std::move(buf)));
  if (!dir || dir->image_bytes() != rec->image_bytes || dir->header().shape != params.shape ||
      dir->header().itemsize != indexes::itemsize(params.type)) {
    *message = "the mloc image's directory does not describe this array (run mmfsck)";
    return EUCLEAN;
  }
  m->grid_.emplace(dir->grid());
  m->header_hash_ = rec->header_hash;
  const layouts::MlocHeader& head = dir->header();
  m->cells_.emplace(head.shape, head.itemsize, m->grid_->chunk(), layouts::CellGrid::default_order(head.shape.size()));
  std::vector<std::uint64_t> lower = head.bin_lower;
  auto type = indexes::ValueType(head.value_type);
  if (lower.empty() || head.value_type != std::uint32_t(params.type)) {
    *message = "the mloc image's bins are malformed (run mmfsck)";
    return EUCLEAN;
  }
  try {
    m->binning_.emplace(type, std::move(lower));
  } catch (const std::exception&) {
    *message = "the mloc image's bins are malformed (run mmfsck)";
    return EUCLEAN;
  }
  if (m->binning_->bins() != head.bins) {
    *message = "the mloc image's bins disagree with its directory (run mmfsck)";
    return EUCLEAN;
  }
  m->dir_ = std::move(dir);
  m->choose_merge_gap();
  *out = std::move(m);
  return 0;
}

void MlocImage::choose_merge_gap() {
  // Two pieces are read as one request through the gap between them when
  // the volume's model serves that no slower than two requests
  // (layouts/merge_gap.h), for pieces of this image's mean stored size.
  if (!dir_) return;
  const layouts::MlocGrid& g = *grid_;
  const std::uint64_t pieces = dir_->lists() * (1 + g.groups().size());
  const std::uint64_t bytes = dir_->image_bytes() - dir_->positions_start();
  const std::uint64_t ss = io_.sector_size();
  const std::uint64_t mean_sectors = pieces ? util::div_up(bytes / pieces, ss) : 1;
  merge_gap_sectors_ = layouts::merge_gap_sectors(io_.geometry(), std::uint32_t(std::max<std::uint64_t>(1, mean_sectors)),
                                                  layouts::Layout::kPlanDepth);
}

std::uint64_t MlocImage::device_bytes() const {
  std::uint64_t s = 0;
  for (const Extent& e : extents_) s += e.sectors;
  return s * io_.sector_size();
}

void MlocImage::sector_runs(const std::vector<Piece>& pieces, std::vector<std::pair<geom::Lbn, std::uint64_t>>* runs,
                            std::vector<std::pair<std::uint64_t, std::uint64_t>>* spans) const {
  // Image sector ranges first (merged), then mapped onto the extents.
  const std::uint64_t ss = io_.sector_size();
  spans->clear();
  for (const Piece& p : pieces) {
    if (p.bytes == 0) continue;
    std::uint64_t lo = p.offset / ss, hi = util::div_up(p.offset + p.bytes, ss);
    if (!spans->empty() && lo <= spans->back().second + merge_gap_sectors_) {
      spans->back().second = std::max(spans->back().second, hi);
    } else {
      spans->push_back({lo, hi});
    }
  }
  runs->clear();
  std::size_t e = 0;
  std::uint64_t e_start = 0;
  for (auto [lo, hi] : *spans) {
    while (e < extents_.size() && e_start + extents_[e].sectors <= lo) e_start += extents_[e++].sectors;
    std::uint64_t s = lo;
    std::size_t f = e;
    std::uint64_t f_start = e_start;
    while (s < hi && f < extents_.size()) {
      std::uint64_t take = std::min(hi, f_start + extents_[f].sectors) - s;
      geom::Lbn lbn = extents_[f].start + (s - f_start);
      if (!runs->empty() && runs->back().first + runs->back().second == lbn)
        runs->back().second += take;
      else
        runs->push_back({lbn, take});
      s += take;
      if (s < hi) f_start += extents_[f++].sectors;
    }
  }
}

int MlocImage::fetch(std::vector<Piece>& pieces, AlignedBuffer* buffer, std::uint64_t* bytes_read,
                     std::vector<geom::Request>* trace) const {
  const std::uint64_t ss = io_.sector_size();
  std::vector<std::size_t> order(pieces.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return pieces[a].offset < pieces[b].offset; });
  std::vector<Piece> sorted;
  sorted.reserve(pieces.size());
  for (auto i : order) sorted.push_back(pieces[i]);
  std::vector<std::pair<geom::Lbn, std::uint64_t>> runs;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
  sector_runs(sorted, &runs, &spans);
  std::uint64_t total = 0;
  for (auto [lo, hi] : spans) total += hi - lo;
  if (buffer->size() < std::max<std::uint64_t>(total * ss, ss))
    *buffer = AlignedBuffer(std::max<std::uint64_t>(total * ss, ss), AlignedBuffer::Uninitialized{});
  // Where each span starts in the buffer; pieces find theirs by offset.
  std::vector<std::uint64_t> span_at(spans.size());
  std::uint64_t at = 0;
  for (std::size_t i = 0; i < spans.size(); ++i) {
    span_at[i] = at;
    at += (spans[i].second - spans[i].first) * ss;
  }
  std::size_t s = 0;
  for (auto i : order) {
    Piece& p = pieces[i];
    if (p.bytes == 0) continue;
    while (s + 1 < spans.size() && spans[s].second * ss < p.offset + p.bytes) ++s;
    p.at = span_at[s] + (p.offset - spans[s].first * ss);
  }
  std::vector<SectorRun> io;
  std::byte* dst = buffer->data();
  for (auto [lbn, n] : runs) {
    io.push_back({lbn, n, dst});
    dst += n * ss;
    if (trace) trace->push_back({lbn, std::uint32_t(n)});
  }
  *bytes_read += total * ss;
  return io.empty() ? 0 : io_.read(io);
}

void MlocImage::chunk_pieces(std::uint64_t rank, std::uint32_t groups, std::vector<Piece>* out) const {
  const MlocGrid& g = *grid_;
  for (std::uint32_t b = 0; b < g.bins(); ++b) entry_pieces(g.position_entry(b, rank), groups, out);
}

bool MlocImage::entry_pieces(std::uint64_t e, std::uint32_t groups, std::vector<Piece>* out) const {
  const layouts::MlocPositionEntry pe = dir_->position(e);
  if (pe.count == 0) return false;
  out->push_back({dir_->position_offset(e), pe.stored, 0});
  for (std::uint32_t k = 0; k < groups; ++k) out->push_back({dir_->unit_offset(e, k), dir_->unit(e, k).stored, 0});
  return true;
}

int MlocImage::positions_of(std::uint32_t bin, std::uint64_t rank, const Piece& piece, const AlignedBuffer& buffer,
                            std::vector<std::byte>* scratch, std::vector<std::uint32_t>* out,
                            std::string* message) const {
  const layouts::MlocPositionEntry& pe = dir_->position(grid_->position_entry(bin, rank));
  std::span<const std::byte> stored(buffer.data() + piece.at, piece.bytes);
  if (layouts::mloc_checksum(stored) != pe.checksum) {
    *message = fmt::format("the positions of bin {} in chunk {} failed their checksum", bin, rank);
    return EIO;
  }
  scratch->resize(pe.raw);
  if (!layouts::mloc_unpack(stored, pe.raw, scratch->data()) ||
      !layouts::mloc_decode_positions(*scratch, pe.count, grid_->brick_elements(), out)) {
    *message = fmt::format("the positions of bin {} in chunk {} do not decode", bin, rank);
    return EIO;
  }
  return 0;
}

int MlocImage::plane_of(std::uint32_t bin, std::uint32_t group, std::uint64_t rank, std::uint64_t count,
                        const Piece& piece, const AlignedBuffer& buffer, std::vector<std::byte>* scratch,
                        const std::byte** plane, std::string* message) const {
  std::span<const std::byte> stored(buffer.data() + piece.at, piece.bytes);
  if (layouts::mloc_checksum(stored) != dir_->unit(grid_->position_entry(bin, rank), group).checksum) {
    *message = fmt::format("unit (bin {}, byte group {}, chunk {}) failed its checksum", bin, group, rank);
    return EIO;
  }
  const std::uint64_t raw = layouts::mloc_unit_raw_bytes(*grid_, count, group);
  *plane = stored.data();
  if (stored.size() == raw) return 0;
  scratch->resize(raw);
  if (!layouts::mloc_unpack(stored, raw, scratch->data())) {
    *message = fmt::format("unit (bin {}, byte group {}, chunk {}) does not decompress", bin, group, rank);
    return EIO;
  }
  *plane = scratch->data();
  return 0;
}

int MlocImage::decode_chunk(std::uint64_t rank, std::uint32_t groups, const std::vector<Piece>& pieces,
                            std::size_t first, const AlignedBuffer& buffer, std::byte* brick, std::string* message,
                            const layouts::MlocSelectionTargets* targets) const {
  const MlocGrid& g = *grid_;
  std::vector<std::uint32_t> positions;
  std::vector<std::byte> scratch;
  std::vector<std::vector<std::byte>> unpacked(groups);
  std::vector<const std::byte*> planes(groups);
  std::size_t at = first;
  for (std::uint32_t b = 0; b < g.bins(); ++b) {
    const layouts::MlocPositionEntry& pe = dir_->position(g.position_entry(b, rank));
    if (pe.count == 0) continue;
    if (int r = positions_of(b, rank, pieces[at++], buffer, &scratch, &positions, message)) return r;
    for (std::uint32_t k = 0; k < groups; ++k)
      if (int r = plane_of(b, k, rank, pe.count, pieces[at++], buffer, &unpacked[k], &planes[k], message)) return r;
    if (targets)
      layouts::mloc_scatter_selected(g, positions, groups, planes.data(), *targets, brick);
    else
      layouts::mloc_scatter(g, positions, groups, planes.data(), brick);
  }
  return 0;
}

std::vector<std::uint64_t> MlocImage::chunks_of(const layouts::Selection& box) const {
  layouts::SelectionGather gather(*cells_, box);
  std::vector<std::uint64_t> ranks;
  layouts::for_each_touched_cell(gather.touched(),
                                 [&](std::span<const std::uint64_t> c) { ranks.push_back(grid_->rank_of(c)); });
  // In the curve's order: neighbouring chunks' units are neighbours on the device.
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

int MlocImage::pipelined(std::size_t batches, const BatchPieces& pieces_of, const BatchConsumer& consume,
                         std::uint64_t* bytes_read, std::string* message) const {
  struct Fetched {
    std::vector<Piece> pieces;
    std::vector<std::size_t> first;
    AlignedBuffer buffer;
    std::uint64_t bytes = 0;
  };
  // The two buffers (one read while the other decodes) are lent by the
  // cache between reads: a view is read in many 1 MiB pieces, and fresh
  // buffers would have the kernel fault in and zero their pages each time.
  // Declared before `fetching`, so given back after its read ends.
  struct Slots {
    MlocBrickCache& cache = MlocBrickCache::shared();
    Fetched f[2] = {{{}, {}, cache.take_buffer(), 0}, {{}, {}, cache.take_buffer(), 0}};
    ~Slots() {
      for (Fetched& s : f) cache.give_buffer(std::move(s.buffer));
    }
  } slots;
  auto start = [&](std::size_t i) {
    Fetched* f = &slots.f[i % 2];
    f->pieces.clear();
    f->first.clear();
    f->bytes = 0;
    pieces_of(i, &f->pieces, &f->first);
    return std::async(std::launch::async, [this, f] { return fetch(f->pieces, &f->buffer, &f->bytes, nullptr); });
  };
  std::future<int> fetching;
  if (batches) fetching = start(0);
  for (std::size_t i = 0; i < batches; ++i) {
    const int fetched = fetching.get();
    Fetched& f = slots.f[i % 2];
    *bytes_read += f.bytes;
    if (fetched) {
      *message = "reading mloc position lists and units failed";
      return fetched;
    }
    if (i + 1 < batches) fetching = start(i + 1);  // read while batch i decodes
    if (int r = consume(i, f.pieces, f.first, f.buffer)) return r;  // `fetching` waits as it goes
  }
  return 0;
}

int MlocImage::read_selection(const layouts::Selection& selection, std::uint32_t keep, std::byte* out,
                              std::uint64_t* bytes_read, std::string* message, bool once) const {
  const std::uint64_t out_bytes = selection.elements() * grid_->itemsize();
  if (!dir_) {
    std::memset(out, 0, out_bytes);
    return 0;
  }
  std::lock_guard serial(read_mu_);
  layouts::SelectionGather gather(*cells_, selection);
  const std::uint32_t groups = layouts::mloc_groups_for_bytes(grid_->groups(), keep);
  MlocBrickCache& cache = MlocBrickCache::shared();
  std::vector<std::uint64_t> chunks;
  for (std::uint64_t rank : chunks_of(selection)) {
    if (auto brick = cache.find(cache_owner_, rank, groups))
      gather.copy(grid_->coords_of(rank), brick->data(), out);
    else
      chunks.push_back(rank);
  }
  const std::uint64_t brick_bytes = grid_->brick_elements() * grid_->itemsize();
  const std::size_t per_batch = std::max<std::uint64_t>(1, kBatchBrickBytes / brick_bytes);
  auto pieces_of = [&](std::size_t i, std::vector<Piece>* pieces, std::vector<std::size_t>* first) {
    for (std::size_t c = i * per_batch; c < std::min(chunks.size(), (i + 1) * per_batch); ++c) {
      first->push_back(pieces->size());
      chunk_pieces(chunks[c], groups, pieces);
    }
  };
  // Per thread of on_two_threads (c % 2), when chunks go straight to `out`.
  std::optional<layouts::MlocSelectionTargets> targets[2];
  if (once)
    for (auto& t : targets) t.emplace(*grid_, selection);
  auto consume_once = [&](std::size_t i, const std::vector<Piece>& pieces, const std::vector<std::size_t>& first,
                          const AlignedBuffer& buffer) {
    const std::size_t c0 = i * per_batch, n = std::min(chunks.size(), c0 + per_batch) - c0;
    std::vector<int> errors(n, 0);
    std::vector<std::string> messages(n);
    mloc_detail::on_two_threads(n, [&](std::size_t j) {
      layouts::MlocSelectionTargets& t = *targets[j % 2];
      if (t.place(chunks[c0 + j]))
        errors[j] = decode_chunk(chunks[c0 + j], groups, pieces, first[j], buffer, out, &messages[j], &t);
    });
    for (std::size_t j = 0; j < n; ++j)
      if (errors[j]) {
        *message = messages[j];
        return errors[j];
      }
    return 0;
  };
  auto consume = [&](std::size_t i, const std::vector<Piece>& pieces, const std::vector<std::size_t>& first,
                     const AlignedBuffer& buffer) {
    if (once) return consume_once(i, pieces, first, buffer);
    const std::size_t c0 = i * per_batch, n = std::min(chunks.size(), c0 + per_batch) - c0;
    std::vector<std::shared_ptr<AlignedBuffer>> bricks(n);
    std::vector<int> errors(n, 0);
    std::vector<std::string> messages(n);
    mloc_detail::on_two_threads(n, [&](std::size_t j) {
      bricks[j] = cache.take_spare(brick_bytes);
      if (!bricks[j]) bricks[j] = std::make_shared<AlignedBuffer>(brick_bytes, AlignedBuffer::Uninitialized{});
      errors[j] = decode_chunk(chunks[c0 + j], groups, pieces, first[j], buffer, bricks[j]->data(), &messages[j]);
    });
    for (std::size_t j = 0; j < n; ++j) {
      if (errors[j]) {
        *message = messages[j];
        return errors[j];
      }
      const std::uint64_t rank = chunks[c0 + j];
      gather.copy(grid_->coords_of(rank), bricks[j]->data(), out);
      cache.put(cache_owner_, rank, groups, std::move(bricks[j]));
    }
    return 0;
  };
  return pipelined(util::div_up(chunks.size(), per_batch), pieces_of, consume, bytes_read, message);
}

int MlocImage::element_location(std::span<const std::uint64_t> coords, geom::Lbn* lbn, std::uint32_t* offset,
                                std::string* message) const {
  if (!dir_) {
    *message = "the mloc array holds no data yet: its elements have no sector";
    return ENODATA;
  }
  if (dir_->header().zstd_level != 0) {
    *message = "user.mmfs.compress: the elements of a compressed mloc array have no sector of their own";
    return ENOTSUP;
  }
  const MlocGrid& g = *grid_;
  std::vector<std::uint64_t> cc(g.dims());
  std::uint64_t in_brick = 0;
  for (std::size_t d = 0; d < g.dims(); ++d) {
    cc[d] = coords[d] / g.chunk()[d];
    in_brick = in_brick * g.chunk()[d] + coords[d] % g.chunk()[d];
  }
  const std::uint64_t rank = g.rank_of(cc);
  std::vector<Piece> pieces;
  chunk_pieces(rank, 0, &pieces);
  AlignedBuffer buffer;
  std::uint64_t bytes = 0;
  if (int r = fetch(pieces, &buffer, &bytes, nullptr)) {
    *message = "reading the chunk's positions failed";
    return r;
  }
  std::vector<std::uint32_t> positions;
  std::vector<std::byte> scratch;
  std::size_t at = 0;
  for (std::uint32_t b = 0; b < g.bins(); ++b) {
    if (dir_->position(g.position_entry(b, rank)).count == 0) continue;
    if (int r = positions_of(b, rank, pieces[at++], buffer, &scratch, &positions, message)) return r;
    auto it = std::lower_bound(positions.begin(), positions.end(), std::uint32_t(in_brick));
    if (it == positions.end() || *it != in_brick) continue;
    const std::uint64_t byte = dir_->unit_offset(g.position_entry(b, rank), 0) + std::uint64_t(it - positions.begin());
    const std::uint64_t ss = io_.sector_size();
    std::uint64_t sector = byte / ss;
    for (const Extent& e : extents_) {
      if (sector < e.sectors) {
        *lbn = e.start + sector;
        *offset = std::uint32_t(byte % ss);
        return 0;
      }
      sector -= e.sectors;
    }
    break;
  }
  *message = "the element is in no bin of its chunk (run mmfsck)";
  return EUCLEAN;
}

layouts::IoPlan MlocImage::plan(const layouts::Selection& selection, std::uint32_t keep,
                                const geom::Geometry& geometry) const {
  layouts::IoPlan p;
  p.bytes_useful = selection.elements() * grid_->itemsize();
  if (!dir_) return p;
  std::vector<Piece> pieces;
  const std::uint32_t groups = layouts::mloc_groups_for_bytes(grid_->groups(), keep);
  for (std::uint64_t rank : chunks_of(selection)) {
    chunk_pieces(rank, groups, &pieces);
    ++p.cells;
  }
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.offset < b.offset; });
  std::vector<std::pair<geom::Lbn, std::uint64_t>> runs;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
  sector_runs(pieces, &runs, &spans);
  layouts::IoBatch batch;
  for (auto [lbn, s] : runs) {
    batch.requests.push_back({lbn, std::uint32_t(s)});
    p.sectors += s;
  }
  p.requests = batch.requests.size();
  p.merge_gap_sectors = merge_gap_sectors_;
  p.bytes_read = p.sectors * geometry.sector_size();
  p.batches.push_back(std::move(batch));
  layouts::model_plan(p, geometry);
  return p;
}

void MlocImage::stage(Ino ino, WriteBatch& batch, std::uint8_t slot, const std::vector<Extent>* stored) const {
  if (!dir_) {
    // No image: no record. A copy keeps an empty extent map (mmfsck expects
    // one for every copy listed).
    batch.del(record_key(ino, slot));
    if (slot) batch.put(extents_key(ino, slot), encode_extents({}));
    else batch.del(extents_key(ino, slot));
    return;
  }
  Record r;
  r.header_bytes = dir_->header_bytes();
  r.header_hash = header_hash_;
  r.image_bytes = dir_->image_bytes();
  batch.put(record_key(ino, slot), encode_record(r));
  batch.put(extents_key(ino, slot), encode_extents(stored ? *stored : extents_));
}

void MlocImage::stage_removal(Metadata& metadata, Ino ino, WriteBatch& batch, std::vector<Extent>* dropped,
                              std::uint8_t slot) {
  if (auto v = metadata.store().get(extents_key(ino, slot))) {
    if (auto xs = decode_extents(*v)) dropped->insert(dropped->end(), xs->begin(), xs->end());
    batch.del(extents_key(ino, slot));
  }
  if (metadata.store().get(record_key(ino, slot))) batch.del(record_key(ino, slot));
}

void MlocImage::release(SpaceSource& allocator) {
  for (const Extent& e : extents_) allocator.free(e);
  extents_.clear();
}

nlohmann::json MlocImage::describe() const {
  nlohmann::json j;
  j["chunk"] = grid_->chunk();
  j["chunks"] = grid_->chunks();
  if (!dir_) {
    j["sealed"] = false;
    return j;
  }
  const MlocGrid& g = *grid_;
  j["bins"] = g.bins();
  j["units"] = g.units();
  j["zstd_level"] = dir_->header().zstd_level;
  j["directory_bytes"] = dir_->header_bytes();
  j["positions"] = {{"stored", dir_->positions_stored()}, {"raw", dir_->positions_raw()}};
  nlohmann::json groups = nlohmann::json::array();
  for (std::uint32_t k = 0; k < g.groups().size(); ++k) {
    const std::uint64_t stored = dir_->group_stored(k);
    std::uint64_t raw = g.elements() * g.groups()[k].bytes;
    groups.push_back({{"first_byte", g.groups()[k].first_rank}, {"bytes", g.groups()[k].bytes},
                      {"stored", stored}, {"raw", raw}});
  }
  j["byte_groups"] = groups;
  j["image_bytes"] = dir_->image_bytes();
  return j;
}

}  // namespace mmfs::fs
