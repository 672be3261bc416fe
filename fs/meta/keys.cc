// The metadata store's keys (fs/meta/keys.h).
#include "fs/meta/keys.h"

#include "util/coding.h"

namespace mmfs::fs::keys {

namespace {

constexpr std::size_t kOwnerEnd = 2 + 8;  // letter, '/', inode number

std::string filed(char letter, Ino ino) {
  std::string k{letter, '/'};
  util::append_be64(k, ino);
  return k;
}

}  // namespace

std::string inode(Ino ino) { return filed('i', ino); }
std::string dirent_prefix(Ino parent) { return filed('d', parent); }
std::string dirent(Ino parent, std::string_view name) { return dirent_prefix(parent).append(name); }
std::string xattr_prefix(Ino ino) { return filed('x', ino); }
std::string xattr(Ino ino, std::string_view name) { return xattr_prefix(ino).append(name); }
std::string extents(Ino ino) { return filed('e', ino); }
std::string checksum_prefix(Ino ino, char table) { return filed(table, ino); }
std::string checksum_prefix(Ino ino) { return checksum_prefix(ino, kChecksumTable); }
std::string alt_checksum_prefix(Ino ino) { return checksum_prefix(ino, kAltChecksumTable); }
std::string checksum_table_prefix(Ino ino, char table, std::uint8_t slot) {
  std::string k = checksum_prefix(ino, table);
  if (is_copy_table(table)) k.push_back(char(slot));
  return k;
}
std::string checksum_record(Ino ino, std::uint64_t record, char table, std::uint8_t slot) {
  std::string k = checksum_table_prefix(ino, table, slot);
  util::append_be64(k, record);
  return k;
}
std::string next_ino() { return "n"; }
std::string index_prefix(Ino ino) { return filed('q', ino); }
std::string index_record(Ino ino) { return index_prefix(ino); }
std::string index_pending(Ino ino) { return index_prefix(ino) + "p"; }
std::string index_extents(Ino ino) { return extents(ino) + "i"; }
std::string mloc_extents(Ino ino) { return extents(ino) + "m"; }
std::string mloc_record(Ino ino) { return xattr(ino, "mmfs.mloc"); }
std::string copy_extents(Ino ino, std::uint8_t slot) { return extents(ino) + "k" + char(slot); }
std::string copy_record(Ino ino) { return xattr(ino, "mmfs.copies"); }
std::string lost_cells(Ino ino) { return xattr(ino, "mmfs.lost"); }
std::string copy_mloc_record(Ino ino, std::uint8_t slot) {
  return xattr(ino, "mmfs.mloc." + std::to_string(unsigned(slot)));
}

std::string_view scan_prefix(Kind kind) {
  switch (kind) {
    case Kind::Inode: return "i/";
    case Kind::Dirent: return "d/";
    case Kind::Xattr: return "x/";
    case Kind::Extents:
    case Kind::IndexExtents:
    case Kind::MlocExtents:
    case Kind::CopyExtents: return "e/";
    case Kind::Checksums: return "c/";
    case Kind::AltChecksums: return "a/";
    case Kind::CopyChecksums: return "k/";
    case Kind::CopyAltChecksums: return "j/";
    case Kind::IndexRecord:
    case Kind::IndexPending: return "q/";
    case Kind::NextIno: return "n";
  }
  return {};
}

std::optional<Ino> owner(std::string_view key) {
  if (key.size() < kOwnerEnd || key[1] != '/') return std::nullopt;
  return util::get_be64(key.data() + 2);
}

std::optional<Key> parse(std::string_view key) {
  Key k;
  if (key == "n") {
    k.kind = Kind::NextIno;
    return k;
  }
  const auto ino = owner(key);
  if (!ino) return std::nullopt;
  const std::string_view rest = key.substr(kOwnerEnd);
  k.kind = Kind::Inode;
  k.ino = *ino;
  switch (key[0]) {
    case 'i':
      if (!rest.empty()) return std::nullopt;
      return k;
    case 'd':
    case 'x':
      if (rest.empty()) return std::nullopt;
      k.kind = key[0] == 'd' ? Kind::Dirent : Kind::Xattr;
      k.name = rest;
      return k;
    case 'e':
      if (rest.empty()) k.kind = Kind::Extents;
      else if (rest == "i") k.kind = Kind::IndexExtents;
      else if (rest == "m") k.kind = Kind::MlocExtents;
      else if (rest.size() == 2 && rest[0] == 'k' && rest[1] != '\0') {
        k.kind = Kind::CopyExtents;
        k.slot = std::uint8_t(rest[1]);
      } else return std::nullopt;
      return k;
    case kChecksumTable:
    case kAltChecksumTable:
      if (rest.size() != 8) return std::nullopt;
      k.kind = key[0] == kChecksumTable ? Kind::Checksums : Kind::AltChecksums;
      k.record = util::get_be64(rest.data());
      return k;
    case kCopyChecksumTable:
    case kCopyAltChecksumTable:
      if (rest.size() != 9 || rest[0] == '\0') return std::nullopt;
      k.kind = key[0] == kCopyChecksumTable ? Kind::CopyChecksums : Kind::CopyAltChecksums;
      k.slot = std::uint8_t(rest[0]);
      k.record = util::get_be64(rest.data() + 1);
      return k;
    case 'q':
      if (rest.empty()) k.kind = Kind::IndexRecord;
      else if (rest == "p") k.kind = Kind::IndexPending;
      else return std::nullopt;
      return k;
    default: return std::nullopt;
  }
}

}  // namespace mmfs::fs::keys
