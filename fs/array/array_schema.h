// The schema of an array file: the user.mmfs.* extended attributes of docs/reference.md §4
// (shape, dtype, layout, ...), how their text is parsed and shown, the rules
// that tie them together, and their persistent (JSON) form.
//
// Pure: no I/O, no filesystem state. Whatever a user types into setfattr
// goes through set_schema_attr(), which either accepts it completely or
// leaves the schema untouched and explains, in one line, what is accepted.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mmfs::fs {

struct Dtype {
  std::string name;  // canonical: int8 uint8 int16 uint16 int32 uint32 int64 uint64 float32 float64
  std::uint32_t itemsize = 8;
  char kind = 'f';  // 'i' signed, 'u' unsigned, 'f' float
  bool operator==(const Dtype&) const = default;
};

// Accepts the canonical names and numpy's i1 u1 i2 u2 i4 u4 i8 u8 f4 f8, the
// latter optionally prefixed by '<' or '=' (and '|' for 1-byte types). Array
// bytes are always little-endian, so '>' (big-endian) is refused: nullopt.
std::optional<Dtype> parse_dtype(std::string_view text);

inline constexpr std::string_view kSchemaPrefix = "user.mmfs.";
// Schema attribute names without the prefix, in display order:
// shape dtype layout order cell basic_cube priority chunk compress index bins dims copies
const std::vector<std::string>& schema_attr_names();
bool is_schema_attr(std::string_view name);  // name without prefix
// Layout names of docs/reference.md §4: naive zorder hilbert multimap quadrangle capsule mloc.
bool is_layout_name(std::string_view name);

// Where an attribute of a table in capsules sits (fs/table/capsule_table.h): set
// by the table directory's user.mmfs.layout, never by an attribute of the
// array itself, and stored with its schema so that the placement, its
// extents and this record commit together.
struct TablePart {
  std::uint64_t table = 0;                // the table directory's inode
  std::uint32_t capsule_blocks = 0;       // c: sectors of a capsule (all attributes)
  std::uint32_t first_block = 0;          // this attribute's first sector in a capsule
  std::uint32_t cells_per_capsule = 1;    // its sectors (cells) per capsule
  bool operator==(const TablePart&) const = default;
};

// One extra placement of an array (user.mmfs.copies, fs/array/copy_spec.h):
// a layout with its own placement attributes (empty: the layout's choice).
struct CopySpec {
  std::string layout;
  std::vector<std::uint32_t> order;
  std::vector<std::uint64_t> cell;
  std::vector<std::uint64_t> basic_cube;
  std::string priority = "V-M-S";
  std::vector<std::uint64_t> chunk;
  std::string compress = "none";
  // Not an attribute: which keys of the store hold the copy (fs/meta/keys.h),
  // 1..255, kept while the copy is, whatever its position in the list.
  std::uint8_t slot = 0;
  // Not an attribute: the members of a volume of several devices the copy
  // lies on (geometry/member_subset.h; empty: the whole volume), so a lost
  // member loses at most one copy of a cell.
  std::vector<std::uint32_t> members;
  // The same placement (every field but the slot and the members).
  bool same_placement(const CopySpec& o) const {
    return layout == o.layout && order == o.order && cell == o.cell && basic_cube == o.basic_cube &&
           priority == o.priority && chunk == o.chunk && compress == o.compress;
  }
  bool operator==(const CopySpec&) const = default;
};

// At most this many extra copies.
inline constexpr std::size_t kMaxCopies = 8;

struct ArraySchema {
  std::vector<std::uint64_t> shape;       // empty: not (yet) an array
  Dtype dtype{"float64", 8, 'f'};
  std::string layout = "multimap";
  std::vector<std::uint32_t> order;       // empty: default n-1,...,0
  std::vector<std::uint64_t> cell;        // empty: the layout's choice
  std::vector<std::uint64_t> basic_cube;  // empty: the layout's choice
  std::string priority = "V-M-S";
  std::vector<std::uint64_t> chunk;       // empty: the layout's choice
  std::string compress = "none";          // "none", "zstd" or "zstd:LEVEL" (LEVEL 1..22, no leading zeros)
  std::string index = "none";             // none e1 bn range interval re ie
  std::string bins;                       // empty: default ("exact" for integer dtypes, "100" for floats)
  std::vector<std::string> dims;          // dimension names; empty: dim_0, dim_1, ... (no effect on placement)
  std::vector<CopySpec> copies;           // extra placements of the same elements (empty: none)
  std::optional<TablePart> table_part;    // an attribute of a table in capsules (layout capsule, 1-D)
  // Not an attribute: the bytes of a cell each data checksum covers (a
  // multiple of the sector size), set when the array is placed
  // (fs/meta/cell_checksums.h); 0 = one checksum per cell (arrays placed before
  // checksums were kept per block).
  std::uint32_t checksum_block = 0;
  // Not an attribute: the members of a volume of several devices the
  // primary lies on (geometry/member_subset.h; empty: the whole volume), set
  // when copies are (fs/array/placement_site.h).
  std::vector<std::uint32_t> members;
  // Not attributes: whether user.mmfs.layout was set (else the volume's
  // model chooses layout and cell when the shape is set,
  // layouts/model_default.h), and why the layout is what it is (the
  // model's reason, for A@/info; empty for an explicit layout and for arrays
  // created before the model chose).
  bool layout_set = false;
  std::string layout_rule;
  bool operator==(const ArraySchema&) const = default;
};

struct SchemaResult {
  int error = 0;        // 0 ok, else EINVAL / EFBIG
  std::string message;  // one line: attribute, what was wrong, what is accepted
  explicit operator bool() const { return error != 0; }
};

// Sets attribute `name` (without prefix) from `value`, parsed strictly (one
// trailing '\n', as echo/setfattr users produce, is ignored). The value is
// checked alone and against the fields already set:
//  * order/cell/basic_cube/chunk/shape: every two of them that are set have
//    the same rank (so a conflict is refused whichever is set second, even
//    before shape is set);
//  * cell[d] and chunk[d] <= shape[d];
//  * prod(shape) * itemsize fits in 64 bits, else EFBIG (also for a single
//    shape number beyond 64 bits).
// Numbers are plain decimal (leading zeros allowed, stored without them).
// On error `schema` is unchanged.
SchemaResult set_schema_attr(ArraySchema& schema, std::string_view name, std::string_view value);
// removexattr of a schema attribute: back to its default. shape cannot be
// removed (EINVAL: "remove the file instead"). Resetting dtype to float64 may
// make the byte size overflow: EFBIG, schema unchanged.
SchemaResult reset_schema_attr(ArraySchema& schema, std::string_view name);
// Whole-schema checks (each field as set_schema_attr would accept it, and the
// same cross-field rules) — used after decoding.
SchemaResult validate_schema(const ArraySchema& schema);
// The dimension names: user.mmfs.dims, or dim_0, dim_1, ... (none without a shape).
std::vector<std::string> dim_names(const ArraySchema& s);
// Dimension names that are not identifiers (netCDF-4 and HDF5 allow any
// name; user.mmfs.dims takes identifiers only) live in this ordinary xattr,
// a JSON list of one non-empty, distinct string per dimension, none with a
// '/' (an HDF5 name, not a path): mmfs-import
// and mmfs.create write it, the xarray engine, mmfs-export and the Zarr view
// read it where user.mmfs.dims is not set (docs/import-export.md). It is not
// one of the file's attributes.
inline constexpr std::string_view kHdf5DimsXattr = "user.hdf5.dims";
// Its names for an array of `rank` dimensions, or nullopt when `json` is not such a list.
std::optional<std::vector<std::string>> decode_hdf5_dims(std::string_view json, std::size_t rank);
// prod(shape) * itemsize (0 for an empty shape). REQUIRES validate_schema ok.
std::uint64_t array_bytes(const ArraySchema& schema);

// Display text of one attribute's effective value (what getfattr shows).
// order: the explicit order or, when empty and shape is set, "n-1,...,1,0";
// cell/basic_cube/chunk: the explicit value or "" (the caller fills in the
// layout's choice); bins: the explicit value or the dtype's default; shape:
// "" when not set. Unknown names: "".
std::string schema_attr_text(const ArraySchema& schema, std::string_view name);

// Persistent form: a JSON object with every field. decode_schema returns
// nullopt on malformed input, unknown keys, or when validate_schema fails
// (never throws); missing keys take their defaults.
std::string encode_schema(const ArraySchema& schema);
// The longest layout_rule a record may hold.
inline constexpr std::size_t kMaxLayoutRule = 4096;
std::optional<ArraySchema> decode_schema(std::string_view text);

}  // namespace mmfs::fs
