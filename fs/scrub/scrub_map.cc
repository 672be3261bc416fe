// The scrub's sector owners (fs/scrub/scrub_map.h).
#include "fs/scrub/scrub_map.h"

#include "fs/array/array_layout.h"
#include "fs/meta/cell_checksums.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <deque>
#include <exception>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <unordered_map>

#include "fs/array/array_schema.h"
#include "fs/meta/keys.h"
#include "fs/meta/superblock.h"
#include "fs/volume/volume.h"
#include "layouts/capsule.h"
#include "layouts/cell_grid.h"
#include "util/align.h"

namespace mmfs::fs {

namespace {

constexpr std::string_view kSchemaRecord = "mmfs.schema";  // ArrayFile::kSchemaXattr
constexpr std::size_t kMaxNamedEntries = 1u << 20;         // the path walk's bound

// The array's placement as ArrayFile::build makes it (fs/array/array_layout.h):
// the layout of its schema over its stored extents. Null when the scrub
// cannot rebuild it; *why says so.
std::unique_ptr<layouts::Layout> rebuild_layout(const geom::Geometry& g, const ArraySchema& s,
                                                const std::vector<layouts::Extent>& extents, std::string* why) {
  try {
    auto layout = make_array_layout(g, s);
    layout->place(extents);
    return layout;
  } catch (const std::exception& e) {
    *why = e.what();
    return nullptr;
  }
}

}  // namespace

// Every inode's path, from a walk of the tree (first name found wins).
std::unordered_map<Ino, std::string> inode_paths(const Metadata& md) {
  std::unordered_map<Ino, std::string> paths;
  paths[kRootIno] = "/";
  std::deque<Ino> todo{kRootIno};
  while (!todo.empty() && paths.size() < kMaxNamedEntries) {
    const Ino dir = todo.front();
    todo.pop_front();
    const std::string prefix = dir == kRootIno ? "" : paths[dir];
    md.readdir(dir, [&](std::string_view name, Ino child) {
      if (paths.count(child)) return true;
      paths[child] = prefix + "/" + std::string(name);
      if (auto n = md.inode(child); n && S_ISDIR(n->mode)) todo.push_back(child);
      return paths.size() < kMaxNamedEntries;
    });
  }
  return paths;
}

const char* to_string(OwnerKind kind) {
  switch (kind) {
    case OwnerKind::Outside: return "outside";
    case OwnerKind::Superblock: return "superblock";
    case OwnerKind::Metadata: return "metadata";
    case OwnerKind::Free: return "free";
    case OwnerKind::ArrayCell: return "array cell";
    case OwnerKind::PlainBlock: return "file block";
    case OwnerKind::ArrayData: return "array data";
    case OwnerKind::IndexObject: return "index";
    case OwnerKind::MlocImage: return "mloc image";
    case OwnerKind::FileTail: return "file tail";
  }
  return "?";
}

std::vector<layouts::Run> ScrubObject::unit_runs(std::uint64_t unit) const {
  std::vector<layouts::Run> runs;
  const std::uint64_t first = unit * unit_sectors, end = first + unit_sectors;
  auto it = std::upper_bound(pieces.begin(), pieces.end(), first,
                             [](std::uint64_t pos, const Piece& p) { return pos < p.position; });
  if (it == pieces.begin()) return runs;
  --it;
  for (std::uint64_t pos = first; pos < end && it != pieces.end(); ++it) {
    if (pos < it->position || pos >= it->position + it->sectors) break;  // a hole: the unit is not placed whole
    const std::uint64_t n = std::min(end, it->position + it->sectors) - pos;
    runs.push_back({it->lbn + (pos - it->position), std::uint32_t(n)});
    pos += n;
  }
  return runs;
}

std::string ScrubObject::unit_name(std::uint64_t unit) const {
  switch (kind) {
    case OwnerKind::ArrayCell:
      if (blocks_per_cell > 1)
        return fmt::format("cell {} (block {}) of {}", unit / blocks_per_cell, unit % blocks_per_cell, path);
      return fmt::format("cell {} of {}", unit, path);
    case OwnerKind::PlainBlock: return fmt::format("block {} of {}", unit, path);
    default: return path;
  }
}

OwnerMap::OwnerMap(std::uint64_t sectors, std::uint32_t sector_size) : sectors_(sectors), sector_size_(sector_size) {}

void OwnerMap::add_region(OwnerKind kind, geom::Lbn start, std::uint64_t sectors) {
  if (start >= sectors_ || sectors == 0) return;
  sectors = std::min(sectors, sectors_ - start);
  // A later region wins where it overlaps an earlier one: cut the earlier ones.
  std::vector<Span> kept;
  for (const Span& r : regions_) {
    const geom::Lbn end = r.start + r.sectors, new_end = start + sectors;
    if (end <= start || r.start >= new_end) {
      kept.push_back(r);
      continue;
    }
    if (r.start < start) kept.push_back({r.start, start - r.start, r.kind, 0, 0});
    if (end > new_end) kept.push_back({new_end, end - new_end, r.kind, 0, 0});
  }
  kept.push_back({start, sectors, kind, 0, 0});
  regions_ = std::move(kept);
}

std::uint32_t OwnerMap::add_object(ScrubObject object) {
  const std::uint32_t index = std::uint32_t(objects_.size());
  if (checksummed(object.kind))
    for (const ScrubObject::Piece& p : object.pieces)
      if (p.lbn < sectors_)
        spans_.push_back({p.lbn, std::min(p.sectors, sectors_ - p.lbn), object.kind, index, p.position});
  objects_.push_back(std::move(object));
  return index;
}

void OwnerMap::add_readable(OwnerKind kind, std::uint32_t object, geom::Lbn start, std::uint64_t sectors) {
  if (start >= sectors_ || sectors == 0) return;
  spans_.push_back({start, std::min(sectors, sectors_ - start), kind, object, 0});
}

void OwnerMap::seal() {
  auto by_start = [](const Span& a, const Span& b) { return a.start < b.start; };
  std::sort(regions_.begin(), regions_.end(), by_start);
  std::sort(spans_.begin(), spans_.end(), by_start);
}

Owner OwnerMap::owner(geom::Lbn lbn) const {
  Owner o;
  if (lbn >= sectors_) return o;
  auto find = [lbn](const std::vector<Span>& v) -> const Span* {
    auto it = std::upper_bound(v.begin(), v.end(), lbn, [](geom::Lbn l, const Span& s) { return l < s.start; });
    if (it == v.begin()) return nullptr;
    --it;
    return lbn < it->start + it->sectors ? &*it : nullptr;
  };
  if (const Span* s = find(spans_)) {
    o.kind = s->kind;
    o.object = s->object;
    if (checksummed(s->kind)) {
      const std::uint64_t pos = s->position + (lbn - s->start);
      const std::uint32_t us = objects_[s->object].unit_sectors;
      o.unit = pos / us;
      o.sector = std::uint32_t(pos % us);
    }
    return o;
  }
  if (const Span* r = find(regions_)) o.kind = r->kind;
  return o;
}

std::uint64_t OwnerMap::memory_bytes() const {
  std::uint64_t n = (regions_.capacity() + spans_.capacity()) * sizeof(Span);
  for (const ScrubObject& o : objects_) n += o.pieces.capacity() * sizeof(ScrubObject::Piece) + sizeof o;
  return n;
}

std::string OwnerMap::describe(geom::Lbn lbn) const {
  const Owner o = owner(lbn);
  switch (o.kind) {
    case OwnerKind::Outside: return "outside the data area";
    case OwnerKind::Metadata: return "the metadata region";
    case OwnerKind::Free: return "free space";
    case OwnerKind::Superblock: return objects_[o.object].path;
    case OwnerKind::ArrayCell:
    case OwnerKind::PlainBlock: return objects_[o.object].unit_name(o.unit);
    case OwnerKind::ArrayData: return fmt::format("data of {} (cells not placed by the scrub)", objects_[o.object].path);
    case OwnerKind::IndexObject: return fmt::format("the bitmap index of {}", objects_[o.object].path);
    case OwnerKind::MlocImage: return fmt::format("the mloc image of {}", objects_[o.object].path);
    case OwnerKind::FileTail: return fmt::format("space past the last block of {}", objects_[o.object].path);
  }
  return "?";
}

// --- from a volume ---------------------------------------------------------

namespace {

struct Builder {
  Builder(Volume& v, OwnerMap& m, const OwnerMap::PlacementSource& p, std::uint64_t b)
      : volume(v), map(m), placements(p), budget(b) {}
  Volume& volume;
  OwnerMap& map;
  const OwnerMap::PlacementSource& placements;
  std::uint64_t budget;
  std::uint64_t used = 0;
  std::unordered_map<Ino, std::string> paths;

  std::string path_of(Ino ino) const {
    auto it = paths.find(ino);
    return it != paths.end() ? it->second : fmt::format("<inode {}>", ino);
  }

  // Extents an object has but whose units the scrub does not know: read them.
  void readable(OwnerKind kind, Ino ino, const std::vector<layouts::Extent>& extents, std::string record = {},
                std::string key = {}) {
    ScrubObject o;
    o.kind = kind;
    o.ino = ino;
    o.path = path_of(ino);
    o.extents_record = std::move(record);
    o.extents_key = std::move(key);
    const std::uint32_t index = map.add_object(std::move(o));
    for (const auto& e : extents) map.add_readable(kind, index, e.start, e.sectors);
  }

  // The pieces of every cell of `layout`, C order of the cells.
  static void add_cells(const layouts::Layout& layout, ScrubObject& o) {
    const auto& grid = layout.grid().grid();
    std::vector<std::uint64_t> coords(grid.size(), 0);
    layouts::Run runs[2];
    const std::uint64_t cells = layout.grid().cells();
    for (std::uint64_t cell = 0; cell < cells; ++cell) {
      const std::size_t k = layout.cell_runs(coords, runs);
      std::uint64_t pos = cell * layout.sectors_per_cell();
      for (std::size_t j = 0; j < k; ++j) {
        auto& v = o.pieces;
        if (!v.empty() && v.back().position + v.back().sectors == pos && v.back().lbn + v.back().sectors == runs[j].lbn)
          v.back().sectors += runs[j].sectors;
        else
          v.push_back({pos, runs[j].lbn, runs[j].sectors});
        pos += runs[j].sectors;
      }
      for (std::size_t d = grid.size(); d-- > 0;) {  // the next cell, C order
        if (++coords[d] < grid[d]) break;
        coords[d] = 0;
      }
    }
  }

  // An array object of `layout`'s cells, or false when it is past the budget.
  // Its units are the cells' checksum blocks (whole cells for arrays placed
  // before blocks), which tile each cell's sectors.
  bool cells_of(const layouts::Layout& layout, ScrubObject& o) {
    o.kind = OwnerKind::ArrayCell;
    const auto schema = decode_schema(o.schema_record);
    const ChecksumBlocks blocks =
        checksum_blocks(layout.grid().cell_bytes(), layout.sectors_per_cell(), volume.geometry().sector_size(),
                        schema ? schema->checksum_block : 0);
    o.blocks_per_cell = blocks.per_cell;
    o.brick_bytes = layout.grid().cell_bytes();
    o.unit_sectors = layout.sectors_per_cell() / blocks.per_cell;
    o.units = layout.grid().cells() * blocks.per_cell;
    o.checked_bytes = blocks.per_cell > 1 ? blocks.bytes : layout.grid().cell_bytes();
    // Each cell adds a piece (twice: the object's and the lookup span) unless merged.
    if (used + layout.grid().cells() * 2 * sizeof(ScrubObject::Piece) > budget) return false;
    add_cells(layout, o);
    used += o.pieces.size() * 2 * sizeof(ScrubObject::Piece);
    return true;
  }

  void array(Ino ino, const std::vector<layouts::Extent>& extents, const std::string& extents_record,
             const std::string& schema_record) {
    ScrubObject o;
    o.ino = ino;
    o.path = path_of(ino);
    o.extents_record = extents_record;
    o.schema_record = schema_record;
    bool placed = false, fits = true;
    // The daemon's own placement first: it is what reads verify against.
    if (placements)
      placements(ino, [&](const layouts::Layout& live) {
        placed = true;
        fits = cells_of(live, o);
      });
    if (!placed) {
      std::string why;
      auto schema = decode_schema(schema_record);
      std::unique_ptr<layouts::Layout> layout;
      if (!schema || schema->shape.empty()) why = "no schema";
      else if (!schema->members.empty()) why = "placed on a member set";  // its layout maps the set's LBNs
      else layout = rebuild_layout(volume.geometry(), *schema, extents, &why);
      placed = layout != nullptr;
      if (layout) fits = cells_of(*layout, o);
    }
    if (!placed || !fits) {
      map.note_unmapped();
      readable(OwnerKind::ArrayData, ino, extents, extents_record);
      return;
    }
    map.add_object(std::move(o));
  }

  void plain(Ino ino, const Inode& inode, const std::vector<layouts::Extent>& extents,
             const std::string& extents_record) {
    const std::uint32_t ss = volume.geometry().sector_size();
    const std::uint64_t block = std::max<std::uint64_t>(4096, ss);  // PlainFile's block
    ScrubObject o;
    o.kind = OwnerKind::PlainBlock;
    o.ino = ino;
    o.path = path_of(ino);
    o.unit_sectors = std::uint32_t(block / ss);
    o.units = util::div_up(inode.size, block);
    o.checked_bytes = block;
    o.extents_record = extents_record;
    const std::uint64_t in_blocks = o.units * o.unit_sectors;
    std::uint64_t pos = 0;
    std::vector<layouts::Extent> tail;
    for (const auto& e : extents) {
      const std::uint64_t inside = pos >= in_blocks ? 0 : std::min(e.sectors, in_blocks - pos);
      if (inside) o.pieces.push_back({pos, e.start, inside});
      if (inside < e.sectors) tail.push_back({e.start + inside, e.sectors - inside});
      pos += e.sectors;
    }
    const std::uint32_t index = map.add_object(std::move(o));
    for (const auto& t : tail) map.add_readable(OwnerKind::FileTail, index, t.start, t.sectors);
  }

  void superblock(const std::string& name, std::uint64_t offset) {
    const std::uint32_t ss = map.sector_size();
    if (offset % ss != 0 || kSuperblockBytes % ss != 0) {  // not whole sectors: read, not verified
      map.add_region(OwnerKind::Metadata, offset / ss, util::div_up(offset % ss + kSuperblockBytes, ss));
      return;
    }
    ScrubObject o;
    o.kind = OwnerKind::Superblock;
    o.path = name;
    o.unit_sectors = kSuperblockBytes / ss;
    o.units = 1;
    o.checked_bytes = kSuperblockBytes;
    o.pieces.push_back({0, offset / ss, o.unit_sectors});
    map.add_object(std::move(o));
  }
};

}  // namespace

std::unique_ptr<OwnerMap> OwnerMap::from_volume(Volume& volume, const PlacementSource& placements,
                                                std::uint64_t budget_bytes) {
  const Superblock& sb = volume.superblock();
  const std::uint32_t ss = volume.geometry().sector_size();
  // A volume of several members addresses less than its members hold: each
  // member's superblock tracks (and the tail past its last whole track) lie
  // outside the volume's byte space (fs/volume/volume_members.cc).
  auto map = std::make_unique<OwnerMap>(std::min(sb.volume_bytes, volume.device().size_bytes()) / ss, ss);
  map->add_region(OwnerKind::Metadata, sb.meta_offset / ss, util::div_up(sb.meta_length, ss));
  map->add_region(OwnerKind::Free, sb.data_first_lbn, sb.data_end_lbn - sb.data_first_lbn);
  Metadata& md = volume.metadata();
  Builder b(volume, *map, placements, budget_bytes);
  b.paths = inode_paths(md);
  if (!volume.striped()) {
    b.superblock("superblock A", 0);
    b.superblock("superblock B", sb.backup_offset);
  }  // else each member's two copies are outside the volume's space, read and checked at every mount

  // Every extent map (fs/meta/keys.h): a file's, an index's, an mloc image's.
  struct Found {
    Ino ino;
    std::optional<keys::Kind> kind;  // none: a kind of extent map this scrub does not know
    std::string record;
    std::string key;
  };
  std::vector<Found> found;
  md.store().scan(keys::scan_prefix(keys::Kind::Extents), [&](std::string_view key, std::string_view value) {
    const auto owner = keys::owner(key);
    if (!owner) return true;
    const auto parsed = keys::parse(key);
    found.push_back({*owner, parsed ? std::optional(parsed->kind) : std::nullopt, std::string(value), std::string(key)});
    return true;
  });
  for (const Found& f : found) {
    auto extents = decode_extents(f.record);
    if (!extents || extents->empty()) continue;
    if (f.kind == keys::Kind::IndexExtents) {
      b.readable(OwnerKind::IndexObject, f.ino, *extents, f.record, f.key);
      continue;
    }
    if (f.kind == keys::Kind::MlocExtents) {
      b.readable(OwnerKind::MlocImage, f.ino, *extents, f.record, f.key);
      continue;
    }
    if (f.kind != keys::Kind::Extents) {  // a kind of extent map this scrub does not know: read it
      b.readable(OwnerKind::ArrayData, f.ino, *extents, f.record, f.key);
      continue;
    }
    auto inode = md.inode(f.ino);
    auto schema_record = md.xattr(f.ino, kSchemaRecord);
    const auto schema = schema_record ? decode_schema(*schema_record) : std::nullopt;
    if (schema && !schema->shape.empty())
      b.array(f.ino, *extents, f.record, *schema_record);
    else if (schema_record && !schema)
      b.readable(OwnerKind::ArrayData, f.ino, *extents, f.record);
    else if (inode && S_ISREG(inode->mode))
      b.plain(f.ino, *inode, *extents, f.record);
    else
      b.readable(OwnerKind::ArrayData, f.ino, *extents, f.record);
  }
  map->seal();
  return map;
}

}  // namespace mmfs::fs
