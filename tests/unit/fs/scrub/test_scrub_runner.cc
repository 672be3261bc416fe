// The scrub's runner (fs/scrub/scrub_runner.h): in idle time to the end of a
// volume and stopped on demand; riding along foreground batches on a MEMS
// device without changing their modeled time (and refused elsewhere); the
// mode a geometry calls for and how each mode reads.
#include <catch2/catch.hpp>

#include <chrono>
#include <cerrno>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fs/scrub/scrub.h"
#include "fs/scrub/scrub_map.h"
#include "fs/scrub/scrub_runner.h"
#include "geometry/load.h"
#include "geometry/memstore.h"
#include "tests/unit/support/array_test_support.h"
#include "tests/unit/support/fs_test_support.h"
#include "tests/unit/support/mems_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;

namespace {

using namespace testing::arrays;

}  // namespace

TEST_CASE("free bandwidth rides along foreground batches without changing their modeled time", "[scrub]") {
  geom::MemStore g(geom::testing::g2());
  g.set_name("g2");
  auto dev = formatted(g, 16ull << 20);
  auto twin = copy_of(*dev);
  Mount with = mount(std::move(dev));
  Mount alone = mount(std::move(twin));
  const auto& sb = with.vol->superblock();
  // Single sectors and 8-sector requests across the data area: foreground batches.
  std::vector<std::vector<SectorRun>> batches;
  AlignedBuffer buf(64 * 512);
  std::mt19937_64 rng(3);
  for (int b = 0; b < 40; ++b) {
    std::vector<SectorRun> runs;
    for (int k = 0; k < 1 + b % 3; ++k) {
      const geom::Lbn lbn = sb.data_first_lbn + rng() % (sb.data_end_lbn - sb.data_first_lbn - 8);
      runs.push_back({lbn, std::uint64_t(k == 0 ? 1 : 8), buf.data() + k * 8 * 512});
    }
    batches.push_back(std::move(runs));
  }
  std::shared_ptr<ScrubRunner> runner;
  std::string msg;
  auto engine = std::make_unique<ScrubEngine>(OwnerMap::from_volume(*with.vol), store_metadata(with.vol->store()),
                                              ScrubOptions{}, nullptr);
  ScrubRunnerOptions options;
  options.idle_ms = 1e9;  // never idle: no request of its own
  REQUIRE(ScrubRunner::start(*with.io, g, ScrubMode::FreeBandwidth, std::move(engine), options, &runner, &msg) == 0);
  for (const auto& runs : batches) {
    REQUIRE(with.io->read(runs) == 0);
    REQUIRE(alone.io->read(runs) == 0);
  }
  const auto a = alone.io->stats(), w = with.io->stats();
  CHECK(w["modeled_ms"].get<double>() == Approx(a["modeled_ms"].get<double>()).epsilon(1e-12));
  CHECK(w["requests"] == a["requests"]);
  CHECK(w["sectors_read"] == a["sectors_read"]);
  CHECK(w["scrub_own_sectors"] == 0);
  const std::uint64_t rode = w["scrub_ride_along_sectors"];
  CHECK(rode > 40 * 2);
  // The ride-along sectors reach the engine (through the runner's queue).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (runner->status()["free_bandwidth"]["delivered"] != rode && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const auto st = runner->status();
  CHECK(st["free_bandwidth"]["delivered"] == rode);
  CHECK(st["free_bandwidth"]["picked"] == rode);
  // Covered by them, unless a later foreground batch read the same sector first.
  CHECK(st["sectors_by"]["free_bandwidth"].get<std::uint64_t>() <= rode);
  CHECK(st["sectors_by"]["free_bandwidth"].get<std::uint64_t>() > rode * 9 / 10);
  CHECK(st["sectors_scanned"] == st["sectors_by"]["free_bandwidth"].get<std::uint64_t>() +
                                     st["sectors_by"]["foreground"].get<std::uint64_t>());
  CHECK(st["mode"] == "free-bandwidth");
  CHECK(st["state"] == "running");
  CHECK(st["errors"] == 0);
  runner->stop();
  CHECK(runner->state() == ScrubState::Stopped);
  // Stopped: the hook is gone.
  REQUIRE(with.io->read(batches[0]) == 0);
  CHECK(with.io->stats()["scrub_ride_along_sectors"] == rode);
  // Free bandwidth needs equivalence classes.
  auto disk = toy_disk();
  auto ddev = formatted(*disk);
  Mount dm = mount(std::move(ddev));
  std::shared_ptr<ScrubRunner> none;
  auto dengine = std::make_unique<ScrubEngine>(OwnerMap::from_volume(*dm.vol), store_metadata(dm.vol->store()),
                                               ScrubOptions{}, nullptr);
  CHECK(ScrubRunner::start(*dm.io, *disk, ScrubMode::FreeBandwidth, std::move(dengine), {}, &none, &msg) == ENOTSUP);
  CHECK(msg.find("MEMS") != std::string::npos);
}

TEST_CASE("the idle-time runner scrubs a volume to the end and stops on demand", "[scrub]") {
  auto g = toy_disk();
  auto dev = formatted(*g);
  Mount m = mount(std::move(dev));
  std::vector<ScrubFinding> found;
  auto engine = std::make_unique<ScrubEngine>(OwnerMap::from_volume(*m.vol), store_metadata(m.vol->store()),
                                              ScrubOptions{}, [&](const ScrubFinding& f) { found.push_back(f); });
  ScrubRunnerOptions options;
  options.idle_ms = 1;
  std::shared_ptr<ScrubRunner> runner;
  std::string msg;
  REQUIRE(ScrubRunner::start(*m.io, *g, ScrubMode::IdleTime, std::move(engine), options, &runner, &msg) == 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (runner->state() == ScrubState::Running && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  REQUIRE(runner->state() == ScrubState::Done);
  const auto st = runner->status();
  CHECK(st["progress"] == 1.0);
  CHECK(st["cells_verified"] == 2);  // the superblocks: nothing else holds data
  CHECK(m.io->stats()["scrub_own_sectors"] == st["sectors_total"]);
  CHECK(found.empty());
  runner->stop();  // after the end: still fine
  CHECK(runner->state() == ScrubState::Done);
}

TEST_CASE("scrub modes: free bandwidth on MEMS, idle time elsewhere, each saying how it reads", "[scrub]") {
  CHECK(std::string(to_string(ScrubMode::FreeBandwidth)) == "free-bandwidth");
  CHECK(std::string(to_string(ScrubMode::IdleTime)) == "idle-time");
  CHECK(std::string(to_string(ScrubState::Running)) == "running");
  CHECK(std::string(to_string(ScrubState::Done)) == "done");
  CHECK(std::string(to_string(ScrubState::Stopped)) == "stopped");
  const geom::MemStore mems(geom::testing::g2());
  auto disk = geom::load_geometry("atlas10k3");
  auto ssd = geom::load_geometry("ssd");
  CHECK(default_scrub_mode(mems) == ScrubMode::FreeBandwidth);
  CHECK(default_scrub_mode(*disk) == ScrubMode::IdleTime);
  CHECK(default_scrub_mode(*ssd) == ScrubMode::IdleTime);
  CHECK(scrub_how(ScrubMode::FreeBandwidth, mems).find("free LBNs of each foreground access") != std::string::npos);
  CHECK(scrub_how(ScrubMode::IdleTime, mems).find("asked for with 'start idle-time'") != std::string::npos);
  CHECK(scrub_how(ScrubMode::IdleTime, *disk) ==
        "reads in idle time, a track at a time: the device (disk) has no free bandwidth");
  CHECK(scrub_how(ScrubMode::IdleTime, *ssd).find("(flash)") != std::string::npos);
}
