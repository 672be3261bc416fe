// A zoned disk: MultiMap §3 (adjacent blocks, depth D, GETADJACENT) and
// Atropos §3.2 (track skew H, quadrangles) over a DiskSim-style layout.
//
// Layout: tracks are numbered cylinder-major (track = cylinder * surfaces +
// surface); LBNs fill tracks in order. Zones are runs of cylinders with the
// same sectors per track. Sector 0 of each track is skewed from the previous
// track's by the zone's track skew (head switch) or cylinder skew (cylinder
// switch), so sequential LBNs stream across track boundaries.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "geometry/geometry.h"
#include "geometry/seek_profile.h"

namespace mmfs::geom {

struct ZoneSpec {
  std::uint64_t cylinders = 0;
  std::uint32_t sectors_per_track = 0;
  std::uint32_t track_skew_sectors = 0;     // head-switch skew (Atropos H)
  std::uint32_t cylinder_skew_sectors = 0;  // skew across a cylinder boundary
};

struct DiskParams {
  std::uint32_t sector_size = 512;
  std::uint32_t surfaces = 1;               // R
  double rpm = 10000;
  std::vector<ZoneSpec> zones;              // outermost (LBN 0) first
  SeekParams seek;                          // settle time, C, sqrt and linear regions
  double head_switch_ms = 0;                // time to switch heads on one cylinder
  double conservatism_deg = 0;              // extra angle added to the settle angle (Table 1)
  std::uint32_t max_depth = 0;              // cap on D (0 = none); the papers' experiments use 128
  std::uint32_t queue_depth = 16;           // requests the firmware's SPTF scheduler sees at once
  bool zero_latency = true;                 // firmware reads a track segment from wherever the head lands
  double overhead_ms = 0;                   // fixed command overhead per request
};

class ZonedDisk final : public Geometry {
 public:
  struct Zone {
    ZoneSpec spec;
    std::uint64_t first_cylinder = 0;
    std::uint64_t first_track = 0, tracks = 0;
    Lbn first_lbn = 0, sectors = 0;
    double start_rev = 0;  // angle of sector 0 of the zone's first track, in revolutions
  };
  // A sector's physical coordinates.
  struct Location {
    std::uint32_t zone = 0;
    std::uint64_t track = 0, cylinder = 0;
    std::uint32_t surface = 0;
    std::uint32_t sector = 0;  // index within the track
    std::uint32_t track_length = 0;
    double track_start_rev = 0;  // angle of the track's sector 0, revolutions [0,1)
  };

  explicit ZonedDisk(const DiskParams& params);
  // Reads the "kind": "disk" JSON form (uniform or with "zones"); throws
  // GeometryError(Invalid) naming the field.
  static std::unique_ptr<ZonedDisk> from_json(const nlohmann::json& j);

  const DiskParams& params() const { return p_; }
  const std::vector<Zone>& zones() const { return zones_; }
  const SeekProfile& seek_profile() const { return seek_; }
  double revolution_ms() const { return rev_ms_; }
  // Time budget of an adjacent access: the time the platter turns through W.
  double adjacency_budget_ms() const { return adjacency_angle() / 360.0 * rev_ms_; }
  std::uint64_t cylinders() const;

  Location locate(Lbn lbn) const;  // no range check: caller checks
  const Zone& zone_of_track(std::uint64_t track) const;
  // Angle of sector 0 of `track`, in revolutions [0,1).
  double track_start_rev(std::uint64_t track) const;
  Lbn track_first_lbn(std::uint64_t track) const;

  DeviceKind kind() const override { return DeviceKind::Disk; }
  std::uint32_t sector_size() const override { return p_.sector_size; }
  Lbn capacity_sectors() const override { return capacity_; }
  std::uint64_t tracks() const override { return tracks_; }
  std::uint64_t largest_zone_tracks() const override;
  TrackBounds zone_bounds(Lbn lbn) const override;
  std::uint64_t track_of(Lbn lbn) const override;
  TrackBounds track_boundaries(Lbn lbn) const override;
  double skew(Lbn lbn) const override;
  double adjacency_angle() const override { return w_deg_; }
  std::uint32_t depth() const override { return depth_; }
  Lbn adjacent(Lbn lbn, std::uint32_t step) const override;
  Lbn adjacent_n(Lbn lbn, std::uint32_t step, std::uint64_t count) const override;
  std::uint32_t parallelism() const override { return 1; }
  QuadrangleParams quadrangle(std::uint32_t block) const override;
  nlohmann::json definition() const override;
  nlohmann::json info() const override;
  std::unique_ptr<ServiceTimeModel> make_service_model() const override;

 private:
  std::uint32_t zone_index_of_lbn(Lbn lbn) const;
  std::uint32_t zone_index_of_track(std::uint64_t track) const;
  // Skew of sector 0 of `track` relative to the zone's first track, in sectors of the zone.
  std::uint64_t track_offset_sectors(const Zone& z, std::uint64_t track) const;

  DiskParams p_;
  SeekProfile seek_;
  std::vector<Zone> zones_;
  Lbn capacity_ = 0;
  std::uint64_t tracks_ = 0;
  double rev_ms_ = 6.0;
  double w_deg_ = 0;
  std::uint32_t depth_ = 0;
};

}  // namespace mmfs::geom
