// Volumes of several devices (docs/on-disk-format.md, "Volumes of
// several devices"): mkfs of p targets, opening them as one volume with
// their identity checked, recording failed RAID 1 members, and rebuilding one.
//
// Where things lie. Each device keeps its own two superblock copies at its
// start and end (device bytes, outside the volume's address space). The
// volume's address space is the StripedGeometry's: volume track t is member
// track t / p of stripe member t mod p. The member tracks that hold a
// device's primary superblock (the first 16 KiB) are left out on every
// member, and so are the tracks that reach its backup copy, so the volume's
// byte space is [p·L(first), p·L(end)) with L(m) the first member LBN of
// member track m: the metadata region starts at p·L(first) and the data area
// follows it on the next volume track. Every member track the volume uses
// thus lies wholly inside every member, and each device's sectors are the
// member LBNs the geometry models (no offset), so the tracks the layouts
// compute are the device's real tracks.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <map>
#include <set>

#include "fs/meta/meta_codec.h"
#include "fs/device/simulated_device.h"
#include "fs/device/split_meta_device.h"
#include "fs/volume/volume.h"
#include "fs/volume/volume_internal.h"
#include "geometry/load.h"
#include "fs/meta/subset_allocator.h"
#include "geometry/member_subset.h"
#include "util/align.h"

namespace mmfs::fs {
namespace {

struct MemberPlan {
  std::uint64_t volume_space = 0;  // bytes of the volume's address space
  std::uint64_t meta_offset = 0, meta_length = 0;
  geom::Lbn data_first = 0, data_end = 0;
};

// The volume's areas over members of `member_bytes` each (see the top).
// `meta_sets`: the metadata region is whole stripes, its two copies on the
// even and the odd members (fs/device/split_meta_device.h), each at least
// half of `meta_bytes`.
bool plan_members(const geom::StripedGeometry& g, std::uint64_t member_bytes, std::uint32_t block,
                  std::uint64_t meta_bytes, MemberPlan* plan, std::string* why, bool meta_sets = false) {
  const geom::Geometry& m = g.member();
  const std::uint64_t ss = m.sector_size(), p = g.members();
  const std::uint64_t backup = backup_superblock_offset(member_bytes);
  const geom::Lbn usable = std::min<geom::Lbn>(m.capacity_sectors(), backup / ss);
  const geom::Lbn sb_end = util::div_up(kSuperblockBytes, ss);
  if (backup < 2 * std::uint64_t(kSuperblockBytes) || usable <= sb_end) {
    *why = fmt::format("a member of {} bytes is too small", member_bytes);
    return false;
  }
  const geom::Lbn first = m.track_boundaries(sb_end - 1).high + 1;
  const geom::TrackBounds last = m.track_boundaries(usable - 1);
  const geom::Lbn end = last.high + 1 == usable ? usable : last.low;
  if (end <= first) {
    *why = fmt::format("a member of {} bytes holds no whole track besides its superblocks", member_bytes);
    return false;
  }
  plan->volume_space = p * end * ss;
  plan->meta_offset = util::align_up(p * first * ss, std::max<std::uint64_t>(block, 4096));
  const std::uint64_t data_bytes = p * (end - first) * ss;
  std::uint64_t meta = meta_bytes ? meta_bytes : detail::default_meta_bytes(data_bytes);
  plan->meta_length = util::align_up(std::max<std::uint64_t>(meta, meta::kMinRegionBytes), std::max<std::uint64_t>(block, 4096));
  if (meta_sets) {
    try {
      SplitMetaDevice::region_for(g, first, util::align_up(plan->meta_length / 2, 4096), &plan->meta_offset,
                                  &plan->meta_length);
    } catch (const std::invalid_argument&) {
      *why = "the members are too small for the metadata region";
      return false;
    }
  }
  const geom::Lbn meta_end = util::div_up(plan->meta_offset + plan->meta_length, ss);
  if (meta_end >= p * end) {
    *why = "the members are too small for the metadata region";
    return false;
  }
  const geom::TrackBounds t = g.track_boundaries(meta_end);
  plan->data_first = t.low == meta_end ? meta_end : t.high + 1;
  plan->data_end = p * end;
  if (plan->data_first >= plan->data_end || plan->data_end - plan->data_first < 4 * g.track_length(plan->data_first)) {
    *why = "the members are too small: fewer than 4 tracks of data after the metadata region";
    return false;
  }
  return true;
}

int write_member_superblocks(BlockDevice& dev, const Superblock& sb) {
  AlignedBuffer buf(kSuperblockBytes);
  encode_superblock(sb, buf.span());
  if (int r = dev.write(sb.backup_offset, buf.data(), kSuperblockBytes)) return r;
  if (int r = dev.write(0, buf.data(), kSuperblockBytes)) return r;
  return dev.flush();
}

std::unique_ptr<geom::StripedGeometry> striped_geometry(const Superblock& sb, std::string* why) {
  try {
    auto g = geom::load_geometry(nlohmann::json::parse(sb.geometry_json));
    auto* s = dynamic_cast<geom::StripedGeometry*>(g.get());
    if (!s || s->members() * (sb.raid == 1 ? 2 : 1) != sb.devices) {
      *why = "the stored geometry does not match the volume's members";
      return nullptr;
    }
    g.release();
    return std::unique_ptr<geom::StripedGeometry>(s);
  } catch (const std::exception& e) {
    *why = fmt::format("the stored geometry does not load: {}", e.what());
    return nullptr;
  }
}

}  // namespace

int format_members(std::vector<MemberTarget> targets, const geom::Geometry& member, std::uint32_t raid,
                   const FormatOptions& opt, FormatSummary* summary, std::string* message) {
  const std::size_t n = targets.size();
  if (raid > 1) return *message = fmt::format("RAID {} is not supported (0 or 1)", raid), EINVAL;
  if (n < 2) return *message = "a volume of several devices needs at least 2 targets", EINVAL;
  if (raid == 1 && n % 2)
    return *message = fmt::format("RAID 1 mirrors devices in pairs: {} targets is an odd number", n), EINVAL;
  if (n > 256) return *message = "at most 256 targets", EINVAL;
  if (opt.label.size() > 63) return *message = "the label is longer than 63 bytes", EINVAL;
  if (dynamic_cast<const geom::StripedGeometry*>(&member))
    return *message = "the member geometry is itself striped", EINVAL;
  std::uint64_t member_bytes = UINT64_MAX;
  std::uint32_t block = 512;
  std::set<std::string> names;
  for (auto& t : targets) {
    if (!names.insert(t.target).second) return *message = fmt::format("target {} is given twice", t.target), EINVAL;
    if (member.sector_size() < t.device->block_size() || member.sector_size() % 512)
      return *message = fmt::format("{}: the geometry's {}-byte sectors are smaller than the target's {}-byte "
                                    "logical blocks", t.target, member.sector_size(), t.device->block_size()),
             EINVAL;
    member_bytes = std::min(member_bytes, t.device->size_bytes() / 4096 * 4096);
    block = std::max(block, t.device->block_size());
    if (!opt.force) {
      std::string sig = detect_signature(*t.device);
      if (!sig.empty())
        return *message = fmt::format("{} already holds a filesystem ({} signature); use -f to overwrite it", t.target,
                                      sig),
               EEXIST;
    }
  }
  auto copy = geom::load_geometry(member.definition());
  copy->set_name(member.name());
  const std::uint32_t p = std::uint32_t(raid == 1 ? n / 2 : n);
  auto g = std::make_unique<geom::StripedGeometry>(std::move(copy), p);
  g->set_name(member.name());
  MemberPlan plan;
  std::string why;
  // RAID 0 keeps its two metadata copies on disjoint members, so it runs without any one of them.
  const bool meta_sets = raid == 0;
  if (!plan_members(*g, member_bytes, block, opt.meta_bytes, &plan, &why, meta_sets)) {
    *message = fmt::format("cannot format {} devices of geometry '{}': {} (the smallest target holds {} bytes)", n,
                           member.name(), why, member_bytes);
    return ENOSPC;
  }
  Superblock sb;
  sb.uuid = detail::random_uuid();
  sb.label = opt.label;
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  sb.created_ns = std::uint64_t(ts.tv_sec) * 1000000000 + std::uint64_t(ts.tv_nsec);
  sb.volume_bytes = std::uint64_t(p) * member_bytes;
  sb.meta_offset = plan.meta_offset;
  sb.meta_length = plan.meta_length;
  sb.data_first_lbn = plan.data_first;
  sb.data_end_lbn = plan.data_end;
  nlohmann::json def = g->definition();
  def["name"] = g->name();
  sb.geometry_json = def.dump();
  sb.devices = std::uint32_t(n);
  sb.raid = raid;
  sb.member_bytes = member_bytes;
  if (meta_sets) {
    sb.meta_sets = true;
    sb.version = kMetaSetsVersion;
  }

  std::vector<std::string> target_names;
  std::vector<std::uint64_t> backups;
  for (auto& t : targets) {
    target_names.push_back(t.target);
    backups.push_back(backup_superblock_offset(t.device->size_bytes()));
  }
  {
    // The metadata store and root through the striped device, superblocks
    // last: an interrupted format leaves no mountable volume.
    StripedDevice dev(std::move(targets), *g, raid, plan.volume_space);
    std::unique_ptr<SplitMetaDevice> split;
    BlockDevice* meta_dev = &dev;
    MetaRegion region{sb.meta_offset, sb.meta_length};
    if (meta_sets) {
      split = std::make_unique<SplitMetaDevice>(dev, *g, SplitMetaDevice::layout_of(*g, sb.meta_offset, sb.meta_length));
      meta_dev = split.get();
      region = {0, split->size_bytes()};
    }
    if (int r = MetaStore::format(*meta_dev, region))
      return *message = fmt::format("writing the metadata region failed: {}", std::strerror(r)), r;
    int err = 0;
    std::string msg;
    auto store = MetaStore::open(*meta_dev, region, &err, &msg);
    if (!store) return *message = "reopening the new metadata region failed: " + msg, err ? err : EIO;
    if (int r = Metadata::format(*store, 0755, 0, 0))
      return *message = fmt::format("creating the root directory failed: {}", std::strerror(r)), r;
    store.reset();
    for (std::uint32_t i = 0; i < n; ++i) {
      Superblock mine = sb;
      mine.member_index = i;
      mine.backup_offset = backups[i];
      try {
        if (int r = write_member_superblocks(dev.device(i), mine))
          return *message = fmt::format("{}: writing the superblocks failed: {}", target_names[i], std::strerror(r)), r;
      } catch (const std::exception& e) {
        return *message = e.what(), EINVAL;
      }
    }
  }
  if (summary) {
    summary->superblock = sb;
    summary->device_bytes = member_bytes;
    const std::uint64_t data = (sb.data_end_lbn - sb.data_first_lbn) * g->sector_size();
    std::string members;
    for (std::uint32_t i = 0; i < n; ++i)
      members += fmt::format("  member {}: {}{}\n", i, target_names[i],
                             raid == 1 ? fmt::format(" (mirror of {})", i ^ 1u) : std::string());
    summary->text = fmt::format(
        "mmfs volume {} label '{}'\n"
        "geometry:     {} ({}) x {} devices, RAID {}{}\n"
        "capacity:     {} bytes of data ({:.2f} GiB) in {} sectors of {} bytes\n"
        "stripe unit:  one member track ({} sectors at LBN 0), rotating over {} stripe members\n"
        "data area:    volume LBN {}..{}\n"
        "metadata:     {} KiB at volume byte {}\n"
        "members:\n{}",
        uuid_string(sb.uuid), sb.label, member.name(), to_string(member.kind()), n, raid,
        raid == 1 ? " (devices 2k and 2k+1 mirror each other)" : " (striped)", data, double(data) / (1 << 30),
        sb.data_end_lbn - sb.data_first_lbn, g->sector_size(), member.track_length(0), p, sb.data_first_lbn,
        sb.data_end_lbn - 1, sb.meta_length >> 10, sb.meta_offset, members);
  }
  return 0;
}

std::unique_ptr<Volume> Volume::open(std::vector<MemberTarget> targets, int* error, std::string* message,
                                     const MembersOptions& o) {
  auto fail = [&](int e, std::string m) {
    *error = e;
    *message = std::move(m);
    return std::unique_ptr<Volume>();
  };
  if (targets.empty()) return fail(EINVAL, "no target given");
  // Every target's superblock: the primary, else the backup copy.
  struct Found {
    std::optional<Superblock> sb;
    std::string why;
    bool primary_ok = false, backup_ok = false;
  };
  std::vector<Found> found(targets.size());
  for (std::size_t i = 0; i < targets.size(); ++i) {
    BlockDevice& dev = *targets[i].device;
    std::optional<Superblock> a, b;
    SuperblockStatus sa = SuperblockStatus::Malformed, sbs = SuperblockStatus::Malformed;
    if (int r = detail::read_superblock_at(dev, 0, &a, &sa))
      return fail(r, fmt::format("{}: cannot read the superblock: {}", targets[i].target, std::strerror(r)));
    if (int r = detail::read_superblock_at(dev, backup_superblock_offset(dev.size_bytes()), &b, &sbs))
      return fail(r, fmt::format("{}: cannot read the backup superblock: {}", targets[i].target, std::strerror(r)));
    found[i].primary_ok = a.has_value();
    found[i].backup_ok = b.has_value() && (!a || *a == *b);
    found[i].sb = a ? a : b;
    if (!found[i].sb)
      found[i].why = sa == SuperblockStatus::NotMmfs && sbs == SuperblockStatus::NotMmfs
                         ? "not an mmfs volume member (no mmfs signature)"
                         : fmt::format("damaged superblocks (primary: {}; backup: {})", to_string(sa), to_string(sbs));
  }
  if (targets.size() == 1 && found[0].sb && found[0].sb->devices == 1) {
    MetaOpenOptions meta = o.metadata;
    if (o.simulate) {
      // The single-device path: the simulated device wraps the geometry the volume stores.
      return fail(EINVAL, "simulate: open a single device with Volume::open(device)");
    }
    return open(std::move(targets[0].device), error, message, o.for_check, meta);
  }
  std::vector<std::string> notes = o.left_out;
  if (o.degraded) {
    // A blank target (a replacement not yet rebuilt) is left out; the member
    // it stands for is then missing, which the checks below allow or refuse.
    for (std::size_t i = targets.size(); i-- > 0;)
      if (!found[i].sb && found[i].why.rfind("not an mmfs", 0) == 0 && targets.size() > 1) {
        notes.insert(notes.begin() + std::ptrdiff_t(o.left_out.size()),
                     fmt::format("{}: holds no mmfs superblock (a blank device): left out", targets[i].target));
        targets.erase(targets.begin() + std::ptrdiff_t(i));
        found.erase(found.begin() + std::ptrdiff_t(i));
      }
  }
  for (std::size_t i = 0; i < targets.size(); ++i)
    if (!found[i].sb)
      return fail(EINVAL, fmt::format("{}: {}{}", targets[i].target, found[i].why,
                                      targets.size() > 1 && found[i].why.rfind("not an mmfs", 0) == 0
                                          ? " (a blank replacement of a RAID 1 member is left out by -o degraded "
                                            "and filled by mmfsck --rebuild)"
                                          : ""));
  // The volume is the one most targets belong to; the others are foreign.
  std::map<std::array<std::uint8_t, 16>, std::size_t> votes;
  for (const auto& f : found) ++votes[f.sb->uuid];
  const auto uuid = std::max_element(votes.begin(), votes.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
  const Superblock* ref = nullptr;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const Superblock& sb = *found[i].sb;
    if (sb.uuid != uuid || sb.devices == 1)
      return fail(EINVAL, fmt::format("{} is not a member of volume {}: it belongs to {} {}", targets[i].target,
                                      uuid_string(uuid), sb.devices == 1 ? "the single-device volume" : "volume",
                                      uuid_string(sb.uuid)));
    if (!ref) ref = &sb;
  }
  const std::uint32_t n = ref->devices;
  std::vector<int> slot(n, -1);
  std::set<std::uint32_t> failed;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const Superblock& sb = *found[i].sb;
    if (sb.devices != n || sb.raid != ref->raid || sb.geometry_json != ref->geometry_json)
      return fail(EUCLEAN, fmt::format("{}: its superblock disagrees with the other members' on the volume's shape "
                                       "(run mmfsck)", targets[i].target));
    if (slot[sb.member_index] >= 0)
      return fail(EINVAL, fmt::format("{} and {} are both member {} of volume {} (a copy of a member?)",
                                      targets[std::size_t(slot[sb.member_index])].target, targets[i].target,
                                      sb.member_index, uuid_string(uuid)));
    slot[sb.member_index] = int(i);
    failed.insert(sb.failed.begin(), sb.failed.end());
  }
  int v_meta_lost = -1;  // the metadata copy on a failed member's set (split_meta)
  std::string missing;
  bool mirrors_healthy = true;  // every missing member's twin is here and healthy
  // RAID 0 with the metadata copies on member sets runs without one member:
  // the metadata from the other copy, data that has another copy (arrays
  // with copies, fs/array/member_sets.h) from it, the rest EIO.
  const bool split_meta = ref->raid == 0 && ref->meta_sets;
  for (std::uint32_t m = 0; m < n; ++m) {
    if (slot[m] >= 0) continue;
    const bool twin_ok = ref->raid == 1 && slot[m ^ 1u] >= 0 && !failed.count(m ^ 1u);
    const bool recorded = failed.count(m) > 0;
    if (split_meta && (recorded || o.degraded)) {
      notes.push_back(fmt::format("member {} is {}: the volume runs degraded: its metadata from the copy on the "
                                  "other members; arrays with copies are served from the copies on other members; "
                                  "other data that lay on it reads as EIO",
                                  m, recorded ? "marked failed and absent" : "missing"));
    } else if (twin_ok && (recorded || o.degraded)) {
      notes.push_back(fmt::format("member {} is {}: the volume runs degraded on its mirror, member {} ({}); "
                                  "mmfsck --rebuild NEW SURVIVORS... restores redundancy",
                                  m, recorded ? "marked failed and absent" : "missing", m ^ 1u,
                                  targets[std::size_t(slot[m ^ 1u])].target));
    } else {
      missing += fmt::format("{}{}", missing.empty() ? "" : ", ", m);
      mirrors_healthy = mirrors_healthy && twin_ok;
    }
    failed.insert(m);
  }
  if (!missing.empty()) {
    const bool one = missing.find(',') == std::string::npos;
    std::string hint;
    if (ref->raid == 0 && split_meta)
      hint = one ? "; mount with -o degraded to run without it (arrays with copies are served whole from the "
                   "copies on other members; other data that lay on it reads as EIO)"
                 : "; a RAID 0 volume runs without one member at most";
    else if (ref->raid == 0)
      hint = "; a RAID 0 volume made before its metadata was kept on member sets holds one copy of each member's "
             "metadata and does not run without one (-o degraded needs the mirrors of RAID 1)";
    else if (mirrors_healthy)
      hint = fmt::format("; mount with -o degraded to run on {} mirror{}, then restore redundancy with mmfsck "
                         "--rebuild NEW SURVIVORS...", one ? "its" : "their", one ? "" : "s");
    else
      hint = "; the mirror of a missing member is missing or failed too: its data has no surviving copy";
    return fail(ENODEV, fmt::format("member{} {} of the {}-device volume {} {} missing (targets given: {}){}",
                                    one ? "" : "s", missing, n, uuid_string(uuid), one ? "is" : "are",
                                    targets.size(), hint));
  }
  if (split_meta && failed.size() > 1)
    return fail(ENODEV, fmt::format("members {} of the {}-device RAID 0 volume {} are failed or missing: it runs "
                                    "without one member at most", fmt::join(failed, ", "), n, uuid_string(uuid)));
  if (split_meta && failed.size() == 1) v_meta_lost = SplitMetaDevice::copy_on(*failed.begin());
  for (std::uint32_t m = 0; m + 1 < n; m += 2)
    if (ref->raid == 1 && failed.count(m) && failed.count(m + 1))
      return fail(EIO, fmt::format("both copies of stripe member {} (members {} and {}) have failed: the volume has "
                                   "lost data", m / 2, m, m + 1));
  std::unique_ptr<Volume> v(new Volume());
  v->meta_lost_copy_ = v_meta_lost;
  std::string why;
  auto g = striped_geometry(*ref, &why);
  if (!g) return fail(EUCLEAN, "damaged volume: " + why);
  MemberPlan plan;
  if (!plan_members(*g, ref->member_bytes, 512, ref->meta_length, &plan, &why))
    return fail(EUCLEAN, "damaged volume: " + why);
  std::vector<MemberTarget> ordered(n);
  v->member_backup_.assign(n, 0);
  v->primary_ok_ = v->backup_ok_ = true;
  for (std::uint32_t m = 0; m < n; ++m) {
    if (slot[m] < 0) {
      ordered[m] = {fmt::format("(member {}, absent)", m),
                    std::make_unique<AbsentDevice>(ref->member_bytes, 512)};
      continue;
    }
    auto& t = targets[std::size_t(slot[m])];
    if (t.device->size_bytes() < ref->member_bytes)
      return fail(EINVAL, fmt::format("{}: holds {} bytes, less than the volume's members ({} bytes)", t.target,
                                      t.device->size_bytes(), ref->member_bytes));
    v->member_backup_[m] = found[std::size_t(slot[m])].sb->backup_offset;
    if (!failed.count(m)) {
      v->primary_ok_ = v->primary_ok_ && found[std::size_t(slot[m])].primary_ok;
      v->backup_ok_ = v->backup_ok_ && found[std::size_t(slot[m])].backup_ok;
    }
    ordered[m] = std::move(t);
  }
  for (std::uint32_t m : failed)
    if (slot[m] >= 0 && ref->raid == 1 && !failed.count(m ^ 1u))
      notes.push_back(fmt::format("member {} ({}) is marked failed: the volume runs degraded on its mirror, member {} "
                                  "({}); mmfsck --rebuild NEW SURVIVORS... restores redundancy",
                                  m, ordered[m].target, m ^ 1u, ordered[m ^ 1u].target));
  v->degraded_notes_ = std::move(notes);
  v->sb_ = *ref;
  v->sb_.failed.assign(failed.begin(), failed.end());
  const std::uint64_t space = std::min<std::uint64_t>(plan.volume_space, g->capacity_sectors() * g->sector_size());
  auto striped = std::make_unique<StripedDevice>(std::move(ordered), *g, ref->raid, space, v->sb_.failed);
  v->striped_ = striped.get();
  striped->set_failure_listener([vol = v.get()](std::uint32_t d, const std::string& reason) { vol->device_failed(d, reason); });
  std::unique_ptr<BlockDevice> device = std::move(striped);
  v->geometry_ = std::move(g);
  if (o.simulate) device = std::make_unique<SimulatedDevice>(std::move(device), *v->geometry_);
  // A failure recorded by one member but not yet by the others is written to all now.
  if (!o.for_check && v->sb_.failed != ref->failed) (void)v->rewrite_member_superblocks();
  v = finish_open(std::move(v), std::move(device), error, message, o.for_check, o.metadata);
  if (v && split_meta)
    for (std::uint32_t m : v->sb_.failed) v->exclude_member_space(m);
  return v;
}

void Volume::exclude_member_space(std::uint32_t m) {
  const auto* g = dynamic_cast<const geom::StripedGeometry*>(geometry_.get());
  if (!g || m >= g->members()) return;
  std::vector<std::uint32_t> members;
  {
    std::lock_guard lock(members_mu_);
    if (std::find(excluded_members_.begin(), excluded_members_.end(), m) == excluded_members_.end())
      excluded_members_.push_back(m);
    std::sort(excluded_members_.begin(), excluded_members_.end());
    members = excluded_members_;
  }
  auto lost = std::make_shared<const geom::MemberSubset>(*g, members);
  auto on_lost = [lost](const std::vector<Extent>& extents) {
    std::vector<Extent> out;
    for (const geom::LbnRun& r : lost->to_parent(lost->on_set(as_runs(extents)))) out.push_back({r.first, r.count});
    return out;
  };
  allocator_->set_withheld([on_lost](const Extent& e) { return on_lost({e}); });
  for (const Extent& e : on_lost(allocator_->free_extents())) allocator_->mark_used(e);
}

void Volume::set_failure_hook(std::function<void(const std::string&, const std::string&)> hook) {
  std::lock_guard lock(members_mu_);
  failure_hook_ = std::move(hook);
}

void Volume::device_failed(std::uint32_t d, const std::string& reason) {
  std::function<void(const std::string&, const std::string&)> hook;
  {
    std::lock_guard lock(members_mu_);
    if (std::find(sb_.failed.begin(), sb_.failed.end(), d) == sb_.failed.end()) {
      sb_.failed.push_back(d);
      std::sort(sb_.failed.begin(), sb_.failed.end());
    }
    hook = failure_hook_;
  }
  // The survivors remember the failure, so a later mount never reads the
  // stale copy even if the device comes back.
  int r = rewrite_member_superblocks();
  if (hook)
    hook(striped_->target(d),
         fmt::format("device {} failed ({}); the volume runs on its mirror{}", d, reason,
                     r ? fmt::format(" (recording the failure in the superblocks failed: {})", std::strerror(r)) : ""));
}

std::optional<std::uint32_t> Volume::metadata_member_failed(std::optional<std::uint32_t> member, int error) {
  if (!striped_ || striped_->raid() != 0) return std::nullopt;
  if (!member) {
    // A flush failed: the member whose own flush fails now (one, with a
    // device error; a missing member's placeholder, ENODEV, is no failure).
    for (std::uint32_t d = 0; d < striped_->devices(); ++d) {
      const int e = striped_->device(d).flush();
      if (e == 0 || (e == ENODEV && striped_->failed(d))) continue;
      if (!is_device_failure(e) || (member && *member != d)) return std::nullopt;
      member = d;
      error = e;
    }
    if (!member) return std::nullopt;
  }
  const std::uint32_t m = *member;
  // One recording at a time, whole: a second thread whose write met the
  // same member waits here until the record is written (or has failed), so
  // no commit stands on one copy before the survivors hold the record.
  std::lock_guard recording(meta_loss_mu_);
  std::function<void(const std::string&, const std::string&)> hook;
  {
    std::lock_guard lock(members_mu_);
    // Already recorded (another thread's request met it first), or a second
    // member: the metadata's other copy is on the lost set already.
    if (!sb_.failed.empty()) return sb_.failed == std::vector<std::uint32_t>{m} ? member : std::nullopt;
    sb_.failed = {m};
    hook = failure_hook_;
  }
  // The survivors remember it before any commit stands on one copy, so a
  // later mount never reads the stale copy, the member back or not.
  const std::string reason = fmt::format("a metadata write or flush failed: {}", std::strerror(error));
  if (const int r = rewrite_member_superblocks()) {
    std::lock_guard lock(members_mu_);
    sb_.failed.clear();
    if (hook)
      hook(striped_->target(m), fmt::format("member {} failed ({}), and recording it in the other members' "
                                            "superblocks failed ({}): metadata writes fail",
                                            m, reason, std::strerror(r)));
    return std::nullopt;
  }
  striped_->record_lost(m, reason);
  {
    std::lock_guard lock(members_mu_);
    meta_lost_copy_ = SplitMetaDevice::copy_on(m);
  }
  if (allocator_) exclude_member_space(m);
  if (hook)
    hook(striped_->target(m),
         fmt::format("member {} failed while the volume runs ({}): the metadata goes on with its copy on the other "
                     "members; the member's data fails (EIO) but for arrays with copies on other members, whose "
                     "copies are promoted (idle arrays at their next use, open ones at their next write); mmfsck "
                     "--rebuild NEW restores the member",
                     m, reason));
  return member;
}

int Volume::rewrite_member_superblocks() {
  // One rewrite at a time: two failures recorded at once must not leave the
  // older list written last.
  std::lock_guard rewriting(rewrite_mu_);
  Superblock sb;
  {
    std::lock_guard lock(members_mu_);
    sb = sb_;
  }
  int first = 0;
  for (std::uint32_t m = 0; m < striped_->devices(); ++m) {
    // A failed member's superblocks are not written: it may be gone, and
    // its stale copy is never read again anyway.
    if (striped_->failed(m) || std::find(sb.failed.begin(), sb.failed.end(), m) != sb.failed.end()) continue;
    Superblock mine = sb;
    mine.member_index = m;
    mine.backup_offset = member_backup_[m];
    if (int r = write_member_superblocks(striped_->device(m), mine); r && !first) first = r;
  }
  if (!first) primary_ok_ = backup_ok_ = true;
  return first;
}

namespace {

// The superblocks of a volume whose member `lost` is now `fresh`, the
// failure forgotten on every member.
int write_rebuilt_superblocks(StripedDevice& s, const Superblock& sb, std::uint32_t lost, MemberTarget& fresh,
                              std::string* message) {
  Superblock mine = sb;
  mine.failed.erase(std::remove(mine.failed.begin(), mine.failed.end(), lost), mine.failed.end());
  mine.member_index = lost;
  mine.backup_offset = backup_superblock_offset(fresh.device->size_bytes());
  if (int r = write_member_superblocks(*fresh.device, mine))
    return *message = fmt::format("{}: writing the superblocks failed: {}", fresh.target, std::strerror(r)), r;
  for (std::uint32_t d = 0; d < s.devices(); ++d) {
    if (s.failed(d)) continue;
    Superblock theirs = mine;
    theirs.member_index = d;
    theirs.backup_offset = backup_superblock_offset(s.device(d).size_bytes());
    if (int r = write_member_superblocks(s.device(d), theirs))
      return *message = fmt::format("{}: updating the superblocks failed: {}", s.target(d), std::strerror(r)), r;
  }
  return 0;
}

}  // namespace

// RAID 0 with its metadata on member sets: the lost member's metadata copy
// is written again from the other copy, onto every member of its set (the
// degraded mount dropped that copy's writes on all of them). Data is not
// copied: there is no second copy of a RAID 0 member's data. An array's
// cells that lay on it are rewritten from its copies on other members by
// the repair that follows (mmfsck runs it; the scrub and self-healing reads
// do it too); other data that lay on it stays lost (reads fail their
// checksums: EIO).
static int rebuild_striped_member(Volume& vol, MemberTarget replacement, std::string* report, std::string* message) {
  StripedDevice& s = *vol.striped();
  const Superblock& sb = vol.superblock();
  const std::vector<std::uint32_t> failed = s.failed_devices();
  if (failed.size() != 1)
    return *message = "no member of the volume is failed or missing: nothing to rebuild", EINVAL;
  const std::uint32_t lost = failed[0];
  if (replacement.device->size_bytes() < sb.member_bytes)
    return *message = fmt::format("{} holds {} bytes; a member of this volume needs {}", replacement.target,
                                  replacement.device->size_bytes(), sb.member_bytes),
           ENOSPC;
  auto* meta = dynamic_cast<SplitMetaDevice*>(vol.meta_device());
  if (!meta) return *message = "the volume's metadata is not on member sets", EINVAL;
  const auto& g = dynamic_cast<const geom::StripedGeometry&>(vol.geometry());
  const int copy = SplitMetaDevice::copy_on(lost);
  const std::uint64_t ss = g.sector_size();
  constexpr std::uint64_t kChunk = 4u << 20;
  AlignedBuffer buf(kChunk);
  std::uint64_t copied = 0;
  for (std::uint64_t off = 0; off < meta->copy_bytes(); off += kChunk) {
    const std::uint64_t n = std::min(kChunk, meta->copy_bytes() - off);
    // Degraded, the lost copy's bytes read as its twin's.
    if (int r = meta->read(std::uint64_t(copy) * meta->copy_bytes() + off, buf.data(), std::uint32_t(n)))
      return *message = fmt::format("reading the surviving metadata copy failed: {}", std::strerror(r)), r;
    // The chunk's sectors as one batch per member (the volume's device has
    // no path to the replacement yet).
    std::map<std::uint32_t, std::vector<IoRequest>> per_member;
    std::uint64_t at = 0;
    for (const geom::LbnRun& run : meta->sectors_of(copy, off, n))
      for (geom::Lbn v = run.first; v < run.first + run.count;) {  // a piece per volume track: one member's
        const auto where = g.locate(v);
        const std::uint64_t k = std::min<geom::Lbn>(g.track_boundaries(v).high + 1, run.first + run.count) - v;
        per_member[where.member].push_back(
            {IoRequest::Op::Write, where.lbn * ss, std::uint32_t(k * ss), buf.data() + at, 0});
        at += k * ss;
        v += k;
      }
    for (auto& [member, requests] : per_member) {
      BlockDevice& dev = member == lost ? *replacement.device : s.device(member);
      if (int r = dev.submit(requests))
        return *message = fmt::format("{}: writing the metadata copy failed: {}",
                                      member == lost ? replacement.target : s.target(member), std::strerror(r)),
               r;
    }
    copied += n;
  }
  for (std::uint32_t d = 0; d < s.devices(); ++d)
    if (d != lost && SplitMetaDevice::copy_on(d) == copy)
      if (int r = s.device(d).flush())
        return *message = fmt::format("{}: flush failed: {}", s.target(d), std::strerror(r)), r;
  if (int r = replacement.device->flush())
    return *message = fmt::format("{}: flush failed: {}", replacement.target, std::strerror(r)), r;
  if (int r = write_rebuilt_superblocks(s, sb, lost, replacement, message)) return r;
  *report = fmt::format("rebuilt member {} of RAID 0 volume {} onto {}: wrote metadata copy {} ({:.1f} MiB) from the "
                        "other copy; the data that lay on the member has no second copy in RAID 0: arrays with "
                        "copies get their cells back from the copies on other members, other data on it is lost\n",
                        lost, uuid_string(sb.uuid), replacement.target, copy, double(copied) / (1 << 20));
  return 0;
}

int rebuild_member(std::vector<MemberTarget> targets, MemberTarget replacement, std::string* report,
                   std::string* message) {
  Volume::MembersOptions o;
  o.degraded = true;
  int err = 0;
  auto vol = Volume::open(std::move(targets), &err, message, o);
  if (!vol) return err;
  StripedDevice* s = vol->striped();
  if (s && s->raid() == 0 && vol->superblock().meta_sets)
    return rebuild_striped_member(*vol, std::move(replacement), report, message);
  if (!s || s->raid() != 1)
    return *message = "only a RAID 1 volume, or a RAID 0 volume with its metadata on member sets, can be rebuilt",
           EINVAL;
  std::uint32_t lost = UINT32_MAX;
  for (std::uint32_t d : s->failed_devices())
    if (!s->failed(d ^ 1u)) {
      lost = d;
      break;
    }
  if (lost == UINT32_MAX) return *message = "no member of the volume is failed or missing: nothing to rebuild", EINVAL;
  const Superblock& sb = vol->superblock();
  if (replacement.device->size_bytes() < sb.member_bytes)
    return *message = fmt::format("{} holds {} bytes; a member of this volume needs {}", replacement.target,
                                  replacement.device->size_bytes(), sb.member_bytes),
           ENOSPC;
  const auto& g = dynamic_cast<const geom::StripedGeometry&>(vol->geometry());
  // The twin's whole share of the volume's address space (member tracks
  // [0, data_end / p)), sector for sector: a full resync, as md does, so the
  // copy never depends on the allocator's view of what is in use.
  const std::uint64_t member_end = sb.data_end_lbn / g.members() * g.sector_size();
  BlockDevice& twin = s->device(lost ^ 1u);
  BlockDevice& fresh = *replacement.device;
  constexpr std::uint32_t kChunk = 4u << 20;
  AlignedBuffer buf(kChunk);
  std::uint64_t copied = 0;
  for (std::uint64_t off = 0; off < member_end; off += kChunk) {
    const auto n = std::uint32_t(std::min<std::uint64_t>(member_end - off, kChunk));
    if (int r = twin.read(off, buf.data(), n))
      return *message = fmt::format("{}: reading byte {} failed: {}", s->target(lost ^ 1u), off, std::strerror(r)), r;
    if (int r = fresh.write(off, buf.data(), n))
      return *message = fmt::format("{}: writing byte {} failed: {}", replacement.target, off, std::strerror(r)), r;
    copied += n;
  }
  if (int r = fresh.flush()) return *message = fmt::format("{}: flush failed: {}", replacement.target, std::strerror(r)), r;
  // The replacement becomes the member; then every member forgets the failure.
  if (int r = write_rebuilt_superblocks(*s, sb, lost, replacement, message)) return r;
  *report = fmt::format("rebuilt member {} of volume {} onto {}: copied {} bytes ({:.1f} MiB) from its mirror, "
                        "member {} ({}); the volume is redundant again\n",
                        lost, uuid_string(sb.uuid), replacement.target, copied, double(copied) / (1 << 20),
                        lost ^ 1u, s->target(lost ^ 1u));
  return 0;
}

}  // namespace mmfs::fs
