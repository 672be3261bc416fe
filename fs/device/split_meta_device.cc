// The metadata region's two copies on disjoint member sets
// (fs/device/split_meta_device.h).
#include "fs/device/split_meta_device.h"

#include "fs/device/remapped_batch.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <vector>

namespace mmfs::fs {

namespace {

std::vector<std::uint32_t> members_of_copy(std::uint32_t p, int copy) {
  std::vector<std::uint32_t> out;
  for (std::uint32_t m = std::uint32_t(copy); m < p; m += 2) out.push_back(m);
  return out;
}

constexpr std::uint64_t kBlock = 4096;

}  // namespace

SplitMetaDevice::Layout SplitMetaDevice::layout_of(const geom::StripedGeometry& g, std::uint64_t region_offset,
                                                   std::uint64_t region_bytes) {
  const std::uint64_t ss = g.sector_size(), p = g.members();
  if (p < 2) throw std::invalid_argument("the metadata copies need a volume of at least 2 members");
  if (region_offset % ss || region_bytes % ss || region_bytes == 0)
    throw std::invalid_argument("the metadata region is not whole sectors");
  const geom::StripedGeometry::MemberLbn at = g.locate(region_offset / ss);
  const geom::TrackBounds first = g.member().track_boundaries(at.lbn);
  const std::uint64_t per_member = region_bytes / ss / p;
  if (at.member != 0 || first.low != at.lbn || per_member * p * ss != region_bytes ||
      g.member().track_boundaries(first.low + per_member - 1).high + 1 != first.low + per_member)
    throw std::invalid_argument("the metadata region is not whole stripes");
  Layout l;
  l.first_lbn = first.low;
  l.copy_bytes = (p / 2) * per_member * ss / kBlock * kBlock;  // the odd members are the fewer
  return l;
}

void SplitMetaDevice::region_for(const geom::StripedGeometry& g, geom::Lbn first_lbn, std::uint64_t copy_bytes,
                                 std::uint64_t* offset, std::uint64_t* length) {
  const geom::Geometry& m = g.member();
  const std::uint64_t ss = g.sector_size(), p = g.members();
  if (p < 2) throw std::invalid_argument("the metadata copies need a volume of at least 2 members");
  const geom::TrackBounds t = m.track_boundaries(first_lbn);
  const geom::Lbn low = t.low;
  geom::Lbn end = t.high + 1;
  while ((p / 2) * (end - low) * ss / kBlock * kBlock < copy_bytes) {
    if (end >= m.capacity_sectors()) throw std::invalid_argument("the members are too small for the metadata region");
    end = m.track_boundaries(end).high + 1;
  }
  *offset = p * low * ss;
  *length = p * (end - low) * ss;
}

SplitMetaDevice::SplitMetaDevice(BlockDevice& volume, const geom::StripedGeometry& g, const Layout& layout, int lost)
    : volume_(volume), geometry_(g), copy_bytes_(layout.copy_bytes), sector_(g.sector_size()), lost_(lost) {
  const geom::Lbn start = layout.first_lbn;
  for (int c = 0; c < 2; ++c) {
    sets_[c] = std::make_unique<geom::MemberSubset>(g, members_of_copy(g.members(), c));
    base_[c] = sets_[c]->to_sub(g.volume_lbn(std::uint32_t(c), start));
  }
}

std::vector<geom::LbnRun> SplitMetaDevice::sectors_of(int copy, std::uint64_t offset, std::uint64_t length) const {
  if (copy < 0 || copy > 1 || offset % sector_ || length % sector_ || offset > copy_bytes_ ||
      length > copy_bytes_ - offset)
    throw std::invalid_argument("not whole sectors of one metadata copy");
  if (length == 0) return {};
  return sets_[copy]->to_parent({{base_[copy] + offset / sector_, length / sector_}});
}

int SplitMetaDevice::submit(std::span<IoRequest> batch) {
  const int lost = lost_.load();
  RemappedBatch pieces(batch);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    IoRequest& r = batch[i];
    if (!pieces.check(i, sector_, size_bytes())) continue;
    for (std::uint64_t done = 0; done < r.length;) {  // a piece per copy it touches
      const std::uint64_t at = r.offset + done;
      int copy = int(at / copy_bytes_);
      const std::uint64_t within = at % copy_bytes_;
      const std::uint64_t n = std::min<std::uint64_t>(r.length - done, copy_bytes_ - within);
      std::byte* buffer = static_cast<std::byte*>(r.buffer) + done;
      done += n;
      if (copy == lost) {
        if (r.op == IoRequest::Op::Write) continue;  // the other copy's request writes these bytes
        copy = 1 - copy;                             // read the twin's
      }
      pieces.add(i, sets_[copy]->to_parent({{base_[copy] + within / sector_, n / sector_}}), sector_, buffer);
    }
  }
  const int r = pieces.submit(volume_);
  if (r == 0 || lost >= 0 || !member_failed_) return r;
  // Writes that failed on one member, with a device error: its copy may be
  // dropped. A failed read, another errno or a second member: fail as is.
  std::optional<std::uint32_t> member;
  int error = 0;
  for (const IoRequest& p : pieces.pieces()) {
    if (p.result == 0) continue;
    const std::uint32_t m = geometry_.locate(p.offset / sector_).member;
    if (p.op != IoRequest::Op::Write || !is_device_failure(p.result) || (member && *member != m)) return r;
    member = m;
    error = p.result;
  }
  if (!member || !drop_failed(member, error)) return r;
  // The failed requests again, without the dropped copy: its pieces are
  // skipped, the other copy's written (again: the same bytes).
  std::vector<IoRequest> again;
  std::vector<std::size_t> which;
  for (std::size_t i = 0; i < batch.size(); ++i)
    if (batch[i].result != 0) {
      IoRequest q = batch[i];
      q.result = 0;
      again.push_back(q);
      which.push_back(i);
    }
  submit(again);
  int first = 0;
  for (std::size_t k = 0; k < again.size(); ++k) {
    batch[which[k]].result = again[k].result;
    if (!first) first = again[k].result;
  }
  for (const IoRequest& q : batch)
    if (q.result && !first) first = q.result;
  return first;
}

int SplitMetaDevice::flush() {
  const int r = volume_.flush();
  if (r == 0 || !member_failed_ || !is_device_failure(r)) return r;
  // Which member failed is the volume's to find (it flushes each). When it
  // is the one whose copy is dropped (now, or by an earlier failure), the
  // metadata's flush stands on the other copy's members, flushed above.
  return drop_failed(std::nullopt, r) ? 0 : r;
}

bool SplitMetaDevice::drop_failed(std::optional<std::uint32_t> member, int error) {
  const std::optional<std::uint32_t> failed = member_failed_(member, error);
  if (!failed) return false;
  int none = -1;
  const int copy = copy_on(*failed);
  // Another thread may have dropped the same copy first; never the other one.
  return lost_.compare_exchange_strong(none, copy) || none == copy;
}

}  // namespace mmfs::fs
