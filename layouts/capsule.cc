#include "layouts/capsule.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "util/align.h"

namespace mmfs::layouts {
namespace {

// Sectors attribute records of `size` bytes need for `n` records of a capsule
// when every sector holds the same number of them: the smallest k >= the byte
// count's sectors that divides n (k = n, one record a sector, always does).
std::uint32_t blocks_for(std::uint64_t n, std::uint32_t size, std::uint32_t sector) {
  for (std::uint64_t k = std::max<std::uint64_t>(1, util::div_up(n * size, sector)); k <= n; ++k)
    if (n % k == 0 && (n / k) * size <= sector) return std::uint32_t(k);
  return std::uint32_t(n);
}

// The MemStore capsules are computed on: the volume itself, or the member
// of a striped volume (a capsule lives on one member, geometry/striped.h).
const geom::MemStore& as_mems(const geom::Geometry& g) {
  const geom::Geometry* device = &g;
  if (const auto* s = dynamic_cast<const geom::StripedGeometry*>(&g)) device = &s->member();
  if (const auto* m = dynamic_cast<const geom::MemStore*>(device)) return *m;
  throw std::invalid_argument(fmt::format(
      "capsule layout: the volume's geometry '{}' has no equivalence classes (capsules need a MEMS geometry, "
      "e.g. mems-g2)",
      g.name()));
}

// The position of `lbn` among the members of its class on its own track (its
// square column), from equivalent() and track_boundaries().
std::size_t column_of(const geom::Geometry& g, Lbn lbn, const std::vector<Lbn>& cls) {
  const geom::TrackBounds tb = g.track_boundaries(lbn);
  auto lo = std::lower_bound(cls.begin(), cls.end(), tb.low);
  auto at = std::lower_bound(lo, cls.end(), lbn);
  return std::size_t(at - lo);
}

}  // namespace

double CapsuleFormat::density(std::span<const std::uint32_t> record_bytes, std::uint32_t sector_size) const {
  std::uint64_t bytes = 0;
  for (std::uint32_t s : record_bytes) bytes += s;
  return double(records * bytes) / double(std::uint64_t(total) * sector_size);
}

CapsuleFormat capsule_with_records(std::span<const std::uint32_t> record_bytes, std::uint32_t sector_size,
                                   std::uint64_t records) {
  if (record_bytes.empty()) throw std::invalid_argument("capsule: a table needs at least one attribute");
  if (records == 0) throw std::invalid_argument("capsule: a capsule holds at least one record");
  CapsuleFormat f;
  f.records = records;
  std::uint64_t total = 0;
  for (std::uint32_t s : record_bytes) {
    if (s == 0 || s > sector_size)
      throw std::invalid_argument(
          fmt::format("capsule: an attribute of {} bytes per record does not fit a {}-byte sector", s, sector_size));
    f.first.push_back(std::uint32_t(total));
    f.blocks.push_back(blocks_for(records, s, sector_size));
    total += f.blocks.back();
  }
  if (total > UINT32_MAX) throw std::invalid_argument("capsule: too many sectors per capsule");
  f.total = std::uint32_t(total);
  return f;
}

CapsuleFormat capsule_resolve(std::span<const std::uint32_t> record_bytes, std::uint32_t sector_size,
                              std::uint32_t parallelism) {
  if (record_bytes.empty()) throw std::invalid_argument("capsule: a table needs at least one attribute");
  std::uint64_t sum = 0;
  std::uint32_t widest = 0;
  for (std::uint32_t s : record_bytes) {
    if (s == 0 || s > sector_size)
      throw std::invalid_argument(
          fmt::format("capsule: an attribute of {} bytes per record does not fit a {}-byte sector", s, sector_size));
    sum += s;
    widest = std::max(widest, s);
  }
  CapsuleFormat best;
  std::uint64_t best_sectors = 0;
  auto consider = [&](std::uint64_t n) {
    CapsuleFormat f;
    f.records = n;
    std::uint64_t total = 0;
    for (std::uint32_t s : record_bytes) {
      f.first.push_back(std::uint32_t(total));
      f.blocks.push_back(blocks_for(n, s, sector_size));
      total += f.blocks.back();
    }
    if (total > parallelism) return;
    f.total = std::uint32_t(total);
    // More record bytes per sector wins (n / total, compared exactly); then fewer sectors.
    if (best.records == 0 || n * best_sectors > best.records * total ||
        (n * best_sectors == best.records * total && total < best_sectors)) {
      best = std::move(f);
      best_sectors = total;
    }
  };
  // A capsule of at most p sectors holds at most p * sector / sum record bytes records.
  const std::uint64_t most = std::uint64_t(parallelism) * sector_size / sum;
  for (std::uint64_t n = 1; n <= most; ++n) consider(n);
  if (best.records == 0) {
    // More attributes than p: a record cannot be one access; one sector each.
    best.records = sector_size / widest;
    std::uint32_t total = 0;
    for (std::size_t i = 0; i < record_bytes.size(); ++i) {
      best.first.push_back(total);
      best.blocks.push_back(1);
      ++total;
    }
    best.total = total;
  }
  return best;
}

std::vector<Lbn> capsule_alloc(const geom::Geometry& g, Lbn band_start, std::uint32_t blocks, std::uint64_t slot,
                               std::vector<std::uint32_t>* splits) {
  geom::TrackBounds track = g.track_boundaries(band_start);
  if (track.low != band_start)
    throw std::invalid_argument(fmt::format("capsule: a band starts at a track's first LBN, not at {}", band_start));
  if (slot >= track.length())
    throw std::invalid_argument(fmt::format("capsule: slot {} is past the {}-sector track", slot, track.length()));
  if (splits) splits->clear();
  std::vector<Lbn> out;
  out.reserve(blocks);
  Lbn anchor = band_start + slot;
  std::vector<Lbn> cls = g.equivalent(anchor);
  std::size_t column = column_of(g, anchor, cls);
  out.push_back(anchor);
  for (std::uint32_t b = 1; b < blocks; ++b) {
    track = g.track_boundaries(track.high + 1);
    auto lo = std::lower_bound(cls.begin(), cls.end(), track.low);
    auto hi = std::upper_bound(lo, cls.end(), track.high);
    if (std::size_t(hi - lo) > column) {
      out.push_back(*(lo + std::ptrdiff_t(column)));
      continue;
    }
    // Track b is outside the class: the rest of the capsule anchors anew.
    if (slot >= track.length())
      throw std::invalid_argument(fmt::format("capsule: track at {} is shorter than slot {}", track.low, slot));
    anchor = track.low + slot;
    cls = g.equivalent(anchor);
    column = column_of(g, anchor, cls);
    out.push_back(anchor);
    if (splits) splits->push_back(b);
  }
  return out;
}

std::vector<Extent> split_into_bands(std::span<const Extent> extents, std::uint64_t band_sectors) {
  if (band_sectors == 0) throw std::invalid_argument("capsule: a band has at least one sector");
  std::vector<Extent> bands;
  for (const Extent& e : extents)
    for (std::uint64_t off = 0; off < e.sectors; off += band_sectors)
      bands.push_back({e.start + off, std::min(band_sectors, e.sectors - off)});
  return bands;
}

std::vector<Extent> band_part_extents(std::span<const Extent> bands, std::uint64_t block_sectors,
                                      const CapsulePart& part) {
  std::vector<Extent> out;
  out.reserve(bands.size());
  for (const Extent& b : bands)
    out.push_back({b.start + std::uint64_t(part.first_block) * block_sectors,
                   std::uint64_t(part.cells_per_capsule) * block_sectors});
  return out;
}

std::vector<std::uint64_t> CapsuleLayout::default_cell(std::span<const std::uint64_t> shape, std::uint32_t itemsize,
                                                       std::uint32_t sector_size) {
  std::vector<std::uint64_t> cell(shape.size(), 1);
  if (!shape.empty()) cell[0] = std::max<std::uint64_t>(1, std::min<std::uint64_t>(shape[0], sector_size / itemsize));
  return cell;
}

CapsuleLayout::CapsuleLayout(const geom::Geometry& geometry, CellGrid grid, CapsulePart part)
    : Layout(geometry, std::move(grid)), mems_(as_mems(geometry)),
      striped_(dynamic_cast<const geom::StripedGeometry*>(&geometry)), part_(part) {
  if (striped_) members_ = striped_->members();
  if (grid_.cell_bytes() > geometry_.sector_size())
    throw std::invalid_argument(fmt::format(
        "capsule layout: a cell is one sector of a capsule; cell {} holds {} bytes, the sector {}",
        fmt::join(grid_.cell(), ","), grid_.cell_bytes(), geometry_.sector_size()));
  if (part_.cells_per_capsule == 0) throw std::invalid_argument("capsule layout: cells_per_capsule must be positive");
  attributes_ = 1;
  for (std::size_t d = 1; d < grid_.dims(); ++d) attributes_ *= grid_.grid()[d];
  const std::uint64_t owned = attributes_ * part_.cells_per_capsule;
  if (part_.capsule_blocks == 0) {
    part_.capsule_blocks = std::uint32_t(std::min<std::uint64_t>(owned, UINT32_MAX));
    part_.first_block = 0;
  }
  if (std::uint64_t(part_.first_block) + owned > part_.capsule_blocks)
    throw std::invalid_argument(fmt::format("capsule layout: blocks {}..{} do not fit a capsule of {} sectors",
                                            part_.first_block, part_.first_block + owned, part_.capsule_blocks));
  owned_ = std::uint32_t(owned);
  track_ = mems_.sectors_per_track();
  band_capsules_ = track_ * members_;
  if (part_.capsule_blocks > mems_.tracks())
    throw std::invalid_argument(fmt::format(
        "capsule layout: a capsule of {} sectors needs a band of {} tracks; the device has {} (group columns "
        "into wider cells: user.mmfs.cell)",
        part_.capsule_blocks, part_.capsule_blocks, mems_.tracks()));
  capsules_ = util::div_up(grid_.grid()[0], part_.cells_per_capsule);
}

SpaceRequest CapsuleLayout::space() const {
  SpaceRequest r;
  r.shape = SpaceShape::TrackGroups;
  r.group_tracks = std::uint64_t(part_.capsule_blocks) * members_;
  r.groups = bands();
  r.sectors = r.groups * band_sectors();
  // Without micropositioning a band that crosses into the next cylinder
  // splits every capsule in it; bands of at most a cylinder's tracks stay
  // inside one (the tracks left over hold other data). A striped volume's
  // cylinder is Ny member tracks on every member: Ny·P volume tracks.
  if (mems_.params().M == 0) r.boundary_tracks = std::uint64_t(mems_.Ny()) * members_;
  // A band group is the same member tracks on every member: it starts on
  // member 0, at a volume track that is a multiple of P.
  if (members_ > 1) r.align_tracks = members_;
  return r;
}

void CapsuleLayout::place(std::vector<Extent> extents) {
  if (extents.size() != bands())
    throw std::invalid_argument(
        fmt::format("capsule: needs {} bands, was given {} extents", bands(), extents.size()));
  // One block of a band: a track, or P tracks (one per member) when striped.
  const std::uint64_t block = band_capsules_;
  const std::uint64_t lead = std::uint64_t(part_.first_block) * block;
  std::vector<Band> bands;
  bands.reserve(extents.size());
  std::uint64_t split = 0;
  for (std::size_t i = 0; i < extents.size(); ++i) {
    const Extent& e = extents[i];
    // The band (group) starts at a track's first LBN, on member 0 of a striped volume.
    const bool fits = e.start >= lead && e.sectors == std::uint64_t(owned_) * block &&
                      e.start - lead + band_sectors() <= geometry_.capacity_sectors();
    if (!fits || geometry_.track_boundaries(e.start).low != e.start ||
        geometry_.track_of(e.start - lead) % members_ != 0)
      throw std::invalid_argument(fmt::format(
          "capsule: extent {}+{} is not tracks {}..{} of a band of {} whole {}-sector tracks{}", e.start, e.sectors,
          std::uint64_t(part_.first_block) * members_, std::uint64_t(part_.first_block + owned_) * members_,
          std::uint64_t(part_.capsule_blocks) * members_, track_,
          members_ > 1 ? fmt::format(" starting at a multiple of {} (the members)", members_) : ""));
    Band b;
    b.start = striped_ ? striped_->locate(e.start - lead).lbn : e.start - lead;
    capsule_alloc(mems_, b.start, part_.capsule_blocks, 0, &b.splits);
    if (!b.splits.empty()) split += std::min<std::uint64_t>(band_capsules_, capsules_ - i * band_capsules_);
    bands.push_back(std::move(b));
  }
  extents_ = std::move(extents);
  bands_ = std::move(bands);
  split_ = split;
}

void CapsuleLayout::locate(std::span<const std::uint64_t> cell, std::uint64_t* capsule, std::uint32_t* block) const {
  std::uint64_t attribute = 0;
  for (std::size_t d = 1; d < grid_.dims(); ++d) attribute = attribute * grid_.grid()[d] + cell[d];
  *capsule = cell[0] / part_.cells_per_capsule;
  *block = part_.first_block + std::uint32_t(attribute * part_.cells_per_capsule + cell[0] % part_.cells_per_capsule);
}

Lbn CapsuleLayout::block_lbn(std::uint64_t capsule, std::uint32_t block) const {
  const Band& band = bands_[capsule / band_capsules_];
  // Slot s of a band group: slot s mod T of member s / T's band.
  const std::uint64_t in_band = capsule % band_capsules_;
  const Lbn lbn = member_block_lbn(band, in_band % track_, block);
  return striped_ ? striped_->volume_lbn(std::uint32_t(in_band / track_), lbn) : lbn;
}

Lbn CapsuleLayout::member_block_lbn(const Band& band, std::uint64_t slot, std::uint32_t block) const {
  // The class segment holding `block`: from the last split at or before it.
  std::uint32_t seg = 0;
  for (std::uint32_t s : band.splits) {
    if (s > block) break;
    seg = s;
  }
  const Lbn anchor = band.start + std::uint64_t(seg) * track_ + slot;
  if (block == seg) return anchor;
  // The member of the anchor's class on the band's track `block`, in the
  // anchor's square column: same y, same column of squares.
  const geom::MemStore::Position pos = mems_.position(anchor);
  const std::uint64_t t = band.start / track_ + block;
  const std::uint64_t ny = mems_.Ny(), nx = mems_.Nx();
  return mems_.lbn_at(std::uint32_t(t / ny), pos.y, std::uint32_t((t % ny) * nx + pos.square % nx));
}

std::size_t CapsuleLayout::cell_runs(std::span<const std::uint64_t> cell, Run out[2]) const {
  std::uint64_t capsule;
  std::uint32_t block;
  locate(cell, &capsule, &block);
  out[0] = {block_lbn(capsule, block), 1};
  return 1;
}

nlohmann::json CapsuleLayout::describe() const {
  nlohmann::json j = Layout::describe();
  j["capsule_sectors"] = part_.capsule_blocks;
  j["first_block"] = part_.first_block;
  j["owned_blocks"] = owned_;
  j["records_per_capsule"] = grid_.cell()[0] * part_.cells_per_capsule;
  j["attributes"] = attributes_;
  j["capsules"] = capsules_;
  j["capsules_per_band"] = band_capsules_;
  if (members_ > 1) j["members"] = members_;
  j["bands"] = bands();
  j["split_capsules"] = split_;
  j["parallelism"] = geometry_.parallelism();
  return j;
}

}  // namespace mmfs::layouts
