// The one interface the rest of mmfs asks questions of a device through
// (ARCHITECTURE.md, "geometry/"). Pure model: no I/O.
//
// Three models implement it: ZonedDisk (MultiMap §3, Atropos §3.2),
// MemStore (MEMS paper §2-3) and Flash. Functions a model cannot answer
// (equivalence classes on a disk, quadrangles on flash) throw
// GeometryError(NotSupported).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "geometry/quadrangle.h"
#include "geometry/types.h"

namespace mmfs::geom {

class ServiceTimeModel;

enum class DeviceKind { Disk, Mems, Flash };
const char* to_string(DeviceKind kind);

// What a read costs the machine besides the device: the requests of a cold
// read of a view (its path's lookups, of which A@'s opens the array, the
// open, the read, the release), the daemon's work on the cells a read brings
// (checksums, gathering the result out of them) and handing the result to
// the reader through the kernel into fresh memory. On a fast device the
// last can bound a full read (docs/measurements.md). `mmfs-geom measure`
// times them (probes/host_probe.h, probes/read_path_probe.h): the hand-over
// through a throwaway FUSE mount, the rest by the daemon's own code on a
// volume in memory; a modeled device has none (the papers' clock).
struct HostCost {
  double request_ms = 0;         // per cold read
  double ms_per_mib = 0;         // per MiB of the result handed to the reader
  double verify_ms_per_mib = 0;  // per MiB of cells read (their checksums)
  double gather_ms_per_mib = 0;  // per MiB of the result gathered out of cells
  bool empty() const { return request_ms == 0 && ms_per_mib == 0 && verify_ms_per_mib == 0 && gather_ms_per_mib == 0; }
};

class Geometry {
 public:
  virtual ~Geometry() = default;

  virtual DeviceKind kind() const = 0;
  // Profile name ("atlas10k3", ...) or "custom" for a geometry file.
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  virtual std::uint32_t sector_size() const = 0;
  virtual Lbn capacity_sectors() const = 0;
  virtual std::uint64_t tracks() const = 0;
  // The most consecutive tracks of one length (a zone): the largest run a
  // track-group layout can use without straddling a zone.
  virtual std::uint64_t largest_zone_tracks() const { return tracks(); }
  // The zone holding lbn — the run of consecutive whole tracks of lbn's
  // track length — as [first LBN, end LBN). A track group a layout places
  // there never straddles a zone. The default finds it by bisection over
  // track lengths; models with a zone table answer exactly.
  virtual TrackBounds zone_bounds(Lbn lbn) const;

  // Track structure. Every function taking an LBN throws
  // GeometryError(OutOfRange) for lbn >= capacity_sectors().
  virtual std::uint64_t track_of(Lbn lbn) const = 0;
  virtual TrackBounds track_boundaries(Lbn lbn) const = 0;
  std::uint64_t track_length(Lbn lbn) const { return track_boundaries(lbn).length(); }

  // Physical angle of the start of `lbn` from the device's zero position,
  // in degrees [0, 360). Zero on devices without rotation.
  virtual double skew(Lbn lbn) const = 0;
  // W: the angle between a block and its adjacent blocks (settle angle plus
  // conservatism), in degrees.
  virtual double adjacency_angle() const = 0;
  // D: the number of tracks reachable within the settle time.
  virtual std::uint32_t depth() const = 0;
  // GETADJACENT (MultiMap Fig. 4): the block `step` tracks away from lbn that
  // can be reached without rotational latency. 1 <= step <= depth(); a step
  // beyond D throws Invalid, a target track past the end throws OutOfRange.
  virtual Lbn adjacent(Lbn lbn, std::uint32_t step) const = 0;
  // `count` successive adjacent(., step) hops from lbn (MultiMap's MAP walks
  // these); models override it with a closed form where one exists.
  virtual Lbn adjacent_n(Lbn lbn, std::uint32_t step, std::uint64_t count) const;

  // Number of LBNs the device can transfer at once (MEMS p; flash queues; 1 on disks).
  virtual std::uint32_t parallelism() const = 0;
  // MEMS equivalence class of lbn, ascending, lbn included.
  virtual std::vector<Lbn> equivalent(Lbn lbn) const;
  // True when a and b share a component and cannot be accessed in parallel.
  virtual bool conflicting(Lbn a, Lbn b) const;
  // Atropos quadrangle parameters for the zone of LBN 0 and block size B.
  virtual QuadrangleParams quadrangle(std::uint32_t block) const;

  // The geometry definition in the JSON form of docs/reference.md §7 / docs/geometry-format.md,
  // complete enough to rebuild an identical geometry with load_geometry().
  virtual nlohmann::json definition() const = 0;
  // docs/reference.md §6 `/.mmfs/geometry`: the definition plus derived values
  // (sector_size, capacity_sectors, tracks, depth, skew_deg, zones).
  virtual nlohmann::json info() const = 0;

  // A fresh service-time model over this geometry, device idle at time 0.
  // The geometry must outlive the model.
  virtual std::unique_ptr<ServiceTimeModel> make_service_model() const = 0;

  // The host's part of a read's time (HostCost); empty unless measured.
  virtual HostCost host_cost() const { return {}; }

 protected:
  void check_lbn(Lbn lbn) const;
  void check_step(std::uint32_t step) const;

 private:
  std::string name_ = "custom";
};

}  // namespace mmfs::geom
