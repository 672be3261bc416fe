// Free bandwidth on a MEMStore (MEMS paper §5.1, Figure 4, Table 4): a
// background scan that reads the whole device "for free" beside a foreground
// workload, with no service-time prediction.
//
// Every time the sled sits at a row y of column x, the equivalence class of
// that position (N LBNs, one per square; N(2M+1) with micropositioning M,
// MemStore::equivalent) is under the tips, and up to p of its sectors
// transfer in one row pass. The foreground uses some of the p slots; the
// background fills the others with LBNs of the class nobody has touched yet.
//
// What a "pass" is: exactly what MemsServiceModel serves. A foreground batch is
// cut into row segments and grouped by sled position as the model groups it
// (equal (x, y) at M = 0; at M > 0 same row, columns within a 2M + 1 window,
// the sled at the first-listed request's column when all reach it); a group of
// k foreground sectors costs ceil(k/p) row passes, so it has
// ceil(k/p) * p - k free slots. An aligned 4 KB request on G2 (8 sectors in
// one row of p = 10) leaves 2; an unaligned one spans two rows (two passes,
// 20 slots) and leaves 12.
//
// Which LBNs a pass may take: those of row y whose column is within M of the
// group's sled column c (at M = 0: column c only, the N LBNs of
// equivalent(lbn) of any of its foreground LBNs), nearest column first, never
// a column another group of the same row would claim in the model's greedy
// grouping. The background LBNs are appended after the foreground in the
// batch, so the model groups them with the foreground's passes and the
// batch's modeled time does not change (tests/unit/geometry/test_free_bandwidth.cc
// checks this against MemsServiceModel).
//
// Tips and columns: a square's tip reads one column at a time (MEMS §2.2: "each
// tip can access only one column at a time, introducing additional conflict
// relations"). MemStore::conflicting() encodes no conflict and the model does
// not count squares, but with micropositioning two LBNs of one square in
// different columns cannot share a pass; so by default a group of P passes
// takes at most P sectors of any square (foreground included). At M = 0 a
// class has one LBN per square and the rule never binds.
//
// State: a touched bit per LBN, stored by position ((x, y) row, then square),
// and an untouched count per (x, y), so a pass costs O(2M + 1 + slots) word
// operations whatever the class size, and exhausted columns cost one load.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "geometry/memstore.h"

namespace mmfs::geom {

// One group of row passes of the last foreground batch.
struct FreePass {
  std::uint32_t x = 0, y = 0;             // sled column and row
  std::uint32_t lo = 0, hi = 0;           // columns the background could use, inclusive
  std::uint32_t fg_lo = 0, fg_hi = 0;     // columns of the group's foreground sectors
  std::uint32_t foreground = 0;           // foreground sectors of the group
  std::uint32_t passes = 0;               // row passes: ceil(foreground / p)
  std::uint32_t bg_begin = 0, bg_end = 0;  // its background LBNs: background[bg_begin, bg_end)
};

class FreeBandwidthScan {
 public:
  // `geometry` must outlive the scan. one_column_per_square: see above.
  explicit FreeBandwidthScan(const MemStore& geometry, bool one_column_per_square = true);

  // Serves one foreground batch: marks its LBNs touched, then picks for every
  // pass the untouched LBNs that fill its free slots, marks them touched and,
  // when `background` is given, appends them to it (grouped by pass, in the
  // order of last_passes()). Returns the number picked. Throws
  // GeometryError(OutOfRange) for a request past the device (nothing changes).
  std::size_t pick(std::span<const Request> foreground, std::vector<Lbn>* background = nullptr);
  std::size_t pick_one(Request r, std::vector<Lbn>* background = nullptr) {
    return pick(std::span<const Request>(&r, 1), background);
  }
  // The passes of the last batch (indices into the `background` it filled).
  const std::vector<FreePass>& last_passes() const { return passes_; }

  bool touched(Lbn lbn) const;
  std::uint64_t capacity() const { return capacity_; }
  std::uint64_t touched_count() const { return touched_; }
  std::uint64_t foreground_touched() const { return fg_touched_; }  // first touched by the foreground
  std::uint64_t granted() const { return granted_; }               // picked for the background
  bool complete() const { return touched_ == capacity_; }
  // Untouched LBNs at row y of column x (N of them at the start).
  std::uint32_t untouched_at(std::uint32_t x, std::uint32_t y) const { return untouched_[row_index(x, y)]; }
  const MemStore& geometry() const { return g_; }
  void reset();

 private:
  struct Segment {
    std::uint64_t key = 0;  // (y << 32) | x, as in MemsServiceModel
    std::uint32_t req = 0;
    std::uint32_t square = 0;  // first square; the segment covers [square, square + count)
    std::uint32_t count = 0;
  };

  std::size_t row_index(std::uint32_t x, std::uint32_t y) const { return std::size_t(x) * sy_ + y; }
  std::uint64_t* row_bits(std::size_t row) { return bits_.data() + row * words_; }
  const std::uint64_t* row_bits(std::size_t row) const { return bits_.data() + row * words_; }
  Lbn lbn_of(std::uint32_t x, std::uint32_t y, std::uint32_t square) const;
  // Marks squares [first, first + count) of a row touched; returns how many were new.
  std::uint32_t mark(std::size_t row, std::uint32_t first, std::uint32_t count);
  // Fills the group of segments [b, e) (one row, one model group).
  std::size_t fill(std::size_t b, std::size_t e, std::int64_t prev_window_end, std::vector<Lbn>* background);

  const MemStore& g_;
  const bool square_rule_;
  std::uint32_t p_, n_, sx_, sy_, m_, nx_, ny_;
  std::uint64_t st_, sc_, capacity_;
  std::uint32_t words_;        // words per (x, y) row of the bitmap
  std::uint64_t last_mask_;    // valid bits of a row's last word

  std::vector<std::uint64_t> bits_;      // touched bits, Sx * Sy rows of `words_` words
  std::vector<std::uint32_t> untouched_;  // per (x, y)
  std::uint64_t touched_ = 0, fg_touched_ = 0, granted_ = 0;

  // Per-batch buffers.
  std::vector<Segment> segs_;
  std::vector<FreePass> passes_;
  std::vector<std::uint32_t> use_;          // sectors per square in the current group
  std::vector<std::uint32_t> used_squares_;  // squares with use_ > 0, to reset
  std::vector<std::uint64_t> full_;         // squares that reached the group's pass count
};

// simulate_free_scan: the experiment of §5.1. Uniformly random foreground reads
// of `request_sectors` sectors (start uniform over the multiples of `align` in
// [0, capacity - sectors]), one per batch, each with its free background
// picks, until every LBN is touched.
struct FreeScanOptions {
  std::uint32_t request_sectors = 8;  // 4 KB of 512-byte sectors
  std::uint32_t align = 1;            // starts are multiples of this many sectors (1: any sector)
  double mark = 0.95;                 // the paper's intermediate mark
  std::uint32_t curve_points = 100;   // Figure 4: requests at every 1/curve_points of the device
  bool one_column_per_square = true;
  std::uint64_t max_requests = 0;     // give up (GeometryError Invalid) after this many; 0: 10^4 per LBN
};

struct FreeScanResult {
  MemsParams params;
  std::uint64_t seed = 0;
  std::uint64_t capacity = 0;
  std::uint64_t requests_mark = 0;   // foreground requests until `mark` of the device is touched
  std::uint64_t requests_full = 0;   // ... until all of it is
  std::uint64_t granted_mark = 0;    // background LBNs granted by then
  std::uint64_t granted_full = 0;
  std::uint64_t foreground_touched = 0;  // LBNs the foreground touched first
  std::uint64_t passes_full = 0;     // row passes of the foreground
  std::vector<std::uint64_t> curve;  // curve[i]: requests until (i + 1) / curve_points touched
  double free_per_request_mark() const {
    return requests_mark ? double(granted_mark) / double(requests_mark) : 0.0;
  }
};

FreeScanResult simulate_free_scan(const MemsParams& params, std::uint64_t seed, const FreeScanOptions& options = {});

}  // namespace mmfs::geom
