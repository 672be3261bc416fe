// A directory of equal-length 1-D arrays is a table (docs/reference.md §5): each array an
// attribute, element i of every array record i. Here the table is placed in
// the MEMS paper's capsules (§5.2, layouts/capsule.h) and read by records:
//
//  * `user.mmfs.layout=capsule` on the directory resolves one capsule format
//    from the attributes' itemsizes (CapsuleResolve), allocates the bands of
//    c tracks once, and gives attribute i its tracks [first_i, first_i+b_i)
//    of every band (its TablePart). On a volume of P striped MEMS members a
//    band is a group of c·P tracks and each of its blocks P tracks, one per
//    member (layouts/capsule.h); the arithmetic here is the same. Every attribute's bytes are copied into
//    its new placement, then one metadata batch switches all of them (their
//    schemas, extents and checksum tables) and writes the directory's table
//    record: a crash leaves every attribute in its old placement or every
//    one in capsules, never a mix. Any other layout moves them out the same way.
//  * Growing (`user.mmfs.shape=N` on the directory, N >= the length) keeps the
//    capsules: old records keep their sectors; new capsules fill the last
//    band's free slots and then new bands, allocated once for all attributes.
//  * Record ranges (`D@/rows/A:B`) plan every attribute's cells, combine the
//    plans (one batch holds a capsule's sectors of every attribute: one
//    parallel access per capsule on the device), read them, and interleave
//    the attributes into records.
//
// The attributes are the directory's 1-D arrays, in readdir order (names
// sorted bytewise). The daemon finds them; everything here takes them as
// given and holds their placement locks (in inode order) for its duration.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fs/array/array_file.h"
#include "layouts/io_plan.h"

namespace mmfs::fs {

struct TableAttribute {
  std::string name;
  Ino ino = 0;
  std::shared_ptr<ArrayFile> array;
};

// The directory's own record of its table (xattr kTableXattr, outside the
// user namespace): the layout the directory's user.mmfs.layout shows and the
// capsule format its attributes were placed with.
struct TableRecord {
  std::string layout = "capsule";
  std::uint64_t records_per_capsule = 0;
  std::uint32_t capsule_sectors = 0;
  bool operator==(const TableRecord&) const = default;
};
inline constexpr std::string_view kTableXattr = "mmfs.table";
std::string encode_table_record(const TableRecord& record);
std::optional<TableRecord> decode_table_record(std::string_view text);

// Checks that `attributes` form a table: at least one, every one a 1-D
// array, all of one length (*records). EINVAL with a message naming the
// first that does not.
int check_table(std::span<const TableAttribute> attributes, std::uint64_t* records, std::string* message);

// Places every attribute into shared capsules (see above). EINVAL for a
// table that does not fit capsules (an itemsize larger than a sector, an
// mloc attribute), ENOTSUP on a volume without equivalence classes, ENOSPC.
// Nothing changes on failure.
int place_table_in_capsules(const ArrayContext& ctx, Ino dir, std::span<const TableAttribute> attributes,
                            std::string* message);
// Gives every attribute its schema of `next` (same order; not capsule) in one
// commit, each on its own newly allocated placement, and drops the
// directory's table record.
int place_table_apart(const ArrayContext& ctx, Ino dir, std::span<const TableAttribute> attributes,
                      std::span<const ArraySchema> next, std::string* message);
// Grows every attribute of a table in capsules to `records` (>= its length).
// EINVAL when an attribute is not in the directory's capsules or has a
// bitmap index (drop it first, set it again after).
int grow_table(const ArrayContext& ctx, Ino dir, std::span<const TableAttribute> attributes, std::uint64_t records,
               std::string* message);

// Records [first, first + count) of the table: per record, every
// attribute's element in attribute order (packed, no padding).
// REQUIRES first + count <= the table's length.
int read_table_rows(const ArrayContext& ctx, std::span<const TableAttribute> attributes, std::uint64_t first,
                    std::uint64_t count, std::byte* out, std::string* message);
// The device plan of that read (combined; modeled on the volume's geometry).
int table_rows_plan(const ArrayContext& ctx, std::span<const TableAttribute> attributes, std::uint64_t first,
                    std::uint64_t count, layouts::IoPlan* out, std::string* message);
// `D@/info`: records, record_bytes, attributes (name, dtype, itemsize,
// offset in a record, layout, whether in the directory's capsules), layout,
// and the capsule format when it has one.
nlohmann::json table_info(std::span<const TableAttribute> attributes, Ino dir,
                          const std::optional<TableRecord>& record);

}  // namespace mmfs::fs
