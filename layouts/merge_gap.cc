#include "layouts/merge_gap.h"

#include <algorithm>
#include <vector>

#include "geometry/service_time.h"

namespace mmfs::layouts {

namespace {

// `depth` requests of `sectors` each, `gap` apart from `start`; joined: each
// pair read as one request through its gap.
double serve_pattern(const geom::Geometry& g, geom::Lbn start, std::uint32_t sectors, std::uint32_t gap,
                     std::uint32_t depth, bool joined) {
  auto model = g.make_service_model();
  model->reset();
  model->place_at(start);
  std::vector<geom::Request> batch;
  geom::Lbn at = start;
  for (std::uint32_t i = 0; i < depth; i += 2) {
    if (joined) {
      batch.push_back({at, 2 * sectors + gap});
    } else {
      batch.push_back({at, sectors});
      batch.push_back({at + sectors + gap, sectors});
    }
    at += 2 * (sectors + gap);
  }
  return model->serve(batch);
}

}  // namespace

std::uint32_t merge_gap_sectors(const geom::Geometry& g, std::uint32_t request_sectors, std::uint32_t depth,
                                std::uint32_t limit_sectors) {
  const std::uint32_t s = std::max<std::uint32_t>(1, request_sectors);
  const std::uint32_t pairs = std::max<std::uint32_t>(2, depth + depth % 2);
  const geom::Lbn cap = g.capacity_sectors();
  std::uint32_t best = 0;
  for (std::uint32_t gap = 1; gap <= limit_sectors; gap *= 2) {
    const geom::Lbn span = geom::Lbn(pairs) * (s + gap);
    if (span * 2 >= cap) break;
    // Several places: a disk's zones differ in track length and skew.
    double separate = 0, joined = 0;
    for (int k = 0; k < 4; ++k) {
      const geom::Lbn start = (cap - span) / 5 * geom::Lbn(k);
      separate += serve_pattern(g, start, s, gap, pairs, false);
      joined += serve_pattern(g, start, s, gap, pairs, true);
    }
    if (!(joined < separate * (1 - 1e-9))) break;  // merely as fast: keep the requests (and the memory)
    best = gap;
  }
  return best;
}

}  // namespace mmfs::layouts
