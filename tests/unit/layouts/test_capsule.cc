// The capsule layout (MEMS paper §5.2.2-§5.2.4) against the paper's examples
// and brute force over the device's equivalence classes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>

#include "geometry/load.h"
#include "geometry/memstore.h"
#include "geometry/mems_service.h"
#include "layouts/capsule.h"
#include "layouts/io_plan.h"
#include "layouts/selection.h"
#include "tests/unit/support/mems_test_support.h"

using namespace mmfs;
using namespace mmfs::layouts;

namespace {

using geom::testing::g2;
using geom::testing::toy;

bool in(const std::vector<geom::Lbn>& sorted, geom::Lbn l) { return std::binary_search(sorted.begin(), sorted.end(), l); }

// The smallest number of sectors holding n records of `size` bytes evenly, by
// trying every k (the oracle of blocks_for).
std::uint64_t brute_blocks(std::uint64_t n, std::uint32_t size, std::uint32_t sector) {
  for (std::uint64_t k = 1; k <= n; ++k)
    if (n % k == 0 && (n / k) * size <= sector) return k;
  return 0;
}

// Checks the capsule of `slot` in the band at `band` against the paper's rules
// and returns whether it is split.
bool check_capsule(const geom::MemStore& g, geom::Lbn band, std::uint32_t c, std::uint64_t slot) {
  std::vector<std::uint32_t> splits;
  std::vector<geom::Lbn> lbns = capsule_alloc(g, band, c, slot, &splits);
  REQUIRE(lbns.size() == c);
  const std::uint64_t T = g.sectors_per_track();
  std::vector<geom::Lbn> cls = g.equivalent(lbns[0]);
  std::size_t seg = 0;
  for (std::uint32_t b = 0; b < c; ++b) {
    // Block b lies on the band's track b.
    CHECK(g.track_of(lbns[b]) == band / T + b);
    if (seg < splits.size() && splits[seg] == b) {
      // A new class begins here: the block is outside the previous class and
      // at the slot's offset of its track.
      CHECK_FALSE(in(cls, lbns[b]));
      CHECK(lbns[b] == band + std::uint64_t(b) * T + slot);
      cls = g.equivalent(lbns[b]);
      ++seg;
    }
    CHECK(in(cls, lbns[b]));
  }
  return !splits.empty();
}

}  // namespace

TEST_CASE("CapsuleResolve: the paper's capsules (Figure 6 and Table 5's table)", "[capsule]") {
  // Figure 6: attributes of 8 and 16 bytes on the G2 (p = 10): 64 records in three LBNs.
  std::vector<std::uint32_t> fig6{8, 16};
  CapsuleFormat f = capsule_resolve(fig6, 512, 10);
  CHECK(f.records == 64);
  CHECK(f.blocks == std::vector<std::uint32_t>{1, 2});
  CHECK(f.first == std::vector<std::uint32_t>{0, 1});
  CHECK(f.total == 3);
  // §5.2.6: 8, 32, 15 and 16 bytes. The paper packs 60 records into 9 sectors;
  // 64 records fit the same 9 sectors (a3's 15-byte records, 32 a sector), so
  // the rule that maximises record bytes per sector takes 64.
  std::vector<std::uint32_t> t5{8, 32, 15, 16};
  f = capsule_resolve(t5, 512, 10);
  CHECK(f.records == 64);
  CHECK(f.blocks == std::vector<std::uint32_t>{1, 4, 2, 2});
  CHECK(f.total == 9);
  CHECK(f.density(t5, 512) == Approx(64.0 * 71 / (9 * 512)));
  // More attributes than p: one sector each, as many records as the widest allows.
  std::vector<std::uint32_t> wide(12, 8);
  wide[3] = 100;
  f = capsule_resolve(wide, 512, 10);
  CHECK(f.total == 12);
  CHECK(f.records == 5);
  CHECK_THROWS_AS(capsule_resolve(std::vector<std::uint32_t>{8, 600}, 512, 10), std::invalid_argument);
  CHECK_THROWS_AS(capsule_resolve(std::vector<std::uint32_t>{}, 512, 10), std::invalid_argument);
}

TEST_CASE("CapsuleResolve is optimal against brute force on random tables", "[capsule]") {
  std::mt19937_64 rng(17);
  for (int round = 0; round < 300; ++round) {
    std::uint32_t p = 1 + std::uint32_t(rng() % 12);
    std::uint32_t sector = rng() % 2 ? 512 : 256;
    std::vector<std::uint32_t> sizes(1 + rng() % 5);
    for (auto& s : sizes) s = 1 + std::uint32_t(rng() % 64);
    CapsuleFormat f = capsule_resolve(sizes, sector, p);
    std::uint64_t sum = std::accumulate(sizes.begin(), sizes.end(), std::uint64_t(0));
    if (sizes.size() > p) {
      CHECK(f.total == sizes.size());
      continue;
    }
    // Valid: every attribute's records split evenly over its sectors.
    std::uint32_t total = 0;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      CHECK(f.first[i] == total);
      CHECK(f.records % f.blocks[i] == 0);
      CHECK(f.records / f.blocks[i] * sizes[i] <= sector);
      total += f.blocks[i];
    }
    CHECK(f.total == total);
    CHECK(total <= p);
    // Optimal: no capsule of at most p sectors stores more record bytes per sector.
    for (std::uint64_t n = 1; n * sum <= std::uint64_t(p) * sector; ++n) {
      std::uint64_t k = 0;
      for (std::uint32_t s : sizes) k += brute_blocks(n, s, sector);
      if (k > p) continue;
      INFO("sizes " << sizes.size() << " p " << p << " n " << n << " k " << k);
      CHECK(n * f.total <= f.records * k);
    }
  }
}

TEST_CASE("CapsuleAlloc: a capsule's blocks share an equivalence class, one block per band track", "[capsule]") {
  for (std::uint32_t M : {0u, 1u}) {
    geom::MemStore g(toy(M, 6));
    const std::uint64_t T = g.sectors_per_track();  // 9
    for (std::uint32_t c : {1u, 2u, 3u, 5u}) {
      for (std::uint64_t t0 = 0; t0 + c <= g.tracks(); ++t0) {
        const geom::Lbn band = t0 * T;
        std::uint64_t split = 0;
        // Over the band's slots, block b of the capsules covers track b once.
        std::vector<std::set<geom::Lbn>> covered(c);
        for (std::uint64_t s = 0; s < T; ++s) {
          split += check_capsule(g, band, c, s);
          std::vector<geom::Lbn> l = capsule_alloc(g, band, c, s);
          for (std::uint32_t b = 0; b < c; ++b) covered[b].insert(l[b]);
          // Block b of p consecutive capsules (one row of squares) is p sequential LBNs.
          if (s % g.Nx() != 0) {
            std::vector<geom::Lbn> prev = capsule_alloc(g, band, c, s - 1);
            for (std::uint32_t b = 0; b < c; ++b) CHECK(l[b] == prev[b] + 1);
          }
        }
        for (std::uint32_t b = 0; b < c; ++b) CHECK(covered[b].size() == T);
        // A band splits only where it leaves a cylinder micropositioning cannot reach.
        const std::uint64_t ny = g.Ny();
        const bool beyond_reach = (t0 + c - 1) / ny - t0 / ny > M;
        CHECK((split != 0) == beyond_reach);
        CHECK((split == 0 || split == T));
      }
    }
  }
}

TEST_CASE("CapsuleLayout places every cell where CapsuleAlloc says, on whole and split bands", "[capsule]") {
  for (std::uint32_t M : {0u, 1u}) {
    geom::MemStore g(toy(M, 9));
    const std::uint64_t T = g.sectors_per_track();
    // A matrix of 4 float64 columns: 64 records a cell, 4 attributes, capsules of 4 sectors.
    CellGrid grid({T * 64 * 5 + 7, 4}, 8, CapsuleLayout::default_cell(std::vector<std::uint64_t>{1000, 4}, 8, 512),
                  {1, 0});
    CapsuleLayout layout(g, grid);
    REQUIRE(layout.attributes() == 4);
    REQUIRE(layout.space().group_tracks == 4);
    REQUIRE(layout.bands() == 6);
    // Bands of 4 tracks; with Ny = 3 every band crosses into the next cylinder.
    std::vector<Extent> ext;
    for (std::uint64_t t : {0u, 4u, 8u, 13u, 17u, 21u}) ext.push_back({t * T, 4 * T});
    layout.place(ext);
    std::uint64_t split = 0;
    for (std::size_t i = 0; i < ext.size(); ++i) {
      const std::uint64_t t = ext[i].start / T;
      if ((t + 3) / 3 - t / 3 > M) split += std::min<std::uint64_t>(T, layout.capsules() - i * T);
    }
    CHECK(layout.split_capsules() == split);
    std::set<geom::Lbn> used;
    std::uint64_t cell[2];
    for (cell[0] = 0; cell[0] < grid.grid()[0]; ++cell[0]) {
      const std::uint64_t band = cell[0] / T, slot = cell[0] % T;
      std::vector<geom::Lbn> want = capsule_alloc(g, ext[band].start, 4, slot);
      for (cell[1] = 0; cell[1] < 4; ++cell[1]) {
        Run r[2];
        REQUIRE(layout.cell_runs(cell, r) == 1);
        CHECK(r[0].sectors == 1);
        CHECK(r[0].lbn == want[cell[1]]);
        CHECK(used.insert(r[0].lbn).second);
      }
    }
  }
}

TEST_CASE("Table attributes own their tracks of shared bands and never collide", "[capsule]") {
  geom::MemStore g(g2());
  const std::uint64_t T = g.sectors_per_track();
  std::vector<std::uint32_t> sizes{8, 32, 15, 16};
  CapsuleFormat f = capsule_resolve(sizes, 512, g.parallelism());
  const std::uint64_t records = 64 * T * 3 + 100;  // four bands, the last partial
  const std::uint64_t bands = (records + f.records - 1) / f.records / T + 1;
  std::set<geom::Lbn> used;
  std::vector<std::vector<geom::Lbn>> capsule_lbns;  // by capsule, the LBNs seen
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    CellGrid grid({records}, sizes[i], {f.records_per_block(i)}, {0});
    CapsuleLayout a(g, grid, CapsulePart{f.total, f.first[i], f.blocks[i]});
    REQUIRE(a.bands() == bands);
    std::vector<Extent> ext;
    // Bands on tracks 5, 14 (crosses into cylinder 1), 40, 60.
    for (std::uint64_t t : {5u, 14u, 40u, 60u})
      ext.push_back({(t + f.first[i]) * T, std::uint64_t(f.blocks[i]) * T});
    std::vector<Extent> whole;
    for (std::uint64_t t : {5u, 14u, 40u, 60u}) whole.push_back({t * T, std::uint64_t(f.total) * T});
    CHECK(band_part_extents(whole, T, a.part()) == ext);
    a.place(ext);
    std::uint64_t cell = 0;
    for (; cell < a.grid().grid()[0]; ++cell) {
      Run r[2];
      a.cell_runs(std::span<const std::uint64_t>(&cell, 1), r);
      CHECK(used.insert(r[0].lbn).second);
      std::uint64_t capsule;
      std::uint32_t block;
      a.locate(std::span<const std::uint64_t>(&cell, 1), &capsule, &block);
      CHECK(block == f.first[i] + cell % f.blocks[i]);
      const std::uint64_t band_start = ext[capsule / T].start - std::uint64_t(f.first[i]) * T;
      CHECK(r[0].lbn == capsule_alloc(g, band_start, f.total, capsule % T)[block]);
    }
  }
}

TEST_CASE("split_into_bands cuts joined bands apart", "[capsule]") {
  const std::vector<Extent> joined{{900, 30}, {2000, 10}};
  CHECK(split_into_bands(joined, 10) == std::vector<Extent>{{900, 10}, {910, 10}, {920, 10}, {2000, 10}});
  CHECK(split_into_bands(joined, 40) == std::vector<Extent>{{900, 30}, {2000, 10}});
  CHECK_THROWS_AS(split_into_bands(joined, 0), std::invalid_argument);
}

TEST_CASE("A capsule matrix reads a row in one parallel access and a column at full bandwidth", "[capsule]") {
  auto gp = geom::load_geometry("mems-g2");
  const auto& g = dynamic_cast<const geom::MemStore&>(*gp);
  const std::uint64_t T = g.sectors_per_track();
  // 8 float64 columns, 64 records a cell: capsules of 8 sectors (<= p = 10).
  const std::vector<std::uint64_t> shape{64 * T * 4, 8};
  CellGrid grid(shape, 8, CapsuleLayout::default_cell(shape, 8, 512), {1, 0});
  CapsuleLayout layout(g, grid);
  Lbn next = 0;
  layout.place(allocate_linear(g, layout.space(), 0, &next));
  // Bands of 8 tracks, one per 10-track cylinder (space() asks for the boundary): no capsule splits.
  CHECK(layout.space().boundary_tracks == 10);
  CHECK(layout.split_capsules() == 0);

  // Record 1000: the 8 sectors of its capsule, one pass of the sled.
  Selection row = Selection::slice(shape, 0, 1000);
  IoPlan r = plan_selection(layout, row);
  CHECK(r.sectors == 8);
  CHECK(r.batches.size() == 1);
  const double row_ms = model_plan(r, g);
  auto model = g.make_service_model();
  auto* mems = dynamic_cast<geom::MemsServiceModel*>(model.get());
  REQUIRE(mems != nullptr);
  // From an idle sled: the command, positioning and one row time, not eight.
  CHECK(row_ms < g.params().overhead_ms + mems->positioning_ms(r.batches[0].requests[0].lbn) +
                     1.5 * mems->row_time_ms());

  // Column 3: whole tracks, merged into one request per band.
  Selection col = Selection::slice(shape, 1, 3);
  IoPlan c = plan_selection(layout, col);
  CHECK(c.requests == layout.bands());
  CHECK(c.bytes_read == c.bytes_useful);
  // A column streams at p sectors per row time: about 1/8 of the whole matrix.
  Selection all = Selection::all(shape);
  IoPlan w = plan_selection(layout, all);
  const double col_ms = model_plan(c, g), all_ms = model_plan(w, g);
  CHECK(col_ms < all_ms / 6);
}

TEST_CASE("Capsule layout: bad geometry, cells and placements are refused", "[capsule]") {
  auto disk = geom::load_geometry("atlas10k3");
  CellGrid grid({1000, 4}, 8, {64, 1}, {1, 0});
  CHECK_THROWS_AS(CapsuleLayout(*disk, grid), std::invalid_argument);
  auto gp = geom::load_geometry("mems-g2");
  CHECK_THROWS_AS(CapsuleLayout(*gp, CellGrid({1000, 4}, 8, {65, 1}, {1, 0})), std::invalid_argument);
  CHECK_THROWS_AS(CapsuleLayout(*gp, grid, CapsulePart{3, 0, 1}), std::invalid_argument);  // 4 blocks > 3
  CapsuleLayout ok(*gp, grid);
  const std::uint64_t T = 270;
  CHECK_THROWS_AS(ok.place({{T + 1, 4 * T}}), std::invalid_argument);  // not at a track's start
  CHECK_THROWS_AS(ok.place({{T, 3 * T}}), std::invalid_argument);      // not the owned tracks
  CHECK_THROWS_AS(ok.place({}), std::invalid_argument);
  CHECK_NOTHROW(ok.place({{T, 4 * T}}));
}
