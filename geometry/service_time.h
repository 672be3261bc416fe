// Predicts how long a device takes to serve batches of requests
// (docs/reference.md §7 (b); Atropos §2.2/§3.3.4; MEMS §4).
//
// A model is stateful: it remembers where the head (or sled) is and the
// device clock, so successive batches are costed from where the last one
// left the device. A batch is a set of requests the firmware may reorder
// (shortest-positioning-time-first); batches are served one after another.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "geometry/types.h"

namespace mmfs::geom {

class ServiceTimeModel {
 public:
  virtual ~ServiceTimeModel() = default;

  // Serves every request of the batch and returns the batch's service time in
  // ms. When `order` is given it receives the indices of the batch in the
  // order they were served. Throws GeometryError(OutOfRange) for a request
  // past the end of the device (before changing any state).
  virtual double serve(std::span<const Request> batch, std::vector<std::uint32_t>* order = nullptr) = 0;

  // Convenience: a batch of one.
  double serve_one(Request r) { return serve(std::span<const Request>(&r, 1)); }

  // Idle device: time 0, head/sled at LBN 0.
  virtual void reset() = 0;
  // Places the head/sled at the start of `lbn` exactly as if a request had just
  // finished there, at the current clock (used to measure positioning alone).
  virtual void place_at(Lbn lbn) = 0;
  // Lets time pass with no request (the platter keeps spinning).
  virtual void idle(double ms) = 0;
  // The device clock in ms since reset().
  virtual double clock_ms() const = 0;
};

}  // namespace mmfs::geom
