// Evaluation of a condition tree to the three sets FastBit uses: rows known
// to match from aligned bins (`sure`), rows the bins cannot decide
// (`maybe`, the candidates), and — after the caller checks the candidates
// against the data — the answer. Pure: atoms are answered by the caller
// (from an index, or by scanning), rows are checked by the caller.
#pragma once

#include <cstdint>
#include <functional>

#include "indexes/bitmap.h"
#include "indexes/condition.h"

namespace mmfs::indexes {

// Rows of [0, rows): `sure` and `maybe` are disjoint.
struct Estimate {
  Bitmap sure;
  Bitmap maybe;
};

// Combines the atoms' estimates along the tree:
//   NOT: sure = all - (sure | maybe), maybe = maybe
//   AND: sure = s1 & s2, maybe = (s1 | m1) & (s2 | m2) - sure
//   OR:  sure = s1 | s2, maybe = (m1 | m2) - sure
// `rows` is the universe's size. The result's `sure` rows match the
// condition and the rows outside sure | maybe do not, provided every atom's
// estimate has that property.
Estimate combine(const Condition& c, std::uint64_t rows, const std::function<Estimate(const Atom&)>& atom);

// The condition on one row, given each atom's truth on it.
bool evaluate_row(const Condition& c, const std::function<bool(const Atom&)>& atom);

}  // namespace mmfs::indexes
