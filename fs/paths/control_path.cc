#include "fs/paths/control_path.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdint>
#include <exception>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <utility>

#include "geometry/striped.h"
#include "geometry/types.h"
#include "layouts/rectangle.h"

namespace mmfs::fs {

namespace {

using geom::ErrorKind;
using geom::GeometryError;
using geom::Lbn;

PathError error(int err, std::string message) { return PathError{err, std::move(message)}; }

int errno_of(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Invalid: return EINVAL;
    case ErrorKind::OutOfRange: return ERANGE;
    case ErrorKind::NotSupported: return ENOTSUP;
  }
  return EINVAL;
}

std::string joined(std::span<const std::string> components, std::size_t count) {
  std::string out = ".mmfs";
  for (std::size_t i = 0; i < count && i < components.size(); ++i) out += "/" + components[i];
  return out;
}

class Walker {
 public:
  Walker(std::span<const std::string> c, const geom::Geometry& g) : c_(c), g_(g) {}

  std::variant<ControlNode, PathError> top() {
    if (c_.empty())
      return dir(
          {"geometry", "stats", "errors", "audit", "scrub", "boundaries", "adjacent", "equivalent", "rectangle"});
    const std::string& name = c_[0];
    if (name == "geometry") return file(ControlKind::Geometry, 1, [&] { return geometry_info().dump(2) + "\n"; });
    if (name == "rectangle") {
      if (c_.size() == 1) return dir({});
      Lbn lbn = 0;
      if (auto e = parse_lbn(lbn)) return *e;
      return file(ControlKind::Rectangle, 2, [&] { return layouts::rectangle_json(g_, lbn, 1).dump() + "\n"; });
    }
    if (name == "stats") return file(ControlKind::Stats, 1, [] { return std::string(); });
    if (name == "errors") return file(ControlKind::Errors, 1, [] { return std::string(); });
    if (name == "audit") return file(ControlKind::Audit, 1, [] { return std::string(); });
    if (name == "scrub") return file(ControlKind::Scrub, 1, [] { return std::string(); });
    if (name == "boundaries") {
      if (c_.size() == 1) return dir({});
      Lbn lbn = 0;
      if (auto e = parse_lbn(lbn)) return *e;
      return file(ControlKind::Boundaries, 2, [&] {
        const auto b = g_.track_boundaries(lbn);
        return fmt::format("{} {}\n", b.low, b.high);
      });
    }
    if (name == "adjacent") return adjacent();
    if (name == "equivalent") {
      if (c_.size() == 1) return dir({});
      Lbn lbn = 0;
      if (auto e = parse_lbn(lbn)) return *e;
      return file(ControlKind::Equivalent, 2, [&] {
        std::string out;
        for (Lbn l : g_.equivalent(lbn)) out += fmt::format("{}\n", l);
        return out;
      });
    }
    return error(ENOENT, fmt::format("'{}': no such control file; accepted: geometry, stats, errors, audit, scrub, "
                                     "boundaries, adjacent, equivalent, rectangle",
                                     joined(c_, 1)));
  }

 private:
  // The geometry's info, plus the volume's devices and stripe unit, and on
  // disks the Atropos parameters of the outermost zone for one-sector blocks
  // (p, w, d, b, N, H, R: what /.mmfs/rectangle/LBN is built from).
  nlohmann::json geometry_info() const {
    nlohmann::json j = g_.info();
    const auto* striped = dynamic_cast<const geom::StripedGeometry*>(&g_);
    const std::uint32_t p = striped ? striped->members() : 1;
    j["p"] = p;
    j["stripe_unit_sectors"] = g_.track_length(0);
    j["stripe_unit"] = "one track of a member (zone-aware)";
    if (g_.kind() == geom::DeviceKind::Disk) {
      const auto q = g_.quadrangle(1);
      nlohmann::json atropos = geom::to_json(q);
      atropos.update({{"p", p}, {"zone", 0}, {"stripe_unit_sectors", q.N}});
      j["atropos"] = atropos;
    }
    return j;
  }

  static ControlNode dir(std::vector<std::string> listing) {
    ControlNode n;
    n.listing = std::move(listing);
    return n;
  }

  // A file named by the first `count` components: nothing may follow it;
  // its content comes from `content()`, whose GeometryErrors become errnos.
  template <class F>
  std::variant<ControlNode, PathError> file(ControlKind kind, std::size_t count, F&& content) const {
    if (c_.size() > count)
      return error(ENOTDIR, fmt::format("'{}' is a file, not a directory: '{}' cannot follow it", joined(c_, count),
                                        c_[count]));
    ControlNode n;
    n.kind = kind;
    try {
      n.content = content();
    } catch (const GeometryError& e) {
      return error(errno_of(e.kind()), fmt::format("'{}': {}", joined(c_, count), e.what()));
    }
    return n;
  }

  // c_[1] as an LBN below the capacity.
  std::optional<PathError> parse_lbn(Lbn& lbn) const {
    const Lbn capacity = g_.capacity_sectors();
    const std::string where = joined(c_, 2);
    const std::string accepted = fmt::format("an LBN 0..{} (the capacity of {} is {} sectors)",
                                             capacity == 0 ? 0 : capacity - 1, g_.name(), capacity);
    switch (parse_number(c_[1], lbn)) {
      case NumberStatus::Ok: break;
      case NumberStatus::TooLarge:
        return error(ERANGE, fmt::format("'{}': LBN '{}' is too large; accepted: {}", where, c_[1], accepted));
      case NumberStatus::Malformed:
        return error(EINVAL, fmt::format("'{}': LBN '{}' is not a non-negative decimal integer; accepted: {}", where,
                                         c_[1], accepted));
    }
    if (lbn >= capacity)
      return error(ERANGE,
                   fmt::format("'{}': LBN {} is beyond the end of the device; accepted: {}", where, lbn, accepted));
    return std::nullopt;
  }

  std::variant<ControlNode, PathError> adjacent() const {
    if (c_.size() == 1) return dir({});
    Lbn lbn = 0;
    if (auto e = parse_lbn(lbn)) return *e;
    const std::uint32_t depth = g_.depth();
    if (c_.size() == 2) {
      std::vector<std::string> listing;
      listing.reserve(depth);
      for (std::uint32_t s = 1; s <= depth; ++s) listing.push_back(fmt::format("{}", s));
      return dir(std::move(listing));
    }
    const std::string where = joined(c_, 3);
    const std::string accepted = depth == 0 ? fmt::format("nothing: {} has depth D = 0 (no adjacent blocks)", g_.name())
                                            : fmt::format("a step 1..{} (the depth D of {})", depth, g_.name());
    std::uint64_t step = 0;
    switch (parse_number(c_[2], step)) {
      case NumberStatus::Ok: break;
      case NumberStatus::TooLarge:
        return error(ERANGE, fmt::format("'{}': STEP '{}' is too large; accepted: {}", where, c_[2], accepted));
      case NumberStatus::Malformed:
        return error(EINVAL, fmt::format("'{}': STEP '{}' is not a non-negative decimal integer; accepted: {}",
                                         where, c_[2], accepted));
    }
    if (step < 1 || step > depth)
      return error(ERANGE, fmt::format("'{}': STEP {} is out of range; accepted: {}", where, step, accepted));
    return file(ControlKind::Adjacent, 3,
                [&] { return fmt::format("{}\n", g_.adjacent(lbn, std::uint32_t(step))); });
  }

  std::span<const std::string> c_;
  const geom::Geometry& g_;
};

}  // namespace

std::variant<ControlNode, PathError> resolve_control(std::span<const std::string> components,
                                                     const geom::Geometry& geometry) {
  return Walker(components, geometry).top();
}

}  // namespace mmfs::fs
