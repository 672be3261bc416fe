// Free bandwidth on a MEMStore (MEMS paper §5.1); the design is described in
// free_bandwidth.h.
#include "geometry/free_bandwidth.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "util/align.h"

namespace mmfs::geom {
namespace {

constexpr std::uint64_t kLow32 = 0xffffffffull;

}  // namespace

FreeBandwidthScan::FreeBandwidthScan(const MemStore& geometry, bool one_column_per_square)
    : g_(geometry), square_rule_(one_column_per_square) {
  const MemsParams& mp = g_.params();
  p_ = mp.p;
  n_ = mp.N;
  sx_ = mp.Sx;
  sy_ = mp.Sy;
  m_ = mp.M;
  nx_ = g_.Nx();
  ny_ = g_.Ny();
  st_ = g_.sectors_per_track();
  sc_ = g_.sectors_per_cylinder();
  capacity_ = g_.capacity_sectors();
  words_ = (n_ + 63) / 64;
  last_mask_ = n_ % 64 == 0 ? ~std::uint64_t(0) : (std::uint64_t(1) << (n_ % 64)) - 1;
  const std::uint64_t rows = std::uint64_t(sx_) * sy_;
  bits_.assign(rows * words_, 0);
  untouched_.assign(rows, n_);
  use_.assign(n_, 0);
  full_.assign(words_, 0);
}

void FreeBandwidthScan::reset() {
  std::fill(bits_.begin(), bits_.end(), 0);
  std::fill(untouched_.begin(), untouched_.end(), n_);
  touched_ = fg_touched_ = granted_ = 0;
  passes_.clear();
}

bool FreeBandwidthScan::touched(Lbn lbn) const {
  const MemStore::Position pos = g_.position(lbn);  // validates lbn
  return (row_bits(row_index(pos.x, pos.y))[pos.square / 64] >> (pos.square % 64)) & 1;
}

// MemStore::lbn_at without the range checks (x, y, square come from the scan).
Lbn FreeBandwidthScan::lbn_of(std::uint32_t x, std::uint32_t y, std::uint32_t square) const {
  const std::uint64_t k = square / nx_, c = square % nx_;
  const bool forward = ((std::uint64_t(x) * ny_ + k) % 2) == 0;
  const std::uint64_t r = forward ? y : sy_ - 1 - y;
  return x * sc_ + k * st_ + r * nx_ + c;
}

std::uint32_t FreeBandwidthScan::mark(std::size_t row, std::uint32_t first, std::uint32_t count) {
  std::uint64_t* w = row_bits(row);
  std::uint32_t fresh = 0;
  while (count > 0) {
    const std::uint32_t bit = first % 64, take = std::min<std::uint32_t>(count, 64 - bit);
    const std::uint64_t mask = (take == 64 ? ~std::uint64_t(0) : ((std::uint64_t(1) << take) - 1)) << bit;
    std::uint64_t& word = w[first / 64];
    fresh += std::uint32_t(std::popcount(mask & ~word));
    word |= mask;
    first += take;
    count -= take;
  }
  untouched_[row] -= fresh;
  return fresh;
}

std::size_t FreeBandwidthScan::pick(std::span<const Request> batch, std::vector<Lbn>* background) {
  if (batch.size() >= std::numeric_limits<std::uint32_t>::max())
    throw GeometryError(ErrorKind::Invalid, fmt::format("batch of {} requests is too large", batch.size()));
  for (const Request& r : batch)
    if (r.lbn >= capacity_ || r.sectors > capacity_ - r.lbn)
      throw GeometryError(ErrorKind::OutOfRange, fmt::format("request {}:{} goes past the last LBN {} of {}", r.lbn,
                                                             r.sectors, capacity_ - 1, g_.name()));
  passes_.clear();
  segs_.clear();
  // The foreground first: its row segments exactly as MemsServiceModel::split
  // cuts them, all marked touched before any background pick.
  for (std::size_t i = 0; i < batch.size(); ++i) {
    Lbn lbn = batch[i].lbn;
    std::uint64_t n = batch[i].sectors;
    while (n > 0) {
      const std::uint64_t track = lbn / st_, o = lbn % st_, r = o / nx_, c = o % nx_;
      const std::uint64_t x = lbn / sc_, k = track % ny_;
      const std::uint64_t y = track % 2 == 0 ? r : sy_ - 1 - r;
      const std::uint32_t len = std::uint32_t(std::min<std::uint64_t>(n, nx_ - c));
      const std::uint32_t square = std::uint32_t(k * nx_ + c);
      segs_.push_back({(y << 32) | x, std::uint32_t(i), square, len});
      const std::uint32_t fresh = mark(row_index(std::uint32_t(x), std::uint32_t(y)), square, len);
      fg_touched_ += fresh;
      touched_ += fresh;
      lbn += len;
      n -= len;
    }
  }
  // Group as MemsServiceModel::build_groups: by row, greedy windows of 2M + 1
  // columns from the leftmost sector.
  if (segs_.size() > 1)
    std::sort(segs_.begin(), segs_.end(), [](const Segment& a, const Segment& b) {
      return a.key != b.key ? a.key < b.key : a.req < b.req;
    });
  const std::uint64_t window = 2 * std::uint64_t(m_);
  std::size_t picked = 0;
  std::int64_t prev_end = -1;
  std::uint64_t prev_y = std::numeric_limits<std::uint64_t>::max();
  for (std::size_t i = 0; i < segs_.size();) {
    const std::uint64_t y = segs_[i].key >> 32, x0 = segs_[i].key & kLow32;
    std::size_t j = i;
    while (j < segs_.size() && (segs_[j].key >> 32) == y && (segs_[j].key & kLow32) <= x0 + window) ++j;
    picked += fill(i, j, y == prev_y ? prev_end : -1, background);
    prev_y = y;
    prev_end = std::int64_t(x0 + window);
    i = j;
  }
  return picked;
}

std::size_t FreeBandwidthScan::fill(std::size_t b, std::size_t e, std::int64_t prev_window_end,
                                    std::vector<Lbn>* background) {
  const std::uint32_t y = std::uint32_t(segs_[b].key >> 32);
  const std::uint32_t x0 = std::uint32_t(segs_[b].key & kLow32), x1 = std::uint32_t(segs_[e - 1].key & kLow32);
  std::uint64_t k = 0;
  for (std::size_t s = b; s < e; ++s) k += segs_[s].count;
  const std::uint64_t passes = util::div_up(k, p_);
  std::uint64_t free_slots = passes * p_ - k;

  // The sled column, as the model places it, and the columns the background
  // may use without moving it or changing the model's grouping.
  std::uint32_t c = x0 + (x1 - x0) / 2, lo = c, hi = c;
  if (m_ > 0) {
    std::uint32_t anchor = segs_[b].req;
    for (std::size_t s = b + 1; s < e; ++s) anchor = std::min(anchor, segs_[s].req);
    std::uint32_t a0 = std::numeric_limits<std::uint32_t>::max(), a1 = 0;
    for (std::size_t s = b; s < e; ++s)
      if (segs_[s].req == anchor) {
        a0 = std::min(a0, std::uint32_t(segs_[s].key & kLow32));
        a1 = std::max(a1, std::uint32_t(segs_[s].key & kLow32));
      }
    const std::uint32_t a = a0 + (a1 - a0) / 2;
    if (std::uint64_t(x0) + m_ >= a && std::uint64_t(x1) <= std::uint64_t(a) + m_) {
      // Every tip reaches the anchor's column: anything within M of it rides
      // along, except columns the previous group's window takes.
      c = a;
      lo = std::uint32_t(std::max<std::int64_t>({std::int64_t(c) - m_, prev_window_end + 1, 0}));
      hi = std::uint32_t(std::min<std::uint64_t>(std::uint64_t(c) + m_, sx_ - 1));
    } else {
      // The model centres the sled on the group's span: only columns inside it
      // keep that centre.
      lo = x0;
      hi = x1;
    }
  }
  FreePass pass;
  pass.x = c;
  pass.y = y;
  pass.lo = lo;
  pass.hi = hi;
  pass.fg_lo = x0;
  pass.fg_hi = x1;
  pass.foreground = std::uint32_t(k);
  pass.passes = std::uint32_t(passes);
  pass.bg_begin = pass.bg_end = background ? std::uint32_t(background->size()) : 0;

  // One column per square and pass: at most `passes` sectors of a square.
  const bool squares = square_rule_ && lo < hi;
  if (squares) {
    for (std::uint32_t s : used_squares_) use_[s] = 0;
    used_squares_.clear();
    std::fill(full_.begin(), full_.end(), 0);
    for (std::size_t s = b; s < e; ++s)
      for (std::uint32_t q = segs_[s].square; q < segs_[s].square + segs_[s].count; ++q) {
        if (use_[q]++ == 0) used_squares_.push_back(q);
        if (use_[q] >= passes) full_[q / 64] |= std::uint64_t(1) << (q % 64);
      }
  }

  std::size_t picked = 0;
  const std::uint32_t reach = std::max(c - lo, hi - c);
  for (std::uint32_t d = 0; d <= reach && free_slots > 0; ++d) {
    for (int side = 0; side < (d == 0 ? 1 : 2) && free_slots > 0; ++side) {
      if (side == 0 ? c < lo + d : std::uint64_t(c) + d > hi) continue;
      const std::uint32_t z = side == 0 ? c - d : c + d;
      const std::size_t row = row_index(z, y);
      if (untouched_[row] == 0) continue;
      std::uint64_t* w = row_bits(row);
      for (std::uint32_t wi = 0; wi < words_ && free_slots > 0; ++wi) {
        std::uint64_t avail = ~w[wi] & (wi + 1 == words_ ? last_mask_ : ~std::uint64_t(0));
        if (squares) avail &= ~full_[wi];
        while (avail != 0 && free_slots > 0) {
          const std::uint32_t bit = std::uint32_t(std::countr_zero(avail));
          avail &= avail - 1;
          const std::uint32_t q = wi * 64 + bit;
          w[wi] |= std::uint64_t(1) << bit;
          --untouched_[row];
          --free_slots;
          ++picked;
          if (squares) {
            if (use_[q]++ == 0) used_squares_.push_back(q);
            if (use_[q] >= passes) full_[wi] |= std::uint64_t(1) << bit;
          }
          if (background) background->push_back(lbn_of(z, y, q));
        }
      }
    }
  }
  touched_ += picked;
  granted_ += picked;
  if (background) pass.bg_end = std::uint32_t(background->size());
  passes_.push_back(pass);
  return picked;
}

FreeScanResult simulate_free_scan(const MemsParams& params, std::uint64_t seed, const FreeScanOptions& opt) {
  const MemStore g(params);  // validates the parameters
  FreeBandwidthScan scan(g, opt.one_column_per_square);
  const std::uint64_t cap = scan.capacity();
  if (opt.request_sectors == 0 || opt.request_sectors > cap)
    throw GeometryError(ErrorKind::Invalid, fmt::format("free scan: request of {} sectors on a device of {}",
                                                        opt.request_sectors, cap));
  if (opt.align == 0) throw GeometryError(ErrorKind::Invalid, "free scan: align must be positive");
  if (!(opt.mark > 0.0 && opt.mark <= 1.0))
    throw GeometryError(ErrorKind::Invalid, fmt::format("free scan: mark {} is not in (0, 1]", opt.mark));
  if (opt.curve_points == 0) throw GeometryError(ErrorKind::Invalid, "free scan: curve_points must be positive");

  FreeScanResult res;
  res.params = params;
  res.seed = seed;
  res.capacity = cap;
  const std::uint64_t at_mark = std::min<std::uint64_t>(cap, std::uint64_t(std::ceil(opt.mark * double(cap))));
  std::vector<std::uint64_t> thresholds(opt.curve_points);
  for (std::uint32_t i = 0; i < opt.curve_points; ++i)
    thresholds[i] = util::div_up((i + 1) * cap, opt.curve_points);
  res.curve.reserve(opt.curve_points);

  const std::uint64_t limit = opt.max_requests ? opt.max_requests : 10000 * cap;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::uint64_t> start(0, (cap - opt.request_sectors) / opt.align);
  std::uint64_t requests = 0, passes = 0;
  bool marked = false;
  while (!scan.complete()) {
    if (requests == limit)
      throw GeometryError(ErrorKind::Invalid, fmt::format("free scan: {} of {} LBNs touched after {} requests",
                                                          scan.touched_count(), cap, requests));
    ++requests;
    scan.pick_one({start(rng) * opt.align, opt.request_sectors});
    for (const FreePass& p : scan.last_passes()) passes += p.passes;
    const std::uint64_t touched = scan.touched_count();
    while (res.curve.size() < thresholds.size() && touched >= thresholds[res.curve.size()])
      res.curve.push_back(requests);
    if (!marked && touched >= at_mark) {
      marked = true;
      res.requests_mark = requests;
      res.granted_mark = scan.granted();
    }
  }
  res.requests_full = requests;
  res.granted_full = scan.granted();
  res.foreground_touched = scan.foreground_touched();
  res.passes_full = passes;
  return res;
}

}  // namespace mmfs::geom
