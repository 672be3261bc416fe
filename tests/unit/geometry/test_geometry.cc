// What every geometry inherits from geom::Geometry (geometry/geometry.h):
// device kind names, the generic zone bisection against brute force over
// tracks of decreasing lengths, adjacent_n as repeated hops, the LBN and
// step checks with their messages, and the NotSupported answers of a model
// without equivalence classes or quadrangles. The models are tested in their
// own files (test_zoned_disk.cc compares the zone table with the bisection).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "geometry/geometry.h"
#include "geometry/service_time.h"
#include "tests/unit/support/geometry_errors.h"

using namespace mmfs::geom;
using testing::error_of;
using testing::message_of;

namespace {

// A device of tracks of the given lengths, back to back, with no zone table:
// adjacent(l, s) is the same offset s tracks on (clipped to the track).
class Tracks final : public Geometry {
 public:
  explicit Tracks(std::vector<std::uint64_t> lengths) : lengths_(std::move(lengths)) {
    for (std::uint64_t n : lengths_) {
      first_.push_back(capacity_);
      capacity_ += n;
    }
    set_name("tracks");
  }
  DeviceKind kind() const override { return DeviceKind::Disk; }
  std::uint32_t sector_size() const override { return 512; }
  Lbn capacity_sectors() const override { return capacity_; }
  std::uint64_t tracks() const override { return lengths_.size(); }
  std::uint64_t track_of(Lbn lbn) const override {
    check_lbn(lbn);
    std::uint64_t t = 0;
    while (t + 1 < first_.size() && first_[t + 1] <= lbn) ++t;
    return t;
  }
  TrackBounds track_boundaries(Lbn lbn) const override {
    const std::uint64_t t = track_of(lbn);
    return {first_[t], first_[t] + lengths_[t] - 1};
  }
  double skew(Lbn) const override { return 0; }
  double adjacency_angle() const override { return 0; }
  std::uint32_t depth() const override { return 2; }
  Lbn adjacent(Lbn lbn, std::uint32_t step) const override {
    check_step(step);
    const std::uint64_t t = track_of(lbn), target = t + step;
    if (target >= lengths_.size()) throw GeometryError(ErrorKind::OutOfRange, "past the last track");
    return first_[target] + std::min(lbn - first_[t], lengths_[target] - 1);
  }
  std::uint32_t parallelism() const override { return 1; }
  nlohmann::json definition() const override { return nlohmann::json::object(); }
  nlohmann::json info() const override { return nlohmann::json::object(); }
  std::unique_ptr<ServiceTimeModel> make_service_model() const override { return nullptr; }

 private:
  std::vector<std::uint64_t> lengths_;
  std::vector<Lbn> first_;
  Lbn capacity_ = 0;
};

}  // namespace

TEST_CASE("geometry: device kinds by name", "[geometry]") {
  CHECK(std::string(to_string(DeviceKind::Disk)) == "disk");
  CHECK(std::string(to_string(DeviceKind::Mems)) == "mems");
  CHECK(std::string(to_string(DeviceKind::Flash)) == "flash");
}

TEST_CASE("geometry: the generic zone of an LBN is the run of tracks of its track's length", "[geometry]") {
  // Zones as on a disk, outer tracks longest: 3 x 8, 4 x 6, 1 x 5, 2 x 3, 5 x 2 sectors.
  std::vector<std::uint64_t> lengths;
  for (auto [count, length] : std::vector<std::pair<int, std::uint64_t>>{{3, 8}, {4, 6}, {1, 5}, {2, 3}, {5, 2}})
    for (int i = 0; i < count; ++i) lengths.push_back(length);
  const Tracks g(lengths);
  REQUIRE(g.capacity_sectors() == 24 + 24 + 5 + 6 + 10);
  // Brute force: walk the tracks, a zone ending where the length changes.
  std::vector<TrackBounds> want(g.capacity_sectors());
  Lbn zone_first = 0, at = 0;
  for (std::size_t t = 0; t < lengths.size(); ++t) {
    at += lengths[t];
    if (t + 1 == lengths.size() || lengths[t + 1] != lengths[t]) {
      for (Lbn l = zone_first; l < at; ++l) want[l] = {zone_first, at - 1};
      zone_first = at;
    }
  }
  for (Lbn l = 0; l < g.capacity_sectors(); ++l) {
    INFO("LBN " << l);
    CHECK(g.zone_bounds(l) == want[l]);
  }
  CHECK(g.zone_bounds(0) == TrackBounds{0, 23});
  CHECK(g.zone_bounds(48) == TrackBounds{48, 52});  // a zone of one track
  CHECK(g.zone_bounds(g.capacity_sectors() - 1) == TrackBounds{59, 68});
  CHECK(error_of([&] { g.zone_bounds(g.capacity_sectors()); }) == ErrorKind::OutOfRange);
  // One zone: the whole device.
  const Tracks uniform(std::vector<std::uint64_t>(7, 4));
  for (Lbn l : {Lbn(0), Lbn(13), Lbn(27)}) CHECK(uniform.zone_bounds(l) == TrackBounds{0, 27});
  CHECK(uniform.largest_zone_tracks() == 7);
}

TEST_CASE("geometry: adjacent_n hops count times; LBN and step checks name the device", "[geometry]") {
  const Tracks g(std::vector<std::uint64_t>(10, 5));  // 10 tracks of 5: adjacent(l, s) = l + 5 s
  CHECK(g.adjacent_n(3, 1, 0) == 3);
  CHECK(g.adjacent_n(3, 1, 4) == 23);
  CHECK(g.adjacent_n(3, 2, 3) == 33);
  CHECK(error_of([&] { g.adjacent_n(3, 2, 5); }) == ErrorKind::OutOfRange);  // track 10 does not exist
  CHECK(error_of([&] { g.adjacent_n(3, 3, 1); }) == ErrorKind::Invalid);     // step beyond D = 2
  CHECK(message_of([&] { g.adjacent(3, 0); }) == "step 0 is outside 1..D = 1..2 for tracks");
  CHECK(message_of([&] { g.adjacent(3, 3); }) == "step 3 is outside 1..D = 1..2 for tracks");
  CHECK(message_of([&] { g.track_of(50); }) == "LBN 50 is beyond the capacity of tracks (50 sectors, last LBN 49)");
  CHECK(error_of([&] { g.track_boundaries(50); }) == ErrorKind::OutOfRange);
  CHECK(g.track_length(49) == 5);
}

TEST_CASE("geometry: no equivalence classes, conflicts or quadrangles unless the model has them", "[geometry]") {
  Tracks g(std::vector<std::uint64_t>(4, 5));
  CHECK(g.name() == "tracks");
  CHECK(error_of([&] { g.equivalent(0); }) == ErrorKind::NotSupported);
  CHECK(message_of([&] { g.equivalent(0); }) ==
        "equivalence classes exist only on MEMS devices, not on disk 'tracks'");
  CHECK(error_of([&] { g.quadrangle(1); }) == ErrorKind::NotSupported);
  CHECK(message_of([&] { g.quadrangle(1); }).find("quadrangles exist only on disks") != std::string::npos);
  CHECK_FALSE(g.conflicting(0, 19));
  CHECK_FALSE(g.conflicting(7, 7));
  CHECK(error_of([&] { g.conflicting(0, 20); }) == ErrorKind::OutOfRange);
  CHECK(error_of([&] { g.conflicting(20, 0); }) == ErrorKind::OutOfRange);
  CHECK(g.host_cost().empty());
  g.set_name("renamed");
  CHECK(message_of([&] { g.equivalent(1); }).find("'renamed'") != std::string::npos);
}
