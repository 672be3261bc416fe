// MEMStore geometry (MEMS paper §2-3): LBN layout, equivalence classes,
// track boundaries and the JSON forms. The service-time model lives in
// geometry/mems_service.cc.
#include "geometry/memstore.h"

#include <fmt/format.h>

#include <algorithm>

#include "geometry/json_fields.h"
#include "geometry/mems_service.h"

namespace mmfs::geom {
namespace {

[[noreturn]] void invalid(const std::string& why) {
  throw GeometryError(ErrorKind::Invalid, fmt::format("MEMS geometry: {}", why));
}

}  // namespace

MemStore::MemStore(const MemsParams& params) : p_(params) {
  if (p_.sector_size == 0) invalid("'sector_size' must be positive");
  if (p_.p == 0) invalid("'p' (parallelism) must be positive");
  if (p_.N == 0) invalid("'squares' (N) must be positive");
  if (p_.Sx == 0) invalid("'sectors_per_square_x' (Sx) must be positive");
  if (p_.Sy == 0) invalid("'sectors_per_square_y' (Sy) must be positive");
  if (p_.N % p_.p != 0)
    invalid(fmt::format("'squares' (N = {}) must be a multiple of 'p' ({}): Ny = N/p rows of squares", p_.N, p_.p));
  // The capacity in bytes (Sx*Sy*N*sector_size) must fit in 63 bits.
  if (std::uint64_t(p_.Sy) * p_.N > (std::uint64_t(1) << 63) / p_.sector_size / p_.Sx)
    invalid(fmt::format("capacity Sx*Sy*N = {}*{}*{} sectors is too large", p_.Sx, p_.Sy, p_.N));
  auto nonneg = [](double v, const char* field) {
    if (!(v >= 0.0) || v > 1e300) invalid(fmt::format("'{}' must be a finite number >= 0, got {}", field, v));
  };
  nonneg(p_.x_settle_ms, "x_settle_ms");
  nonneg(p_.x_full_ms, "x_full_ms");
  nonneg(p_.y_full_ms, "y_full_ms");
  nonneg(p_.turnaround_ms, "turnaround_ms");
  nonneg(p_.overhead_ms, "overhead_ms");
  if (!(p_.bandwidth_mb_s > 0.0) || p_.bandwidth_mb_s > 1e300)
    invalid(fmt::format("'bandwidth_mb_s' must be positive, got {}", p_.bandwidth_mb_s));
}

std::unique_ptr<MemStore> MemStore::from_json(const nlohmann::json& j) {
  const std::string where;
  if (!j.is_object()) invalid("the geometry must be a JSON object");
  // "profile", "name" and "notes" are the loader's business (geometry/load.cc).
  jsonf::reject_unknown(j, where,
                        {"kind", "profile", "name", "notes", "sector_size", "p", "squares", "sectors_per_square_x",
                         "sectors_per_square_y", "micropositioning", "x_settle_ms", "x_full_ms", "y_full_ms",
                         "bandwidth_mb_s", "turnaround_ms", "overhead_ms", "depth"});
  if (auto it = j.find("kind"); it != j.end() && !(it->is_string() && it->get<std::string>() == "mems"))
    throw GeometryError(ErrorKind::Invalid,
                        fmt::format("geometry field 'kind': expected \"mems\", got {}", it->dump()));

  constexpr std::uint64_t u32 = UINT32_MAX;
  const MemsParams d;  // defaults for the optional fields
  MemsParams m;
  m.sector_size = std::uint32_t(jsonf::optional_uint(j, "sector_size", where, d.sector_size, 1, u32));
  m.p = std::uint32_t(jsonf::required_uint(j, "p", where, 1, u32));
  m.N = std::uint32_t(jsonf::required_uint(j, "squares", where, 1, u32));
  m.Sx = std::uint32_t(jsonf::required_uint(j, "sectors_per_square_x", where, 1, u32));
  m.Sy = std::uint32_t(jsonf::required_uint(j, "sectors_per_square_y", where, 1, u32));
  m.M = std::uint32_t(jsonf::optional_uint(j, "micropositioning", where, d.M, 0, u32));
  m.x_settle_ms = jsonf::optional_double(j, "x_settle_ms", where, d.x_settle_ms);
  m.x_full_ms = jsonf::optional_double(j, "x_full_ms", where, d.x_full_ms);
  m.y_full_ms = jsonf::optional_double(j, "y_full_ms", where, d.y_full_ms);
  m.bandwidth_mb_s = jsonf::optional_double(j, "bandwidth_mb_s", where, d.bandwidth_mb_s, 1e-9);
  m.turnaround_ms = jsonf::optional_double(j, "turnaround_ms", where, d.turnaround_ms);
  m.overhead_ms = jsonf::optional_double(j, "overhead_ms", where, d.overhead_ms);
  m.depth = std::uint32_t(jsonf::optional_uint(j, "depth", where, d.depth, 0, u32));
  if (m.N % m.p != 0)
    throw GeometryError(ErrorKind::Invalid,
                        fmt::format("geometry field 'squares': {} is not a multiple of 'p' ({})", m.N, m.p));
  return std::make_unique<MemStore>(m);
}

// Layout (MEMS §2.1, Fig. 2/3): LBN l lies in cylinder x = l / S_C, on track
// k = (l % S_C) / S_T of that cylinder (the k-th row of squares), at offset
// o = l % S_T in the track. A track runs across the Nx = p squares of its row
// of squares (o % Nx), then along Y (o / Nx), so p consecutive LBNs share one
// (x, y) and stream together.
//
// Track reversal: the sled changes direction at the end of every track, so the
// Y direction of a track is the parity of its GLOBAL track number x*Ny + k —
// this is the paper's y_l formula (parity of floor(l/S_T)). The paper's
// LBN_{l,i} formula instead uses the parity of floor(i/Nx) + x_l, which agrees
// with y_l only when Ny is odd (Table 2, Ny = 3) and breaks for G2 (Table 3,
// Ny = 10). We use the global track parity in both directions, so that
// position() and lbn_at() are exact inverses on every geometry.
MemStore::Position MemStore::position(Lbn lbn) const {
  check_lbn(lbn);
  const std::uint64_t st = sectors_per_track(), sc = sectors_per_cylinder();
  const std::uint64_t x = lbn / sc;
  const std::uint64_t k = (lbn % sc) / st;
  const std::uint64_t o = lbn % st;
  const std::uint64_t r = o / Nx(), c = o % Nx();
  const bool forward = ((x * Ny() + k) % 2) == 0;
  Position pos;
  pos.x = std::uint32_t(x);
  pos.y = std::uint32_t(forward ? r : p_.Sy - 1 - r);
  pos.square = std::uint32_t(k * Nx() + c);
  return pos;
}

Lbn MemStore::lbn_at(std::uint32_t x, std::uint32_t y, std::uint32_t square) const {
  if (x >= p_.Sx || y >= p_.Sy || square >= p_.N)
    throw GeometryError(ErrorKind::OutOfRange,
                        fmt::format("MEMS position x={} y={} square={} is outside Sx={} Sy={} N={}", x, y, square,
                                    p_.Sx, p_.Sy, p_.N));
  const std::uint64_t k = square / Nx(), c = square % Nx();
  const bool forward = ((std::uint64_t(x) * Ny() + k) % 2) == 0;
  const std::uint64_t r = forward ? y : p_.Sy - 1 - y;
  return x * sectors_per_cylinder() + k * sectors_per_track() + r * Nx() + c;
}

Lbn MemStore::capacity_sectors() const { return std::uint64_t(p_.Sx) * p_.Sy * p_.N; }

std::uint64_t MemStore::tracks() const { return std::uint64_t(p_.Sx) * Ny(); }

std::uint64_t MemStore::track_of(Lbn lbn) const {
  check_lbn(lbn);
  return lbn / sectors_per_track();
}

// get_boundaries (MEMS §3.4): the S_T-sector track containing lbn. The paper
// writes LBN_max - LBN_min = S_T with an exclusive max; TrackBounds is
// inclusive (docs/reference.md §6), so high - low = S_T - 1.
TrackBounds MemStore::track_boundaries(Lbn lbn) const {
  const std::uint64_t t = track_of(lbn);
  return {t * sectors_per_track(), (t + 1) * sectors_per_track() - 1};
}

double MemStore::skew(Lbn lbn) const {
  check_lbn(lbn);
  return 0.0;  // no rotation
}

std::uint32_t MemStore::depth() const { return p_.depth != 0 ? p_.depth : Ny(); }

// The LBN `step` tracks further at the same in-track offset (as on flash and
// the MultiMap toy disk). With track reversal an odd step lands on the mirrored
// row Sy-1-y; the same-row LBNs of other tracks are the equivalence class.
Lbn MemStore::adjacent(Lbn lbn, std::uint32_t step) const {
  check_lbn(lbn);
  check_step(step);
  const Lbn target = lbn + std::uint64_t(step) * sectors_per_track();
  if (target >= capacity_sectors())
    throw GeometryError(ErrorKind::OutOfRange,
                        fmt::format("adjacent({}, {}): track {} is past the last track {} of {}", lbn, step,
                                    track_of(lbn) + step, tracks() - 1, name()));
  return target;
}

// E_l (MEMS §3.2): the LBN at l's y in every square, for every cylinder within
// M (micropositioning) of l's, clamped to the device. N*(2M+1) LBNs away from
// the X edges.
std::vector<Lbn> MemStore::equivalent(Lbn lbn) const {
  const Position pos = position(lbn);
  const std::uint32_t lo = pos.x >= p_.M ? pos.x - p_.M : 0;
  const std::uint32_t hi = std::uint32_t(std::min<std::uint64_t>(std::uint64_t(pos.x) + p_.M, p_.Sx - 1));
  std::vector<Lbn> out;
  out.reserve(std::size_t(hi - lo + 1) * p_.N);
  for (std::uint32_t x = lo; x <= hi; ++x)
    for (std::uint32_t i = 0; i < p_.N; ++i) out.push_back(lbn_at(x, pos.y, i));
  std::sort(out.begin(), out.end());
  return out;
}

// check_conflicting (MEMS §3.4): real devices may share channel electronics
// between tips; the paper defines no concrete relation, so nothing conflicts.
// Kept as the hook where a conflict relation would go.
bool MemStore::conflicting(Lbn a, Lbn b) const { return Geometry::conflicting(a, b); }

nlohmann::json MemStore::definition() const {
  return {{"kind", "mems"},
          {"sector_size", p_.sector_size},
          {"p", p_.p},
          {"squares", p_.N},
          {"sectors_per_square_x", p_.Sx},
          {"sectors_per_square_y", p_.Sy},
          {"micropositioning", p_.M},
          {"x_settle_ms", p_.x_settle_ms},
          {"x_full_ms", p_.x_full_ms},
          {"y_full_ms", p_.y_full_ms},
          {"bandwidth_mb_s", p_.bandwidth_mb_s},
          {"turnaround_ms", p_.turnaround_ms},
          {"overhead_ms", p_.overhead_ms},
          {"depth", p_.depth}};
}

nlohmann::json MemStore::info() const {
  nlohmann::json j = definition();
  j["profile"] = name();
  j["capacity_sectors"] = capacity_sectors();
  j["capacity_bytes"] = capacity_sectors() * p_.sector_size;
  j["tracks"] = tracks();
  j["depth"] = depth();  // the effective D (the definition's 0 means Ny)
  j["skew_deg"] = 0;
  j["parallelism"] = p_.p;
  j["sectors_per_track"] = sectors_per_track();
  j["sectors_per_cylinder"] = sectors_per_cylinder();
  // N*(2M+1) (§3.2); a device narrower than 2M+1 cylinders caps it.
  j["equivalence_class_size"] = std::uint64_t(p_.N) * std::min<std::uint64_t>(2 * std::uint64_t(p_.M) + 1, p_.Sx);
  return j;
}

std::unique_ptr<ServiceTimeModel> MemStore::make_service_model() const {
  return std::make_unique<MemsServiceModel>(*this);
}

}  // namespace mmfs::geom
