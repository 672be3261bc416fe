// The benchmark workloads (docs/reference.md §8): beams along every dimension
// at random positions, the middle slice along every dimension, p%-length
// cubes at random corners, the full scan and PLoD reads. Each query is
// spelled as the view a user would read below `A@` and turned into a
// selection by the daemon's own path resolver (fs::resolve_view), so that
// `A@/plan/VIEW` on a mounted array plans exactly the same selection. Every
// target gets the same queries; bench/mmfs_bench_real.py uses the same
// workload ids for the real clock.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "layouts/selection.h"

namespace mmfs::bench {

struct Workload {
  std::string id;     // "beam0", "slice2", "cube5", "full", "plod2-full", "plod2-slice0"
  std::string kind;   // "beam" "slice" "cube" "full" "plod"
  std::optional<std::uint32_t> dim;   // beam/slice dimension (plod: the slice's)
  std::optional<double> p;            // cube: percent of each edge
  std::optional<std::uint32_t> plod;  // bytes kept per element
  bool random = false;                // one query per run at random positions
  std::vector<std::string> views;     // below A@, one per query: "slice/0/512", "box/3,:,7"
  std::vector<layouts::Selection> selections;  // the views resolved
};

struct WorkloadOptions {
  std::vector<std::uint64_t> shape;
  std::uint32_t itemsize = 8;
  unsigned runs = 15;                 // random beams per dimension, random cubes per p
  std::uint64_t seed = 2005;
  std::vector<double> cubes = {1, 5, 10};
  std::uint32_t plod = 2;             // bytes kept by the PLoD reads; 0 = none
};

// The MultiMap paper's p%-length cube (§5.2: "an N-dimensional cube with an
// edge length equal to the p% of the dataset's edge length"):
// edge_d = max(1, round(p/100 * S_d)).
std::vector<std::uint64_t> cube_edges(const std::vector<std::uint64_t>& shape, double p);
// A@/box/SEL of a box of `edges` whose corner is uniform among the positions where it fits.
std::string random_cube_view(const std::vector<std::uint64_t>& shape, const std::vector<std::uint64_t>& edges,
                             std::mt19937_64& rng);
// A@/box/SEL of a beam along `dim` through a uniform random point.
std::string random_beam_view(const std::vector<std::uint64_t>& shape, std::uint32_t dim, std::mt19937_64& rng);
// The selection the daemon reads for a view below A@ (throws std::invalid_argument with
// the resolver's message for a bad view).
layouts::Selection resolve_selection(const std::string& view, const std::vector<std::uint64_t>& shape,
                                     std::uint32_t itemsize);

// Throws std::invalid_argument for options that give no valid workload (p out of (0, 100], plod > itemsize).
std::vector<Workload> make_workloads(const WorkloadOptions& options);

}  // namespace mmfs::bench
