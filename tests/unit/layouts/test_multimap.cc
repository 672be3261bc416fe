// The MultiMap layout (layouts/multimap.h) against the paper's worked
// examples (§4.2, Figures 8-10), its basic-cube equations (Eq. 1-3), and the
// adjacency of neighbouring cells on the Atlas 10K III.
#include <catch2/catch.hpp>

#include <random>

#include "geometry/load.h"
#include "layouts/multimap.h"
#include "tests/unit/support/layout_test_support.h"

using namespace mmfs;
using namespace mmfs::layouts;
using namespace mmfs::layouts::testing;

TEST_CASE("MultiMap §4.2: the 2-D, 3-D and 4-D examples map to the LBNs of Figures 8-10") {
  auto g = toy();
  // Fig. 8: S = (8, 3): Dim_1 runs along first adjacent blocks.
  auto l2 = placed("multimap", *g, paper_grid({8, 3}));
  for_each_cell({8, 3}, [&](const auto& c) { CHECK(l2->cell_lbn(c) == c[0] + 8 * c[1]); });
  // Fig. 9: S = (8, 4, 3): Dim_2 along 4th adjacent blocks (LBN 32 is the 4th neighbour of 0).
  auto l3 = placed("multimap", *g, paper_grid({8, 4, 3}));
  CHECK(dynamic_cast<MultiMapLayout&>(*l3).basic_cube() == std::vector<std::uint64_t>{8, 4, 3});
  for_each_cell({8, 4, 3}, [&](const auto& c) { CHECK(l3->cell_lbn(c) == c[0] + 8 * c[1] + 32 * c[2]); });
  CHECK(l3->cell_lbn(std::vector<std::uint64_t>{0, 0, 1}) == 32);
  CHECK(l3->cell_lbn(std::vector<std::uint64_t>{0, 0, 2}) == 64);
  // Fig. 10: S = (8, 2, 2, 3): Dim_3 along (S_1 x S_2)-th adjacent blocks.
  auto l4 = placed("multimap", *g, paper_grid({8, 2, 2, 3}));
  for_each_cell({8, 2, 2, 3},
                [&](const auto& c) { CHECK(l4->cell_lbn(c) == c[0] + 8 * c[1] + 16 * c[2] + 32 * c[3]); });
}

TEST_CASE("MultiMap: basic cubes obey Eq. 1-3 and user cubes are validated") {
  auto g = geom::load_geometry("atlas10k3");
  // The paper's 3-D chunk: 259^3 cells on D = 128.
  auto k = MultiMapLayout::choose_basic_cube(paper_grid({259, 259, 259}), 1, 686, 128, 1u << 30);
  CHECK(k[0] == 259);  // Eq. 1, two cubes per track
  CHECK(k[1] <= 128);  // Eq. 3
  CHECK(k[2] == 259);  // Eq. 2
  // Two cubes share a track, so an even cube count wastes nothing: 4 cubes of
  // 65 (1 cell of padding) beat 3 of 87 (an empty packing slot) and 7 of 37.
  CHECK(k[1] == 65);
  auto k4 = MultiMapLayout::choose_basic_cube(paper_grid({530, 32, 32, 32}), 1, 686, 128, 1u << 30);
  CHECK(k4 == std::vector<std::uint64_t>{530, 16, 8, 32});

  CHECK_THROWS_WITH(MultiMapLayout(*g, paper_grid({1000, 10, 10}), {687, 10, 10}), Catch::Contains("Eq. 1"));
  CHECK_THROWS_WITH(MultiMapLayout(*g, paper_grid({100, 200, 10}), {100, 129, 10}), Catch::Contains("Eq. 3"));
  CHECK_THROWS_WITH(MultiMapLayout(*g, paper_grid({100, 20, 10}), {100, 21, 10}), Catch::Contains("1..20"));
  CHECK_THROWS_WITH(MultiMapLayout(*g, paper_grid({100, 20, 10}), {100, 20}), Catch::Contains("dimensions"));
  // A device with a single track has no adjacent blocks at all.
  auto one_track = geom::load_geometry(nlohmann::json{{"kind", "disk"}, {"cylinders", 1}, {"sectors_per_track", 64},
                                                      {"rpm", 10000}, {"settle_ms", 1.0}, {"settle_cylinders", 1}});
  REQUIRE(one_track->depth() == 0);
  CHECK_THROWS_WITH(MultiMapLayout(*one_track, paper_grid({8, 2})), Catch::Contains("D = 0"));
}

TEST_CASE("MultiMap on the Atlas: neighbours in every non-primary dimension are adjacent blocks") {
  auto g = geom::load_geometry("atlas10k3");
  auto layout = placed("multimap", *g, paper_grid({259, 100, 40}), {}, 686 * 8 * 100);
  const auto& mm = dynamic_cast<MultiMapLayout&>(*layout);
  auto K = mm.basic_cube();
  std::mt19937_64 rng(3);
  for (int i = 0; i < 2000; ++i) {
    std::vector<std::uint64_t> c = {rng() % 259, rng() % 100, rng() % 40};
    Lbn here = layout->cell_lbn(c);
    // Dim_0: the next sector on the track (within the cube's row).
    if (c[0] % K[0] + 1 < K[0]) {
      auto n = c;
      ++n[0];
      auto b = g->track_boundaries(here);
      CHECK(layout->cell_lbn(n) == (here == b.high ? b.low : here + 1));
    }
    std::uint64_t step = 1;
    for (std::size_t d = 1; d < 3; ++d) {
      if (c[d] % K[d] + 1 < K[d] && c[d] + 1 < (d == 1 ? 100u : 40u)) {
        auto n = c;
        ++n[d];
        CHECK(layout->cell_lbn(n) == g->adjacent(here, std::uint32_t(step)));
      }
      step *= K[d];
    }
  }
}
