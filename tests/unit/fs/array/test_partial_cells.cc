// Partial-cell reads (plans chosen by cost): which checksum
// blocks of a cell hold a selection (layouts/cell_blocks.h) against brute
// force; plans that read only those blocks, chosen when the volume's model
// serves them faster than whole cells (layouts/io_plan.h); and an array on a
// flash volume whose views read so, verify block by block, and equal the
// byte model, with damage outside the blocks read left unseen and damage
// inside them an EIO.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "fs/array/array_file.h"
#include "fs/meta/cell_checksums.h"
#include "geometry/load.h"
#include "layouts/cell_blocks.h"
#include "layouts/io_plan.h"
#include "layouts/layout.h"
#include "tests/unit/support/array_test_support.h"
#include "tests/unit/support/array_view_support.h"
#include "tests/unit/support/fs_test_support.h"

using namespace mmfs;
using namespace mmfs::layouts;

namespace {

using fs::testing::RefDevice;
using namespace fs::testing::arrays;

// The built-in ssd profile's service model on a small device.
std::unique_ptr<geom::Geometry> small_ssd(std::uint64_t sectors = 4096) {
  return geom::load_geometry(nlohmann::json{{"kind", "flash"},        {"sector_size", 4096},
                                            {"capacity_sectors", sectors}, {"track_sectors", 32},
                                            {"queues", 8},            {"latency_ms", 0.08},
                                            {"bandwidth_mb_s", 2000.0}, {"depth", 128},
                                            {"name", "small-ssd"}});
}

// Every selected element of cell `cc`, its bytes' blocks marked.
BlockMask brute_mask(const CellGrid& g, const Selection& sel, std::span<const std::uint64_t> cc,
                     std::uint64_t block_bytes, std::uint32_t per_cell) {
  BlockMask m;
  m.words.assign((per_cell + 63) / 64, 0);
  const std::size_t n = g.dims();
  std::vector<std::uint64_t> local(n, 0);
  for (;;) {
    bool selected = true;
    std::uint64_t offset = 0;
    for (std::size_t d = 0; d < n; ++d) {
      const std::uint64_t x = cc[d] * g.cell()[d] + local[d];
      const DimRange& r = sel.dims()[d];
      selected = selected && x < g.shape()[d] && x >= r.start && x < r.stop && (x - r.start) % r.step == 0;
      offset = offset * g.cell()[d] + local[d];
    }
    if (selected)
      for (std::uint64_t byte = offset * g.itemsize(); byte < (offset + 1) * g.itemsize(); ++byte)
        m.set(std::uint32_t(std::min<std::uint64_t>(byte / block_bytes, per_cell - 1)));
    std::size_t d = n;
    for (;;) {
      if (d == 0) return m;
      --d;
      if (++local[d] < g.cell()[d]) break;
      local[d] = 0;
    }
  }
}

DimRange random_range(std::mt19937_64& rng, std::uint64_t extent) {
  const std::uint64_t a = rng() % extent;
  if (rng() % 4 == 0) return DimRange{a, a + 1, 1, true};
  const std::uint64_t b = a + 1 + rng() % (extent - a);
  return DimRange{a, b, 1 + rng() % 3, false};
}

// The LBNs of the sectors of `mask`'s blocks of cell `cc`.
void needed_sectors(const Layout& layout, std::span<const std::uint64_t> cc, const BlockMask& mask,
                    std::uint32_t block_sectors, std::set<geom::Lbn>* out) {
  Run runs[2];
  const std::size_t k = layout.cell_runs(cc, runs);
  std::vector<geom::Lbn> sectors;
  for (std::size_t i = 0; i < k; ++i)
    for (std::uint32_t s = 0; s < runs[i].sectors; ++s) sectors.push_back(runs[i].lbn + s);
  for (std::uint32_t b = 0; b * block_sectors < sectors.size(); ++b)
    if (mask.has(b))
      for (std::uint32_t s = 0; s < block_sectors; ++s) out->insert(sectors[b * block_sectors + s]);
}

}  // namespace

TEST_CASE("cell blocks: the blocks of a cell holding a selection equal brute force", "[partial_cells]") {
  std::mt19937_64 rng(1818);
  for (int trial = 0; trial < 300; ++trial) {
    const std::size_t n = 1 + rng() % 4;
    std::vector<std::uint64_t> shape(n), cell(n);
    for (std::size_t d = 0; d < n; ++d) {
      shape[d] = 1 + rng() % 14;
      cell[d] = 1 + rng() % shape[d];
    }
    const std::uint32_t itemsize = 1u << (rng() % 4);
    std::vector<std::uint32_t> order = CellGrid::default_order(n);
    CellGrid g(shape, itemsize, cell, order);
    const std::uint64_t brick = g.cell_bytes();
    const std::uint64_t want_blocks = 1 + rng() % std::min<std::uint64_t>(brick, 70);
    const std::uint64_t block = (brick + want_blocks - 1) / want_blocks;
    const std::uint32_t per_cell = std::uint32_t((brick + block - 1) / block);
    std::vector<DimRange> dims;
    for (std::size_t d = 0; d < n; ++d) dims.push_back(random_range(rng, shape[d]));
    Selection sel(dims);
    INFO("trial " << trial << " brick " << brick << " block " << block << " per cell " << per_cell);
    CellBlocks blocks(g, sel, block, per_cell);
    std::vector<std::vector<std::uint64_t>> touched(n);
    for (std::size_t d = 0; d < n; ++d) touched[d] = cells_touched(dims[d], cell[d]);
    std::vector<std::size_t> idx(n, 0);
    std::vector<std::uint64_t> cc(n);
    for (;;) {
      for (std::size_t d = 0; d < n; ++d) cc[d] = touched[d][idx[d]];
      const BlockMask& got = blocks.of(cc);
      const BlockMask want = brute_mask(g, sel, cc, block, per_cell);
      REQUIRE(got.words == want.words);
      REQUIRE(got.count == want.count);
      REQUIRE(blocks.full(got) == (want.count == per_cell));
      std::size_t d = n;
      bool done = true;
      while (d-- > 0) {
        if (++idx[d] < touched[d].size()) {
          done = false;
          break;
        }
        idx[d] = 0;
      }
      if (done) break;
    }
  }
}

TEST_CASE("io plan: a partial-cell plan reads exactly the blocks holding the selection, when the model says so",
          "[partial_cells]") {
  auto ssd = small_ssd();
  auto disk = geom::load_geometry("atlas10k3");
  std::mt19937_64 rng(77);
  for (const geom::Geometry* geometry : {ssd.get(), disk.get()}) {
    const std::uint32_t ss = geometry->sector_size();
    const std::uint32_t block_sectors = fs::checksum_block_bytes(ss) / ss;
    for (const char* name : {"naive", "zorder", "hilbert", "multimap"}) {
      INFO(geometry->name() << " " << name);
      CellGrid g({64, 64, 16}, 8, {16, 16, 4}, {2, 1, 0});  // 8 KiB cells: two 4 KiB blocks
      auto layout = make_layout(name, *geometry, g);
      layout->place(allocate_linear(*geometry, layout->space(), 0));
      REQUIRE(layout->sectors_per_cell() == 2 * block_sectors);
      std::vector<Selection> views = {Selection::slice(g.shape(), 0, rng() % 64),
                                      Selection::slice(g.shape(), 1, rng() % 64),
                                      Selection::slice(g.shape(), 2, rng() % 16)};
      for (int k = 0; k < 8; ++k) {
        std::vector<DimRange> dims;
        for (std::size_t d = 0; d < 3; ++d) dims.push_back(random_range(rng, g.shape()[d]));
        views.push_back(Selection(dims));
      }
      std::size_t partial_plans = 0;
      for (std::size_t v = 0; v < views.size(); ++v) {
        INFO("view " << v);
        const Selection& sel = views[v];
        PlanOptions options;
        options.block_sectors = block_sectors;
        IoPlan plan = plan_selection(*layout, sel, options);
        IoPlan whole = plan_selection(*layout, sel);
        model_plan(whole, *geometry);
        // The blocks the view needs, cell by cell.
        CellBlocks blocks(g, sel, std::uint64_t(block_sectors) * ss, 2);
        std::set<geom::Lbn> needed;
        bool cut = false;
        std::vector<std::vector<std::uint64_t>> touched(3);
        for (std::size_t d = 0; d < 3; ++d) touched[d] = cells_touched(sel.dims()[d], g.cell()[d]);
        for (auto a : touched[0])
          for (auto b : touched[1])
            for (auto c : touched[2]) {
              const std::vector<std::uint64_t> cc = {a, b, c};
              const BlockMask& m = blocks.of(cc);
              cut = cut || !blocks.full(m);
              needed_sectors(*layout, cc, m, block_sectors, &needed);
            }
        std::set<geom::Lbn> read;
        for (const IoBatch& b : plan.batches)
          for (const geom::Request& r : b.requests)
            for (std::uint32_t s = 0; s < r.sectors; ++s) read.insert(r.lbn + s);
        for (geom::Lbn l : needed) REQUIRE(read.count(l) == 1);  // nothing needed is left out
        CHECK((plan.whole_cells_ms >= 0) == cut);  // a choice only when a cell is cut
        if (plan.partial_cells) {
          ++partial_plans;
          CHECK(plan.modeled_ms < whole.modeled_ms);  // chosen because the model serves it faster
          CHECK(plan.whole_cells_ms == Approx(whole.modeled_ms));
          CHECK(plan.sectors < whole.sectors);
          // Every request starts and ends on a needed sector (gaps only between them).
          for (const IoBatch& b : plan.batches)
            for (const geom::Request& r : b.requests) {
              CHECK(needed.count(r.lbn) == 1);
              CHECK(needed.count(r.lbn + r.sectors - 1) == 1);
            }
        } else {
          CHECK(plan.sectors == whole.sectors);
          CHECK(plan.requests == whole.requests);
        }
      }
      // On flash a slice along dimension 0 needs one block of each cell and
      // the model takes it; a slice along the last needs both.
      if (geometry == ssd.get()) {
        PlanOptions options;
        options.block_sectors = block_sectors;
        CHECK(plan_selection(*layout, views[0], options).partial_cells);
        CHECK_FALSE(plan_selection(*layout, views[2], options).partial_cells);
        CHECK(partial_plans >= 1);
      }
    }
  }
}

TEST_CASE("array file: views on flash read only the blocks they need, verified block by block",
          "[partial_cells][array_file]") {
  auto g = small_ssd();
  std::mt19937_64 rng(4242);
  fs::MemoryDevice dev(16ull << 20, 512);
  {
    auto f = formatted(*g, 16ull << 20);
    dev.bytes() = f->bytes();
  }
  fs::ArraySchema s = make_schema({64, 64, 16}, "float64", "hilbert");
  s.cell = {16, 16, 4};
  Mount m = mount(std::unique_ptr<fs::BlockDevice>(new RefDevice(dev)));
  auto a = create_array(m, "part", s);
  Bytes model = random_bytes(rng, a->size());
  REQUIRE(write_file(*a, 0, model) == 0);
  std::string msg;
  REQUIRE(a->flush(true, &msg) == 0);
  REQUIRE(stored_schema(m, a->ino())->checksum_block == 4096);

  // The plan of a slice along dimension 0 reads one 4 KiB block of each of
  // its 16 cells, and the gaps between them the model finds cheaper to read
  // than another request; never the whole cells' 32 blocks.
  nlohmann::json plan;
  REQUIRE(a->plan(resolve({"slice", "0", "5"}, s), &plan, &msg) == 0);
  CHECK(plan.at("cell_reads") == "partial");
  CHECK(plan.at("bytes_read").get<std::uint64_t>() >= 16 * 4096);
  CHECK(plan.at("bytes_read").get<std::uint64_t>() < 32 * 4096);
  CHECK(plan.at("whole_cells_modeled_ms").get<double>() > plan.at("modeled_ms").get<double>());
  check_views(*a, s, model, rng);

  // Damage block 1 of cell (0, 0, 0): element (8, 0, 0) is its first.
  std::string where;
  REQUIRE(a->lbn_text(std::vector<std::uint64_t>{8, 0, 0}, &where, &msg) == 0);
  std::uint64_t lbn = 0, offset = 0;
  REQUIRE(std::sscanf(where.c_str(), "%lu %lu", &lbn, &offset) == 2);
  CHECK(offset == 0);
  const std::uint64_t byte = lbn * 4096 + offset;
  const std::uint64_t e = (8 * 64 + 0) * 16 + 0;
  REQUIRE(std::memcmp(dev.bytes().data() + byte, model.data() + e * 8, 8) == 0);
  dev.bytes()[byte + 5] ^= std::byte{0x01};
  auto b = open_stored(m, a->ino());  // nothing cached
  auto slice0 = [&](std::uint64_t i) {
    std::vector<Sel> sel = {{true, i, i + 1, 1}, {false, 0, 64, 1}, {false, 0, 16, 1}};
    return extract(model, s.shape, 8, sel);
  };
  // Slices 0..7 read block 0 of the cell only: the damage is not theirs.
  CHECK(bytes_diff(read_view_bytes(*b, resolve({"slice", "0", "3"}, s), 0, 64 * 16 * 8), slice0(3)) == "");
  // Slice 8 reads the damaged block; slices along the other dimensions read the whole cell.
  Bytes out(64 * 16 * 8);
  std::size_t got = 0;
  CHECK(b->read_view(resolve({"slice", "0", "8"}, s), 0, out.size(), reinterpret_cast<std::byte*>(out.data()), &got,
                     &msg) == EIO);
  CHECK_THAT(msg, Catch::Contains("checksum"));
  CHECK(b->read_view(resolve({"slice", "2", "0"}, s), 0, 64 * 64 * 8, reinterpret_cast<std::byte*>(out.data()),
                     &got, &msg) == EIO);
  Bytes all(model.size());
  CHECK(b->read(0, all.size(), reinterpret_cast<std::byte*>(all.data()), &got, &msg) == EIO);
  // Repaired: every view is whole again.
  dev.bytes()[byte + 5] ^= std::byte{0x01};
  auto c = open_stored(m, a->ino());
  check_views(*c, s, model, rng);
}
