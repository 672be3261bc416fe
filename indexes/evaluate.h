// Evaluation of a condition tree to the three sets FastBit uses: rows known
// to match from aligned bins (`sure`), rows the bins cannot decide
// (`maybe`, the candidates), and — after the caller checks the candidates
// against the data — the answer. Pure: atoms are answered by the caller
// (from an index, or by scanning), rows are checked by the caller.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <variant>

#include "indexes/bitmap.h"
#include "indexes/condition.h"

namespace mmfs::indexes {

// Rows of [0, rows): `sure` and `maybe` are disjoint.
//
// An estimate handed out by an index may borrow its sure rows from the
// index's cache instead of copying them (a copy of a dense bitmap of ten
// million rows costs more than intersecting it): then `borrowed` holds them
// and `sure` is empty. Readers use sure_rows(); anything that changes the
// sure rows calls own() first. combine() owns what it changes; only its
// count of an all-sure conjunction reads borrowed rows as they are.
struct Estimate {
  Bitmap sure;
  Bitmap maybe;
  std::shared_ptr<const Bitmap> borrowed;

  const Bitmap& sure_rows() const { return borrowed ? *borrowed : sure; }
  void own() {
    if (borrowed) {
      sure = *borrowed;
      borrowed.reset();
    }
  }
};

// Combines the atoms' estimates along the tree:
//   NOT: sure = all - (sure | maybe), maybe = maybe
//   AND: sure = s1 & s2, maybe = (s1 | m1) & (s2 | m2) - sure
//   OR:  sure = s1 | s2, maybe = (m1 | m2) - sure
// `rows` is the universe's size. The result's `sure` rows match the
// condition and the rows outside sure | maybe do not, provided every atom's
// estimate has that property.
Estimate combine(const Condition& c, std::uint64_t rows, const std::function<Estimate(const Atom&)>& atom);

// The number of rows matching `c` when the estimates decide every row
// (no candidates; computed without building the final set), or else the
// estimate combine() gives.
std::variant<std::uint64_t, Estimate> combine_for_count(const Condition& c, std::uint64_t rows,
                                                        const std::function<Estimate(const Atom&)>& atom);

// The condition on one row, given each atom's truth on it.
bool evaluate_row(const Condition& c, const std::function<bool(const Atom&)>& atom);

}  // namespace mmfs::indexes
