#include "fs/array/copy_promotion.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>
#include <utility>
#include <vector>

#include "fs/array/behind_record.h"
#include "fs/array/member_sets.h"

namespace mmfs::fs {

namespace {

bool loses_one(const std::vector<std::uint32_t>& members, const MemberLost& lost) {
  return std::any_of(members.begin(), members.end(), [&](std::uint32_t m) { return lost(m); });
}

// The values of `a` and `b` exchanged (either may be absent).
void swap_values(const MetaStore& store, const std::string& a, const std::string& b, WriteBatch* batch) {
  const auto va = store.get(a), vb = store.get(b);
  if (vb) batch->put(a, *vb);
  else batch->del(a);
  if (va) batch->put(b, *va);
  else batch->del(b);
}

// Every key under prefix `a` moved under prefix `b` and the other way round
// (the suffixes, a checksum table's record numbers, kept).
void swap_prefixes(const MetaStore& store, const std::string& a, const std::string& b, WriteBatch* batch) {
  std::vector<std::pair<std::string, std::string>> under_a, under_b;
  auto collect = [&](const std::string& prefix, std::vector<std::pair<std::string, std::string>>* out) {
    store.scan(prefix, [&](std::string_view k, std::string_view v) {
      out->emplace_back(std::string(k.substr(prefix.size())), std::string(v));
      return true;
    });
  };
  collect(a, &under_a);
  collect(b, &under_b);
  for (const auto& [suffix, v] : under_a) batch->del(a + suffix);
  for (const auto& [suffix, v] : under_b) batch->del(b + suffix);
  for (const auto& [suffix, v] : under_a) batch->put(b + suffix, v);
  for (const auto& [suffix, v] : under_b) batch->put(a + suffix, v);
}

}  // namespace

std::optional<std::size_t> promotable_copy(const ArraySchema& s, const std::map<std::uint8_t, Roaring>& behind,
                                           const MemberLost& lost) {
  if (!lost || s.members.empty() || !loses_one(s.members, lost)) return std::nullopt;
  for (std::size_t i = 0; i < s.copies.size(); ++i) {
    const CopySpec& c = s.copies[i];
    if (c.slot == 0 || c.members.empty() || loses_one(c.members, lost)) continue;
    if (auto it = behind.find(c.slot); it != behind.end() && !it->second.isEmpty()) continue;
    return i;
  }
  return std::nullopt;
}

std::optional<std::size_t> promotable_copy_lagging(const ArraySchema& s,
                                                   const std::map<std::uint8_t, Roaring>& behind,
                                                   const MemberLost& lost) {
  if (!lost || s.members.empty() || !loses_one(s.members, lost)) return std::nullopt;
  std::optional<std::size_t> best;
  std::uint64_t fewest = 0;
  for (std::size_t i = 0; i < s.copies.size(); ++i) {
    const CopySpec& c = s.copies[i];
    if (c.slot == 0 || c.members.empty() || loses_one(c.members, lost) || c.layout == "mloc") continue;
    const auto it = behind.find(c.slot);
    const std::uint64_t n = it == behind.end() ? 0 : it->second.cardinality();
    if (!best || n < fewest) best = i, fewest = n;
  }
  return best;
}

ArraySchema promoted_schema(const ArraySchema& s, std::size_t index) {
  const CopySpec& c = s.copies.at(index);
  ArraySchema p = s;
  p.layout = c.layout;
  p.order = c.order;
  p.cell = c.cell;
  p.basic_cube = c.basic_cube;
  p.priority = c.priority;
  p.chunk = c.chunk;
  p.compress = c.compress;
  p.members = c.members;
  CopySpec& demoted = p.copies[index];
  demoted.layout = s.layout;
  demoted.order = s.order;
  demoted.cell = s.cell;
  demoted.basic_cube = s.basic_cube;
  demoted.priority = s.priority;
  demoted.chunk = s.chunk;
  demoted.compress = s.compress;
  demoted.members = s.members;
  p.layout_set = true;
  p.layout_rule = fmt::format(
      "promoted from copy {} by a degraded mount: the primary ({}, members {}) had a lost member; it is copy {} "
      "now, behind until mmfsck --rebuild restores the member",
      index + 1, s.layout, fmt::join(s.members, ","), index + 1);
  return p;
}

void stage_promotion(const MetaStore& store, Ino ino, const ArraySchema& s, std::size_t index,
                     std::uint64_t primary_cells, std::map<std::uint8_t, Roaring> behind, const Roaring& lost,
                     WriteBatch* batch) {
  const CopySpec& copy = s.copies.at(index);
  const std::uint8_t slot = copy.slot;
  // The extent maps and mloc records: a sealed mloc primary keeps its
  // image's under e/<ino>m and x/<ino>mmfs.mloc, an mloc copy its own under
  // e/<ino>k<slot> and x/<ino>mmfs.mloc.<slot>; cells have no record.
  const bool primary_image = s.layout == "mloc", copy_image = copy.layout == "mloc";
  const std::string primary_extents = primary_image ? keys::mloc_extents(ino) : keys::extents(ino);
  const auto old_primary = store.get(primary_extents), old_copy = store.get(keys::copy_extents(ino, slot));
  const auto old_primary_record = primary_image ? store.get(keys::mloc_record(ino)) : std::nullopt;
  const auto old_copy_record = copy_image ? store.get(keys::copy_mloc_record(ino, slot)) : std::nullopt;
  batch->del(primary_extents);
  batch->del(keys::copy_extents(ino, slot));
  if (primary_image) batch->del(keys::mloc_record(ino));
  if (copy_image) batch->del(keys::copy_mloc_record(ino, slot));
  if (old_copy) batch->put(copy_image ? keys::mloc_extents(ino) : keys::extents(ino), *old_copy);
  if (old_copy_record) batch->put(keys::mloc_record(ino), *old_copy_record);
  if (old_primary) batch->put(keys::copy_extents(ino, slot), *old_primary);
  if (old_primary_record) batch->put(keys::copy_mloc_record(ino, slot), *old_primary_record);
  swap_values(store, keys::xattr(ino, set_extents_record(0)), keys::xattr(ino, set_extents_record(slot)), batch);
  swap_prefixes(store, keys::checksum_table_prefix(ino, keys::kChecksumTable, 0),
                keys::checksum_table_prefix(ino, keys::kCopyChecksumTable, slot), batch);
  swap_prefixes(store, keys::checksum_table_prefix(ino, keys::kAltChecksumTable, 0),
                keys::checksum_table_prefix(ino, keys::kCopyAltChecksumTable, slot), batch);
  Roaring all;
  all.addRange(0, primary_cells);
  behind[slot] = std::move(all);
  const std::string record = encode_behind(behind);
  if (record.empty()) batch->del(keys::copy_record(ino));
  else batch->put(keys::copy_record(ino), record);
  if (lost.isEmpty()) batch->del(keys::lost_cells(ino));
  else batch->put(keys::lost_cells(ino), encode_lost(lost));
}

}  // namespace mmfs::fs
