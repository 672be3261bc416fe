// The volume's superblock (docs/on-disk-format.md): identity, version, where
// the metadata region and the data area are, and the geometry the device is
// addressed through. Two copies: at byte 0 and in the last kSuperblockBytes
// of the volume; each carries its own checksum.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace mmfs::fs {

constexpr std::uint32_t kSuperblockBytes = 16384;
// The newest superblock version this release reads. Version 1 is every
// volume but one: version 2 marks a RAID 0 volume whose two metadata copies
// lie on disjoint member sets (meta_sets), which a release that predates it
// must refuse rather than read its metadata region as one striped range.
constexpr std::uint32_t kFormatVersion = 2;
constexpr std::uint32_t kMetaSetsVersion = 2;
constexpr char kSuperblockMagic[8] = {'M', 'M', 'F', 'S', 'V', 'O', 'L', '1'};

struct Superblock {
  std::uint32_t version = 1;
  std::array<std::uint8_t, 16> uuid{};
  std::string label;                 // at most 63 bytes
  std::uint64_t created_ns = 0;      // CLOCK_REALTIME at mkfs
  std::uint64_t volume_bytes = 0;    // bytes of the device the volume uses
  std::uint64_t meta_offset = 0;     // metadata region (MetaStore), bytes
  std::uint64_t meta_length = 0;
  std::uint64_t data_first_lbn = 0;  // data area: [first, end) in geometry sectors
  std::uint64_t data_end_lbn = 0;
  std::uint64_t backup_offset = 0;   // byte offset of the second copy
  std::string geometry_json;         // Geometry::definition() of the volume, with its name

  // A volume of several devices (docs/on-disk-format.md, "Volumes of several
  // devices"): every member carries its own copies of this superblock, equal
  // but for member_index and backup_offset. A single-device volume has
  // devices == 1 and stores none of these fields.
  std::uint32_t devices = 1;         // members of the volume
  std::uint32_t member_index = 0;    // this member's place, < devices
  std::uint32_t raid = 0;            // 0: striped; 1: members 2k and 2k+1 mirror each other
  std::uint64_t member_bytes = 0;    // bytes of each member the volume uses
  std::vector<std::uint32_t> failed; // members marked failed, ascending
  // RAID 0 with version >= kMetaSetsVersion: the metadata region is whole
  // stripes, and its two copies lie on the even and the odd members
  // (fs/device/split_meta_device.h), so the volume runs without any one
  // member (mmfs -o degraded).
  bool meta_sets = false;

  bool operator==(const Superblock&) const = default;
};

// Encodes into exactly kSuperblockBytes (little-endian fields, then the
// geometry JSON, zero padding, XXH3-64 of everything before it in the last 8
// bytes). Throws std::length_error when the label or geometry do not fit.
void encode_superblock(const Superblock& sb, std::span<std::byte> out);

enum class SuperblockStatus { Ok, NotMmfs, NewerVersion, BadChecksum, Malformed };
const char* to_string(SuperblockStatus s);

// Decodes and validates one copy. `status` says why a copy was rejected.
std::optional<Superblock> decode_superblock(std::span<const std::byte> in, SuperblockStatus* status);

std::string uuid_string(const std::array<std::uint8_t, 16>& uuid);

}  // namespace mmfs::fs
