#include "fs/table/capsule_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>

#include "fs/array/array_layout.h"
#include "layouts/capsule.h"

namespace mmfs::fs {

using layouts::CellGrid;
using layouts::DimRange;
using layouts::Selection;

namespace {

// The attributes' placement locks, taken in inode order (every multi-array
// operation takes them so, and never while holding one already).
template <class Lock>
std::vector<Lock> lock_all(std::span<const TableAttribute> attributes) {
  std::vector<const TableAttribute*> order;
  for (const TableAttribute& a : attributes) order.push_back(&a);
  std::sort(order.begin(), order.end(), [](auto* x, auto* y) { return x->ino < y->ino; });
  std::vector<Lock> locks;
  for (std::size_t i = 0; i < order.size(); ++i)
    if (i == 0 || order[i]->ino != order[i - 1]->ino)  // two names of one array: one lock
      locks.emplace_back(order[i]->array->placement_mutex());
  return locks;
}

Selection records_of(std::uint64_t first, std::uint64_t count) {
  return Selection({DimRange{first, first + count, 1, false}});
}

layouts::CapsulePart part_of(const TablePart& t) {
  return layouts::CapsulePart{t.capsule_blocks, t.first_block, t.cells_per_capsule};
}

// The placement of attribute `schema` (1-D, in capsules), for the space it asks.
std::unique_ptr<layouts::CapsuleLayout> capsule_layout(const ArrayContext& ctx, const ArraySchema& schema) {
  std::unique_ptr<layouts::Layout> layout = make_array_layout(ctx.geometry, schema);
  auto* capsule = dynamic_cast<layouts::CapsuleLayout*>(layout.get());
  if (!capsule) throw std::invalid_argument("a table attribute's schema has no capsule part");
  layout.release();
  return std::unique_ptr<layouts::CapsuleLayout>(capsule);
}

int allocate_bands(const ArrayContext& ctx, const layouts::CapsuleLayout& probe, std::uint64_t groups,
                   std::vector<Extent>* bands, std::string* message) {
  layouts::SpaceRequest req = probe.space();
  req.groups = groups;
  req.sectors = groups * probe.band_sectors();
  std::vector<Extent> got;
  if (int r = ctx.allocator.allocate(req, &got)) {
    *message = fmt::format("the table's capsules need {} bands of {} tracks ({} MiB); {} MiB are free", groups,
                           req.group_tracks, req.sectors * ctx.geometry.sector_size() >> 20,
                           ctx.allocator.free_sectors() * ctx.geometry.sector_size() >> 20);
    return r;
  }
  *bands = layouts::split_into_bands(got, probe.band_sectors());
  return 0;
}

void free_all(const ArrayContext& ctx, const std::vector<Extent>& extents) {
  for (const Extent& e : extents) ctx.allocator.free(e);
}

// Commits the staged placements (and the directory's record, or its
// removal) in one batch, then adopts them. Returns like commit_placement: >0
// not applied (the caller frees the new space), <0 applied but not synced.
int commit_all(const ArrayContext& ctx, Ino dir, std::span<const TableAttribute> attributes,
               std::vector<ArrayFile::Staged>& staged, const std::optional<TableRecord>& record,
               std::string* message) {
  if (int r = ctx.io.flush()) {  // the copied cells before the records that point at them
    *message = "device flush failed";
    return r;
  }
  WriteBatch batch;
  std::vector<Extent> dropped;
  for (std::size_t i = 0; i < attributes.size(); ++i) {
    attributes[i].array->stage_commit_locked(staged[i], batch);
    dropped.insert(dropped.end(), staged[i].dropped.begin(), staged[i].dropped.end());
  }
  if (record) batch.put(keys::xattr(dir, kTableXattr), encode_table_record(*record));
  else if (ctx.metadata.xattr(dir, kTableXattr)) batch.del(keys::xattr(dir, kTableXattr));
  if (int r = ctx.metadata.apply(batch, std::move(dropped))) {
    *message = "metadata commit failed";
    return r;
  }
  for (std::size_t i = 0; i < attributes.size(); ++i) attributes[i].array->adopt_locked(std::move(staged[i]));
  if (int r = ctx.metadata.sync()) {
    *message = "metadata sync failed";
    return -r;
  }
  return 0;
}

}  // namespace

std::string encode_table_record(const TableRecord& r) {
  return nlohmann::json{{"layout", r.layout},
                        {"records_per_capsule", r.records_per_capsule},
                        {"capsule_sectors", r.capsule_sectors}}
      .dump();
}

std::optional<TableRecord> decode_table_record(std::string_view text) {
  auto j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  auto layout = j.find("layout");
  auto per = j.find("records_per_capsule");
  auto sectors = j.find("capsule_sectors");
  if (layout == j.end() || !layout->is_string() || per == j.end() || !per->is_number_unsigned() ||
      sectors == j.end() || !sectors->is_number_unsigned() || sectors->get<std::uint64_t>() > UINT32_MAX)
    return std::nullopt;
  return TableRecord{layout->get<std::string>(), per->get<std::uint64_t>(), sectors->get<std::uint32_t>()};
}

int check_table(std::span<const TableAttribute> attributes, std::uint64_t* records, std::string* message) {
  if (attributes.empty()) {
    *message = "the directory holds no 1-D array files (a table's attributes)";
    return EINVAL;
  }
  const std::vector<std::uint64_t> first = attributes[0].array->shape();
  for (std::size_t i = 0; i < attributes.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (attributes[i].ino == attributes[j].ino) {
        *message = fmt::format("'{}' and '{}' are one array file (hard links): a table's attributes are distinct "
                               "arrays",
                               attributes[j].name, attributes[i].name);
        return EINVAL;
      }
  for (const TableAttribute& a : attributes) {
    const std::vector<std::uint64_t> shape = a.array->shape();
    if (shape.size() != 1 || shape[0] != first.at(0)) {
      *message = fmt::format("'{}' has shape {} and '{}' shape {}: a table's attributes are 1-D arrays of one length",
                             a.name, fmt::join(shape, ","), attributes[0].name, fmt::join(first, ","));
      return EINVAL;
    }
  }
  *records = first.at(0);
  return 0;
}

int place_table_in_capsules(const ArrayContext& ctx, Ino dir, std::span<const TableAttribute> attributes,
                            std::string* message) {
  if (ctx.geometry.kind() != geom::DeviceKind::Mems) {
    *message = fmt::format("user.mmfs.layout: 'capsule' needs a MEMS volume (equivalence classes); this volume's "
                           "geometry '{}' has none",
                           ctx.geometry.name());
    return ENOTSUP;
  }
  std::uint64_t records = 0;
  if (int r = check_table(attributes, &records, message)) return r;
  std::vector<std::uint32_t> sizes;
  for (const TableAttribute& a : attributes) sizes.push_back(a.array->schema().dtype.itemsize);
  layouts::CapsuleFormat format;
  try {
    format = layouts::capsule_resolve(sizes, ctx.geometry.sector_size(), ctx.geometry.parallelism());
  } catch (const std::invalid_argument& e) {
    *message = e.what();
    return EINVAL;
  }
  auto locks = lock_all<std::unique_lock<DrainingSharedMutex>>(attributes);
  std::vector<ArraySchema> next;
  for (std::size_t i = 0; i < attributes.size(); ++i) {
    ArraySchema s = attributes[i].array->schema_locked();
    s.layout = "capsule";
    s.cell = {format.records_per_block(i)};
    s.order.clear();
    s.basic_cube.clear();
    s.table_part = TablePart{dir, format.total, format.first[i], format.blocks[i]};
    s.members.clear();  // capsules span the whole volume (an array keeps a member set after its copies go)
    next.push_back(std::move(s));
  }
  std::unique_ptr<layouts::CapsuleLayout> probe;
  try {
    probe = capsule_layout(ctx, next[0]);
  } catch (const std::invalid_argument& e) {
    *message = e.what();
    return EINVAL;
  }
  std::vector<Extent> bands;
  if (int r = allocate_bands(ctx, *probe, probe->bands(), &bands, message)) return r;
  std::vector<ArrayFile::Staged> staged(attributes.size());
  for (std::size_t i = 0; i < attributes.size(); ++i) {
    const std::vector<Extent> mine =
        layouts::band_part_extents(bands, probe->capsules_per_band(), part_of(*next[i].table_part));
    if (int r = attributes[i].array->stage_placement_locked(next[i], &mine, true, &staged[i], message)) {
      free_all(ctx, bands);
      *message = fmt::format("'{}': {}", attributes[i].name, *message);
      return r;
    }
  }
  int r = commit_all(ctx, dir, attributes, staged, TableRecord{"capsule", format.records, format.total}, message);
  if (r > 0) free_all(ctx, bands);
  return r < 0 ? -r : r;
}

int place_table_apart(const ArrayContext& ctx, Ino dir, std::span<const TableAttribute> attributes,
                      std::span<const ArraySchema> next, std::string* message) {
  auto locks = lock_all<std::unique_lock<DrainingSharedMutex>>(attributes);
  std::vector<ArrayFile::Staged> staged(attributes.size());
  auto release = [&](std::size_t upto) {
    for (std::size_t j = 0; j < upto; ++j) free_all(ctx, staged[j].state->volume_extents());
  };
  for (std::size_t i = 0; i < attributes.size(); ++i) {
    if (int r = attributes[i].array->stage_placement_locked(next[i], nullptr, true, &staged[i], message)) {
      release(i);
      *message = fmt::format("'{}': {}", attributes[i].name, *message);
      return r;
    }
  }
  int r = commit_all(ctx, dir, attributes, staged, std::nullopt, message);
  if (r > 0) release(attributes.size());
  return r < 0 ? -r : r;
}

int grow_table(const ArrayContext& ctx, Ino dir, std::span<const TableAttribute> attributes, std::uint64_t records,
               std::string* message) {
  std::uint64_t length = 0;
  if (int r = check_table(attributes, &length, message)) return r;
  if (records < length) {
    *message = fmt::format("a table grows, never shrinks: it holds {} records, {} were asked", length, records);
    return EINVAL;
  }
  auto locks = lock_all<std::unique_lock<DrainingSharedMutex>>(attributes);
  std::vector<ArraySchema> next;
  for (const TableAttribute& a : attributes) {
    ArraySchema s = a.array->schema_locked();
    if (!s.table_part || s.table_part->table != dir) {
      *message = fmt::format("'{}' is not in the directory's capsules: set user.mmfs.layout=capsule on the "
                             "directory again to take it in, then grow",
                             a.name);
      return EINVAL;
    }
    if (s.index != "none") {
      *message = fmt::format("'{}' has a bitmap index: set its user.mmfs.index to none, grow, then set it again",
                             a.name);
      return EINVAL;
    }
    s.shape = {records};
    next.push_back(std::move(s));
  }
  if (records == length) return 0;
  std::unique_ptr<layouts::CapsuleLayout> probe;
  try {
    probe = capsule_layout(ctx, next[0]);
  } catch (const std::invalid_argument& e) {
    *message = e.what();
    return EINVAL;
  }
  const std::uint64_t have = attributes[0].array->cells_locked()->layout().extents().size();
  std::vector<Extent> bands;
  if (probe->bands() > have)
    if (int r = allocate_bands(ctx, *probe, probe->bands() - have, &bands, message)) return r;
  // Blocks of the new bands that no attribute owns (one that was removed) go
  // back: a track each, or P consecutive tracks (one per member) when striped.
  const std::uint64_t track = probe->capsules_per_band();
  std::vector<bool> owned(next[0].table_part->capsule_blocks, false);
  for (const ArraySchema& s : next)
    for (std::uint32_t b = 0; b < s.table_part->cells_per_capsule; ++b) owned.at(s.table_part->first_block + b) = true;
  std::vector<Extent> unowned;
  for (const Extent& band : bands)
    for (std::size_t b = 0; b < owned.size(); ++b)
      if (!owned[b]) unowned.push_back({band.start + b * track, track});
  std::vector<ArrayFile::Staged> staged(attributes.size());
  for (std::size_t i = 0; i < attributes.size(); ++i) {
    std::vector<Extent> mine = attributes[i].array->cells_locked()->layout().extents();
    const std::vector<Extent> added = layouts::band_part_extents(bands, track, part_of(*next[i].table_part));
    mine.insert(mine.end(), added.begin(), added.end());
    if (int r = attributes[i].array->stage_placement_locked(next[i], &mine, false, &staged[i], message)) {
      free_all(ctx, bands);
      *message = fmt::format("'{}': {}", attributes[i].name, *message);
      return r;
    }
  }
  const std::optional<std::string> stored = ctx.metadata.xattr(dir, kTableXattr);
  std::optional<TableRecord> record = stored ? decode_table_record(*stored) : std::nullopt;
  int r = commit_all(ctx, dir, attributes, staged, record, message);
  if (r > 0) {
    free_all(ctx, bands);
    return r;
  }
  free_all(ctx, unowned);
  return -r;
}

namespace {

// Reads the attributes' cells of the records in the combined plan's batches
// and gathers each attribute's elements into columns[i].
int read_columns(const ArrayContext& ctx, std::span<const TableAttribute> attributes, std::uint64_t first,
                 std::uint64_t count, std::vector<std::vector<std::byte>>* columns, std::string* message) {
  const Selection sel = records_of(first, count);
  columns->assign(attributes.size(), {});
  // A sealed mloc attribute has no cells to batch with the others: its file serves it.
  std::vector<bool> cells(attributes.size(), true);
  for (std::size_t i = 0; i < attributes.size(); ++i) {
    const std::uint32_t size = attributes[i].array->schema().dtype.itemsize;
    (*columns)[i].resize(count * size);
    if (attributes[i].array->schema().layout != "mloc") continue;
    cells[i] = false;
    std::size_t got = 0;
    if (int r = attributes[i].array->read(first * size, count * size, (*columns)[i].data(), &got, message)) return r;
  }
  for (int attempt = 0;; ++attempt) {
    // Dirty cells first (a read sees every write before it).
    for (std::size_t i = 0; i < attributes.size(); ++i)
      if (cells[i] && attributes[i].array->has_dirty_cells())
        if (int r = attributes[i].array->flush(false, message)) return r;
    auto locks = lock_all<std::shared_lock<DrainingSharedMutex>>(attributes);
    bool dirty = false;
    std::vector<layouts::IoPlan> plans;
    for (std::size_t i = 0; i < attributes.size(); ++i) {
      const ArrayState* state = cells[i] ? attributes[i].array->cells_locked() : nullptr;
      if (!state) continue;
      dirty = dirty || state->has_dirty();
      plans.push_back(layouts::plan_selection(state->layout(), sel));
    }
    if (dirty && attempt < 3) continue;  // a write landed between the flush and the locks
    if (dirty) {
      *message = "the table's attributes are being written: the read could not see a settled state";
      return EAGAIN;
    }
    const layouts::IoPlan plan = layouts::combine_plans(plans, ctx.geometry.sector_size());
    SectorBuffer sectors(plan, ctx.geometry.sector_size());
    for (const layouts::IoBatch& batch : plan.batches)
      if (int r = ctx.io.read(sectors.runs_of(batch))) {
        *message = "device read failed";
        return r;
      }
    for (std::size_t i = 0; i < attributes.size(); ++i) {
      const ArrayState* state = cells[i] ? attributes[i].array->cells_locked() : nullptr;
      if (!state) continue;
      std::uint64_t bad = 0;
      if (int r = state->gather_selection(sel, sectors, (*columns)[i].data(), &bad)) {
        *message = fmt::format("'{}': cell {} failed its checksum (the device returned other bytes than were "
                               "written)",
                               attributes[i].name, bad);
        return r;
      }
    }
    return 0;
  }
}

}  // namespace

int read_table_rows(const ArrayContext& ctx, std::span<const TableAttribute> attributes, std::uint64_t first,
                    std::uint64_t count, std::byte* out, std::string* message) {
  if (count == 0) return 0;
  std::vector<std::vector<std::byte>> columns;
  if (int r = read_columns(ctx, attributes, first, count, &columns, message)) return r;
  std::uint64_t record = 0;
  for (const auto& c : columns) record += c.size() / count;
  std::uint64_t offset = 0;
  for (const auto& c : columns) {
    const std::uint64_t size = c.size() / count;
    for (std::uint64_t r = 0; r < count; ++r) std::memcpy(out + r * record + offset, c.data() + r * size, size);
    offset += size;
  }
  return 0;
}

int table_rows_plan(const ArrayContext& ctx, std::span<const TableAttribute> attributes, std::uint64_t first,
                    std::uint64_t count, layouts::IoPlan* out, std::string* message) {
  (void)message;
  std::vector<layouts::IoPlan> plans;
  for (const TableAttribute& a : attributes) plans.push_back(a.array->scan_plan(records_of(first, count)));
  *out = layouts::combine_plans(plans, ctx.geometry.sector_size());
  layouts::model_plan(*out, ctx.geometry);
  return 0;
}

nlohmann::json table_info(std::span<const TableAttribute> attributes, Ino dir,
                          const std::optional<TableRecord>& record) {
  nlohmann::json attrs = nlohmann::json::array();
  std::uint64_t offset = 0, records = 0;
  bool all_in = !attributes.empty();
  for (const TableAttribute& a : attributes) {
    const ArraySchema s = a.array->schema();
    const bool in = s.table_part && s.table_part->table == dir;
    all_in = all_in && in;
    records = s.shape.at(0);
    attrs.push_back({{"name", a.name},
                     {"dtype", s.dtype.name},
                     {"itemsize", s.dtype.itemsize},
                     {"offset", offset},
                     {"layout", s.layout},
                     {"in_capsules", in}});
    offset += s.dtype.itemsize;
  }
  nlohmann::json j = {{"records", records},
                      {"record_bytes", offset},
                      {"attributes", attrs},
                      {"layout", record ? record->layout : "none"}};
  if (record && record->layout == "capsule") {
    nlohmann::json c = {{"records_per_capsule", record->records_per_capsule},
                        {"sectors", record->capsule_sectors},
                        {"all_attributes_in_capsules", all_in}};
    if (!attributes.empty() && all_in) {
      const nlohmann::json d = attributes[0].array->info();
      if (d.contains("capsule")) {
        c["capsules"] = d["capsule"]["capsules"];
        c["bands"] = d["capsule"]["bands"];
        c["split_capsules"] = d["capsule"]["split_capsules"];
        c["parallelism"] = d["capsule"]["parallelism"];
      }
    }
    j["capsule"] = c;
  }
  return j;
}

}  // namespace mmfs::fs
