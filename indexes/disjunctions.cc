#include "indexes/disjunctions.h"

namespace mmfs::indexes {

KeySet atom_keys(const Atom& a, ValueType t) {
  return a.interval ? interval_keys(t, a.low, a.high) : compare_keys(t, a.op, a.value);
}

void merge_disjunctions(Condition* c, const TypeOf& type_of, std::map<const Atom*, KeySet>* united) {
  using Kind = Condition::Kind;
  for (Condition& child : c->children) merge_disjunctions(&child, type_of, united);
  if (c->kind != Kind::Or || c->children.size() < 2) return;
  for (const Condition& child : c->children)
    if (child.kind != Kind::Atom || child.atom.name != c->children[0].atom.name) return;
  const std::optional<ValueType> t = type_of(c->children[0].atom.name);
  if (!t) return;
  KeySet keys;
  for (const Condition& child : c->children) {
    auto merged = united->find(&child.atom);  // a nested OR merged already
    keys = unite(keys, merged != united->end() ? merged->second : atom_keys(child.atom, *t));
    if (merged != united->end()) united->erase(merged);
  }
  Atom first = c->children[0].atom;
  c->children.clear();
  c->kind = Kind::Atom;
  c->atom = std::move(first);
  (*united)[&c->atom] = std::move(keys);
}

}  // namespace mmfs::indexes
