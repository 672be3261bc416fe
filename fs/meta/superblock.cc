#include "fs/meta/superblock.h"

#include <xxhash.h>

#include <cstring>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/coding.h"

namespace mmfs::fs {
namespace {

// Fixed header layout (little-endian), then the geometry JSON.
constexpr std::size_t kHeaderBytes = 8 + 4 + 4 + 16 + 64 + 8 * 8 + 4;
constexpr std::size_t kChecksumOffset = kSuperblockBytes - 8;

// The fields in order: each moves p past its bytes.
template <typename T>
void put(std::byte*& p, T v) {
  util::put_le(p, v);
  p += sizeof(T);
}

template <typename T>
T get(const std::byte*& p) {
  const T v = util::get_le<T>(p);
  p += sizeof(T);
  return v;
}

}  // namespace

const char* to_string(SuperblockStatus s) {
  switch (s) {
    case SuperblockStatus::Ok: return "valid";
    case SuperblockStatus::NotMmfs: return "no mmfs signature";
    case SuperblockStatus::NewerVersion: return "written by a newer mmfs (on-disk version not supported)";
    case SuperblockStatus::BadChecksum: return "checksum mismatch";
    case SuperblockStatus::Malformed: return "malformed fields";
  }
  return "?";
}

namespace {

// The member fields of a multi-device volume, as JSON after the geometry
// (a u32 length, then the text); absent (length 0) on a single device, so
// volumes written before members existed read as single-device ones.
std::string member_json(const Superblock& sb) {
  if (sb.devices <= 1) return {};
  nlohmann::json j{{"devices", sb.devices}, {"index", sb.member_index}, {"raid", sb.raid},
                   {"member_bytes", sb.member_bytes}, {"failed", sb.failed}};
  if (sb.meta_sets) j["meta_sets"] = true;
  return j.dump();
}

bool decode_member_json(std::string_view text, Superblock* sb) {
  try {
    auto j = nlohmann::json::parse(text);
    // Unsigned integers of 32 bits only: get<std::uint32_t>() truncates a larger
    // one and is undefined for a float out of range (1e10).
    for (const char* key : {"devices", "index", "raid"})
      if (!j.at(key).is_number_unsigned() || j.at(key).get<std::uint64_t>() > UINT32_MAX) return false;
    if (!j.at("member_bytes").is_number_unsigned() || !j.at("failed").is_array()) return false;
    for (const auto& f : j.at("failed"))
      if (!f.is_number_unsigned() || f.get<std::uint64_t>() > UINT32_MAX) return false;
    sb->devices = j.at("devices").get<std::uint32_t>();
    sb->member_index = j.at("index").get<std::uint32_t>();
    sb->raid = j.at("raid").get<std::uint32_t>();
    sb->member_bytes = j.at("member_bytes").get<std::uint64_t>();
    sb->failed = j.at("failed").get<std::vector<std::uint32_t>>();
    sb->meta_sets = j.contains("meta_sets") && j.at("meta_sets").get<bool>();
  } catch (const std::exception&) {
    return false;
  }
  if (sb->devices < 2 || sb->devices > 1024 || sb->member_index >= sb->devices || sb->raid > 1 ||
      (sb->raid == 1 && sb->devices % 2))
    return false;
  for (std::uint32_t f : sb->failed)
    if (f >= sb->devices) return false;
  if (sb->meta_sets && (sb->raid != 0 || sb->version < kMetaSetsVersion)) return false;
  return true;
}

}  // namespace

void encode_superblock(const Superblock& sb, std::span<std::byte> out) {
  if (out.size() != kSuperblockBytes) throw std::length_error("superblock buffer must be kSuperblockBytes");
  if (sb.label.size() > 63) throw std::length_error("label longer than 63 bytes");
  const std::string members = member_json(sb);
  if (kHeaderBytes + sb.geometry_json.size() + 4 + members.size() > kChecksumOffset)
    throw std::length_error(fmt::format("geometry definition of {} bytes does not fit the superblock ({} bytes)",
                                        sb.geometry_json.size(), kChecksumOffset - kHeaderBytes));
  std::memset(out.data(), 0, out.size());
  std::byte* p = out.data();
  std::memcpy(p, kSuperblockMagic, 8);
  p += 8;
  put<std::uint32_t>(p, sb.version);
  put<std::uint32_t>(p, kSuperblockBytes);
  std::memcpy(p, sb.uuid.data(), 16);
  p += 16;
  std::memcpy(p, sb.label.data(), sb.label.size());
  p += 64;
  for (std::uint64_t v : {sb.created_ns, sb.volume_bytes, sb.meta_offset, sb.meta_length, sb.data_first_lbn,
                          sb.data_end_lbn, sb.backup_offset, std::uint64_t(0)})
    put<std::uint64_t>(p, v);
  put<std::uint32_t>(p, std::uint32_t(sb.geometry_json.size()));
  std::memcpy(p, sb.geometry_json.data(), sb.geometry_json.size());
  p += sb.geometry_json.size();
  put<std::uint32_t>(p, std::uint32_t(members.size()));
  std::memcpy(p, members.data(), members.size());
  std::uint64_t sum = XXH3_64bits(out.data(), kChecksumOffset);
  std::byte* c = out.data() + kChecksumOffset;
  put<std::uint64_t>(c, sum);
}

std::optional<Superblock> decode_superblock(std::span<const std::byte> in, SuperblockStatus* status) {
  auto fail = [&](SuperblockStatus s) {
    if (status) *status = s;
    return std::optional<Superblock>();
  };
  if (in.size() < kSuperblockBytes) return fail(SuperblockStatus::Malformed);
  if (std::memcmp(in.data(), kSuperblockMagic, 8) != 0) return fail(SuperblockStatus::NotMmfs);
  const std::byte* c = in.data() + kChecksumOffset;
  if (get<std::uint64_t>(c) != XXH3_64bits(in.data(), kChecksumOffset)) return fail(SuperblockStatus::BadChecksum);
  const std::byte* p = in.data() + 8;
  Superblock sb;
  sb.version = get<std::uint32_t>(p);
  if (sb.version > kFormatVersion) return fail(SuperblockStatus::NewerVersion);
  if (sb.version == 0 || get<std::uint32_t>(p) != kSuperblockBytes) return fail(SuperblockStatus::Malformed);
  std::memcpy(sb.uuid.data(), p, 16);
  p += 16;
  const char* label = reinterpret_cast<const char*>(p);
  sb.label.assign(label, strnlen(label, 63));
  p += 64;
  sb.created_ns = get<std::uint64_t>(p);
  sb.volume_bytes = get<std::uint64_t>(p);
  sb.meta_offset = get<std::uint64_t>(p);
  sb.meta_length = get<std::uint64_t>(p);
  sb.data_first_lbn = get<std::uint64_t>(p);
  sb.data_end_lbn = get<std::uint64_t>(p);
  sb.backup_offset = get<std::uint64_t>(p);
  get<std::uint64_t>(p);  // reserved
  std::uint32_t json_len = get<std::uint32_t>(p);
  if (json_len > kChecksumOffset - kHeaderBytes) return fail(SuperblockStatus::Malformed);
  sb.geometry_json.assign(reinterpret_cast<const char*>(p), json_len);
  p += json_len;
  if (kHeaderBytes + json_len + 4 <= kChecksumOffset) {
    std::uint32_t members_len = get<std::uint32_t>(p);
    if (members_len > kChecksumOffset - kHeaderBytes - json_len - 4) return fail(SuperblockStatus::Malformed);
    if (members_len &&
        !decode_member_json({reinterpret_cast<const char*>(p), members_len}, &sb))
      return fail(SuperblockStatus::Malformed);
  }
  // Cross-field sanity: a checksum protects against corruption, not against bugs.
  if (sb.meta_offset < kSuperblockBytes || sb.meta_length == 0 || sb.meta_offset + sb.meta_length < sb.meta_offset ||
      sb.meta_offset + sb.meta_length > sb.volume_bytes || sb.data_first_lbn > sb.data_end_lbn ||
      // (not backup_offset + kSuperblockBytes: that wraps past 2^64 for an offset near it)
      sb.volume_bytes < kSuperblockBytes || sb.backup_offset > sb.volume_bytes - kSuperblockBytes)
    return fail(SuperblockStatus::Malformed);
  if (status) *status = SuperblockStatus::Ok;
  return sb;
}

std::string uuid_string(const std::array<std::uint8_t, 16>& u) {
  return fmt::format("{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
                     u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
                     u[15]);
}

}  // namespace mmfs::fs
