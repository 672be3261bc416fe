// A batch of a device whose byte space maps onto another device's (a member
// set's sub-volume, fs/device/subset_device.h; the metadata copies on member
// sets, fs/device/split_meta_device.h): each request becomes pieces on the
// device below, all sent as one batch, so the device below (one queue per
// member) runs them in parallel. A request succeeds when all its pieces do;
// its result is its first failing piece's errno.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "fs/device/block_device.h"
#include "geometry/member_subset.h"

namespace mmfs::fs {

class RemappedBatch {
 public:
  // `batch`: the requests made of this device; their results are cleared.
  explicit RemappedBatch(std::span<IoRequest> batch);

  // Whether request i is whole sectors of `sector` bytes inside `size`
  // bytes, as any device checks; if not, its result is EINVAL and it gets no
  // piece.
  bool check(std::size_t i, std::uint32_t sector, std::uint64_t size);
  // Adds to request i the pieces at `runs` (LBNs of the device below, in
  // the request's order), their bytes from `buffer` on; returns the bytes
  // they cover.
  std::uint64_t add(std::size_t i, const std::vector<geom::LbnRun>& runs, std::uint32_t sector, std::byte* buffer);
  // Sends every piece to `below` in one batch; `done(i)` runs once request
  // i's last piece has arrived. 0, or the first failing request's errno.
  int submit(BlockDevice& below, const BlockDevice::RequestDone& done = nullptr);

  // After submit(): the pieces sent below, with their results.
  const std::vector<IoRequest>& pieces() const { return pieces_; }

 private:
  std::span<IoRequest> batch_;
  std::vector<IoRequest> pieces_;
  std::vector<std::size_t> owner_;  // pieces_[j] belongs to batch_[owner_[j]]
  std::vector<std::size_t> left_;   // pieces of each request not yet arrived
};

}  // namespace mmfs::fs
