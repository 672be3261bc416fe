// MEMS-based storage (MEMStore) geometry: MEMS paper §2-3, Tables 2 and 3.
//
// Five device parameters: p (parallelism), N (squares), Sx, Sy (sectors per
// square in X and Y), M (micropositioning). Derived: Nx = p, Ny = N/p,
// S_T = Sy*Nx sectors per track, S_C = S_T*Ny sectors per cylinder,
// Sx cylinders. Sequential LBNs run across the Nx squares of a row of squares,
// then along Y; the sled direction reverses on every track (global track parity).
#pragma once

#include <nlohmann/json.hpp>

#include "geometry/geometry.h"

namespace mmfs::geom {

struct MemsParams {
  std::uint32_t sector_size = 512;
  std::uint32_t p = 10;      // LBNs accessible in parallel (power budget)
  std::uint32_t N = 100;     // squares (after striping each LBN over tips)
  std::uint32_t Sx = 2500;   // sectors per square in X (= cylinders)
  std::uint32_t Sy = 27;     // sectors per square in Y
  std::uint32_t M = 0;       // micropositioning, cylinders either way
  // Service-time parameters (see docs/geometry-format.md).
  double x_settle_ms = 0.2;       // settle after any X move
  double x_full_ms = 0.64;        // X seek across all Sx columns, excluding settle: t = x_full*sqrt(dx/Sx)
  double y_full_ms = 0.64;        // Y seek across a whole square: t = y_full*sqrt(dy/Sy)
  double bandwidth_mb_s = 38.0;   // streaming bandwidth (p sectors per row time)
  double turnaround_ms = 0.06;    // sled reversal at the end of a track
  // Per batch: the controller and bus overhead of a command (a host's batch()
  // is one linked command, MEMS §3.4). 0 models the media alone.
  double overhead_ms = 0.0;
  std::uint32_t depth = 0;        // D for layouts; 0 = tracks per cylinder (Ny)
};

class MemStore final : public Geometry {
 public:
  explicit MemStore(const MemsParams& params);
  // Reads the "kind": "mems" JSON form; throws GeometryError(Invalid) naming the field.
  static std::unique_ptr<MemStore> from_json(const nlohmann::json& j);

  const MemsParams& params() const { return p_; }
  std::uint32_t Nx() const { return p_.p; }
  std::uint32_t Ny() const { return p_.N / p_.p; }
  std::uint64_t sectors_per_track() const { return std::uint64_t(p_.Sy) * Nx(); }
  std::uint64_t sectors_per_cylinder() const { return sectors_per_track() * Ny(); }

  // Physical position of an LBN: cylinder x (column in every square), y
  // (row in the square), and the square index in [0, N).
  struct Position {
    std::uint32_t x = 0, y = 0, square = 0;
  };
  Position position(Lbn lbn) const;
  // The LBN at (x, y) of square i (MEMS §3.2, LBN_{l,i}).
  Lbn lbn_at(std::uint32_t x, std::uint32_t y, std::uint32_t square) const;

  DeviceKind kind() const override { return DeviceKind::Mems; }
  std::uint32_t sector_size() const override { return p_.sector_size; }
  Lbn capacity_sectors() const override;
  std::uint64_t tracks() const override;
  std::uint64_t track_of(Lbn lbn) const override;
  TrackBounds track_boundaries(Lbn lbn) const override;
  double skew(Lbn lbn) const override;
  double adjacency_angle() const override { return 0.0; }
  std::uint32_t depth() const override;
  Lbn adjacent(Lbn lbn, std::uint32_t step) const override;
  std::uint32_t parallelism() const override { return p_.p; }
  std::vector<Lbn> equivalent(Lbn lbn) const override;
  bool conflicting(Lbn a, Lbn b) const override;
  nlohmann::json definition() const override;
  nlohmann::json info() const override;
  std::unique_ptr<ServiceTimeModel> make_service_model() const override;

 private:
  MemsParams p_;
};

}  // namespace mmfs::geom
