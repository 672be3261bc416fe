// Building an array placement's cells (ArrayFile::build): the layout its
// schema asks for, over new space, given extents or the stored extent map,
// on the whole volume or on a member set (fs/array/member_sets.h), with its
// checksum tables.
#include <fmt/format.h>

#include <cerrno>

#include "fs/array/array_file.h"
#include "fs/array/array_file_internal.h"
#include "fs/array/array_layout.h"

namespace mmfs::fs {

using detail::is_mloc;

namespace {

// The layouts this release places; the others of docs/reference.md §4 are accepted names.
bool layout_implemented(const std::string& name) {
  return name == "naive" || name == "zorder" || name == "hilbert" || name == "multimap" || name == "quadrangle" ||
         name == "capsule" || name == "mloc";
}

}  // namespace

ArraySchema placed_schema(const ArrayContext& ctx, const ArraySchema& schema) {
  ArraySchema placed = schema;
  if (!is_mloc(schema)) placed.checksum_block = checksum_block_bytes(ctx.geometry.sector_size());
  return placed;
}

int ArrayFile::build(const ArrayContext& ctx, Ino ino, const ArraySchema& schema, bool allocate,
                     std::unique_ptr<ArrayState>* out, std::string* message, const std::vector<Extent>* given,
                     std::uint8_t slot) {
  if (!layout_implemented(schema.layout)) {
    *message = fmt::format("user.mmfs.layout: '{}' is not implemented in this release (use naive, zorder, hilbert, "
                           "multimap, quadrangle, capsule or mloc)", schema.layout);
    return ENOTSUP;
  }
  if (schema.layout == "capsule" && ctx.geometry.kind() != geom::DeviceKind::Mems) {
    *message = fmt::format("user.mmfs.layout: 'capsule' needs a MEMS volume (equivalence classes); this volume's "
                           "geometry '{}' has none", ctx.geometry.name());
    return ENOTSUP;
  }
  if (schema.layout == "quadrangle" && ctx.geometry.kind() != geom::DeviceKind::Disk) {
    *message = fmt::format("user.mmfs.layout: 'quadrangle' needs a disk volume (Atropos quadrangles are built from "
                           "tracks and head switches); this volume's geometry '{}' is a {} device",
                           ctx.geometry.name(), ctx.geometry.kind() == geom::DeviceKind::Mems ? "MEMS" : "flash");
    return ENOTSUP;
  }
  if (schema.compress != "none" && !is_mloc(schema)) {
    *message = "user.mmfs.compress: compression comes with the mloc layout, not implemented in this release";
    return ENOTSUP;
  }
  // A placement on a member set lives in the set's own LBNs (member_sets.h).
  MemberSetSite* site = nullptr;
  if (!schema.members.empty()) {
    if (!ctx.member_sets) {
      *message = "the placement lies on a member set, which this volume does not provide";
      return EUCLEAN;
    }
    if (!(site = ctx.member_sets->site(schema.members, message))) return EUCLEAN;
    if (given) {
      *message = "a placement on a member set allocates its own extents";
      return EINVAL;
    }
  }
  const geom::Geometry& geometry = site ? site->geometry() : ctx.geometry;
  auto free_all = [&](const std::vector<Extent>& extents) {
    if (site) site->free(extents);
    else
      for (const Extent& x : extents) ctx.allocator.free(x);
  };
  std::unique_ptr<layouts::Layout> layout;
  try {
    layout = make_array_layout(geometry, schema);
  } catch (const std::exception& e) {
    *message = e.what();
    return EINVAL;
  }
  std::vector<Extent> extents;
  if (given) {
    extents = *given;
  } else if (allocate) {
    layouts::SpaceRequest req = layout->space();
    const int r = site ? site->allocate(req, &extents) : ctx.allocator.allocate(req, &extents);
    if (r) {
      const std::uint64_t free = site ? site->free_sectors() : ctx.allocator.free_sectors();
      *message = fmt::format("the array needs {} MiB of {} on the {}; {} MiB are free",
                             req.sectors * geometry.sector_size() >> 20,
                             req.shape == layouts::SpaceShape::TrackGroups ? "track groups" : "whole tracks",
                             site ? fmt::format("members {}", fmt::join(site->members(), ",")) : "device",
                             free * geometry.sector_size() >> 20);
      return r;
    }
  } else {
    std::optional<std::vector<Extent>> decoded;
    if (slot != 0) {
      const auto stored = ctx.metadata.store().get(keys::copy_extents(ino, slot));
      decoded = stored ? decode_extents(*stored) : std::nullopt;
      if (!decoded) {
        *message = fmt::format("the extent map of copy slot {} is missing or does not decode", slot);
        return EUCLEAN;
      }
    } else {
      decoded = ctx.metadata.extents(ino);
    }
    extents = std::move(*decoded);
    if (site) {
      // The layout's own extents, which must be the same sectors as the volume's map.
      const auto record = ctx.metadata.xattr(ino, set_extents_record(slot));
      auto own = record ? decode_extents(*record) : std::nullopt;
      bool same = false;
      try {
        same = own && site->to_volume(*own) == extents;
      } catch (const std::exception&) {
      }
      if (!same) {
        *message = fmt::format("the extent map of {} on members {} is missing or disagrees with the volume's",
                               slot ? fmt::format("copy slot {}", slot) : std::string("the array"),
                               fmt::join(site->members(), ","));
        return EUCLEAN;
      }
      extents = std::move(*own);
    }
  }
  try {
    layout->place(extents);
  } catch (const std::exception& e) {
    if (allocate && !given) free_all(extents);
    *message = fmt::format("the stored placement does not fit the layout: {}", e.what());
    return EUCLEAN;
  }
  std::uint64_t cells = layout->grid().cells();
  const ChecksumBlocks blocks = checksum_blocks(layout->grid().cell_bytes(), layout->sectors_per_cell(),
                                                ctx.geometry.sector_size(), schema.checksum_block);
  try {
    const bool fresh = allocate || given;
    const char sum_table = slot ? keys::kCopyChecksumTable : keys::kChecksumTable;
    const char alt_table = slot ? keys::kCopyAltChecksumTable : keys::kAltChecksumTable;
    CellChecksums sums = fresh ? CellChecksums::fresh(ino, cells, sum_table, blocks, slot)
                               : CellChecksums(ctx.metadata.store(), ino, cells, sum_table, blocks, slot);
    CellChecksums alt = fresh ? CellChecksums::fresh(ino, cells, alt_table, blocks, slot)
                              : CellChecksums(ctx.metadata.store(), ino, cells, alt_table, blocks, slot);
    *out = std::make_unique<ArrayState>(std::move(layout), std::move(sums), std::move(alt),
                                        site ? site->io() : ctx.io, site);
  } catch (const std::bad_alloc&) {
    // The checksum tables (8 bytes per cell in memory) do not fit: give the space back.
    if (allocate && !given) free_all(extents);
    *message = fmt::format("the array's {} cells need {} MiB of checksum tables in memory, more than is available",
                           cells, cells * blocks.per_cell * 8 >> 20);
    return ENOMEM;
  }
  return 0;
}

}  // namespace mmfs::fs
