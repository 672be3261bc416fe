// Service-time model of a MEMStore (MEMS paper §2, §4; docs/reference.md §7 (b)).
//
// Physics:
//  * The sled is positioned in X (cylinder) and Y (row within the squares) by
//    independent actuators that run in parallel: positioning =
//    max(x_seek, y_seek).
//      x_seek(dx) = dx == 0 ? 0 : x_settle_ms + x_full_ms * sqrt(dx / Sx)
//      y_seek(dy) = y_full_ms * sqrt(dy / Sy)  (+ turnaround_ms if the sled
//                   has to reverse its direction of motion)
//  * Tips read while the sled moves in Y at constant speed. One "row time" =
//    p * sector_size bytes / bandwidth: while the sled passes one row y, up to
//    p sectors at that (x, y) — any p of one equivalence class — transfer.
//    A row can be read moving either way (an equivalence class spans tracks of
//    both directions, and the paper reads any p of it in parallel).
//  * Continuing in the current direction onto the next row costs nothing
//    (streaming); skipping ahead costs the cheaper of passing over the rows at
//    read speed or a Y seek.
//
// Every non-empty batch first costs overhead_ms (the command's controller and
// bus overhead; a batch is one linked command). A batch is cut into its sectors, grouped by (x, y) (with micropositioning M,
// sectors of one row within 2M cylinders join one group; the sled sits at the
// first-listed request's column when every tip of the group reaches it from
// there, else in the middle: see build_groups); each pass over a group reads
// min(p, remaining) of its sectors
// in one row time. Groups on consecutive rows of one column form a run, which
// the sled sweeps without stopping, entering at either end; the next run is
// chosen shortest-positioning-time-first (greedy SPTF). So a sequential
// request of n sectors costs one positioning plus about n/p row times, and a
// row holding more than p requested sectors is passed again on the way back.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "geometry/memstore.h"
#include "geometry/service_time.h"

namespace mmfs::geom {

class MemsServiceModel final : public ServiceTimeModel {
 public:
  // `geometry` must outlive the model.
  explicit MemsServiceModel(const MemStore& geometry);

  double serve(std::span<const Request> batch, std::vector<std::uint32_t>* order = nullptr) override;
  void reset() override;
  void place_at(Lbn lbn) override;
  void idle(double ms) override;
  double clock_ms() const override { return clock_; }

  // Time to transfer one row (up to p sectors of one (x, y)), in ms.
  double row_time_ms() const { return row_ms_; }
  // Positioning time from the current sled state to the start of reading
  // lbn's row (either direction), without changing any state.
  double positioning_ms(Lbn lbn) const;

 private:
  // Sled state: column x, Y coordinate u in row boundaries [0, Sy] (row y
  // spans [y, y+1]), direction of motion dir (+1: increasing y).
  struct Sled {
    std::uint32_t x = 0;
    std::uint32_t u = 0;
    int dir = +1;
  };
  // Consecutive sectors of one request in one row of one track.
  struct Segment {
    std::uint64_t key = 0;  // (y << 32) | x: groups form runs in this order
    std::uint32_t req = 0;
    std::uint32_t count = 0;
  };
  // Sectors the sled reads from one position; segs_[seg_begin, seg_end).
  struct Group {
    std::uint32_t x = 0, y = 0;
    std::uint64_t remaining = 0;
    std::uint32_t seg_begin = 0, seg_end = 0;
    std::uint32_t seg_cursor = 0;  // first segment with sectors left
    std::uint32_t seg_used = 0;    // sectors already served of segs_[seg_cursor]
  };
  struct Move {
    double ms = 0.0;
    Sled after;
  };

  double x_seek(std::uint32_t dx) const;
  double y_seek(std::uint32_t dy) const;
  // Positioning from `from` to reading row y of column x moving in direction
  // dir, and where the sled ends up after reading that row.
  Move move_to(const Sled& from, std::uint32_t x, std::uint32_t y, int dir) const;
  // Whether the live group at byx_ position `pos` continues the run at (x, y).
  bool continues(std::uint32_t pos, std::uint32_t x, std::int64_t y) const;

  void split(std::span<const Request> batch);
  void build_groups();
  double schedule(std::vector<std::uint32_t>* order);
  void consume(Group& g, std::uint64_t sectors, std::vector<std::uint32_t>* order);

  const MemStore& g_;
  const MemsParams& p_;
  double row_ms_ = 0.0;
  double x_scale_ = 0.0, y_scale_ = 0.0;  // x_full/sqrt(Sx), y_full/sqrt(Sy)
  Sled sled_;
  double clock_ = 0.0;

  // Per-batch buffers, reused so that small batches allocate nothing.
  std::vector<Segment> segs_;
  std::vector<Group> groups_;
  std::vector<std::uint32_t> byx_;               // group indices ordered by (x, y)
  std::vector<std::uint32_t> next_, prev_;       // live list over byx_ positions
  std::vector<std::uint64_t> left_;              // sectors left per request (for `order`)
};

}  // namespace mmfs::geom
