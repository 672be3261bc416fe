#include "fs/device/subset_device.h"

#include <cerrno>
#include <vector>

namespace mmfs::fs {

SubsetDevice::SubsetDevice(BlockDevice& volume, const geom::MemberSubset& set)
    : volume_(volume),
      set_(set),
      sector_(set.geometry().sector_size()),
      size_(set.geometry().capacity_sectors() * set.geometry().sector_size()) {}

int SubsetDevice::submit_streaming(std::span<IoRequest> batch, const RequestDone& done) {
  std::vector<IoRequest> pieces;
  std::vector<std::size_t> owner;          // pieces[j] belongs to batch[owner[j]]
  std::vector<std::size_t> left(batch.size(), 0);  // pieces of each request not yet arrived
  for (std::size_t i = 0; i < batch.size(); ++i) {
    IoRequest& r = batch[i];
    r.result = 0;
    // As the devices below: empty, not whole sectors, or past the end.
    if (r.length == 0 || r.buffer == nullptr || r.offset % sector_ != 0 || r.length % sector_ != 0 ||
        r.offset > size_ || r.length > size_ - r.offset) {
      r.result = EINVAL;
      continue;
    }
    std::uint64_t at = 0;  // bytes of the request before this piece
    for (const geom::LbnRun& run : set_.to_parent({{r.offset / sector_, r.length / sector_}})) {
      IoRequest p;
      p.op = r.op;
      p.offset = run.first * sector_;
      p.length = std::uint32_t(run.count * sector_);  // no longer than the request
      p.buffer = static_cast<std::byte*>(r.buffer) + at;
      at += p.length;
      pieces.push_back(p);
      owner.push_back(i);
      ++left[i];
    }
  }
  auto piece_done = [&](std::size_t j) {
    const std::size_t i = owner[j];
    if (--left[i] == 0 && done) done(i);
  };
  if (!pieces.empty()) volume_.submit_streaming(pieces, piece_done);
  // A request fails with its first failing piece.
  for (std::size_t j = 0; j < pieces.size(); ++j)
    if (pieces[j].result != 0 && batch[owner[j]].result == 0) batch[owner[j]].result = pieces[j].result;
  for (const IoRequest& r : batch)
    if (r.result != 0) return r.result;
  return 0;
}

}  // namespace mmfs::fs
