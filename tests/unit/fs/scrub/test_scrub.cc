// The scrub engine (fs/scrub/scrub.h; docs/daemon.md "Scrub"), without a
// mount: coverage counting, gathering a multi-sector cell from sectors
// arriving in any order, a flipped byte found and named (and a rewrite's race
// not reported), and the whole engine over real in-memory volumes. The owner
// map is tested in test_scrub_map.cc, the runner in test_scrub_runner.cc.
#include <catch2/catch.hpp>

#include <cstring>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "fs/file/plain_file.h"
#include "fs/meta/cell_checksums.h"
#include "fs/scrub/scrub.h"
#include "fs/scrub/scrub_map.h"
#include "tests/unit/support/array_test_support.h"
#include "tests/unit/support/fs_test_support.h"
#include "tests/unit/support/scrub_test_support.h"

using namespace mmfs;
using namespace mmfs::fs;

namespace {

using testing::toy_map;
using namespace testing::arrays;

// Checksums kept by the test: (ino, unit) -> recorded values.
class FakeMetadata final : public ScrubMetadata {
 public:
  std::map<std::pair<Ino, std::uint64_t>, StoredChecksums> sums;
  bool moved = false;
  StoredChecksums checksums(Ino ino, std::uint64_t unit) const override {
    auto it = sums.find({ino, unit});
    return it == sums.end() ? StoredChecksums{} : it->second;
  }
  bool unchanged(const ScrubObject&) const override { return !moved; }
};

std::vector<std::byte> cell_bytes(int seed) {
  std::vector<std::byte> b(3 * 512);
  std::mt19937 rng(seed);
  for (auto& x : b) x = std::byte(rng());
  return b;
}

struct Toy {
  FakeMetadata* md = nullptr;
  std::vector<ScrubFinding> found;
  std::unique_ptr<ScrubEngine> engine;
};

Toy toy_engine(ScrubOptions options = {}) {
  Toy t;
  auto md = std::make_unique<FakeMetadata>();
  t.md = md.get();
  for (int c = 0; c < 4; ++c) {
    auto b = cell_bytes(c);
    t.md->sums[{7, std::uint64_t(c)}] = {cell_checksum(std::span(b).first(1500)), 0};
  }
  t.engine = std::make_unique<ScrubEngine>(toy_map(), std::move(md), options,
                                           [f = &t.found](const ScrubFinding& x) { f->push_back(x); });
  return t;
}

// Delivers sector `k` of cell `c` (its bytes from `bytes`).
void give(ScrubEngine& e, geom::Lbn lbn, const std::vector<std::byte>& bytes, std::uint32_t k,
          ReadPath how = ReadPath::FreeBandwidth) {
  const geom::Lbn l[1] = {lbn};
  const int ok[1] = {0};
  e.deliver(l, bytes.data() + k * 512, ok, how);
}

// Reads the whole volume through the engine as the idle-time runner does,
// then its pending and suspect units; returns when complete.
void scrub_all(ScrubEngine& e, SectorIo& io) {
  geom::Lbn cursor = 0;
  while (auto next = e.next_uncovered(cursor, 256)) {
    auto [lbn, n] = *next;
    AlignedBuffer buf(n * io.sector_size());
    const SectorRun run{lbn, n, buf.data()};
    const int r = io.read_background(std::span(&run, 1));
    e.deliver_run(lbn, n, buf.data(), r, ReadPath::IdleTime);
    cursor = lbn + n;
  }
  while (auto job = e.next_unit_job()) {
    std::uint64_t sectors = 0;
    for (const auto& r : job->runs) sectors += r.sectors;
    AlignedBuffer buf(sectors * io.sector_size());
    std::vector<SectorRun> runs;
    std::byte* p = buf.data();
    for (const auto& r : job->runs) {
      runs.push_back({r.lbn, r.sectors, p});
      p += r.sectors * io.sector_size();
    }
    e.finish_unit_job(*job, buf.data(), io.read_background(runs));
  }
}

}  // namespace

TEST_CASE("coverage counts every sector once, across chunks, and finds the gaps", "[scrub]") {
  const std::uint64_t n = (1u << 20) * 2 + 777;  // three chunks, the last one short
  CoverageMap c(n);
  CHECK(c.mark(5, 10) == 10);
  CHECK(c.mark(10, 10) == 5);  // 10..14 were covered already
  CHECK(c.count() == 15);
  CHECK(c.covered(5));
  CHECK(c.covered(19));
  CHECK_FALSE(c.covered(20));
  CHECK(c.next_uncovered(0) == 0);
  CHECK(c.next_uncovered(5) == 20);
  CHECK(c.uncovered_run(20, 100) == 100);
  CHECK(c.uncovered_run(0, 100) == 5);
  CHECK(c.mark(n - 3, 10) == 3);  // clipped to the map
  CHECK(c.mark(n + 5, 1) == 0);
  // A whole chunk: counted, and found full afterwards.
  CHECK(c.mark(1u << 20, 1u << 20) == (1u << 20));
  CHECK(c.covered((1u << 20) + 12345));
  CHECK(c.next_uncovered(1u << 20) == (2u << 20));
  // Everything: complete, nothing left to find.
  c.mark(0, n);
  CHECK(c.count() == n);
  CHECK(c.complete());
  CHECK_FALSE(c.next_uncovered(0).has_value());
  // Wrapping: the gap before `from` is found after the end.
  CoverageMap w(100);
  w.mark(50, 50);
  CHECK(w.next_uncovered(60) == 0);
}

TEST_CASE("a multi-sector cell is verified once all its sectors arrived, in any order", "[scrub]") {
  Toy t = toy_engine();
  ScrubEngine& e = *t.engine;
  auto c2 = cell_bytes(2);
  give(e, 400, c2, 2);  // the split cell, last sector first
  give(e, 301, c2, 1);
  CHECK(e.status()["cells_gathering"] == 1);
  CHECK(e.status()["cells_verified"] == 0);
  give(e, 301, c2, 1);  // again: counted once
  CHECK(e.status()["sectors_scanned"] == 2);
  give(e, 300, c2, 0);
  auto st = e.status();
  CHECK(st["cells_verified"] == 1);
  CHECK(st["verified_by"]["free_bandwidth"] == 1);
  CHECK(st["cells_gathering"] == 0);
  CHECK(t.found.empty());
  // A run of free space and metadata: read, nothing to verify.
  std::vector<std::byte> junk(512 * 10);
  e.deliver_run(0, 10, junk.data(), 0, ReadPath::IdleTime);
  CHECK(e.status()["sectors_scanned"] == 13);
  CHECK(e.status()["sectors_by"]["idle_time"] == 10);
}

TEST_CASE("a flipped byte is suspected, read again, and reported naming the cell", "[scrub]") {
  Toy t = toy_engine();
  ScrubEngine& e = *t.engine;
  auto c1 = cell_bytes(1);
  c1[700] ^= std::byte{0x10};  // sector 1 of cell 1
  for (std::uint32_t k = 0; k < 3; ++k) give(e, 210 + k, c1, k);
  CHECK(e.status()["suspects"] == 1);
  CHECK(t.found.empty());  // not yet: a rewrite may have raced the read
  auto job = e.next_unit_job();
  REQUIRE(job);
  CHECK(job->confirm);
  REQUIRE(job->runs.size() == 1);
  CHECK(job->runs[0].lbn == 210);
  e.finish_unit_job(*job, c1.data(), 0);
  REQUIRE(t.found.size() == 1);
  CHECK(t.found[0].lbn == 210);
  CHECK(t.found[0].ino == 7);
  CHECK(t.found[0].path == "/t/a");
  CHECK(t.found[0].what == "cell 1 of /t/a failed its checksum");
  REQUIRE(t.found[0].runs.size() == 1);
  CHECK(t.found[0].runs[0].sectors == 3);
  auto st = e.status();
  CHECK(st["errors"] == 1);
  CHECK(st["error_list"][0]["lbn"] == 210);
  CHECK(st["suspects"] == 0);
  // The bytes past the brick (padding) are not checksummed: a change there is no finding.
  Toy u = toy_engine();
  auto c3 = cell_bytes(3);
  c3[1510] ^= std::byte{1};
  for (std::uint32_t k = 0; k < 3; ++k) give(*u.engine, 230 + k, c3, k);
  CHECK(u.engine->status()["cells_verified"] == 1);
}

TEST_CASE("a mismatch that a rewrite explains is a false alarm, and a moved object voids it", "[scrub]") {
  Toy t = toy_engine();
  ScrubEngine& e = *t.engine;
  auto old_bytes = cell_bytes(0);
  auto new_bytes = cell_bytes(40);
  // The sectors were read while the cell was being rewritten: new bytes, old checksum.
  for (std::uint32_t k = 0; k < 3; ++k) give(e, 200 + k, new_bytes, k);
  CHECK(e.status()["suspects"] == 1);
  // The rewrite commits: the checksum now describes the new bytes.
  t.md->sums[{7, 0}] = {cell_checksum(std::span(new_bytes).first(1500)), 0};
  auto job = e.next_unit_job();
  REQUIRE(job);
  e.finish_unit_job(*job, new_bytes.data(), 0);
  CHECK(t.found.empty());
  CHECK(e.status()["false_alarms"] == 1);
  // An object whose extents changed since the map was built: its finding is void.
  auto bad = cell_bytes(99);
  for (std::uint32_t k = 0; k < 3; ++k) give(e, 230 + k, bad, k);
  t.md->moved = true;
  job = e.next_unit_job();
  REQUIRE(job);
  e.finish_unit_job(*job, bad.data(), 0);
  CHECK(t.found.empty());
  CHECK(e.status()["void_findings"] == 1);
}

TEST_CASE("unwritten cells need nothing; read errors are findings", "[scrub]") {
  Toy t = toy_engine();
  ScrubEngine& e = *t.engine;
  t.md->sums.erase({7, 3});  // cell 3 never held data
  auto junk = cell_bytes(77);
  for (std::uint32_t k = 0; k < 3; ++k) give(e, 230 + k, junk, k);
  CHECK(e.status()["cells_unwritten"] == 1);
  CHECK(t.found.empty());
  const geom::Lbn l[2] = {150, 201};
  const int res[2] = {EIO, EIO};
  std::vector<std::byte> buf(1024);
  e.deliver(l, buf.data(), res, ReadPath::FreeBandwidth);
  REQUIRE(t.found.size() == 2);
  CHECK(t.found[0].lbn == 150);
  CHECK(t.found[0].path == "free space");
  CHECK(t.found[0].what == "LBN 150 (free space) could not be read: EIO");
  CHECK(t.found[1].path == "/t/a");
  CHECK(t.found[1].ino == 7);
}

// The recheck after the repairs: a finding whose unit now reads and matches
// its checksum (a copy or mirror rewrote it), or whose owner moved, is
// resolved; one still bad, one whose sectors still do not read, and one in
// free space that still does not read stay open; each is decided once.
TEST_CASE("the recheck resolves what the repairs mended and leaves the rest open", "[scrub]") {
  Toy t = toy_engine();
  ScrubEngine& e = *t.engine;
  auto bad1 = cell_bytes(1), bad2 = cell_bytes(2);
  bad1[10] ^= std::byte{1};
  bad2[600] ^= std::byte{1};
  for (std::uint32_t k = 0; k < 3; ++k) give(e, 210 + k, bad1, k);
  for (std::uint32_t k = 0; k < 2; ++k) give(e, 300 + k, bad2, k);  // cell 2: sectors 300, 301, 400
  give(e, 400, bad2, 2);
  while (auto job = e.next_unit_job()) {
    const auto& bytes = job->unit == 1 ? bad1 : bad2;
    e.finish_unit_job(*job, bytes.data(), 0);
  }
  const geom::Lbn l[2] = {150, 231};  // free space; a sector of cell 3
  const int res[2] = {EIO, EIO};
  std::vector<std::byte> junk(1024);
  e.deliver(l, junk.data(), res, ReadPath::IdleTime);
  REQUIRE(t.found.size() == 4);
  CHECK(e.status()["errors_resolved"] == 0);

  auto jobs = e.recheck_jobs();
  REQUIRE(jobs.size() == 4);
  // Cell 3's unreadable sector is read again with its whole unit.
  std::map<geom::Lbn, ScrubEngine::RecheckJob> by_lbn;
  for (const auto& j : jobs) by_lbn[t.found[j.finding].lbn] = j;
  REQUIRE(by_lbn.count(231));
  REQUIRE(by_lbn[231].runs.size() == 1);
  CHECK(by_lbn[231].runs[0].lbn == 230);
  CHECK(by_lbn[231].runs[0].sectors == 3);
  REQUIRE(by_lbn[300].runs.size() == 2);  // cell 2 lies in two pieces
  // Cell 1 repaired; cell 2 still bad; cell 3 reads now but is not its
  // checksum's bytes; the free sector still does not read.
  const auto good1 = cell_bytes(1), good3 = cell_bytes(3);
  e.finish_recheck(by_lbn[210], good1.data(), 0);
  e.finish_recheck(by_lbn[300], bad2.data(), 0);
  e.finish_recheck(by_lbn[231], cell_bytes(50).data(), 0);
  e.finish_recheck(by_lbn[150], junk.data(), EIO);
  auto st = e.status();
  CHECK(st["errors"] == 4);
  CHECK(st["errors_resolved"] == 1);
  std::map<geom::Lbn, nlohmann::json> listed;
  for (const auto& x : st["error_list"]) listed[x["lbn"].get<geom::Lbn>()] = x;
  CHECK_THAT(listed[210].value("resolved", ""), Catch::Contains("cell 1 of /t/a") && Catch::Contains("repaired"));
  for (geom::Lbn open : {300, 231, 150}) CHECK_FALSE(listed[open].contains("resolved"));
  // Resolved once: a second pass neither asks for it nor counts it again.
  e.finish_recheck(by_lbn[210], good1.data(), 0);
  CHECK(e.status()["errors_resolved"] == 1);
  jobs = e.recheck_jobs();
  CHECK(jobs.size() == 3);
  // Cell 3 reads whole now; the free sector reads; and the array moved: the
  // bad cell 2's sectors no longer hold it (decided without a read).
  e.finish_recheck(by_lbn[231], good3.data(), 0);
  e.finish_recheck(by_lbn[150], junk.data(), 0);
  t.md->moved = true;
  jobs = e.recheck_jobs();
  REQUIRE(jobs.size() == 1);
  CHECK(jobs[0].runs.empty());
  e.finish_recheck(jobs[0], nullptr, 0);
  st = e.status();
  CHECK(st["errors_resolved"] == 4);
  for (const auto& x : st["error_list"]) CHECK(x.contains("resolved"));
  listed.clear();
  for (const auto& x : st["error_list"]) listed[x["lbn"].get<geom::Lbn>()] = x;
  CHECK_THAT(listed[300]["resolved"].get<std::string>(), Catch::Contains("moved or rewritten"));
  CHECK(listed[150]["resolved"] == "reads now");
  CHECK(e.recheck_jobs().empty());
}

TEST_CASE("incomplete cells past the memory cap wait for the completion pass", "[scrub]") {
  ScrubOptions opt;
  opt.partial_bytes = 2 * 3 * 512;  // two incomplete cells at most
  Toy t = toy_engine(opt);
  ScrubEngine& e = *t.engine;
  std::vector<std::vector<std::byte>> cells;
  for (int c = 0; c < 4; ++c) cells.push_back(cell_bytes(c));
  give(e, 200, cells[0], 0);
  give(e, 210, cells[1], 0);
  give(e, 230, cells[3], 0);  // the third: cell 0 (the oldest) goes
  auto st = e.status();
  CHECK(st["cells_evicted"] == 1);
  CHECK(st["cells_pending"] == 1);
  CHECK(st["cells_gathering"] == 2);
  CHECK_FALSE(e.next_unit_job());  // the completion pass waits for full coverage
  // Everything else covered, by the foreground and free reads.
  e.foreground_read(0, 200);
  e.foreground_read(201, 9);
  e.foreground_read(211, 19);
  e.foreground_read(231, 769);
  CHECK(e.coverage_complete());
  CHECK_FALSE(e.complete());
  // Cell 0 (evicted), 1 and 3 (incomplete) are read whole; cell 2 never was touched but is covered by the foreground.
  std::set<std::uint64_t> units;
  while (auto job = e.next_unit_job()) {
    units.insert(job->unit);
    CHECK_FALSE(job->confirm);
    e.finish_unit_job(*job, cells[job->unit].data(), 0);
  }
  CHECK(units == std::set<std::uint64_t>{0, 1, 3});
  st = e.status();
  CHECK(st["verified_by"]["completion"] == 3);
  CHECK(st["progress"] == 1.0);
  CHECK(e.complete());
  CHECK(t.found.empty());
}

TEST_CASE("the engine over a whole volume verifies everything and names one flipped byte", "[scrub]") {
  ArraySchema s = make_schema({32, 32, 32}, "float64", "multimap");  // 4 KiB cells: 8 sectors
  auto v = testing::scrub_volume(s, [](std::size_t i) { return double(i) * 1.25 + 1; }, 20000, 'y');
  MemoryDevice& raw = *v.dev;
  Mount& m = v.m;
  auto& a = v.a;
  const Ino fino = v.fino;
  std::string msg;

  auto run = [&](std::vector<ScrubFinding>* found) {
    auto engine = std::make_unique<ScrubEngine>(OwnerMap::from_volume(*m.vol), store_metadata(m.vol->store()),
                                                ScrubOptions{}, [found](const ScrubFinding& f) { found->push_back(f); });
    scrub_all(*engine, *m.io);
    CHECK(engine->complete());
    return engine->status();
  };
  std::vector<ScrubFinding> found;
  auto st = run(&found);
  CHECK(found.empty());
  CHECK(st["progress"] == 1.0);
  CHECK(st["cells_verified"] == 32 * 32 * 32 * 8 / 4096 + 5 + 2);  // cells, blocks, superblocks
  CHECK(st["verified_by"]["idle_time"] == st["cells_verified"]);

  // A byte of element (3, 4, 5) flipped behind the volume's back.
  std::string where;
  REQUIRE(a->lbn_text(std::vector<std::uint64_t>{3, 4, 5}, &where, &msg) == 0);
  std::uint64_t lbn = 0, offset = 0;
  REQUIRE(std::sscanf(where.c_str(), "%lu %lu", &lbn, &offset) == 2);
  raw.bytes()[lbn * 512 + offset] ^= std::byte{0x40};
  // And a byte of the file's second block.
  geom::Lbn file_sector_9 = 0;  // in the file's second block
  std::uint64_t before = 0;
  for (const auto& e : m.md().extents(fino)) {
    if (9 < before + e.sectors) {
      file_sector_9 = e.start + (9 - before);
      break;
    }
    before += e.sectors;
  }
  REQUIRE(file_sector_9 != 0);
  raw.bytes()[file_sector_9 * 512 + 3] ^= std::byte{1};
  found.clear();
  st = run(&found);
  REQUIRE(found.size() == 2);
  std::map<std::string, ScrubFinding> by_path;
  for (const auto& f : found) by_path[f.path] = f;
  REQUIRE(by_path.count("/a"));
  CHECK(by_path["/a"].what.find("failed its checksum") != std::string::npos);
  bool names_it = false;
  for (const auto& r : by_path["/a"].runs) names_it |= r.lbn <= lbn && lbn < r.lbn + r.sectors;
  CHECK(names_it);
  REQUIRE(by_path.count("/f"));
  CHECK(by_path["/f"].what == "block 1 of /f failed its checksum");
  CHECK(st["errors"] == 2);
}

namespace {
// The recheck as ScrubRunner::recheck_findings does it, through `io`.
void recheck_all(ScrubEngine& e, SectorIo& io) {
  for (const auto& job : e.recheck_jobs()) {
    std::uint64_t sectors = 0;
    for (const auto& r : job.runs) sectors += r.sectors;
    AlignedBuffer buf(std::max<std::uint64_t>(sectors, 1) * io.sector_size());
    std::vector<SectorRun> runs;
    std::byte* p = buf.data();
    for (const auto& r : job.runs) {
      runs.push_back({r.lbn, r.sectors, p});
      p += r.sectors * io.sector_size();
    }
    e.finish_recheck(job, buf.data(), runs.empty() ? 0 : io.read_background(runs));
  }
}
}  // namespace

// Over a real volume (the store's checksums and extent records): a cell
// found bad and then mended in place is resolved by the recheck, a file block
// still bad stays open until its file is truncated (its owner moved).
TEST_CASE("the recheck over a whole volume resolves a mended cell, and a bad block only once its file moved",
          "[scrub]") {
  ArraySchema s = make_schema({32, 32, 32}, "float64", "multimap");
  auto v = testing::scrub_volume(s, [](std::size_t i) { return double(i) * 0.5 - 3; }, 20000, 'z');
  MemoryDevice& raw = *v.dev;
  Mount& m = v.m;
  std::string msg, where;
  REQUIRE(v.a->lbn_text(std::vector<std::uint64_t>{7, 30, 2}, &where, &msg) == 0);
  std::uint64_t lbn = 0, offset = 0;
  REQUIRE(std::sscanf(where.c_str(), "%lu %lu", &lbn, &offset) == 2);
  raw.bytes()[lbn * 512 + offset] ^= std::byte{0x08};
  geom::Lbn file_first = m.md().extents(v.fino).at(0).start;
  raw.bytes()[file_first * 512 + 7] ^= std::byte{0x01};

  std::vector<ScrubFinding> found;
  ScrubEngine e(OwnerMap::from_volume(*m.vol), store_metadata(m.vol->store()), ScrubOptions{},
                [&found](const ScrubFinding& f) { found.push_back(f); });
  scrub_all(e, *m.io);
  REQUIRE(found.size() == 2);
  // Nothing mended yet: the recheck reads both again and leaves them open.
  recheck_all(e, *m.io);
  CHECK(e.status()["errors_resolved"] == 0);
  // The cell's bytes put back in place, as a repair from a copy does.
  raw.bytes()[lbn * 512 + offset] ^= std::byte{0x08};
  recheck_all(e, *m.io);
  auto st = e.status();
  CHECK(st["errors_resolved"] == 1);
  for (const auto& f : st["error_list"]) {
    INFO(f.dump());
    if (f["path"] == "/a") CHECK_THAT(f.value("resolved", ""), Catch::Contains("matches its checksum now"));
    else CHECK_FALSE(f.contains("resolved"));
  }
  // The file truncated to nothing (its extents change): the bad sectors no
  // longer hold it, decided without a read.
  REQUIRE(v.file->truncate(0) == 0);
  REQUIRE(v.file->commit() == 0);
  auto jobs = e.recheck_jobs();
  REQUIRE(jobs.size() == 1);
  CHECK(jobs[0].runs.empty());
  recheck_all(e, *m.io);
  st = e.status();
  CHECK(st["errors_resolved"] == 2);
  for (const auto& f : st["error_list"])
    if (f["path"] == "/f") CHECK_THAT(f.value("resolved", ""), Catch::Contains("moved or rewritten"));
}
