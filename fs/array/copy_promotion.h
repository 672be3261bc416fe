// A copy takes the primary's place when the primary lies on a lost member
// (docs/copies-on-members.md, "Promotion"). On a RAID 0 volume mounted
// without a member (-o degraded), an array whose primary had cells there
// can still be read from a copy on the survivors, but its writes would fail:
// the primary is the placement writes land in and fsync makes durable. So at
// the array's first open in such a mount, a current copy on surviving members
// is promoted: in one commit, the schema's placement attributes and members
// trade places with that copy's, the two placements' keys in the store are
// exchanged (extent maps, mloc image records, member-set extent records,
// checksum and alternative tables), and the old primary becomes that copy's slot with
// every cell behind, so it is never read until a catch-up after
// `mmfsck --rebuild` rewrites it from the new primary. A crash leaves the
// commit applied or not, never half of it.
//
// What the user sees: user.mmfs.layout (and the placement attributes) name
// the promoted layout, user.mmfs.copies the old primary's, A@/info's
// layout_rule says why. Pure over the metadata store: no device I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include <roaring/roaring.hh>

#include "fs/array/array_schema.h"
#include "fs/meta/keys.h"
#include "fs/meta/meta_store.h"

namespace mmfs::fs {

// Whether member `m` of the volume is lost (recorded failed and absent).
using MemberLost = std::function<bool(std::uint32_t member)>;

// The copy (index in s.copies) to promote: the first whose members are
// all present and which has no cell behind (`behind`: the decoded
// keys::copy_record). nullopt when the primary loses no member (or lies on
// the whole volume: no member set) or when no copy qualifies.
std::optional<std::size_t> promotable_copy(const ArraySchema& s, const std::map<std::uint8_t, Roaring>& behind,
                                           const MemberLost& lost);
// When no copy qualifies above: the copy of cells (not an mloc image) on
// present members with the fewest cells behind, whose lagging cells the
// member took with it (docs/copies-on-members.md, "Cells lost with a
// member"). nullopt when the primary loses no member or no copy is on
// present members.
std::optional<std::size_t> promotable_copy_lagging(const ArraySchema& s,
                                                   const std::map<std::uint8_t, Roaring>& behind,
                                                   const MemberLost& lost);

// `s` with copy `index` as the primary and the primary as that copy (same
// slot); layout_set, and layout_rule saying why.
ArraySchema promoted_schema(const ArraySchema& s, std::size_t index);

// Stages into `batch` everything of the promotion but the schema record:
// the keys of the primary and of copy `index` exchanged, the record of
// cells behind with the old primary's `primary_cells` cells all behind in
// the copy's slot (`behind`: the current record, decoded), and the record
// of the new primary's cells lost with the member (keys::lost_cells): `lost`
// (cells of the copy's grid), the old primary's record dropped.
void stage_promotion(const MetaStore& store, Ino ino, const ArraySchema& s, std::size_t index,
                     std::uint64_t primary_cells, std::map<std::uint8_t, Roaring> behind, const Roaring& lost,
                     WriteBatch* batch);

}  // namespace mmfs::fs
