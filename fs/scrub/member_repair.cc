// Putting back a rebuilt RAID 0 member's data (fs/scrub/member_repair.h).
#include "fs/scrub/member_repair.h"

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <map>
#include <set>

#include "fs/array/array_file.h"
#include "fs/meta/keys.h"
#include "fs/meta/subset_allocator.h"
#include "fs/scrub/scrub_map.h"
#include "geometry/member_subset.h"

namespace mmfs::fs {

int repair_member_data(Volume& volume, std::uint32_t member, MemberRepairReport* report, std::string* message) {
  const auto* g = dynamic_cast<const geom::StripedGeometry*>(&volume.geometry());
  if (!g || member >= g->members()) {
    *message = fmt::format("the volume has no stripe member {}", member);
    return EINVAL;
  }
  Metadata& md = volume.metadata();
  const geom::MemberSubset on_member(*g, {member});
  // Which extent maps touch the member, per inode: the file's own, its copies', its index's, an mloc image's.
  std::map<Ino, std::set<keys::Kind>> touched;
  md.store().scan(keys::scan_prefix(keys::Kind::Extents), [&](std::string_view key, std::string_view value) {
    const auto parsed = keys::parse(key);
    const auto extents = decode_extents(value);
    if (parsed && extents && !on_member.on_set(as_runs(*extents)).empty()) touched[parsed->ino].insert(parsed->kind);
    return true;
  });
  if (touched.empty()) return 0;
  const auto paths = inode_paths(md);
  auto path_of = [&](Ino ino) {
    auto it = paths.find(ino);
    return it != paths.end() ? it->second : fmt::format("inode {}", ino);
  };
  SectorIo io(volume.device(), volume.geometry());
  MemberSets sets(volume.allocator(), volume.device(), volume.geometry());
  ArrayContext ctx{md, volume.allocator(), io, volume.geometry(), volume.geometry().name()};
  ctx.member_sets = &sets;
  const std::atomic<bool> stop{false};
  for (const auto& [ino, kinds] : touched) {
    const auto record = md.xattr(ino, std::string(ArrayFile::kSchemaXattr));
    const auto schema = record ? decode_schema(*record) : std::nullopt;
    const bool index = kinds.count(keys::Kind::IndexExtents) > 0;
    auto index_lost = [&](const std::string& why) {
      report->lost.push_back(fmt::format("{}: its bitmap index ({}; set user.mmfs.index again to rebuild it)",
                                         path_of(ino), why));
    };
    const bool copied = schema && !schema->copies.empty();
    if (kinds.count(keys::Kind::MlocExtents) && !copied)
      report->lost.push_back(fmt::format("{}: mloc image blocks", path_of(ino)));
    // (An mloc primary's image with copies is sealed anew from them below: ArrayFile::repair_placements.)
    const bool placed = kinds.count(keys::Kind::Extents) || kinds.count(keys::Kind::CopyExtents) ||
                        (copied && kinds.count(keys::Kind::MlocExtents));
    if (!placed && !index) continue;
    if (!schema || schema->shape.empty()) {
      report->lost.push_back(fmt::format("{}: file blocks", path_of(ino)));
      continue;
    }
    if (kinds.count(keys::Kind::MlocExtents) && !copied) {
      if (index) index_lost("built from an image that is lost too");
      if (!placed) continue;
    }
    if (placed && schema->copies.empty()) {
      report->lost.push_back(fmt::format("{}: array cells (the array has no copies)", path_of(ino)));
      if (index) index_lost("built from cells that are lost too");
      continue;
    }
    std::shared_ptr<ArrayFile> a;
    std::string why;
    if (int r = ArrayFile::open(ctx, ino, *schema, &a, &why)) {
      report->failed.push_back(fmt::format("{}: {} ({})", path_of(ino), why, std::strerror(r)));
      if (index) index_lost("the array did not open");
      continue;
    }
    // An index is derived from the data: once the data reads whole again
    // (it did not lie on the member, or its copies put it back), the index
    // is built from it anew.
    auto rebuild_index = [&]() {
      std::string why_not;
      if (int r = a->rebuild_index(&why_not)) return index_lost(fmt::format("{}: {}", why_not, std::strerror(r)));
      ++report->indexes;
    };
    if (!placed) {
      rebuild_index();
      a->quiesce();
      continue;
    }
    // A copy behind (writes while the member was gone) repairs nothing until
    // caught up, and its catch-up reads the primary: repair what the current
    // placements can, catch up, and only then read everything once more.
    // Cells lost with the member (a lagging copy was promoted over it): the
    // catch-up first fills those another copy holds (ArrayFile::catch_up);
    // the rest are gone for good, reported as lost as a plain file's blocks
    // are; the copies catch up on every other cell, and the placements are
    // read through once every lost cell has been written whole (they fail
    // there).
    const nlohmann::json info = a->info();
    bool behind = false;
    for (const auto& c : info.value("copies", nlohmann::json::array())) behind = behind || c["state"] != "current";
    std::uint64_t lost = info.value("lost_cells", std::uint64_t{0});
    std::uint64_t first_lost = info.value("first_lost_cell", std::uint64_t{0});
    std::uint64_t repaired = 0, more = 0;
    int r = 0;
    if (lost) {
      r = a->catch_up(&why);
      behind = false;
      const nlohmann::json now = a->info();
      lost = now.value("lost_cells", std::uint64_t{0});
      first_lost = now.value("first_lost_cell", std::uint64_t{0});
    }
    if (lost)
      report->lost.push_back(fmt::format("{}: {} array cell(s) (cell {} first), which the copy promoted over the "
                                         "member had not caught up on and no other copy held; each reads as an "
                                         "error until written whole",
                                         path_of(ino), lost, first_lost));
    if (r == 0) {
      if (!lost) r = a->repair_placements(stop, &repaired, &why);
      if (behind) {
        r = a->catch_up(&why);
        if (r == 0 && !lost) r = a->repair_placements(stop, &more, &why);
      }
    }
    if (r == 0) r = a->flush(true, &why);
    if (index) {
      if (r == 0) rebuild_index();
      else index_lost("the array's repair failed");
    }
    a->quiesce();
    repaired += more;
    if (r) {
      report->failed.push_back(fmt::format("{}: {} ({})", path_of(ino), why, std::strerror(r)));
      continue;
    }
    ++report->arrays;
    report->cells += repaired;
  }
  return 0;
}

}  // namespace mmfs::fs
