// Pieces of fs/volume/volume.cc that the multi-device volume (fs/volume/volume_members.cc)
// shares: not part of the volume's interface.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "fs/device/block_device.h"
#include "fs/meta/superblock.h"

namespace mmfs::fs::detail {

// The default metadata region of a volume of `volume_bytes`: 1/16 of it (the
// region holds two copies of everything, so each copy has 1/32), at least
// 8 MiB and at most 8 GiB; a volume under 64 MiB gets 1/8 of itself (at least
// 64 KiB) instead of the 8 MiB floor, so small devices format.
std::uint64_t default_meta_bytes(std::uint64_t volume_bytes);

// A version 4 UUID.
std::array<std::uint8_t, 16> random_uuid();

// Reads and decodes the superblock copy at `offset`: 0 with *out set (or
// empty with *status saying why), or the device's errno.
int read_superblock_at(BlockDevice& device, std::uint64_t offset, std::optional<Superblock>* out,
                       SuperblockStatus* status);

}  // namespace mmfs::fs::detail
