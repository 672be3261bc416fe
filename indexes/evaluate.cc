#include "indexes/evaluate.h"

#include <utility>

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
// intersection of the sures and `sure | maybe` that of the unions.
Estimate conjunction(const Condition& c, std::uint64_t rows, const std::function<Estimate(const Atom&)>& atom) {
  Estimate out;
  Bitmap possible;  // sure | maybe so far
  bool first = true;
  for (const Condition& child : c.children) {
    Estimate e = combine(child, rows, atom);
    Bitmap child_possible = e.sure | e.maybe;
    if (first) {
      out.sure = std::move(e.sure);
      possible = std::move(child_possible);
      first = false;
    } else {
      out.sure &= e.sure;
      possible &= child_possible;
    }
  }
  possible -= out.sure;
  out.maybe = std::move(possible);
  return out;
}

// OR folded over n children: sure is the union of the sures, maybe the
// union of the maybes less the sure rows.
Estimate disjunction(const Condition& c, std::uint64_t rows, const std::function<Estimate(const Atom&)>& atom) {
  Estimate out;
  for (const Condition& child : c.children) {
    Estimate e = combine(child, rows, atom);
    out.sure |= e.sure;
    out.maybe |= e.maybe;
  }
  out.maybe -= out.sure;
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
