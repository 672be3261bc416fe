// Building an array placement (ArrayFile::build): the cells its schema's
// layout asks for, over new space, given extents or the stored extent map,
// with their checksum tables; or an mloc image, encoded, loaded, staged,
// released, and (an mloc copy's) encoded anew whole. Either on the whole volume or on a member set
// (fs/array/member_sets.h).
#include <fmt/format.h>

#include <cerrno>

#include "fs/array/array_file.h"
#include "fs/array/behind_record.h"
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
    if (!fresh && slot == 0)
      if (auto record = ctx.metadata.store().get(keys::lost_cells(ino))) {
        Roaring lost;
        if (!decode_lost(*record, &lost) || (!lost.isEmpty() && lost.maximum() >= cells)) {
          out->reset();
          *message = "the record of the array's cells lost with a failed member does not decode";
          return EUCLEAN;
        }
        (*out)->set_lost(std::move(lost));
      }
  } catch (const std::bad_alloc&) {
    // The checksum tables (8 bytes per cell in memory) do not fit: give the space back.
    if (allocate && !given) free_all(extents);
    *message = fmt::format("the array's {} cells need {} MiB of checksum tables in memory, more than is available",
                           cells, cells * blocks.per_cell * 8 >> 20);
    return ENOMEM;
  }
  return 0;
}

int ArrayFile::image_site(const ArrayContext& ctx, const std::vector<std::uint32_t>& members, MemberSetSite** site,
                          std::string* message) {
  *site = nullptr;
  if (members.empty()) return 0;
  if (!ctx.member_sets) {
    *message = "the image lies on a member set, which this volume does not provide";
    return EUCLEAN;
  }
  return (*site = ctx.member_sets->site(members, message)) ? 0 : EUCLEAN;
}

int ArrayFile::load_image(const ArrayContext& ctx, Ino ino, const ArraySchema& schema, std::uint8_t slot,
                          std::unique_ptr<Placement>* out, std::string* message) {
  MlocParams params;
  if (int r = mloc_params(schema.shape, schema.dtype.name, schema.chunk, schema.priority, schema.compress,
                          schema.bins, &params, message))
    return r;
  MemberSetSite* site = nullptr;
  if (int r = image_site(ctx, schema.members, &site, message)) return r;
  SectorIo& io = site ? site->io() : ctx.io;
  // On a set the image addresses its sectors in the set's LBNs: the record of
  // them must name the sectors the volume's extent map does.
  std::optional<std::vector<Extent>> own;
  const std::string key = slot ? keys::copy_mloc_record(ino, slot) : keys::mloc_record(ino);
  if (site && ctx.metadata.store().get(key)) {
    const auto stored = ctx.metadata.store().get(slot ? keys::copy_extents(ino, slot) : keys::mloc_extents(ino));
    const auto volume = stored ? decode_extents(*stored) : std::nullopt;
    const auto record = ctx.metadata.xattr(ino, set_extents_record(slot));
    own = record ? decode_extents(*record) : std::nullopt;
    bool same = false;
    try {
      same = own && volume && site->to_volume(*own) == *volume;
    } catch (const std::exception&) {
    }
    if (!same) {
      *message = fmt::format("the extent map of {}'s mloc image on members {} is missing or disagrees with the "
                             "volume's", slot ? fmt::format("copy slot {}", slot) : std::string("the array"),
                             fmt::join(site->members(), ","));
      return EUCLEAN;
    }
  }
  std::unique_ptr<MlocImage> image;
  const int r = MlocImage::load(ctx.metadata, io, ino, params, &image, message, slot, own ? &*own : nullptr);
  if (r || !image) {
    // (A failed load still gets an empty stand-in: a copy then lags whole.)
    std::string ignored;
    if (int e = MlocImage::empty(params, io, &image, r ? &ignored : message)) return r ? r : e;
  }
  *out = image_placement(std::move(image), ctx.geometry, site);
  return r;
}

int ArrayFile::encode_image_locked(const ArraySchema& schema, bool empty, std::unique_ptr<Placement>* out,
                                   std::string* message) {
  MlocParams params;
  if (int r = mloc_params_of(schema, &params, message)) return r;
  MemberSetSite* site = nullptr;
  if (int r = image_site(ctx_, schema.members, &site, message)) return r;
  SectorIo& io = site ? site->io() : ctx_.io;
  std::unique_ptr<MlocImage> image;
  if (empty || !holds_data_locked()) {
    if (int r = MlocImage::empty(params, io, &image, message)) return r;
  } else {
    // From the current placement the model reads cheapest (never a copy that lags).
    AlignedBuffer scratch;
    const RowReader rows = [&](std::uint64_t row, std::uint64_t count, std::byte* o, std::string* m) {
      return read_rows_locked(row, count, o, m, &scratch);
    };
    SpaceSource& space = site ? site->space() : static_cast<SpaceSource&>(ctx_.allocator);
    if (int r = MlocImage::encode(params, rows, space, io, &image, message)) return r;
  }
  *out = image_placement(std::move(image), ctx_.geometry, site);
  return 0;
}

void ArrayFile::stage_image(const Placement& image, std::uint8_t slot, WriteBatch& batch) const {
  const MemberSetSite* site = image.site();
  image.image()->stage(ino_, batch, slot, site ? &image.extents() : nullptr);
  if (site && image.holds_data())
    batch.put(keys::xattr(ino_, set_extents_record(slot)), encode_extents(image.image()->extents()));
  else
    batch.del(keys::xattr(ino_, set_extents_record(slot)));
}

void ArrayFile::release_image(Placement& image) {
  MemberSetSite* site = image.site();
  image.image()->release(site ? site->space() : static_cast<SpaceSource&>(ctx_.allocator));
}

int ArrayFile::reencode_copy_locked(std::size_t k, std::string* message) {
  ArrayCopy& c = copies_.at(k - 1);
  if (int r = flush_locked(false, message)) return r;
  std::unique_ptr<Placement> fresh;
  if (int r = encode_image_locked(c.schema, false, &fresh, message)) {
    *message = fmt::format("copy {}: re-encoding its mloc image: {}", k, *message);
    return r;
  }
  // The stored image's extents go (a copy whose image failed to load holds
  // an empty stand-in, not them).
  WriteBatch batch;
  std::vector<Extent> dropped;
  MlocImage::stage_removal(ctx_.metadata, ino_, batch, &dropped, c.spec.slot);
  stage_image(*fresh, c.spec.slot, batch);
  Roaring was = std::move(c.behind);
  c.behind = Roaring();
  stage_copies_record_locked(batch);
  if (int r = ctx_.metadata.apply(batch, std::move(dropped))) {
    c.behind = std::move(was);
    release_image(*fresh);
    *message = "metadata commit failed";
    return r;
  }
  for (ArrayCopy& other : copies_) other.unrecorded = false;
  c.placement = std::move(fresh);
  ++placement_epoch_;  // views may be served by it again
  return 0;
}

void ArrayFile::note_bad_image_locked(std::uint32_t k, const std::string& why) {
  ArrayCopy& c = copies_.at(k - 1);
  const std::uint64_t chunks = c.placement->grid().cells();
  if (c.behind.cardinality() == chunks) return;  // already to be encoded anew
  c.behind.addRange(0, chunks);
  c.unrecorded = true;
  ++placement_epoch_;  // it serves no view now
  if (ctx_.on_healed)
    ctx_.on_healed(ino_, fmt::format("{}: its mloc image failed to read ({}); it is encoded anew from the other "
                                     "placements", placement_name(k), why));
}

}  // namespace mmfs::fs
