// The BlockDevice of a member set (geometry/member_subset.h;
// docs/copies-on-members.md, piece 2): its byte space is the set's own
// sub-volume LBN space, and each request goes to the volume's device at the
// VLBNs the set maps it to. A placement confined to a member set (a copy of
// an array kept off the members another copy uses) is laid out, planned and
// read on the sub-volume as on any volume; only this class knows where its
// sectors lie on the whole one.
//
// A request is cut at sub-track boundaries (one sub-track is one whole or
// partial volume track on one member), its pieces merged where they touch
// on the volume, and the pieces of a whole batch go to the volume's device
// as one batch, so the volume's device (a StripedDevice: one queue per
// member) runs them in parallel. A request succeeds when all its pieces do;
// its result is the first failing piece's errno. submit_streaming() reports
// a request done once its last piece has arrived.
//
// A request must be a non-empty run of whole sectors of the set's geometry
// inside it, as on any device (EINVAL otherwise; nothing of it is sent);
// its buffer must be aligned for the volume's device. Thread-safe as the
// volume's device is; the set and the device must outlive this.
#pragma once

#include <cstdint>
#include <span>

#include "fs/device/block_device.h"
#include "geometry/member_subset.h"

namespace mmfs::fs {

class SubsetDevice final : public BlockDevice {
 public:
  SubsetDevice(BlockDevice& volume, const geom::MemberSubset& set);

  std::uint64_t size_bytes() const override { return size_; }
  std::uint32_t block_size() const override { return volume_.block_size(); }
  int submit(std::span<IoRequest> batch) override { return submit_streaming(batch, nullptr); }
  int submit_streaming(std::span<IoRequest> batch, const RequestDone& done) override;
  int flush() override { return volume_.flush(); }
  std::uint32_t mirror_sides() const override { return volume_.mirror_sides(); }

 private:
  BlockDevice& volume_;
  const geom::MemberSubset& set_;
  std::uint32_t sector_;
  std::uint64_t size_;
};

}  // namespace mmfs::fs
