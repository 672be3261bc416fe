#include "fs/file/plain_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "util/align.h"

namespace mmfs::fs {

namespace {
constexpr std::uint64_t kMaxGrowBytes = 64ull << 20;
}  // namespace

PlainFile::PlainFile(Metadata& metadata, Allocator& allocator, SectorIo& io, const geom::Geometry& geometry,
                     Ino ino, std::uint64_t size)
    : metadata_(metadata), allocator_(allocator), io_(io), ino_(ino),
      block_(std::max<std::uint64_t>(4096, io.sector_size())),
      sectors_per_block_(block_ / io.sector_size()),
      small_limit_sectors_(geometry.track_length(allocator.first())),
      size_(size),
      extents_(metadata.extents(ino)),
      sums_(metadata.store(), ino, util::div_up(size, block_)),
      alt_(metadata.store(), ino, util::div_up(size, block_), 'a') {
  // Read now, as the extents are: an unlink may remove the records while an
  // object of the file lives, and it must still know its stored blocks.
  sums_.load_all();
  alt_.load_all();
  for (const Extent& e : extents_) {
    starts_.push_back(capacity_sectors_);
    capacity_sectors_ += e.sectors;
  }
}

std::uint64_t PlainFile::size() const {
  std::lock_guard lock(mu_);
  return size_;
}

bool PlainFile::dirty() const {
  std::lock_guard lock(mu_);
  return dirty_;
}

std::uint64_t PlainFile::allocated_bytes() const {
  std::lock_guard lock(mu_);
  return capacity_sectors_ * io_.sector_size();
}

std::vector<Extent> PlainFile::extents() const {
  std::lock_guard lock(mu_);
  return extents_;
}

void PlainFile::map_locked(std::uint64_t first, std::uint64_t sectors, std::byte* buffer,
                           std::vector<SectorRun>* runs) const {
  auto it = std::upper_bound(starts_.begin(), starts_.end(), first);
  std::size_t i = std::size_t(it - starts_.begin()) - 1;
  while (sectors > 0) {
    const Extent& e = extents_[i];
    std::uint64_t within = first - starts_[i];
    std::uint64_t n = std::min(sectors, e.sectors - within);
    runs->push_back({e.start + within, n, buffer});
    buffer += n * io_.sector_size();
    first += n;
    sectors -= n;
    ++i;
  }
}

int PlainFile::ensure_capacity_locked(std::uint64_t bytes) {
  std::uint64_t need = util::div_up(util::align_up(bytes, block_), io_.sector_size());
  if (need <= capacity_sectors_) return 0;
  std::uint64_t grow = std::max(need - capacity_sectors_,
                                std::min(capacity_sectors_, kMaxGrowBytes / io_.sector_size()));
  grow = util::align_up(grow, sectors_per_block_);
  std::vector<Extent> got;
  int r = ENOSPC;
  if (capacity_sectors_ + grow > small_limit_sectors_) r = allocator_.allocate({layouts::SpaceShape::Runs, grow}, &got);
  if (r != 0) r = allocator_.allocate_small(grow, &got);
  if (r != 0) r = allocator_.allocate_small(need - capacity_sectors_, &got);  // a nearly full volume
  if (r != 0) return r;
  for (const Extent& e : got) {
    // Adjacent to the last extent: extend it, so streaming stays one run.
    if (!extents_.empty() && extents_.back().start + extents_.back().sectors == e.start) {
      extents_.back().sectors += e.sectors;
    } else {
      starts_.push_back(capacity_sectors_);
      extents_.push_back(e);
    }
    capacity_sectors_ += e.sectors;
  }
  dirty_ = true;
  return 0;
}

bool PlainFile::block_stored(std::uint64_t b) const {
  return b < sums_.cells() && (sums_.get(b) != 0 || alt_.get(b) != 0);
}

bool PlainFile::block_valid(std::uint64_t b, std::span<const std::byte> contents) const {
  if (sums_.verify(b, contents)) return true;
  return alt_.get(b) != 0 && cell_checksum(contents) == alt_.get(b);
}

int PlainFile::read_blocks_locked(std::uint64_t first_block, std::uint64_t blocks, std::byte* out, bool verify,
                                  std::string* why) {
  std::vector<SectorRun> runs;
  std::uint64_t capacity_blocks = capacity_sectors_ / sectors_per_block_;
  // Only blocks that hold data are read: unwritten ones are zeros by
  // definition, cleared here (the others the device overwrites whole).
  std::uint64_t b = first_block;
  while (b < first_block + blocks) {
    if (b >= capacity_blocks || !block_stored(b)) {
      std::memset(out + (b - first_block) * block_, 0, block_);
      ++b;
      continue;
    }
    std::uint64_t e = b;
    while (e < first_block + blocks && e < capacity_blocks && block_stored(e)) ++e;
    map_locked(b * sectors_per_block_, (e - b) * sectors_per_block_, out + (b - first_block) * block_, &runs);
    b = e;
  }
  if (int r = io_.read(runs)) {
    if (why) *why = fmt::format("the device failed the read ({})", std::strerror(r));
    return r;
  }
  if (!verify) return 0;
  for (std::uint64_t i = 0; i < blocks; ++i) {
    std::uint64_t blk = first_block + i;
    if (!block_stored(blk)) continue;
    if (!block_valid(blk, {out + i * block_, block_})) {
      if (why) *why = fmt::format("block {} failed its checksum (the device returned other bytes than were written)", blk);
      return EIO;
    }
  }
  return 0;
}

int PlainFile::write_blocks_locked(std::uint64_t first_block, std::uint64_t blocks, const std::byte* data) {
  if (sums_.cells() < first_block + blocks) {
    sums_.resize(first_block + blocks);
    alt_.resize(first_block + blocks);
  }
  // Blocks that hold data are rewritten in place. Their new checksums become
  // durable alternatives before the bytes change, in a commit of the file's
  // state so far (size, extents, the checksums of earlier writes): a block
  // rewritten before is then committed as that version before it changes
  // again, and no alternative record is cleared (records hold 1,024 blocks)
  // while its block's new checksum is not committed. So every block a crash
  // can bring back matches its checksum or its alternative. A block that
  // holds no data needs none: it reads as zeros without the device until its
  // checksum commits, and an alternative would make its stale sectors (an
  // earlier file's bytes) its contents after a crash before the write.
  bool rewrites = false;
  for (std::uint64_t b = first_block; b < first_block + blocks; ++b)
    if (block_stored(b)) {
      alt_.set_raw(b, cell_checksum({data + (b - first_block) * block_, block_}));
      rewrites = true;
    }
  if (rewrites) {
    if (int r = commit_locked({}, {}, {})) return r;
    if (int r = metadata_.sync()) return r;
  }
  std::vector<SectorRun> runs;
  map_locked(first_block * sectors_per_block_, blocks * sectors_per_block_, const_cast<std::byte*>(data), &runs);
  if (int r = io_.write(runs)) return r;
  for (std::uint64_t i = 0; i < blocks; ++i) {
    sums_.set(first_block + i, {data + i * block_, block_});
    alt_.set_raw(first_block + i, 0);
  }
  return 0;
}

int PlainFile::zero_tail_locked() {
  const std::uint64_t from = size_ % block_;
  const std::uint64_t b = size_ / block_;
  if (from == 0 || !block_stored(b)) return 0;
  AlignedBuffer buf(block_);
  if (int r = read_blocks_locked(b, 1, buf.data(), true)) return r;
  if (std::all_of(buf.data() + from, buf.data() + block_, [](std::byte x) { return x == std::byte{0}; })) return 0;
  std::memset(buf.data() + from, 0, block_ - from);
  return write_blocks_locked(b, 1, buf.data());
}

int PlainFile::read(std::uint64_t offset, std::size_t length, std::byte* out, std::size_t* got, std::string* why) {
  std::lock_guard lock(mu_);
  *got = 0;
  if (offset >= size_ || length == 0) return 0;
  length = std::size_t(std::min<std::uint64_t>(length, size_ - offset));
  std::uint64_t b0 = offset / block_, b1 = util::div_up(offset + length, block_);
  AlignedBuffer buf((b1 - b0) * block_, AlignedBuffer::ForIo{});  // read_blocks_locked clears what it skips
  if (int r = read_blocks_locked(b0, b1 - b0, buf.data(), true, why)) return r;
  std::memcpy(out, buf.data() + (offset - b0 * block_), length);
  *got = length;
  return 0;
}

int PlainFile::write(std::uint64_t offset, const std::byte* data, std::size_t length) {
  std::lock_guard lock(mu_);
  if (length == 0) return 0;
  std::uint64_t end = offset + length;
  if (end < offset) return EFBIG;
  if (int r = ensure_capacity_locked(end)) return r;
  // A hole between the end and the write reads as zeros.
  if (offset > size_)
    if (int r = zero_tail_locked()) return r;
  std::uint64_t b0 = offset / block_, b1 = util::div_up(end, block_);
  // Every byte is set below: the partial blocks at either end are read whole
  // (as zeros where nothing is stored), the rest is the caller's data.
  AlignedBuffer buf((b1 - b0) * block_, AlignedBuffer::ForIo{});
  // Read-modify-write of the partial blocks at either end.
  if (offset % block_ != 0)
    if (int r = read_blocks_locked(b0, 1, buf.data(), true)) return r;
  if (end % block_ != 0 && (b1 - 1 != b0 || offset % block_ == 0))
    if (int r = read_blocks_locked(b1 - 1, 1, buf.data() + (b1 - 1 - b0) * block_, true)) return r;
  std::memcpy(buf.data() + (offset - b0 * block_), data, length);
  if (int r = write_blocks_locked(b0, b1 - b0, buf.data())) return r;
  size_ = std::max(size_, end);
  dirty_ = true;
  return 0;
}

int PlainFile::truncate(std::uint64_t size) {
  std::lock_guard lock(mu_);
  if (size == size_) return 0;
  if (size > size_) {
    // Growing needs no space: the new blocks read as zeros until written.
    if (int r = zero_tail_locked()) return r;
    size_ = size;
    dirty_ = true;
    return 0;
  }
  // Shrinking: the size, the checksums past it and the extents freed, one
  // batch. The last block keeps its bytes past the new end (see the header).
  std::uint64_t keep_blocks = util::div_up(size, block_);
  WriteBatch batch;
  if (sums_.cells() > keep_blocks) {
    sums_.resize(keep_blocks);
    alt_.resize(keep_blocks);
    for (char tag : {'c', 'a'})
      CellChecksums::stage_removal_from(metadata_.store(), ino_,
                                        util::div_up(keep_blocks, CellChecksums::kCellsPerRecord), batch, tag);
  }
  // Whole extents past the kept blocks go back to the allocator (after the sync).
  std::vector<Extent> dropped;
  std::uint64_t keep_sectors = keep_blocks * sectors_per_block_;
  while (!extents_.empty() && starts_.back() >= keep_sectors) {
    dropped.push_back(extents_.back());
    capacity_sectors_ -= extents_.back().sectors;
    extents_.pop_back();
    starts_.pop_back();
  }
  size_ = size;
  return commit_locked(std::move(batch), std::move(dropped), {});
}

int PlainFile::fallocate(std::uint64_t offset, std::uint64_t length, bool keep_size) {
  std::lock_guard lock(mu_);
  std::uint64_t end = offset + length;
  if (end < offset) return EFBIG;
  if (int r = ensure_capacity_locked(end)) return r;
  if (!keep_size && end > size_) {
    if (int r = zero_tail_locked()) return r;
    size_ = end;
    dirty_ = true;
  }
  return 0;
}

int PlainFile::commit(const std::function<void(Inode&)>& edit) {
  std::lock_guard lock(mu_);
  return commit_locked({}, {}, edit);
}

int PlainFile::commit_locked(WriteBatch batch, std::vector<Extent> dropped, const std::function<void(Inode&)>& edit) {
  if (extents_.empty()) batch.del(keys::extents(ino_));
  else batch.put(keys::extents(ino_), encode_extents(extents_));
  sums_.stage(batch);
  alt_.stage(batch);
  std::uint64_t size = size_;
  auto set_size = [&](Inode& n) {
    if (edit) edit(n);
    n.size = size;
  };
  if (int r = metadata_.apply_with_inode(ino_, set_size, std::move(batch), std::move(dropped))) return r;
  dirty_ = false;
  return 0;
}

}  // namespace mmfs::fs
