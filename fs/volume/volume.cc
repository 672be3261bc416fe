#include "fs/volume/volume.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <random>

#include "fs/device/split_meta_device.h"
#include "fs/meta/meta_codec.h"
#include "fs/volume/volume_internal.h"
#include "geometry/load.h"
#include "util/align.h"

namespace mmfs::fs {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;
constexpr std::uint64_t kMinMetaBytes = meta::kMinRegionBytes;  // what the MetaStore accepts
constexpr std::uint64_t kMaxDefaultMetaBytes = 8192 * kMiB;
constexpr std::uint64_t kFullMetaFloor = 8 * kMiB;  // the default's floor on volumes of 64 MiB and more
constexpr std::uint64_t kStep = 4096;               // device sizes are planned in 4 KiB steps

struct Plan {
  std::uint64_t volume_bytes, meta_offset, meta_length, backup_offset;
  geom::Lbn data_first, data_end;
};

}  // namespace

std::uint64_t detail::default_meta_bytes(std::uint64_t volume_bytes) {
  std::uint64_t floor = std::clamp<std::uint64_t>(volume_bytes / 8, kMinMetaBytes, kFullMetaFloor);
  return std::clamp<std::uint64_t>(volume_bytes / 16, floor, kMaxDefaultMetaBytes);
}

namespace {
using detail::default_meta_bytes;

// Where everything goes on a device of `device_bytes`, with a metadata region
// of `meta_bytes` (0: the default for the volume's size).
bool plan_volume(const geom::Geometry& g, std::uint64_t device_bytes, std::uint32_t block, std::uint64_t meta_bytes,
                 Plan* p) {
  const std::uint64_t ss = g.sector_size();
  // Both superblocks and the smallest metadata region, before anything is
  // subtracted from the device's size.
  if (device_bytes < 2 * std::uint64_t(kSuperblockBytes) + kMinMetaBytes + kStep) return false;
  p->backup_offset = backup_superblock_offset(device_bytes);
  // The modeled device ends at its capacity; the backup copy sits at the end of the real one.
  p->volume_bytes = std::min<std::uint64_t>(device_bytes, g.capacity_sectors() * ss);
  p->meta_offset = util::align_up(std::uint64_t(kSuperblockBytes), block);
  std::uint64_t meta = meta_bytes ? meta_bytes : default_meta_bytes(p->volume_bytes);
  p->meta_length = util::align_up(std::max(meta, kMinMetaBytes), std::max<std::uint64_t>(block, 4096));
  std::uint64_t meta_end_lbn = util::align_up(p->meta_offset + p->meta_length, ss) / ss;
  if (meta_end_lbn >= g.capacity_sectors()) return false;
  p->data_first = g.track_boundaries(meta_end_lbn).low == meta_end_lbn ? meta_end_lbn
                                                                       : g.track_boundaries(meta_end_lbn).high + 1;
  p->data_end = std::min<geom::Lbn>(g.capacity_sectors(), std::min(p->volume_bytes, p->backup_offset) / ss);
  // At least a few whole tracks of data.
  return p->data_first < p->data_end && p->data_end - p->data_first >= 4 * g.track_length(p->data_first);
}

// The smallest device size (a multiple of 4 KiB) the plan fits, or 0 when no
// size does (the modeled device itself is too small). A larger device is
// planned with the metadata region of this smallest one when its own default
// does not fit (see format_volume), so every size from here up formats.
std::uint64_t smallest_plan(const geom::Geometry& g, std::uint32_t block, std::uint64_t meta_bytes) {
  Plan p;
  // Past the modeled device plus both superblocks nothing changes: the
  // volume, its metadata and its data area are those of the modeled device.
  std::uint64_t lo = 2 * std::uint64_t(kSuperblockBytes) + kMinMetaBytes;
  std::uint64_t hi = util::align_up(g.capacity_sectors() * g.sector_size() + 2 * kSuperblockBytes, kStep) + 2 * kStep;
  if (!plan_volume(g, hi, block, meta_bytes, &p)) return 0;
  lo = util::align_down(lo, kStep);
  // plan(lo) fails, plan(hi) fits.
  while (hi - lo > kStep) {
    std::uint64_t mid = util::align_down(lo + (hi - lo) / 2, kStep);
    if (plan_volume(g, mid, block, meta_bytes, &p)) hi = mid;
    else lo = mid;
  }
  return hi;
}

}  // namespace

std::array<std::uint8_t, 16> detail::random_uuid() {
  std::random_device rd;
  std::array<std::uint8_t, 16> u;
  for (auto& b : u) b = std::uint8_t(rd());
  u[6] = (u[6] & 0x0f) | 0x40;  // version 4
  u[8] = (u[8] & 0x3f) | 0x80;  // variant 1
  return u;
}

int detail::read_superblock_at(BlockDevice& dev, std::uint64_t offset, std::optional<Superblock>* out,
                       SuperblockStatus* status) {
  AlignedBuffer buf(kSuperblockBytes);
  if (offset > dev.size_bytes() || dev.size_bytes() - offset < kSuperblockBytes) {
    *status = SuperblockStatus::Malformed;
    return 0;
  }
  if (int r = dev.read(offset, buf.data(), kSuperblockBytes)) return r;
  *out = decode_superblock(buf.span(), status);
  return 0;
}

using detail::random_uuid;
using detail::read_superblock_at;

std::uint64_t backup_superblock_offset(std::uint64_t device_bytes) {
  // A device too small for one superblock has no backup slot: offset 0 (the
  // primary's), never an offset wrapped around below zero.
  std::uint64_t end = util::align_down(device_bytes, 4096);
  return end >= 2 * std::uint64_t(kSuperblockBytes) ? end - kSuperblockBytes : 0;
}

std::uint64_t minimum_volume_bytes(const geom::Geometry& g, std::uint32_t block, std::uint64_t meta_bytes) {
  std::uint64_t min = smallest_plan(g, block, meta_bytes);
  return min ? min : UINT64_MAX;
}

std::string detect_signature(BlockDevice& dev) {
  const std::uint32_t n = std::uint32_t(std::min<std::uint64_t>(dev.size_bytes(), 128 * 1024) / 4096 * 4096);
  if (n < 4096) return "";
  AlignedBuffer buf(n);
  if (dev.read(0, buf.data(), n)) return "";
  const char* p = reinterpret_cast<const char*>(buf.data());
  auto at = [&](std::size_t off, const char* magic, std::size_t len) { return off + len <= n && !std::memcmp(p + off, magic, len); };
  if (at(0, kSuperblockMagic, 8)) return "mmfs";
  if (at(1080, "\x53\xef", 2)) return "ext2/3/4";
  if (at(0, "XFSB", 4)) return "xfs";
  if (at(65600, "_BHRfS_M", 8)) return "btrfs";
  if (at(4086, "SWAPSPACE2", 10)) return "swap";
  if (at(512, "EFI PART", 8)) return "GPT partition table";
  if (at(82, "FAT32   ", 8) || at(54, "FAT16   ", 8) || at(54, "FAT12   ", 8)) return "vfat";
  if (at(3, "NTFS    ", 8)) return "ntfs";
  if (at(0, "hsqs", 4)) return "squashfs";
  // A backup mmfs superblock at the end also counts.
  std::optional<Superblock> sb;
  SuperblockStatus st;
  if (!read_superblock_at(dev, backup_superblock_offset(dev.size_bytes()), &sb, &st) && sb) return "mmfs";
  return "";
}

int format_volume(BlockDevice& dev, const geom::Geometry& g, const FormatOptions& opt, FormatSummary* summary,
                  std::string* message) {
  if (g.sector_size() < dev.block_size() || g.sector_size() % 512) {
    *message = fmt::format("the geometry's {}-byte sectors are smaller than the target's {}-byte logical blocks",
                           g.sector_size(), dev.block_size());
    return EINVAL;
  }
  if (opt.label.size() > 63) {
    *message = "the label is longer than 63 bytes";
    return EINVAL;
  }
  std::uint64_t min = smallest_plan(g, dev.block_size(), opt.meta_bytes);
  if (min == 0) {
    *message = fmt::format("geometry '{}' models a device of {} bytes, too small for an mmfs volume (two {}-byte "
                           "superblocks, a metadata region of at least {} bytes and 4 tracks of data)",
                           g.name(), g.capacity_sectors() * g.sector_size(), kSuperblockBytes,
                           std::max(opt.meta_bytes, kMinMetaBytes));
    return ENOSPC;
  }
  Plan p;
  bool fits = dev.size_bytes() >= min && plan_volume(g, dev.size_bytes(), dev.block_size(), opt.meta_bytes, &p);
  if (!fits && dev.size_bytes() >= min) {
    // The default metadata region of this size pushed the data area past a
    // track boundary it could not spare: take the smallest volume's region.
    Plan smallest;
    fits = plan_volume(g, min, dev.block_size(), opt.meta_bytes, &smallest) &&
           plan_volume(g, dev.size_bytes(), dev.block_size(), smallest.meta_length, &p);
  }
  if (!fits) {
    *message = fmt::format("the target holds {} bytes; a volume of geometry '{}' needs at least {} bytes ({:.2f} MiB)",
                           dev.size_bytes(), g.name(), min, double(min) / kMiB);
    return ENOSPC;
  }
  if (!opt.force) {
    std::string sig = detect_signature(dev);
    if (!sig.empty()) {
      *message = fmt::format("the target already holds a filesystem ({} signature); use -f to overwrite it", sig);
      return EEXIST;
    }
  }
  Superblock sb;
  sb.uuid = random_uuid();
  sb.label = opt.label;
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  sb.created_ns = std::uint64_t(ts.tv_sec) * 1000000000 + std::uint64_t(ts.tv_nsec);
  sb.volume_bytes = std::max(p.volume_bytes, p.backup_offset + kSuperblockBytes);
  sb.meta_offset = p.meta_offset;
  sb.meta_length = p.meta_length;
  sb.data_first_lbn = p.data_first;
  sb.data_end_lbn = p.data_end;
  sb.backup_offset = p.backup_offset;
  nlohmann::json def = g.definition();
  def["name"] = g.name();
  sb.geometry_json = def.dump();

  // The metadata store and root first, superblocks last: a volume whose
  // format was interrupted has no valid superblock and is not mountable.
  if (int r = MetaStore::format(dev, {sb.meta_offset, sb.meta_length})) {
    *message = fmt::format("writing the metadata region failed: {}", std::strerror(r));
    return r;
  }
  {
    int err = 0;
    std::string msg;
    auto store = MetaStore::open(dev, {sb.meta_offset, sb.meta_length}, &err, &msg);
    if (!store) {
      *message = "reopening the new metadata region failed: " + msg;
      return err ? err : EIO;
    }
    if (int r = Metadata::format(*store, 0755, 0, 0)) {
      *message = fmt::format("creating the root directory failed: {}", std::strerror(r));
      return r;
    }
  }
  AlignedBuffer buf(kSuperblockBytes);
  try {
    encode_superblock(sb, buf.span());
  } catch (const std::exception& e) {
    *message = e.what();
    return EINVAL;
  }
  if (int r = dev.write(sb.backup_offset, buf.data(), kSuperblockBytes)) return *message = "writing the backup superblock failed", r;
  if (int r = dev.write(0, buf.data(), kSuperblockBytes)) return *message = "writing the superblock failed", r;
  if (int r = dev.flush()) return *message = "flushing the device failed", r;

  if (summary) {
    summary->superblock = sb;
    summary->device_bytes = dev.size_bytes();
    std::uint64_t modeled = g.capacity_sectors() * g.sector_size();
    summary->unused_bytes = dev.size_bytes() > modeled ? dev.size_bytes() - modeled : 0;
    std::string tracks;
    nlohmann::json info = g.info();
    if (info.contains("zones")) {
      for (const auto& z : info["zones"])
        tracks += (tracks.empty() ? "" : ", ") + std::to_string(z.value("sectors_per_track", 0));
    } else if (info.contains("sectors_per_track")) {
      tracks = std::to_string(info["sectors_per_track"].get<std::uint64_t>());
    } else if (info.contains("track_sectors")) {
      tracks = std::to_string(info["track_sectors"].get<std::uint64_t>());
    }
    std::uint64_t data_sectors = sb.data_end_lbn - sb.data_first_lbn;
    summary->text = fmt::format(
        "mmfs volume {} label '{}'\n"
        "geometry:     {} ({})\n"
        "capacity:     {} bytes of data ({:.2f} GiB) in {} sectors of {} bytes\n"
        "tracks:       {} (data area: LBN {}..{})\n"
        "depth D:      {}\n"
        "track length: {} sectors\n"
        "metadata:     {} at byte {}\n",
        uuid_string(sb.uuid), sb.label, g.name(), to_string(g.kind()), data_sectors * g.sector_size(),
        double(data_sectors * g.sector_size()) / (1 << 30), data_sectors, g.sector_size(), g.tracks(),
        sb.data_first_lbn, sb.data_end_lbn - 1, g.depth(), tracks,
        sb.meta_length % kMiB ? fmt::format("{} KiB", sb.meta_length >> 10) : fmt::format("{} MiB", sb.meta_length / kMiB),
        sb.meta_offset);
    if (summary->unused_bytes)
      summary->text += fmt::format("note:         the target is {} bytes larger than the modeled device; that part "
                                   "is left unused\n",
                                   summary->unused_bytes);
    else if (dev.size_bytes() < modeled)
    {
      double percent = 100.0 * double(dev.size_bytes()) / double(modeled);
      summary->text += fmt::format("note:         the target holds the first {} % of the modeled device (its outer "
                                   "zones)\n",
                                   percent >= 1 ? fmt::format("{:.1f}", percent) : fmt::format("{:.2g}", percent));
    }
  }
  return 0;
}

std::unique_ptr<Volume> Volume::open(std::unique_ptr<BlockDevice> device, int* error, std::string* message,
                                     bool for_check, const MetaOpenOptions& metadata) {
  auto fail = [&](int e, std::string m) {
    *error = e;
    *message = std::move(m);
    return std::unique_ptr<Volume>();
  };
  if (device->size_bytes() < 2 * std::uint64_t(kSuperblockBytes) + kMinMetaBytes)
    return fail(EINVAL, fmt::format("not an mmfs volume (the target holds {} bytes, less than the smallest volume)",
                                    device->size_bytes()));
  std::unique_ptr<Volume> v(new Volume());
  std::optional<Superblock> a, b;
  SuperblockStatus sa = SuperblockStatus::Malformed, sbs = SuperblockStatus::Malformed;
  if (int r = read_superblock_at(*device, 0, &a, &sa)) return fail(r, "cannot read the superblock");
  if (int r = read_superblock_at(*device, backup_superblock_offset(device->size_bytes()), &b, &sbs))
    return fail(r, "cannot read the backup superblock");
  v->primary_ok_ = a.has_value();
  v->backup_ok_ = b.has_value() && (!a || *a == *b);
  if (!a && !b) {
    if (sa == SuperblockStatus::NotMmfs && sbs == SuperblockStatus::NotMmfs)
      return fail(EINVAL, "not an mmfs volume (no mmfs signature)");
    if (sa == SuperblockStatus::NewerVersion || sbs == SuperblockStatus::NewerVersion)
      return fail(EPROTONOSUPPORT, fmt::format("the volume was written by a newer mmfs (on-disk version > {})",
                                               kFormatVersion));
    return fail(EUCLEAN, fmt::format("damaged volume: primary superblock: {}; backup superblock: {}",
                                     to_string(sa), to_string(sbs)));
  }
  v->sb_ = a ? *a : *b;
  if (v->sb_.devices > 1)
    return fail(EINVAL, fmt::format("this is member {} of a {}-device mmfs volume ({}): give all its members, "
                                    "comma-separated or as separate targets",
                                    v->sb_.member_index, v->sb_.devices, uuid_string(v->sb_.uuid)));
  try {
    v->geometry_ = geom::load_geometry(nlohmann::json::parse(v->sb_.geometry_json));
  } catch (const std::exception& e) {
    return fail(EUCLEAN, fmt::format("damaged volume: the stored geometry does not load: {}", e.what()));
  }
  return finish_open(std::move(v), std::move(device), error, message, for_check, metadata);
}

std::unique_ptr<Volume> Volume::finish_open(std::unique_ptr<Volume> v, std::unique_ptr<BlockDevice> device,
                                            int* error, std::string* message, bool for_check,
                                            const MetaOpenOptions& metadata) {
  auto fail = [&](int e, std::string m) {
    *error = e;
    *message = std::move(m);
    return std::unique_ptr<Volume>();
  };
  const auto& g = *v->geometry_;
  if (g.sector_size() < device->block_size())
    return fail(EINVAL, fmt::format("the volume's {}-byte sectors are smaller than the device's {}-byte blocks",
                                    g.sector_size(), device->block_size()));
  if (v->sb_.data_end_lbn > g.capacity_sectors() || v->sb_.data_end_lbn * g.sector_size() > device->size_bytes() ||
      v->sb_.meta_offset + v->sb_.meta_length > device->size_bytes())
    return fail(EUCLEAN, "damaged volume: the superblock's areas lie beyond the device");
  int err = 0;
  std::string msg;
  MetaRegion region{v->sb_.meta_offset, v->sb_.meta_length};
  BlockDevice* meta_device = device.get();
  if (v->sb_.meta_sets) {
    const auto* striped = dynamic_cast<const geom::StripedGeometry*>(v->geometry_.get());
    if (!striped) return fail(EUCLEAN, "damaged volume: metadata on member sets needs a volume of several members");
    try {
      const SplitMetaDevice::Layout layout = SplitMetaDevice::layout_of(*striped, region.offset, region.length);
      auto split = std::make_unique<SplitMetaDevice>(*device, *striped, layout, v->meta_lost_copy_);
      // A member lost while the volume runs degrades it as a mount without
      // the member would (mmfsck checks the volume as it is: no handler).
      if (!for_check && v->striped_)
        split->set_member_failed([vol = v.get()](std::optional<std::uint32_t> m, int e) {
          return vol->metadata_member_failed(m, e);
        });
      v->meta_device_ = std::move(split);
    } catch (const std::exception& e) {
      return fail(EUCLEAN, fmt::format("damaged volume: the metadata region: {}", e.what()));
    }
    meta_device = v->meta_device_.get();
    region = {0, meta_device->size_bytes()};
  }
  v->store_ = MetaStore::open(*meta_device, region, &err, &msg, metadata, &v->metadata_report_);
  if (!v->store_) return fail(err ? err : EUCLEAN, "damaged metadata: " + msg);
  v->allocator_ = std::make_unique<Allocator>(g, v->sb_.data_first_lbn, v->sb_.data_end_lbn);
  // The free map is the complement of every extent map (the files', the indexes', the mloc images').
  std::string bad;
  v->store_->scan(keys::scan_prefix(keys::Kind::Extents), [&](std::string_view key, std::string_view value) {
    auto extents = decode_extents(value);
    if (!extents) {
      bad = "an extent map does not decode";
      return false;
    }
    for (const Extent& e : *extents)
      if (!v->allocator_->mark_used(e)) {
        bad = fmt::format("extent {}+{} is outside the data area or used twice", e.start, e.sectors);
        if (!for_check) return false;
        v->problems_.push_back(bad);
      }
    (void)key;
    return true;
  });
  if (!bad.empty() && !for_check) return fail(EUCLEAN, "damaged metadata: " + bad + " (run mmfsck)");
  v->metadata_ = std::make_unique<Metadata>(*v->store_, *v->allocator_);
  if (!v->metadata_->inode(kRootIno)) {
    if (!for_check) return fail(EUCLEAN, "damaged metadata: no root directory (run mmfsck)");
    v->problems_.push_back("no root directory");
  }
  v->device_ = std::move(device);
  return v;
}

int Volume::rewrite_superblocks() {
  if (striped_) return rewrite_member_superblocks();
  AlignedBuffer buf(kSuperblockBytes);
  encode_superblock(sb_, buf.span());
  if (int r = device_->write(sb_.backup_offset, buf.data(), kSuperblockBytes)) return r;
  if (int r = device_->write(0, buf.data(), kSuperblockBytes)) return r;
  if (int r = device_->flush()) return r;
  primary_ok_ = backup_ok_ = true;
  return 0;
}

}  // namespace mmfs::fs
