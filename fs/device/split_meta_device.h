// The metadata region of a RAID 0 volume whose two metadata copies lie on
// disjoint member sets (Superblock::meta_sets; docs/on-disk-format.md,
// "Volumes of several devices"), as the byte space the MetaStore works in.
//
// The MetaStore keeps everything twice, copy 1 at half its region
// (fs/meta/meta_store.h). Striped over every member, both copies of a block
// would share the member that holds it, and losing any member would lose
// some metadata twice. Here the region is whole stripes (member tracks
// [t0, t0 + T) of every member), copy 0 lies on the even members and copy 1
// on the odd ones, each laid along its set's own LBNs (geom::MemberSubset),
// so each member holds blocks of one copy only.
//
// This device's byte space is [0, 2·copy_bytes): [0, copy_bytes) is copy 0,
// the rest copy 1; the MetaStore's region is all of it. A request is cut
// where it changes copy and where its sectors change member, and its pieces
// go to the volume's device as one batch.
//
// Degraded (`lost` = the copy on the set with a missing member): that copy's
// reads are served by the other copy's sectors and its writes are dropped, so
// the MetaStore finds two equal copies and goes on with one. mmfsck
// --rebuild writes the lost copy from the other.
//
// A member that fails while both copies are kept (a write or a flush of one
// member fails with a device error) degrades the device the same way, once
// the volume has recorded that member failed in the survivors' superblocks
// (set_member_failed): the failed writes are then done again without the
// copy, so the MetaStore's commit stands on the other. Without that record a
// remount could read the stale copy, so when the volume cannot record it (or
// two members fail) the request fails with the device's errno, as it would
// on one device.
//
// Thread-safe as the volume's device is; it and `geometry` must outlive this.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>

#include "fs/device/block_device.h"
#include "geometry/member_subset.h"
#include "geometry/striped.h"

namespace mmfs::fs {

class SplitMetaDevice final : public BlockDevice {
 public:
  // Where the copies lie: `first_lbn` is the member LBN of the member track
  // the region starts at; each copy holds `copy_bytes` (whole 4 KiB blocks)
  // of its set's sectors from there.
  struct Layout {
    geom::Lbn first_lbn = 0;
    std::uint64_t copy_bytes = 0;
  };
  // The layout of a region of `region_bytes` (whole stripes) from volume
  // byte `region_offset`: each copy as large as the smaller set holds, in
  // whole 4 KiB blocks. Throws std::invalid_argument for a volume of one
  // member or a region that is not whole stripes.
  static Layout layout_of(const geom::StripedGeometry& geometry, std::uint64_t region_offset,
                          std::uint64_t region_bytes);
  // The whole-stripe region from the member track at member LBN `first_lbn`
  // (T tracks, the fewest that give each copy at least `copy_bytes`): its
  // volume bytes [*offset, *offset + *length). Throws std::invalid_argument
  // when the members are too small.
  static void region_for(const geom::StripedGeometry& geometry, geom::Lbn first_lbn, std::uint64_t copy_bytes,
                         std::uint64_t* offset, std::uint64_t* length);

  // `lost`: -1, or the copy (0 or 1) whose set has a missing member.
  SplitMetaDevice(BlockDevice& volume, const geom::StripedGeometry& geometry, const Layout& layout, int lost = -1);

  std::uint64_t size_bytes() const override { return 2 * copy_bytes_; }
  std::uint32_t block_size() const override { return volume_.block_size(); }
  int submit(std::span<IoRequest> batch) override;
  int flush() override;

  // Told of a device failure: `member` whose write failed while both copies
  // were kept, or nullopt for a flush that failed (the handler finds which
  // member failed; it may be the one whose copy is dropped already), and the
  // errno. Returns the member once the volume has recorded it failed (its
  // copy is then dropped, or stays dropped), or nullopt (the request fails).
  // Called from the thread whose I/O failed; set before any I/O.
  using MemberFailed = std::function<std::optional<std::uint32_t>(std::optional<std::uint32_t> member, int error)>;
  void set_member_failed(MemberFailed handler) { member_failed_ = std::move(handler); }
  // The copy dropped (-1: none).
  int lost() const { return lost_.load(); }

  // The copy whose set holds `member` (even members: copy 0).
  static int copy_on(std::uint32_t member) { return int(member % 2); }
  std::uint64_t copy_bytes() const { return copy_bytes_; }
  // The volume sectors holding bytes [offset, offset + length) of `copy`
  // (whole sectors), in order: where mmfsck --rebuild writes a lost copy.
  std::vector<geom::LbnRun> sectors_of(int copy, std::uint64_t offset, std::uint64_t length) const;

 private:
  // Drops the copy of `member` when the volume records it failed: true then.
  bool drop_failed(std::optional<std::uint32_t> member, int error);

  BlockDevice& volume_;
  const geom::StripedGeometry& geometry_;
  std::unique_ptr<geom::MemberSubset> sets_[2];  // the even members, the odd ones
  geom::Lbn base_[2];  // each copy's first sector in its set's LBNs
  std::uint64_t copy_bytes_;
  std::uint32_t sector_;
  std::atomic<int> lost_;
  MemberFailed member_failed_;
};

}  // namespace mmfs::fs
