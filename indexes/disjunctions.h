// Atoms of one array joined by OR, as one atom of their united keys
// (`K25==11|K25==19` is K25 in {11, 19}): an index then plans them as one
// set of bins, reads each bitmap once and keeps the atom's rows in its cache,
// instead of a query uniting them anew every time.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "indexes/condition.h"
#include "indexes/values.h"

namespace mmfs::indexes {

// The keys an atom matches among the values of dtype `t`.
KeySet atom_keys(const Atom& a, ValueType t);

// The dtype of the array a NAME (empty: the queried array) names; nullopt
// when there is none (the OR is then left as it is, for the caller's checks
// to report).
using TypeOf = std::function<std::optional<ValueType>(const std::string& name)>;

// Rewrites every OR whose children are all atoms of one array (after its
// own children are merged) into one atom, the first child's with its
// position, and records the united keys of each such atom in `united`,
// keyed by the atom's address in `c` (stable: the tree is not changed after).
void merge_disjunctions(Condition* c, const TypeOf& type_of, std::map<const Atom*, KeySet>* united);

}  // namespace mmfs::indexes
