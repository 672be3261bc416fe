// A copy takes the primary's place when the primary lies on a lost member
// (fs/array/copy_promotion.h, docs/copies-on-members.md "Promotion"): at the
// array's open on a degraded mount, and, when a member is lost while the
// volume runs, in place under an array already loaded, at its next write.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <string>

#include "fs/array/array_file.h"
#include "fs/array/array_file_internal.h"
#include "fs/array/behind_record.h"
#include "fs/meta/keys.h"

namespace mmfs::fs {

using detail::is_mloc;

namespace {

// The commit of a promotion: the schema record and the keys traded
// (stage_promotion), synced. `behind`: the copies' cells behind by slot;
// `lost`: the promoted copy's cells whose bytes the member took.
int commit_promotion(const ArrayContext& ctx, Ino ino, const ArraySchema& schema, std::size_t index,
                     const ArraySchema& next, std::uint64_t primary_cells, std::map<std::uint8_t, Roaring> behind,
                     const Roaring& lost, std::string* message) {
  MetaStore& store = ctx.metadata.store();
  WriteBatch batch;
  batch.put(keys::xattr(ino, std::string(ArrayFile::kSchemaXattr)), encode_schema(next));
  stage_promotion(store, ino, schema, index, primary_cells, std::move(behind), lost, &batch);
  if (int r = ctx.metadata.apply(batch, {})) {
    *message = "metadata commit failed (promoting a copy over a primary on a lost member)";
    return r;
  }
  if (int r = ctx.metadata.sync()) {
    *message = "metadata sync failed (promoting a copy over a primary on a lost member)";
    return r;
  }
  if (ctx.on_promoted)
    ctx.on_promoted(ino, fmt::format("copy {} ({}, members {}) is the primary now: the primary ({}, members {}) lay "
                                     "on a lost member; it is copy {}, behind until the member is rebuilt{}",
                                     index + 1, next.layout, fmt::join(next.members, ","), schema.layout,
                                     fmt::join(schema.members, ","), index + 1,
                                     lost.isEmpty()
                                         ? std::string()
                                         : fmt::format("; {} cell(s) the copy had not caught up on (cell {} first) "
                                                       "were lost with the member: they read as errors until "
                                                       "written whole",
                                                       lost.cardinality(), lost.minimum())));
  return 0;
}

}  // namespace

int ArrayFile::promote_if_primary_lost(const ArrayContext& ctx, Ino ino, const ArraySchema& schema,
                                       std::uint64_t primary_cells, ArraySchema* promoted, std::string* message) {
  if (!ctx.member_lost || schema.copies.empty()) return 0;
  // An mloc primary being written (staging cells, no image) stays: only a sealed one trades places.
  if (is_mloc(schema) && !ctx.metadata.extents(ino).empty()) return 0;
  MetaStore& store = ctx.metadata.store();
  std::map<std::uint8_t, Roaring> behind;
  if (auto v = store.get(keys::copy_record(ino)))
    if (!decode_behind(*v, &behind)) return 0;  // the copies' open reports it
  // A current copy if there is one; else the one lagging least, its
  // lagging cells lost: the array takes writes again, and every other byte
  // it held reads.
  auto index = promotable_copy(schema, behind, ctx.member_lost);
  if (!index) index = promotable_copy_lagging(schema, behind, ctx.member_lost);
  if (!index) return 0;
  const ArraySchema next = promoted_schema(schema, *index);
  const auto lagging = behind.find(schema.copies[*index].slot);
  const Roaring lost = lagging == behind.end() ? Roaring() : lagging->second;
  if (int r = commit_promotion(ctx, ino, schema, *index, next, primary_cells, std::move(behind), lost, message))
    return r;
  *promoted = next;
  return 0;
}


int ArrayFile::promote_in_place_locked(std::string* message) {
  // What the next write needs when a member was lost while the array was
  // loaded: a cell primary on the lost member, and a copy on the survivors.
  // Its lag in the primary's dirty cells is carried over below; what it lags
  // of bytes the primary's device alone held is lost with the member (a
  // copy that lags nothing such is preferred).
  if (!ctx_.member_lost || copies_.empty() || retired_) return 0;
  if (is_mloc(schema_) || !cells_locked() || !placement_lost_locked(0)) return 0;
  std::map<std::uint8_t, Roaring> behind, on_device;
  for (const ArrayCopy& c : copies_) {
    if (c.current()) continue;
    behind[c.spec.slot] = c.behind;
    Roaring lag = c.behind & c.lag_on_device;
    if (!lag.isEmpty()) on_device[c.spec.slot] = std::move(lag);
  }
  auto index = promotable_copy(schema_, on_device, ctx_.member_lost);
  if (!index) index = promotable_copy_lagging(schema_, on_device, ctx_.member_lost);
  if (!index || is_mloc(copies_[*index].schema)) return 0;  // an mloc copy trades places at the next load
  const ArraySchema next = promoted_schema(schema_, *index);
  const auto lagging = on_device.find(schema_.copies[*index].slot);
  const Roaring lost = lagging == on_device.end() ? Roaring() : lagging->second;
  if (int r = commit_promotion(ctx_, ino_, schema_, *index, next, grid_locked().cells(), std::move(behind), lost,
                               message))
    return r;
  // The placements again from the store, as an open builds them: each
  // placement's checksum tables are bound to its keys, which traded places.
  schema_ = next;
  std::unique_ptr<ArrayState> state;
  int r = build(ctx_, ino_, schema_, false, &state, message);
  std::uint64_t settled = 0;
  if (r == 0 && (r = state->settle_torn_rewrites(&settled)) != 0)
    *message = "reading the cells a crash interrupted the rewrite of failed";
  std::unique_ptr<Placement> old;
  if (r == 0) {
    old = std::move(placement_);
    replace_placement_locked(cell_placement(std::move(state), ctx_.geometry));
    r = open_copies_locked(message);
  }
  if (r != 0) {
    // The store holds the promotion and memory the placements before it
    // (or half of them): nothing may be written through them. The array's
    // next load (once it is let go) builds it from the store.
    if (old) placement_ = std::move(old);
    retired_ = true;
    *message = fmt::format("the copy was promoted over the primary on a lost member, but the array did not load "
                           "again ({}): it is served again once its files are closed",
                           *message);
    return r;
  }
  // Cells the promoted copy lagged that another copy holds current, back
  // first: the old primary's dirty bytes below may land on them.
  fill_lost_or_report_locked();
  // What the old primary had not written back, into the new one: the bytes
  // its copy lagged, and any others its writers gave it since.
  if (const ArrayState* was = old->cells(); was && was->has_dirty()) {
    ArrayState& now = *writable_cells_locked();
    was->for_each_dirty_run(
        [&](std::uint64_t offset, const std::byte* data, std::size_t length) { now.write_bytes(offset, data, length); });
  }
  return 0;
}

}  // namespace mmfs::fs
