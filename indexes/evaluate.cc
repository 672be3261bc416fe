#include "indexes/evaluate.h"

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

// Accumulates into `into`, moving `from` when `into` is still empty (a
// copy of a large bitmap costs more than the operation itself).
void unite(Bitmap& into, Bitmap&& from) {
  if (into.isEmpty()) {
    into = std::move(from);
  } else {
    into |= from;
  }
}

// AND folded over n children. Pairwise, sure = s1 & s2 and the union
// sure | maybe = (s1 | m1) & (s2 | m2), so over n children `sure` is the
// intersection of the sures and `sure | maybe` that of the unions. A NOT
// child is applied as a difference (s - (s' | m'), possible - s'), never
// materialized against all rows, unless every child is one. While no
// child has candidates, `sure | maybe` is `sure` and is not kept apart.
Estimate conjunction(const Condition& c, std::uint64_t rows, const std::function<Estimate(const Atom&)>& atom) {
  std::vector<const Condition*> order;
  for (const Condition& child : c.children)
    if (child.kind != Kind::Not) order.push_back(&child);
  const bool all_negated = order.empty();
  for (const Condition& child : c.children)
    if (child.kind == Kind::Not) order.push_back(&child);
  Estimate out;
  std::optional<Bitmap> possible;  // sure | maybe so far, once it differs from sure
  bool first = true;
  for (const Condition* child : order) {
    if (first && all_negated) {
      out = combine(*child, rows, atom);
      if (!out.maybe.isEmpty()) possible = out.sure | out.maybe;
      first = false;
      continue;
    }
    if (child->kind == Kind::Not) {
      Estimate e = combine(child->children.at(0), rows, atom);
      if (!e.maybe.isEmpty() && !possible) possible = out.sure;
      out.sure -= e.sure;
      out.sure -= e.maybe;
      if (possible) *possible -= e.sure;
      continue;
    }
    Estimate e = combine(*child, rows, atom);
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
  if (possible) {
    *possible -= out.sure;
    out.maybe = std::move(*possible);
  }
  return out;
}

// OR folded over n children: sure is the union of the sures, maybe the
// union of the maybes less the sure rows.
Estimate disjunction(const Condition& c, std::uint64_t rows, const std::function<Estimate(const Atom&)>& atom) {
  Estimate out;
  for (const Condition& child : c.children) {
    Estimate e = combine(child, rows, atom);
    unite(out.sure, std::move(e.sure));
    unite(out.maybe, std::move(e.maybe));
  }
  if (!out.maybe.isEmpty()) out.maybe -= out.sure;
  return out;
}

}  // namespace

Estimate combine(const Condition& c, std::uint64_t rows, const std::function<Estimate(const Atom&)>& atom) {
  switch (c.kind) {
    case Kind::Atom: return atom(c.atom);
    case Kind::Not: return negate(combine(c.children.at(0), rows, atom), rows);
    case Kind::And: return conjunction(c, rows, atom);
    case Kind::Or: return disjunction(c, rows, atom);
  }
  return {};
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
