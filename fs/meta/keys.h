// The metadata store's keys (docs/on-disk-format.md, "Keys"): the one place
// they are built and parsed. Every key but the inode counter's is a letter,
// '/', the inode number it is filed under (8 bytes, big-endian, so a scan
// visits inodes in number order), then what its kind adds:
//
//   i/<ino>              Inode          the inode record
//   d/<parent><name>     Dirent         a directory entry (name not empty)
//   x/<ino><name>        Xattr          an extended attribute, or an mmfs.* record (name not empty)
//   e/<ino>              Extents        the file's extent map
//   e/<ino>i             IndexExtents   the bitmap index's extent map
//   e/<ino>m             MlocExtents    the mloc image's extent map
//   e/<ino>k<slot>       CopyExtents    the extent map of an extra copy (slot: 1 byte, 1..255)
//   c/<ino><record>      Checksums      a cell checksum record (record: 8 bytes, big-endian)
//   a/<ino><record>      AltChecksums   a record of checksums of cells being rewritten in place
//   k/<ino><slot><record>  CopyChecksums     a copy's cell checksum record
//   j/<ino><slot><record>  CopyAltChecksums  a copy's record of checksums of cells being rewritten
//   q/<ino>              IndexRecord    the bitmap index's record
//   q/<ino>p             IndexPending   the marker of an index that may lag its data
//   n                    NextIno        the inode counter
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mmfs::fs {

using Ino = std::uint64_t;

namespace keys {

enum class Kind : std::uint8_t {
  Inode,
  Dirent,
  Xattr,
  Extents,
  IndexExtents,
  MlocExtents,
  CopyExtents,
  Checksums,
  AltChecksums,
  CopyChecksums,
  CopyAltChecksums,
  IndexRecord,
  IndexPending,
  NextIno,
};

// The tables of cell checksums (fs/meta/cell_checksums.h), by their letter:
// the committed contents' and the alternatives' of cells being rewritten.
inline constexpr char kChecksumTable = 'c';
inline constexpr char kAltChecksumTable = 'a';
// The same two tables of an array's extra copies (user.mmfs.copies), whose
// keys carry the copy's slot after the inode.
inline constexpr char kCopyChecksumTable = 'k';
inline constexpr char kCopyAltChecksumTable = 'j';
inline constexpr bool is_copy_table(char table) {
  return table == kCopyChecksumTable || table == kCopyAltChecksumTable;
}

// Building.
std::string inode(Ino ino);
std::string dirent(Ino parent, std::string_view name);
std::string dirent_prefix(Ino parent);
std::string xattr(Ino ino, std::string_view name);
std::string xattr_prefix(Ino ino);
std::string extents(Ino ino);
// Cell checksum records of a table (kChecksumTable, kAltChecksumTable).
// `slot`: a copy table's copy (ignored for the primary's tables).
std::string checksum_record(Ino ino, std::uint64_t record, char table = kChecksumTable, std::uint8_t slot = 0);
// Every key of one table: of a copy table, of the copy `slot` only.
std::string checksum_table_prefix(Ino ino, char table, std::uint8_t slot);
// Every key of `table` filed under `ino` (of a copy table: every copy's).
std::string checksum_prefix(Ino ino, char table);
std::string checksum_prefix(Ino ino);      // the committed contents' table
std::string alt_checksum_prefix(Ino ino);  // checksums of cells being rewritten in place
std::string next_ino();
// An array's bitmap index (fs/array/array_index.h): its record, the marker of an
// index that may lag its data, and its extents (an extent map, "e/" + 'i').
std::string index_prefix(Ino ino);
std::string index_record(Ino ino);
std::string index_pending(Ino ino);
std::string index_extents(Ino ino);
// An mloc array's sealed image (fs/mloc/mloc_image.h): its extents (an extent map,
// "e/" + 'm') and its record (directory length and checksum), an xattr
// record outside the user namespace.
std::string mloc_extents(Ino ino);
std::string mloc_record(Ino ino);
// An mloc copy's image (user.mmfs.copies `mloc`): its extent map is the
// copy's (copy_extents), its record this xattr record ("mmfs.mloc.<slot>").
std::string copy_mloc_record(Ino ino, std::uint8_t slot);
// An array's extra copies (fs/array/array_copies.h): the extent map of the
// copy in `slot`, and the record of the cells each copy has not caught up
// on (an xattr record outside the user namespace).
std::string copy_extents(Ino ino, std::uint8_t slot);
std::string copy_record(Ino ino);
// The primary's cells lost with a failed member (fs/array/behind_record.h,
// docs/copies-on-members.md "Cells lost with a member").
std::string lost_cells(Ino ino);

// Scanning: the prefix every key of `kind` begins with. Kinds of one letter
// share it: a scan of scan_prefix(Kind::Extents) visits every extent map
// (the index's and the mloc image's too), one of Kind::IndexRecord the
// pending markers too.
std::string_view scan_prefix(Kind kind);

// Parsing.
struct Key {
  Kind kind = Kind::Inode;
  Ino ino = 0;               // the inode it is filed under (a dirent's: the parent); NextIno: 0
  std::uint64_t record = 0;  // Checksums, AltChecksums (and the copies'): the record number
  std::uint8_t slot = 0;     // CopyExtents, CopyChecksums, CopyAltChecksums: the copy's slot (1..255)
  std::string_view name;     // Dirent, Xattr: the name (a view into the parsed key)
  bool operator==(const Key&) const = default;
};
// The key's kind and fields; nullopt for anything the table above does not
// describe (a short key, an unknown letter or suffix, an empty name).
std::optional<Key> parse(std::string_view key);
// The inode any per-inode key is filed under, of a known kind or not
// (a letter, '/', 8 bytes, anything): nullopt for the counter and short keys.
std::optional<Ino> owner(std::string_view key);

}  // namespace keys
}  // namespace mmfs::fs
