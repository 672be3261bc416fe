// Basic vocabulary of the geometry engine: sector addresses, track bounds,
// device requests, and the one error type every model throws.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace mmfs::geom {

using Lbn = std::uint64_t;

// First and last LBN of a track, both inclusive (docs/reference.md §6 `boundaries`).
struct TrackBounds {
  Lbn low = 0;
  Lbn high = 0;
  std::uint64_t length() const { return high - low + 1; }
  bool operator==(const TrackBounds&) const = default;
};

// One device request: `sectors` consecutive sectors starting at `lbn`.
struct Request {
  Lbn lbn = 0;
  std::uint32_t sectors = 1;
};

// What went wrong, so callers can map it to an errno (EINVAL, ERANGE, ENOTSUP).
enum class ErrorKind { Invalid, OutOfRange, NotSupported };

class GeometryError : public std::runtime_error {
 public:
  GeometryError(ErrorKind kind, const std::string& what)
      : std::runtime_error(what), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

}  // namespace mmfs::geom
