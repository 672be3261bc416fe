// Query conditions (docs/reference.md §5), one path component:
//
//   cond   := term (('&' | '|') term)*          # & binds tighter than |
//   term   := '!' term | '(' cond ')' | atom
//   atom   := [NAME] OP NUMBER | [NAME] 'in' '[' NUMBER ',' NUMBER ']'
//   OP     := '==' | '!=' | '<' | '<=' | '>' | '>='
//
// NAME is another array of the same directory: a run of characters other
// than the operators, brackets, '&', '|', '!', ',' and blanks, which does not
// start like a NUMBER and is not "in". Blanks between tokens are allowed.
// Parsing never recurses without bound: nesting deeper than kMaxDepth, more
// than kMaxAtoms atoms or text longer than kMaxLength is an error, not a crash.
// Pure.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "indexes/values.h"

namespace mmfs::indexes {

struct Atom {
  std::string name;  // empty: the array the query is on
  bool interval = false;  // `in [low, high]`
  CompareOp op = CompareOp::Eq;
  Number value;          // !interval
  Number low, high;      // interval
  std::size_t position = 0;  // byte offset of the atom in the text
};

struct Condition {
  enum class Kind : std::uint8_t { Atom, Not, And, Or };
  Kind kind = Kind::Atom;
  Atom atom;                        // Kind::Atom
  std::vector<Condition> children;  // Not: one; And/Or: two or more
};

struct ConditionError {
  std::size_t position = 0;  // byte offset where the problem was found
  std::string message;       // e.g. "expected a number after '>'"
};

inline constexpr std::size_t kMaxDepth = 64;
inline constexpr std::size_t kMaxAtoms = 256;
inline constexpr std::size_t kMaxLength = 4096;

std::variant<Condition, ConditionError> parse_condition(std::string_view text);
// Canonical text (fully parenthesised where needed, numbers as written);
// parse_condition(to_text(c)) gives back an equal tree.
std::string to_text(const Condition& c);
// The distinct names the atoms use (empty string for the array itself), in
// order of first appearance.
std::vector<std::string> names(const Condition& c);
// Visits every atom (depth-first, left to right).
void for_each_atom(const Condition& c, const std::function<void(const Atom&)>& visit);
// The same tree: shape, names, operators and numbers as written (atoms'
// positions aside). What to_text's round trip preserves.
bool same_tree(const Condition& a, const Condition& b);

}  // namespace mmfs::indexes
