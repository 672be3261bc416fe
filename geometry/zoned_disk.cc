#include "geometry/zoned_disk.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "geometry/disk_service.h"
#include "geometry/json_fields.h"

namespace mmfs::geom {
namespace {

double frac(double x) { return x - std::floor(x); }

[[noreturn]] void invalid(const std::string& msg) { throw GeometryError(ErrorKind::Invalid, msg); }

// Rounds an offset in sectors to the first sector boundary at or after it.
// Offsets that are integers up to floating-point noise stay put, so the
// uniform zero-skew geometry gives exactly L + s*T (docs/reference.md §7).
std::uint64_t first_boundary_at_or_after(double offset) {
  double r = std::round(offset);
  if (std::fabs(offset - r) < 1e-6) return std::uint64_t(r);
  return std::uint64_t(std::ceil(offset));
}

}  // namespace

ZonedDisk::ZonedDisk(const DiskParams& params) : p_(params) {
  if (p_.sector_size == 0) invalid("geometry field 'sector_size': must be positive");
  if (p_.surfaces == 0) invalid("geometry field 'surfaces': must be at least 1");
  if (!(p_.rpm > 0)) invalid("geometry field 'rpm': must be positive");
  if (p_.zones.empty()) invalid("geometry field 'zones': at least one zone is required");
  if (p_.conservatism_deg < 0) invalid("geometry field 'conservatism_deg': must not be negative");
  rev_ms_ = 60000.0 / p_.rpm;

  std::uint64_t cyl = 0;
  for (std::size_t i = 0; i < p_.zones.size(); ++i) {
    const ZoneSpec& s = p_.zones[i];
    std::string where = fmt::format("zones[{}]", i);
    if (s.cylinders == 0) invalid(fmt::format("geometry field '{}.cylinders': must be at least 1", where));
    if (s.sectors_per_track == 0)
      invalid(fmt::format("geometry field '{}.sectors_per_track': must be at least 1", where));
    if (s.track_skew_sectors >= s.sectors_per_track || s.cylinder_skew_sectors >= s.sectors_per_track)
      invalid(fmt::format("geometry field '{}': skews must be smaller than sectors_per_track ({})", where,
                          s.sectors_per_track));
    Zone z;
    z.spec = s;
    z.first_cylinder = cyl;
    z.first_track = cyl * p_.surfaces;
    z.first_lbn = capacity_;
    // The capacity in bytes must fit in 63 bits, as MemStore's and Flash's
    // must (a zone's sectors wrapped past 2^64: a disk smaller than its zones).
    std::uint64_t end = 0;
    if (__builtin_mul_overflow(s.cylinders, std::uint64_t(p_.surfaces), &z.tracks) ||
        __builtin_mul_overflow(z.tracks, std::uint64_t(s.sectors_per_track), &z.sectors) ||
        __builtin_add_overflow(capacity_, z.sectors, &end) || end > (std::uint64_t(1) << 63) / p_.sector_size)
      invalid(fmt::format("geometry field '{}': the disk up to this zone holds more than 2^63 bytes", where));
    if (!zones_.empty()) {
      // The first track of a zone follows the previous zone's last track across a
      // cylinder boundary, skewed by the new zone's cylinder skew.
      const Zone& prev = zones_.back();
      double prev_last = frac(prev.start_rev + double(track_offset_sectors(prev, prev.first_track + prev.tracks - 1)) /
                                                   prev.spec.sectors_per_track);
      z.start_rev = frac(prev_last + double(s.cylinder_skew_sectors) / s.sectors_per_track);
    }
    zones_.push_back(z);
    cyl += s.cylinders;
    capacity_ += z.sectors;
  }
  tracks_ = cyl * p_.surfaces;
  seek_ = SeekProfile(p_.seek, cyl - 1);

  // W: the platter turns through the settle angle while the head settles; the
  // conservatism is extra slack against rotational misses (MultiMap §3.2).
  w_deg_ = p_.seek.settle_ms / rev_ms_ * 360.0 + p_.conservatism_deg;
  // D = R x (cylinders reachable within the time the platter turns through W).
  // With no conservatism that is exactly the settle region C (Table 1, 0°).
  std::uint64_t reach = p_.conservatism_deg == 0 ? std::min(p_.seek.settle_cylinders, cyl - 1)
                                                 : seek_.max_distance_within(adjacency_budget_ms());
  std::uint64_t d = reach * p_.surfaces;
  d = std::min<std::uint64_t>(d, tracks_ - 1);
  if (p_.max_depth != 0) d = std::min<std::uint64_t>(d, p_.max_depth);
  depth_ = std::uint32_t(std::min<std::uint64_t>(d, UINT32_MAX));
}

std::uint64_t ZonedDisk::largest_zone_tracks() const {
  std::uint64_t best = 0;
  for (const Zone& z : zones_) best = std::max(best, z.tracks);
  return best;
}

TrackBounds ZonedDisk::zone_bounds(Lbn lbn) const {
  check_lbn(lbn);
  const Zone& z = zones_[zone_index_of_lbn(lbn)];
  return {z.first_lbn, z.first_lbn + z.sectors - 1};
}

std::uint64_t ZonedDisk::cylinders() const { return tracks_ / p_.surfaces; }

std::uint32_t ZonedDisk::zone_index_of_lbn(Lbn lbn) const {
  auto it = std::upper_bound(zones_.begin(), zones_.end(), lbn,
                             [](Lbn l, const Zone& z) { return l < z.first_lbn; });
  return std::uint32_t(it - zones_.begin() - 1);
}

std::uint32_t ZonedDisk::zone_index_of_track(std::uint64_t track) const {
  auto it = std::upper_bound(zones_.begin(), zones_.end(), track,
                             [](std::uint64_t t, const Zone& z) { return t < z.first_track; });
  return std::uint32_t(it - zones_.begin() - 1);
}

const ZonedDisk::Zone& ZonedDisk::zone_of_track(std::uint64_t track) const {
  return zones_[zone_index_of_track(track)];
}

std::uint64_t ZonedDisk::track_offset_sectors(const Zone& z, std::uint64_t track) const {
  std::uint64_t local = track - z.first_track;
  std::uint64_t cylinder_switches = local / p_.surfaces;
  std::uint64_t head_switches = local - cylinder_switches;
  std::uint64_t T = z.spec.sectors_per_track;
  return (head_switches % T * z.spec.track_skew_sectors + cylinder_switches % T * z.spec.cylinder_skew_sectors) % T;
}

double ZonedDisk::track_start_rev(std::uint64_t track) const {
  const Zone& z = zone_of_track(track);
  return frac(z.start_rev + double(track_offset_sectors(z, track)) / z.spec.sectors_per_track);
}

Lbn ZonedDisk::track_first_lbn(std::uint64_t track) const {
  const Zone& z = zone_of_track(track);
  return z.first_lbn + (track - z.first_track) * z.spec.sectors_per_track;
}

ZonedDisk::Location ZonedDisk::locate(Lbn lbn) const {
  Location loc;
  loc.zone = zone_index_of_lbn(lbn);
  const Zone& z = zones_[loc.zone];
  std::uint64_t local = lbn - z.first_lbn;
  loc.track_length = z.spec.sectors_per_track;
  loc.track = z.first_track + local / loc.track_length;
  loc.sector = std::uint32_t(local % loc.track_length);
  loc.cylinder = loc.track / p_.surfaces;
  loc.surface = std::uint32_t(loc.track % p_.surfaces);
  loc.track_start_rev = frac(z.start_rev + double(track_offset_sectors(z, loc.track)) / loc.track_length);
  return loc;
}

std::uint64_t ZonedDisk::track_of(Lbn lbn) const {
  check_lbn(lbn);
  const Zone& z = zones_[zone_index_of_lbn(lbn)];
  return z.first_track + (lbn - z.first_lbn) / z.spec.sectors_per_track;
}

TrackBounds ZonedDisk::track_boundaries(Lbn lbn) const {
  check_lbn(lbn);
  const Zone& z = zones_[zone_index_of_lbn(lbn)];
  std::uint64_t T = z.spec.sectors_per_track;
  Lbn low = z.first_lbn + (lbn - z.first_lbn) / T * T;
  return {low, low + T - 1};
}

double ZonedDisk::skew(Lbn lbn) const {
  check_lbn(lbn);
  Location loc = locate(lbn);
  return frac(loc.track_start_rev + double(loc.sector) / loc.track_length) * 360.0;
}

Lbn ZonedDisk::adjacent(Lbn lbn, std::uint32_t step) const {
  check_lbn(lbn);
  check_step(step);
  // GETADJACENT: the first block of the target track at or after skew(lbn) + W.
  // The target track is found by track number rather than lbn + step*T so that
  // it is exactly `step` tracks away even across a zone boundary; within a zone
  // the two agree.
  std::uint32_t zi = zone_index_of_lbn(lbn);
  const Zone& z = zones_[zi];
  const std::uint64_t T = z.spec.sectors_per_track;
  const std::uint64_t local = lbn - z.first_lbn;
  const std::uint64_t track_local = local / T;
  const std::uint64_t sector = local - track_local * T;
  const std::uint64_t target_local = track_local + step;
  double offset;  // in sectors of the target track, from its sector 0
  Lbn target_first;
  if (target_local < z.tracks) {
    // Same zone (the common case): the skew between the two tracks is `step`
    // head switches, of which some are cylinder switches. Integer arithmetic
    // keeps zero-skew geometries exact.
    std::uint64_t cylinder_switches = target_local / p_.surfaces - track_local / p_.surfaces;
    std::uint64_t head_switches = step - cylinder_switches;
    std::uint64_t skew = (head_switches % T * z.spec.track_skew_sectors +
                          cylinder_switches % T * z.spec.cylinder_skew_sectors) % T;
    offset = double(std::int64_t(sector) - std::int64_t(skew)) + w_deg_ / 360.0 * double(T);
    target_first = z.first_lbn + target_local * T;
  } else {
    std::uint64_t target_track = z.first_track + target_local;
    if (target_track >= tracks_)
      throw GeometryError(ErrorKind::OutOfRange,
                          fmt::format("the track {} steps from LBN {} is beyond the last track ({})", step, lbn,
                                      tracks_ - 1));
    const Zone& tz = zone_of_track(target_track);
    double from_rev = frac(z.start_rev + double(track_offset_sectors(z, z.first_track + track_local)) / T +
                           double(sector) / T);
    double target_rev = from_rev + w_deg_ / 360.0;
    offset = (target_rev - track_start_rev(target_track)) * double(tz.spec.sectors_per_track);
    target_first = track_first_lbn(target_track);
    const std::uint64_t Tt = tz.spec.sectors_per_track;
    offset -= std::floor(offset / double(Tt)) * double(Tt);
    return target_first + first_boundary_at_or_after(offset) % Tt;
  }
  offset -= std::floor(offset / double(T)) * double(T);  // into [0, T)
  return target_first + first_boundary_at_or_after(offset) % T;
}

Lbn ZonedDisk::adjacent_n(Lbn lbn, std::uint32_t step, std::uint64_t count) const {
  if (count == 0) {
    check_lbn(lbn);
    return lbn;
  }
  check_lbn(lbn);
  check_step(step);
  const Zone& z = zones_[zone_index_of_lbn(lbn)];
  const std::uint64_t T = z.spec.sectors_per_track;
  const std::uint64_t local = lbn - z.first_lbn;
  const std::uint64_t track_local = local / T;
  // Closed form when every hop stays in the zone and track and cylinder skews
  // are equal: each hop then moves the sector by the same whole number
  // delta = boundary(W in sectors) - step * skew (mod T), because the start
  // sector is whole and the rounding of GETADJACENT commutes with whole shifts.
  if (z.spec.track_skew_sectors == z.spec.cylinder_skew_sectors && count <= (z.tracks - 1) / step &&
      track_local + count * step < z.tracks) {
    const std::uint64_t sector = local - track_local * T;
    double w = w_deg_ / 360.0 * double(T);
    std::uint64_t w_whole = first_boundary_at_or_after(w - std::floor(w / double(T)) * double(T)) % T;
    std::uint64_t skew = std::uint64_t(step) % T * z.spec.track_skew_sectors % T;
    std::uint64_t delta = (w_whole + T - skew) % T;
    std::uint64_t target = (sector + (count % T) * delta) % T;
    return z.first_lbn + (track_local + count * step) * T + target;
  }
  return Geometry::adjacent_n(lbn, step, count);
}

QuadrangleParams ZonedDisk::quadrangle(std::uint32_t block) const {
  const ZoneSpec& z0 = zones_.front().spec;
  return compute_quadrangle(z0.sectors_per_track, z0.track_skew_sectors, block);
}

nlohmann::json ZonedDisk::definition() const {
  nlohmann::json zones = nlohmann::json::array();
  for (const Zone& z : zones_)
    zones.push_back({{"cylinders", z.spec.cylinders},
                     {"sectors_per_track", z.spec.sectors_per_track},
                     {"track_skew_sectors", z.spec.track_skew_sectors},
                     {"cylinder_skew_sectors", z.spec.cylinder_skew_sectors}});
  return {{"kind", "disk"},
          {"sector_size", p_.sector_size},
          {"surfaces", p_.surfaces},
          {"rpm", p_.rpm},
          {"settle_ms", p_.seek.settle_ms},
          {"settle_cylinders", p_.seek.settle_cylinders},
          {"seek", seek_.to_json()},
          {"head_switch_ms", p_.head_switch_ms},
          {"conservatism_deg", p_.conservatism_deg},
          {"max_depth", p_.max_depth},
          {"queue_depth", p_.queue_depth},
          {"zero_latency", p_.zero_latency},
          {"overhead_ms", p_.overhead_ms},
          {"zones", zones}};
}

nlohmann::json ZonedDisk::info() const {
  nlohmann::json j = definition();
  j["profile"] = name();
  j["capacity_sectors"] = capacity_;
  j["capacity_bytes"] = capacity_ * p_.sector_size;
  j["cylinders"] = cylinders();
  j["tracks"] = tracks_;
  j["depth"] = depth_;
  j["skew_deg"] = w_deg_;
  j["revolution_ms"] = rev_ms_;
  j["adjacency_budget_ms"] = adjacency_budget_ms();
  j["parallelism"] = 1;
  for (std::size_t i = 0; i < zones_.size(); ++i) {
    j["zones"][i]["first_cylinder"] = zones_[i].first_cylinder;
    j["zones"][i]["first_lbn"] = zones_[i].first_lbn;
    j["zones"][i]["sectors"] = zones_[i].sectors;
  }
  return j;
}

std::unique_ptr<ServiceTimeModel> ZonedDisk::make_service_model() const {
  return std::make_unique<DiskServiceModel>(*this);
}

std::unique_ptr<ZonedDisk> ZonedDisk::from_json(const nlohmann::json& j) {
  using namespace jsonf;
  if (!j.is_object()) invalid("geometry: expected a JSON object");
  reject_unknown(j, "",
                 {"kind", "profile", "name", "notes", "sector_size", "surfaces", "rpm", "cylinders",
                  "sectors_per_track", "track_skew_sectors", "cylinder_skew_sectors", "settle_ms",
                  "settle_cylinders", "conservatism_deg", "head_switch_ms", "max_depth", "queue_depth",
                  "zero_latency", "overhead_ms", "seek", "zones"});
  DiskParams p;
  p.sector_size = std::uint32_t(optional_uint(j, "sector_size", "", 512, 1, 1u << 20));
  p.surfaces = std::uint32_t(optional_uint(j, "surfaces", "", 1, 1, 1024));
  p.rpm = required_double(j, "rpm", "", 1e-3, 1e6);
  double rev_ms = 60000.0 / p.rpm;
  p.seek.settle_ms = required_double(j, "settle_ms", "", 0, 1e4);
  p.seek.settle_cylinders = required_uint(j, "settle_cylinders", "", 1, UINT32_MAX);
  p.conservatism_deg = optional_double(j, "conservatism_deg", "", 0, 0, 3600);
  p.max_depth = std::uint32_t(optional_uint(j, "max_depth", "", 0, 0, UINT32_MAX));
  p.queue_depth = std::uint32_t(optional_uint(j, "queue_depth", "", 16, 1, 4096));
  p.overhead_ms = optional_double(j, "overhead_ms", "", 0, 0, 1e4);
  if (j.contains("zero_latency")) {
    if (!j["zero_latency"].is_boolean()) invalid("geometry field 'zero_latency': expected true or false");
    p.zero_latency = j["zero_latency"].get<bool>();
  }
  if (j.contains("seek")) {
    const auto& s = j["seek"];
    if (!s.is_object()) invalid("geometry field 'seek': expected an object");
    reject_unknown(s, "seek", {"sqrt_a_ms", "sqrt_b_ms", "linear_cylinders", "full_stroke_ms"});
    p.seek.sqrt_a_ms = optional_double(s, "sqrt_a_ms", "seek", -1, 0, 1e4);
    p.seek.sqrt_b_ms = optional_double(s, "sqrt_b_ms", "seek", -1, 0, 1e4);
    p.seek.linear_cylinders = optional_uint(s, "linear_cylinders", "seek", 0, 0, UINT32_MAX);
    p.seek.full_stroke_ms = optional_double(s, "full_stroke_ms", "seek", 0, 0, 1e5);
    if (p.seek.linear_cylinders != 0 && !s.contains("full_stroke_ms"))
      invalid("geometry field 'seek.full_stroke_ms': required with seek.linear_cylinders");
  }

  // Skews default to the head-switch time expressed in sectors of each zone.
  bool has_top_skew = j.contains("track_skew_sectors");
  std::uint64_t top_skew = optional_uint(j, "track_skew_sectors", "", 0, 0, UINT32_MAX);
  bool has_top_cyl_skew = j.contains("cylinder_skew_sectors");
  std::uint64_t top_cyl_skew = optional_uint(j, "cylinder_skew_sectors", "", 0, 0, UINT32_MAX);

  auto read_zone = [&](const nlohmann::json& z, const std::string& where) {
    ZoneSpec s;
    s.cylinders = required_uint(z, "cylinders", where, 1, UINT32_MAX);
    s.sectors_per_track = std::uint32_t(required_uint(z, "sectors_per_track", where, 1, 1u << 24));
    return s;
  };
  std::vector<nlohmann::json> zone_json;
  if (j.contains("zones")) {
    if (j.contains("cylinders") || j.contains("sectors_per_track"))
      invalid("geometry field 'zones': give either 'zones' or 'cylinders' + 'sectors_per_track', not both");
    if (!j["zones"].is_array() || j["zones"].empty())
      invalid("geometry field 'zones': expected a non-empty list of zones");
    for (std::size_t i = 0; i < j["zones"].size(); ++i) {
      const auto& z = j["zones"][i];
      std::string where = fmt::format("zones[{}]", i);
      if (!z.is_object()) invalid(fmt::format("geometry field '{}': expected an object", where));
      reject_unknown(z, where,
                     {"cylinders", "sectors_per_track", "track_skew_sectors", "cylinder_skew_sectors",
                      "first_cylinder", "first_lbn", "sectors"});
      p.zones.push_back(read_zone(z, where));
      zone_json.push_back(z);
    }
  } else {
    p.zones.push_back(read_zone(j, ""));
    zone_json.push_back(nlohmann::json::object());
  }

  double default_switch = has_top_skew ? double(top_skew) / p.zones[0].sectors_per_track * rev_ms : p.seek.settle_ms;
  p.head_switch_ms = optional_double(j, "head_switch_ms", "", default_switch, 0, 1e4);
  for (std::size_t i = 0; i < p.zones.size(); ++i) {
    ZoneSpec& s = p.zones[i];
    std::string where = p.zones.size() > 1 || j.contains("zones") ? fmt::format("zones[{}]", i) : "";
    auto from_time = [&](double ms) {
      return std::uint64_t(std::ceil(ms / rev_ms * s.sectors_per_track - 1e-9)) % s.sectors_per_track;
    };
    std::uint64_t skew_default = has_top_skew ? top_skew : from_time(p.head_switch_ms);
    s.track_skew_sectors = std::uint32_t(
        optional_uint(zone_json[i], "track_skew_sectors", where, skew_default, 0, s.sectors_per_track - 1));
    std::uint64_t cyl_default = has_top_cyl_skew ? top_cyl_skew : s.track_skew_sectors;
    s.cylinder_skew_sectors = std::uint32_t(
        optional_uint(zone_json[i], "cylinder_skew_sectors", where, cyl_default, 0, s.sectors_per_track - 1));
  }
  return std::make_unique<ZonedDisk>(p);
}

}  // namespace mmfs::geom
