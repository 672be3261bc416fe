// Requests of a remapping device as one batch below (fs/device/remapped_batch.h).
#include "fs/device/remapped_batch.h"

#include <cerrno>

namespace mmfs::fs {

RemappedBatch::RemappedBatch(std::span<IoRequest> batch) : batch_(batch), left_(batch.size(), 0) {
  for (IoRequest& r : batch_) r.result = 0;
}

bool RemappedBatch::check(std::size_t i, std::uint32_t sector, std::uint64_t size) {
  IoRequest& r = batch_[i];
  if (r.length == 0 || r.buffer == nullptr || r.offset % sector != 0 || r.length % sector != 0 || r.offset > size ||
      r.length > size - r.offset) {
    r.result = EINVAL;
    return false;
  }
  return true;
}

std::uint64_t RemappedBatch::add(std::size_t i, const std::vector<geom::LbnRun>& runs, std::uint32_t sector,
                                 std::byte* buffer) {
  std::uint64_t at = 0;
  for (const geom::LbnRun& run : runs) {
    IoRequest p;
    p.op = batch_[i].op;
    p.offset = run.first * sector;
    p.length = std::uint32_t(run.count * sector);  // no longer than the request
    p.buffer = buffer + at;
    at += p.length;
    pieces_.push_back(p);
    owner_.push_back(i);
    ++left_[i];
  }
  return at;
}

int RemappedBatch::submit(BlockDevice& below, const BlockDevice::RequestDone& done) {
  if (!pieces_.empty()) {
    if (done)
      below.submit_streaming(pieces_, [&](std::size_t j) {
        if (--left_[owner_[j]] == 0) done(owner_[j]);
      });
    else
      below.submit(pieces_);
  }
  for (std::size_t j = 0; j < pieces_.size(); ++j)
    if (pieces_[j].result != 0 && batch_[owner_[j]].result == 0) batch_[owner_[j]].result = pieces_[j].result;
  for (const IoRequest& r : batch_)
    if (r.result != 0) return r.result;
  return 0;
}

}  // namespace mmfs::fs
