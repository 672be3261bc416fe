// Well-formed metadata records the meta tests start from: the plain tests
// check their round trips, the [fuzz] tests mutate them.
#pragma once

#include "fs/meta/meta_codec.h"
#include "fs/meta/superblock.h"

namespace mmfs::fs::testing {

// A single-device flash superblock of a 1 GiB volume.
inline Superblock sample_superblock() {
  Superblock sb;
  for (int i = 0; i < 16; ++i) sb.uuid[i] = std::uint8_t(i * 7);
  sb.label = "data";
  sb.created_ns = 123456789;
  sb.volume_bytes = 1ull << 30;
  sb.meta_offset = 16384;
  sb.meta_length = 8 << 20;
  sb.data_first_lbn = 17000;
  sb.data_end_lbn = 2000000;
  sb.backup_offset = (1ull << 30) - 16384;
  sb.geometry_json = R"({"kind":"flash","sector_size":4096})";
  return sb;
}

// A version 2 region of 1 MiB in 4 KiB blocks: each copy (512 KiB) holds the
// header block, two checkpoint slots of 16 blocks and a log of 64 blocks.
inline meta::RegionHeader sample_region_v2() {
  meta::RegionHeader h;
  h.block_size = 4096;
  h.nonce = 0x1234567890abcdefull;
  h.region_length = 1 << 20;
  h.slot_offset[0] = 4096;
  h.slot_offset[1] = 4096 * 17;
  h.slot_length = 4096 * 16;
  h.log_offset = 4096 * 33;
  h.log_length = 4096 * 64;
  return h;
}

}  // namespace mmfs::fs::testing
