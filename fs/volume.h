// An mmfs volume: superblocks, metadata region, data area
// (docs/on-disk-format.md). format_volume() is mkfs; Volume::open() is what
// the daemon and the tools mount.
#pragma once

#include <memory>
#include <string>

#include "fs/allocator.h"
#include "fs/block_device.h"
#include "fs/meta_store.h"
#include "fs/metadata.h"
#include "fs/superblock.h"
#include "geometry/geometry.h"

namespace mmfs::fs {

struct FormatOptions {
  std::string label;
  bool force = false;            // overwrite an existing filesystem signature
  // Metadata region size; 0 = the default: 1/16 of the volume (two copies of
  // 1/32), 8 MiB..8 GiB, and 1/8 of a volume under 64 MiB (at least 64 KiB).
  std::uint64_t meta_bytes = 0;
};

struct FormatSummary {
  Superblock superblock;
  std::uint64_t device_bytes = 0;
  std::uint64_t unused_bytes = 0;  // past the modeled device's capacity
  std::string text;                // the human summary mkfs prints
};

// The smallest device (a multiple of 4 KiB) that holds a volume of this
// geometry with a metadata region of `meta_bytes` (0: the default); every
// larger device holds one too. UINT64_MAX when the modeled device is itself
// too small.
std::uint64_t minimum_volume_bytes(const geom::Geometry& geometry, std::uint32_t device_block_size,
                                   std::uint64_t meta_bytes = 0);

// Names a known filesystem signature found at the start of the device ("mmfs",
// "ext4", "xfs", ...) or returns an empty string.
std::string detect_signature(BlockDevice& device);

// Formats the device. Returns 0 or an errno with a one-line *message: EEXIST
// for a signature without force, ENOSPC for a too-small target (naming the
// minimum), EINVAL for a geometry whose sector is smaller than the device's
// logical block, EIO for device errors. Writes only the superblocks and the
// metadata region: a 1 TiB sparse image formats in milliseconds.
int format_volume(BlockDevice& device, const geom::Geometry& geometry, const FormatOptions& options,
                  FormatSummary* summary, std::string* message);

class Volume {
 public:
  // Opens a formatted device. On failure returns nullptr, *error (EUCLEAN
  // corrupt volume, EPROTONOSUPPORT newer version, EINVAL not mmfs, EIO) and
  // a one-line *message.
  // `for_check` (mmfsck) opens a volume whose extent maps overlap or whose
  // root is missing instead of refusing it; problems() lists what was found.
  // `metadata` says whether the metadata store verifies both copies, repairs
  // one from its twin and salvages a prefix (fs/meta_store.h); what it found
  // and did is metadata_report().
  static std::unique_ptr<Volume> open(std::unique_ptr<BlockDevice> device, int* error, std::string* message,
                                      bool for_check = false, const MetaOpenOptions& metadata = {});
  const std::vector<std::string>& problems() const { return problems_; }
  const MetaOpenReport& metadata_report() const { return metadata_report_; }

  BlockDevice& device() { return *device_; }
  const Superblock& superblock() const { return sb_; }
  const geom::Geometry& geometry() const { return *geometry_; }
  MetaStore& store() { return *store_; }
  Allocator& allocator() { return *allocator_; }
  Metadata& metadata() { return *metadata_; }
  // Which superblock copies were valid at open (fsck repairs the other).
  bool primary_valid() const { return primary_ok_; }
  bool backup_valid() const { return backup_ok_; }
  // Rewrites both superblock copies from superblock() (fsck -y).
  int rewrite_superblocks();

 private:
  Volume() = default;
  std::unique_ptr<BlockDevice> device_;
  Superblock sb_;
  std::unique_ptr<geom::Geometry> geometry_;
  std::unique_ptr<MetaStore> store_;
  std::unique_ptr<Allocator> allocator_;
  std::unique_ptr<Metadata> metadata_;
  bool primary_ok_ = false, backup_ok_ = false;
  std::vector<std::string> problems_;
  MetaOpenReport metadata_report_;
};

// Byte offset of the backup superblock on a device of `device_bytes`.
std::uint64_t backup_superblock_offset(std::uint64_t device_bytes);

}  // namespace mmfs::fs
