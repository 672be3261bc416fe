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
//   c/<ino><record>      Checksums      a cell checksum record (record: 8 bytes, big-endian)
//   a/<ino><record>      AltChecksums   a record of checksums of cells being rewritten in place
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
  Checksums,
  AltChecksums,
  IndexRecord,
  IndexPending,
  NextIno,
};

// The tables of cell checksums (fs/meta/cell_checksums.h), by their letter:
// the committed contents' and the alternatives' of cells being rewritten.
inline constexpr char kChecksumTable = 'c';
inline constexpr char kAltChecksumTable = 'a';

// Building.
std::string inode(Ino ino);
std::string dirent(Ino parent, std::string_view name);
std::string dirent_prefix(Ino parent);
std::string xattr(Ino ino, std::string_view name);
std::string xattr_prefix(Ino ino);
std::string extents(Ino ino);
// Cell checksum records of a table (kChecksumTable, kAltChecksumTable).
std::string checksum_record(Ino ino, std::uint64_t record, char table = kChecksumTable);
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

// Scanning: the prefix every key of `kind` begins with. Kinds of one letter
// share it: a scan of scan_prefix(Kind::Extents) visits every extent map
// (the index's and the mloc image's too), one of Kind::IndexRecord the
// pending markers too.
std::string_view scan_prefix(Kind kind);

// Parsing.
struct Key {
  Kind kind = Kind::Inode;
  Ino ino = 0;               // the inode it is filed under (a dirent's: the parent); NextIno: 0
  std::uint64_t record = 0;  // Checksums, AltChecksums: the record number
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
