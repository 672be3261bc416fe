// An mmfs volume: superblocks, metadata region, data area
// (docs/on-disk-format.md). format_volume() is mkfs; Volume::open() is what
// the daemon and the tools mount.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "fs/meta/allocator.h"
#include "fs/device/block_device.h"
#include "fs/meta/meta_store.h"
#include "fs/meta/metadata.h"
#include "fs/device/striped_device.h"
#include "fs/meta/superblock.h"
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
  // one from its twin and salvages a prefix (fs/meta/meta_store.h); what it found
  // and did is metadata_report().
  static std::unique_ptr<Volume> open(std::unique_ptr<BlockDevice> device, int* error, std::string* message,
                                      bool for_check = false, const MetaOpenOptions& metadata = {});
  // A volume of several devices (fs/volume/volume_members.cc): every member's
  // superblocks are read and their identity checked — a target of another
  // volume, a member given twice or one missing is refused, naming it. A
  // RAID 1 member recorded failed may be missing (the volume runs degraded
  // on its twin). `degraded` (mount -o degraded, mmfsck --rebuild) also
  // lets a RAID 1 member be missing whose twin is healthy, and leaves out a
  // blank target (no mmfs signature in either superblock: a replacement
  // not yet rebuilt); the survivors' superblocks then record it failed.
  // `left_out`: targets the caller could not open (open_targets), reported
  // with the rest in degraded_notes(). `simulate` delays each batch by
  // the volume geometry's service time (the striped model: members in
  // parallel). One target that is a single-device volume opens as open().
  struct MembersOptions {
    bool for_check = false;
    MetaOpenOptions metadata;
    bool simulate = false;
    bool degraded = false;
    std::vector<std::string> left_out;
  };
  static std::unique_ptr<Volume> open(std::vector<MemberTarget> targets, int* error, std::string* message,
                                      const MembersOptions& options);
  const std::vector<std::string>& problems() const { return problems_; }
  const MetaOpenReport& metadata_report() const { return metadata_report_; }
  // One line per target left out and per member the volume runs without,
  // as found at open (later failures reach the failure hook).
  const std::vector<std::string>& degraded_notes() const { return degraded_notes_; }

  BlockDevice& device() { return *device_; }
  const Superblock& superblock() const { return sb_; }
  const geom::Geometry& geometry() const { return *geometry_; }
  MetaStore& store() { return *store_; }
  Allocator& allocator() { return *allocator_; }
  Metadata& metadata() { return *metadata_; }
  // Which superblock copies were valid at open (fsck repairs the other).
  bool primary_valid() const { return primary_ok_; }
  bool backup_valid() const { return backup_ok_; }
  // Rewrites both superblock copies from superblock() (fsck -y); on every
  // healthy member of a volume of several devices.
  int rewrite_superblocks();

  // Several devices: the striped device (else nullptr), and a hook told of
  // every device the volume marks failed (after the survivors' superblocks
  // record it), for /.mmfs/errors.
  StripedDevice* striped() { return striped_; }
  // The metadata store's device when its copies lie on member sets
  // (Superblock::meta_sets: a SplitMetaDevice), else null.
  BlockDevice* meta_device() { return meta_device_.get(); }
  void set_failure_hook(std::function<void(const std::string& target, const std::string& reason)> hook);

 private:
  Volume() = default;
  static std::unique_ptr<Volume> finish_open(std::unique_ptr<Volume> v, std::unique_ptr<BlockDevice> device,
                                             int* error, std::string* message, bool for_check,
                                             const MetaOpenOptions& metadata);
  int rewrite_member_superblocks();
  // A RAID 0 volume running without member m: its free space is taken out
  // of the free map (until the next mount), and what is freed on it later
  // stays out (Allocator::set_withheld), so nothing new lands on it.
  void exclude_member_space(std::uint32_t m);
  void device_failed(std::uint32_t device, const std::string& reason);
  // RAID 0 with its metadata on member sets: a member failed a write or a
  // flush of the metadata while both copies were kept (SplitMetaDevice::
  // MemberFailed; nullopt member: find it by flushing each). Records it
  // failed in the survivors' superblocks, takes it out of the free map and
  // tells the failure hook; returns it, or nullopt when it cannot be recorded
  // or another member is failed already (the metadata then has no copy left).
  std::optional<std::uint32_t> metadata_member_failed(std::optional<std::uint32_t> member, int error);

  StripedDevice* striped_ = nullptr;             // inside device_ (possibly under a SimulatedDevice)
  std::vector<std::uint64_t> member_backup_;     // per device: its backup superblock's offset
  std::mutex members_mu_;                        // guards sb_.failed and failure_hook_ after open
  std::mutex rewrite_mu_;                        // serializes rewrite_member_superblocks()
  std::mutex meta_loss_mu_;                      // serializes metadata_member_failed()
  std::function<void(const std::string&, const std::string&)> failure_hook_;
  std::unique_ptr<BlockDevice> device_;
  // The metadata region of a RAID 0 volume with its copies on member sets
  // (Superblock::meta_sets): the store's device, over device_.
  std::unique_ptr<BlockDevice> meta_device_;
  int meta_lost_copy_ = -1;  // the metadata copy on a failed member's set (-1: none)
  std::vector<std::uint32_t> excluded_members_;  // exclude_member_space's (guarded by members_mu_)
  Superblock sb_;
  std::unique_ptr<geom::Geometry> geometry_;
  std::unique_ptr<MetaStore> store_;
  std::unique_ptr<Allocator> allocator_;
  std::unique_ptr<Metadata> metadata_;
  bool primary_ok_ = false, backup_ok_ = false;
  std::vector<std::string> problems_;
  std::vector<std::string> degraded_notes_;
  MetaOpenReport metadata_report_;
};

// Formats several devices as one volume of `member` geometry (mkfs.mmfs with
// several targets): raid 0 stripes track by track over all of them (at
// least 2), raid 1 mirrors devices 2k and 2k+1 and stripes over the pairs
// (an even number, at least 2). Each member gets superblocks naming the
// volume and its place in it. Errors as format_volume, the message naming
// the target at fault.
int format_members(std::vector<MemberTarget> targets, const geom::Geometry& member, std::uint32_t raid,
                   const FormatOptions& options, FormatSummary* summary, std::string* message);

// Restores redundancy of a RAID 1 volume (mmfsck --rebuild): `targets` are
// the volume's members (a failed or missing one may be left out),
// `replacement` a device at least as large as a member. The failed member's
// share of the volume is copied from its twin onto the replacement (all of
// it, as md resyncs), which then gets that member's superblocks; the
// volume's record of the failure is cleared. *report says what was done.
int rebuild_member(std::vector<MemberTarget> targets, MemberTarget replacement, std::string* report,
                   std::string* message);

// Byte offset of the backup superblock on a device of `device_bytes`.
std::uint64_t backup_superblock_offset(std::uint64_t device_bytes);

}  // namespace mmfs::fs
