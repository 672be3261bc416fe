// Planning an atom over a stored index (which bitmaps, fewest bytes) and
// evaluating the plan from the fetched bitmaps. The planner and the
// evaluator share one deterministic description of how a run of bins is
// computed per encoding, so the plan only records the choices (coarse or
// not, complement or not).
#include <algorithm>
#include <optional>

#include "indexes/bitmap_index.h"
#include "indexes/index_internal.h"

namespace mmfs::indexes {

using detail::BinClass;
using detail::Layout;
using Fetch = std::function<const Bitmap&(std::uint32_t)>;

namespace {

// A range of bins [f, l] out of n interval-encoded bitmaps of width m
// (I_i = bins i..i+m-1, i <= n-m) is one or two of them (Chan & Ioannidis).
struct IntervalTerm {
  enum class Op : std::uint8_t { Single, Minus, And, Or } op = Op::Single;
  std::uint32_t a = 0, b = 0;  // interval indices
};

template <class Cost>
IntervalTerm choose_interval(std::uint32_t n, std::uint32_t f, std::uint32_t l, Cost cost) {
  const std::uint32_t m = (n + 1) / 2, len = l - f + 1;
  using Op = IntervalTerm::Op;
  std::optional<IntervalTerm> best;
  std::uint64_t best_cost = 0;
  auto consider = [&](IntervalTerm t) {
    std::uint64_t c = cost(t.a) + (t.op == Op::Single ? 0 : cost(t.b));
    if (!best || c < best_cost) best = t, best_cost = c;
  };
  if (len == m) consider({Op::Single, f, f});
  if (len < m) {
    if (f <= n - m && l + 1 <= n - m) consider({Op::Minus, f, l + 1});        // [f, f+m-1] - [l+1, l+m]
    if (f <= n - m && l + 1 >= m) consider({Op::And, f, l + 1 - m});          // [f, f+m-1] & [l-m+1, l]
    if (f >= m && l + 1 >= m) consider({Op::Minus, l + 1 - m, f - m});       // [l-m+1, l] - [f-m, f-1]
  }
  if (len > m) consider({Op::Or, f, l + 1 - m});  // [f, f+m-1] | [l-m+1, l]; len <= n <= 2m
  return *best;  // every [f, l] has a candidate (see the cases above)
}

}  // namespace

struct IndexHeader::Planner {
  const IndexHeader& h;
  Layout layout;
  std::uint32_t B;

  explicit Planner(const IndexHeader& header)
      : h(header),
        layout{header.encoding_, header.binning_.value_bins(), header.binning_.has_nan_bin(), header.coarse_bins()},
        B(header.binning_.value_bins()) {}

  bool nan_rows() const { return layout.nan && h.bin_rows_[B] > 0; }
  bool empty(std::uint32_t bin) const { return h.bin_rows_[bin] == 0; }
  std::uint64_t bytes(std::uint32_t id) const { return h.directory_.length(id); }
  // Stored bytes of e1's fine bitmaps of bins f..l (contiguous, in bin order).
  std::uint64_t fine_span(std::uint32_t f, std::uint32_t l) const {
    return h.directory_.offset(l) + h.directory_.length(l) - h.directory_.offset(f);
  }
  std::uint32_t groups() const { return std::uint32_t(h.coarse_groups_.size()); }
  std::uint32_t group_first(std::uint32_t g) const { return h.coarse_groups_[g]; }
  std::uint32_t group_last(std::uint32_t g) const { return g + 1 < groups() ? h.coarse_groups_[g + 1] - 1 : B - 1; }

  // --- which bitmaps a recipe range needs ---------------------------------

  void fine_ids(std::uint32_t f, std::uint32_t l, std::vector<std::uint32_t>* ids) const {
    for (std::uint32_t b = f; b <= l; ++b) {
      if (!empty(b)) ids->push_back(b);
    }
  }
  void universe_ids(std::vector<std::uint32_t>* ids) const {  // all non-NaN rows
    if (nan_rows()) ids->push_back(layout.nan_id());
  }
  // Range encoding over n parts whose bitmaps start at id `base`.
  void range_ids(std::uint32_t n, std::uint32_t base, std::uint32_t f, std::uint32_t l,
                 std::vector<std::uint32_t>* ids) const {
    if (l + 1 < n) {
      ids->push_back(base + l);
    } else {
      universe_ids(ids);
    }
    if (f > 0) ids->push_back(base + f - 1);
  }
  IntervalTerm interval_term(std::uint32_t n, std::uint32_t base, std::uint32_t f, std::uint32_t l) const {
    return choose_interval(n, f, l, [&](std::uint32_t i) { return bytes(base + i); });
  }
  void interval_ids(std::uint32_t n, std::uint32_t base, std::uint32_t f, std::uint32_t l,
                    std::vector<std::uint32_t>* ids) const {
    IntervalTerm t = interval_term(n, base, f, l);
    ids->push_back(base + t.a);
    if (t.op != IntervalTerm::Op::Single) ids->push_back(base + t.b);
  }
  // Coarse groups entirely inside [f, l]: [a, b], or nullopt.
  std::optional<std::pair<std::uint32_t, std::uint32_t>> inner_groups(std::uint32_t f, std::uint32_t l) const {
    const auto& g = h.coarse_groups_;
    auto a = std::uint32_t(std::lower_bound(g.begin(), g.end(), f) - g.begin());
    if (a >= groups() || group_first(a) > l) return std::nullopt;
    std::uint32_t b = a;
    while (b < groups() && group_last(b) <= l) ++b;
    if (b == a) return std::nullopt;
    return std::pair{a, b - 1};
  }

  std::vector<std::uint32_t> ids(const AtomPlan::Range& r) const {
    std::vector<std::uint32_t> out;
    switch (h.encoding_) {
      case Encoding::E1:
      case Encoding::RE:
      case Encoding::IE:
        if (r.complement) {
          if (r.first > 0) fine_ids(0, r.first - 1, &out);
          if (r.last + 1 < B) fine_ids(r.last + 1, B - 1, &out);
          universe_ids(&out);
        } else if (r.coarse) {
          auto [a, b] = *inner_groups(r.first, r.last);
          if (h.encoding_ == Encoding::RE) {
            range_ids(groups(), layout.coarse_first(), a, b, &out);
          } else {
            interval_ids(groups(), layout.coarse_first(), a, b, &out);
          }
          if (r.first < group_first(a)) fine_ids(r.first, group_first(a) - 1, &out);
          if (group_last(b) < r.last) fine_ids(group_last(b) + 1, r.last, &out);
        } else {
          fine_ids(r.first, r.last, &out);
        }
        break;
      case Encoding::Range: range_ids(B, 0, r.first, r.last, &out); break;
      case Encoding::Interval: interval_ids(B, 0, r.first, r.last, &out); break;
      case Encoding::BN:
        if (r.first > 0 || r.last + 1 < B) {
          for (std::uint32_t k = 0; k < layout.slices(); ++k) out.push_back(k);
        }
        universe_ids(&out);
        break;
    }
    return out;
  }

  // --- computing the rows of a recipe range --------------------------------

  struct Eval {
    const Planner& p;
    const Fetch& fetch;
    const FineUnion& fine_union;
    std::optional<Bitmap> universe;  // non-NaN rows, made once

    const Bitmap& values() {
      if (!universe) {
        universe = range_bitmap(0, p.h.rows_);
        if (p.nan_rows()) *universe -= fetch(p.layout.nan_id());
      }
      return *universe;
    }
    Bitmap fine(std::uint32_t f, std::uint32_t l) {
      if (fine_union)
        if (std::optional<Bitmap> u = fine_union(f, l)) return std::move(*u);
      std::vector<const Bitmap*> parts;
      for (std::uint32_t b = f; b <= l; ++b)
        if (!p.empty(b)) parts.push_back(&fetch(b));
      return union_all(std::move(parts));
    }
    Bitmap range(std::uint32_t n, std::uint32_t base, std::uint32_t f, std::uint32_t l) {
      Bitmap out = l + 1 < n ? fetch(base + l) : values();
      if (f > 0) out -= fetch(base + f - 1);
      return out;
    }
    Bitmap interval(std::uint32_t n, std::uint32_t base, std::uint32_t f, std::uint32_t l) {
      IntervalTerm t = p.interval_term(n, base, f, l);
      const Bitmap& a = fetch(base + t.a);
      switch (t.op) {
        case IntervalTerm::Op::Single: return a;
        case IntervalTerm::Op::Minus: return a - fetch(base + t.b);
        case IntervalTerm::Op::And: return a & fetch(base + t.b);
        case IntervalTerm::Op::Or: return a | fetch(base + t.b);
      }
      return a;
    }
    // Bit-sliced: rows whose bin number is <= v (O'Neil & Quass).
    Bitmap at_most(std::uint32_t v) {
      Bitmap less, equal = values();
      for (std::uint32_t k = p.layout.slices(); k-- > 0;) {
        const Bitmap& s = fetch(k);
        if ((v >> k) & 1) {
          less |= equal - s;
          equal &= s;
        } else {
          equal -= s;
        }
      }
      return less | equal;
    }
    Bitmap sliced(std::uint32_t f, std::uint32_t l) {
      if (f == 0 && l + 1 == p.B) return values();
      Bitmap out = at_most(l);
      if (f > 0) out -= at_most(f - 1);
      return out;
    }

    Bitmap rows(const AtomPlan::Range& r) {
      const std::uint32_t B = p.B;
      switch (p.h.encoding_) {
        case Encoding::Range: return range(B, 0, r.first, r.last);
        case Encoding::Interval: return interval(B, 0, r.first, r.last);
        case Encoding::BN: return sliced(r.first, r.last);
        default: break;
      }
      if (r.complement) {
        Bitmap out = values();
        if (r.first > 0) out -= fine(0, r.first - 1);
        if (r.last + 1 < B) out -= fine(r.last + 1, B - 1);
        return out;
      }
      if (!r.coarse) return fine(r.first, r.last);
      auto [a, b] = *p.inner_groups(r.first, r.last);
      std::uint32_t base = p.layout.coarse_first();
      Bitmap out = p.h.encoding_ == Encoding::RE ? range(p.groups(), base, a, b) : interval(p.groups(), base, a, b);
      if (r.first < p.group_first(a)) out |= fine(r.first, p.group_first(a) - 1);
      if (p.group_last(b) < r.last) out |= fine(p.group_last(b) + 1, r.last);
      return out;
    }
  };

  // --- planning -------------------------------------------------------------

  // The options a run of sure bins has under the encoding.
  std::vector<AtomPlan::Range> options(std::uint32_t f, std::uint32_t l) const {
    std::vector<AtomPlan::Range> out{{f, l, false, false}};
    // The complement (all rows minus the other bins) reads at least the
    // other bins' bitmaps. e1's fine bitmaps are stored in bin order, so both
    // sides' bytes are spans of the directory, known without listing the
    // other bins (a single bin of a 500,000-bin index listed them all).
    if (h.encoding_ == Encoding::E1 && (f > 0 || l + 1 < B) && fine_span(0, B - 1) - fine_span(f, l) <= fine_span(f, l))
      out.push_back({f, l, false, true});
    if ((h.encoding_ == Encoding::RE || h.encoding_ == Encoding::IE) && groups() > 0 && inner_groups(f, l)) {
      out.push_back({f, l, true, false});
    }
    return out;
  }

  AtomPlan plan(const KeySet& raw) const {
    KeySet keys = detail::normalized(raw);
    AtomPlan plan;
    // Only the bins the key ranges touch are classified (and walked below):
    // the others hold no matching key.
    std::vector<BinClass> cls(B, BinClass::Skip);
    std::vector<std::pair<std::uint32_t, std::uint32_t>> spans;
    for (const auto& [lo, hi] : keys.ranges) {
      const std::uint32_t b0 = h.binning_.bin_of_key(lo), b1 = h.binning_.bin_of_key(hi);
      if (!spans.empty() && b0 <= spans.back().second + 1) spans.back().second = std::max(spans.back().second, b1);
      else spans.push_back({b0, b1});
    }
    const BinStatsView stats = h.stats();
    for (const auto& [b0, b1] : spans)
      for (std::uint32_t b = b0; b <= b1 && b < B; ++b) {
        cls[b] = detail::classify(keys, h.binning_.key_range(b), stats[b]);
        if (cls[b] == BinClass::Maybe) plan.maybe_bins.push_back(b);
      }
    plan.sure_nan = keys.nan && nan_rows();

    std::vector<std::uint32_t> needed;
    for (std::uint32_t b : plan.maybe_bins) {
      auto more = ids({b, b, false, false});
      needed.insert(needed.end(), more.begin(), more.end());
    }
    if (plan.sure_nan) needed.push_back(layout.nan_id());
    std::sort(needed.begin(), needed.end());

    // Maximal runs of sure bins; empty bins join any run (no rows to add).
    std::uint64_t sure_rows = 0;
    for (const auto& [b0, b1] : spans) {
      const std::uint32_t end = std::min<std::uint32_t>(b1 + 1, B);
      for (std::uint32_t b = b0; b < end;) {
        if (cls[b] != BinClass::Sure && cls[b] != BinClass::Empty) {
          ++b;
          continue;
        }
        std::uint32_t e = b;
        bool any_sure = false;
        while (e < end && (cls[e] == BinClass::Sure || cls[e] == BinClass::Empty)) {
          any_sure |= cls[e] == BinClass::Sure;
          sure_rows += h.bin_rows_[e];
          ++e;
        }
        if (any_sure) choose_run(b, e - 1, &plan, &needed);
        b = e;
      }
    }

    for (std::uint32_t id : needed) plan.bytes += bytes(id);
    plan.bitmaps = std::move(needed);
    plan.aligned = plan.maybe_bins.empty();
    if (plan.aligned) plan.count = sure_rows + (plan.sure_nan ? h.bin_rows_[B] : 0);
    return plan;
  }

  // Picks the run's cheapest option counting only bitmaps not already
  // needed: fewest bytes, then fewest bitmaps.
  void choose_run(std::uint32_t f, std::uint32_t l, AtomPlan* plan, std::vector<std::uint32_t>* needed) const {
    std::optional<AtomPlan::Range> best;
    std::vector<std::uint32_t> best_new;
    std::uint64_t best_bytes = 0;
    for (const AtomPlan::Range& r : options(f, l)) {
      std::vector<std::uint32_t> want = ids(r), fresh;
      std::sort(want.begin(), want.end());
      want.erase(std::unique(want.begin(), want.end()), want.end());
      std::set_difference(want.begin(), want.end(), needed->begin(), needed->end(), std::back_inserter(fresh));
      std::uint64_t cost = 0;
      for (std::uint32_t id : fresh) cost += bytes(id);
      if (!best || cost < best_bytes || (cost == best_bytes && fresh.size() < best_new.size())) {
        best = r, best_bytes = cost, best_new = std::move(fresh);
      }
    }
    plan->sure.push_back(*best);
    std::vector<std::uint32_t> merged;
    std::merge(needed->begin(), needed->end(), best_new.begin(), best_new.end(), std::back_inserter(merged));
    *needed = std::move(merged);
  }
};

AtomPlan IndexHeader::plan(const KeySet& keys) const { return Planner(*this).plan(keys); }

std::optional<std::uint32_t> IndexHeader::lone_bitmap(const AtomPlan& plan) const {
  if (plan.sure.size() != 1 || !plan.maybe_bins.empty() || plan.sure_nan) return std::nullopt;
  if (encoding_ != Encoding::E1 && encoding_ != Encoding::RE && encoding_ != Encoding::IE) return std::nullopt;
  const AtomPlan::Range& r = plan.sure[0];
  if (r.first != r.last || r.coarse || r.complement || r.first >= bin_rows_.size() || bin_rows_[r.first] == 0) return std::nullopt;
  return r.first;  // the fine level is stored in bin order, first in the directory
}

Estimate IndexHeader::evaluate(const AtomPlan& plan, const Fetch& bitmap, const FineUnion& fine_union) const {
  Planner p(*this);
  Planner::Eval ev{p, bitmap, fine_union, std::nullopt};
  Estimate out;
  // A bitmap moved into an empty result is not copied again.
  auto unite = [](Bitmap& into, Bitmap&& from) {
    if (into.isEmpty()) {
      into = std::move(from);
    } else {
      into |= from;
    }
  };
  for (const AtomPlan::Range& r : plan.sure) unite(out.sure, ev.rows(r));
  if (plan.sure_nan && p.nan_rows()) out.sure |= bitmap(p.layout.nan_id());
  if (!plan.maybe_bins.empty()) {
    std::vector<const Bitmap*> cut;
    std::vector<Bitmap> owned;
    owned.reserve(plan.maybe_bins.size());
    for (std::uint32_t b : plan.maybe_bins) owned.push_back(ev.rows({b, b, false, false}));
    for (const Bitmap& b : owned) cut.push_back(&b);
    out.maybe = union_all(std::move(cut));
    out.maybe -= out.sure;
  }
  return out;
}

}  // namespace mmfs::indexes
