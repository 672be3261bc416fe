#include "indexes/evaluate.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

namespace mmfs::indexes {
namespace {

using Kind = Condition::Kind;

// NOT: a row surely matches the negation when the child surely misses it
// (outside both of the child's sets); the child's candidates stay candidates.
Estimate negate(Estimate e, std::uint64_t rows) {
  Estimate out;
  out.sure = range_bitmap(0, rows);
  out.sure -= e.sure;
  out.sure -= e.maybe;
  out.maybe = std::move(e.maybe);
  return out;
}

// AND folded over n children. Pairwise, sure = s1 & s2 and the union
// sure | maybe = (s1 | m1) & (s2 | m2), so over n children `sure` is the
// intersection of the sures and `sure | maybe` that of the unions. A NOT
// child is applied as a difference (s - (s' | m'), possible - s'), never
// materialized against all rows, unless every child is one. While no
// child has candidates, `sure | maybe` is `sure` and is not kept apart.
// The positive children are intersected largest first: dense bitmaps stay
// word-wise bitsets as long as possible, and only the last, smallest step
// turns containers into sorted arrays (or, for a count, none does).
struct Conjunction {
  std::vector<Estimate> positive;  // children
  std::vector<Estimate> negated;   // the estimates of NOT children's operands
  bool any_maybe = false;
};

// An atom's estimate as handed out (possibly borrowed), any other
// subtree's combined.
Estimate child_estimate(const Condition& c, std::uint64_t rows, const std::function<Estimate(const Atom&)>& atom) {
  return c.kind == Kind::Atom ? atom(c.atom) : combine(c, rows, atom);
}

Conjunction children_of(const Condition& c, std::uint64_t rows, const std::function<Estimate(const Atom&)>& atom) {
  Conjunction out;
  for (const Condition& child : c.children) {
    Estimate e = child_estimate(child.kind == Kind::Not ? child.children.at(0) : child, rows, atom);
    out.any_maybe = out.any_maybe || !e.maybe.isEmpty();
    (child.kind == Kind::Not ? out.negated : out.positive).push_back(std::move(e));
  }
  std::stable_sort(out.positive.begin(), out.positive.end(), [](const Estimate& a, const Estimate& b) {
    return a.sure_rows().cardinality() + a.maybe.cardinality() > b.sure_rows().cardinality() + b.maybe.cardinality();
  });
  return out;
}

Estimate conjoin(Conjunction parts, std::uint64_t rows) {
  for (Estimate& e : parts.positive) e.own();
  for (Estimate& e : parts.negated) e.own();
  Estimate out;
  std::optional<Bitmap> possible;  // sure | maybe so far, once it differs from sure
  if (parts.positive.empty()) {     // every child a NOT: the first one against all rows
    parts.positive.push_back(negate(std::move(parts.negated.front()), rows));
    parts.negated.erase(parts.negated.begin());
  }
  bool first = true;
  for (Estimate& e : parts.positive) {
    if (first) {
      out.sure = std::move(e.sure);
      if (!e.maybe.isEmpty()) possible = out.sure | e.maybe;
      first = false;
      continue;
    }
    if (!e.maybe.isEmpty()) {
      if (!possible) possible = out.sure;
      *possible &= e.sure | e.maybe;
    } else if (possible) {
      *possible &= e.sure;
    }
    out.sure &= e.sure;
  }
  for (Estimate& e : parts.negated) {
    if (!e.maybe.isEmpty() && !possible) possible = out.sure;
    out.sure -= e.sure;
    out.sure -= e.maybe;
    if (possible) *possible -= e.sure;
  }
  if (possible) {
    *possible -= out.sure;
    out.maybe = std::move(*possible);
  }
  return out;
}

Estimate conjunction(const Condition& c, std::uint64_t rows, const std::function<Estimate(const Atom&)>& atom) {
  return conjoin(children_of(c, rows, atom), rows);
}

// OR folded over n children: sure is the union of the sures, maybe the
// union of the maybes less the sure rows. Each is merged in one pass
// (CRoaring's many-way union) from the children's rows where they are:
// lent rows are not copied first.
Estimate disjunction(const Condition& c, std::uint64_t rows, const std::function<Estimate(const Atom&)>& atom) {
  std::vector<Estimate> children;
  children.reserve(c.children.size());
  for (const Condition& child : c.children) children.push_back(child_estimate(child, rows, atom));
  std::vector<const Bitmap*> sure, maybe;
  for (const Estimate& e : children) {
    sure.push_back(&e.sure_rows());
    if (!e.maybe.isEmpty()) maybe.push_back(&e.maybe);
  }
  Estimate out;
  out.sure = union_all(std::move(sure));
  if (!maybe.empty()) {
    out.maybe = union_all(std::move(maybe));
    out.maybe -= out.sure;
  }
  return out;
}

}  // namespace

Estimate combine(const Condition& c, std::uint64_t rows, const std::function<Estimate(const Atom&)>& atom) {
  switch (c.kind) {
    case Kind::Atom: {
      Estimate e = atom(c.atom);
      e.own();
      return e;
    }
    case Kind::Not: return negate(combine(c.children.at(0), rows, atom), rows);
    case Kind::And: return conjunction(c, rows, atom);
    case Kind::Or: return disjunction(c, rows, atom);
  }
  return {};
}

std::variant<std::uint64_t, Estimate> combine_for_count(const Condition& c, std::uint64_t rows,
                                                        const std::function<Estimate(const Atom&)>& atom) {
  if (c.kind != Kind::And) return combine(c, rows, atom);
  Conjunction parts = children_of(c, rows, atom);
  if (parts.any_maybe || parts.positive.empty()) return conjoin(std::move(parts), rows);
  // Every row is decided: counted from the operands where they are
  // (borrowed rows are only read), nothing built.
  std::vector<const Bitmap*> all_of, none_of;
  for (const Estimate& e : parts.positive) all_of.push_back(&e.sure_rows());
  for (const Estimate& e : parts.negated) none_of.push_back(&e.sure_rows());
  // Two operands: CRoaring's own intersection count is one pass.
  if (none_of.empty() && all_of.size() <= 2)
    return all_of.size() == 1 ? all_of[0]->cardinality() : and_count(*all_of[0], *all_of[1]);
  if (none_of.size() == 1 && all_of.size() == 1) return all_of[0]->cardinality() - and_count(*all_of[0], *none_of[0]);
  return count_all_none(all_of, none_of);
}

bool evaluate_row(const Condition& c, const std::function<bool(const Atom&)>& atom) {
  switch (c.kind) {
    case Kind::Atom: return atom(c.atom);
    case Kind::Not: return !evaluate_row(c.children.at(0), atom);
    case Kind::And:
      for (const Condition& child : c.children)
        if (!evaluate_row(child, atom)) return false;
      return true;
    case Kind::Or:
      for (const Condition& child : c.children)
        if (evaluate_row(child, atom)) return true;
      return false;
  }
  return false;
}

}  // namespace mmfs::indexes
