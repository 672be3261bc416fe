#include "fs/device/subset_device.h"

#include "fs/device/remapped_batch.h"

#include <cerrno>
#include <vector>

namespace mmfs::fs {

SubsetDevice::SubsetDevice(BlockDevice& volume, const geom::MemberSubset& set)
    : volume_(volume),
      set_(set),
      sector_(set.geometry().sector_size()),
      size_(set.geometry().capacity_sectors() * set.geometry().sector_size()) {}

int SubsetDevice::submit_streaming(std::span<IoRequest> batch, const RequestDone& done) {
  RemappedBatch pieces(batch);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    IoRequest& r = batch[i];
    if (!pieces.check(i, sector_, size_)) continue;  // as the devices below
    pieces.add(i, set_.to_parent({{r.offset / sector_, r.length / sector_}}), sector_, static_cast<std::byte*>(r.buffer));
  }
  return pieces.submit(volume_, done);
}

}  // namespace mmfs::fs
