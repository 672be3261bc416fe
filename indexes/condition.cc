#include "indexes/condition.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>

namespace mmfs::indexes {
namespace {

// Characters that end a NAME or a NUMBER: the operators, brackets, the
// connectives and the interval's comma. Blanks end them too.
constexpr std::string_view kDelimiters = "=!<>&|()[],";

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_delimiter(char c) { return kDelimiters.find(c) != std::string_view::npos; }
bool is_word_char(char c) { return !is_blank(c) && !is_delimiter(c); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
char lower(char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; }

std::string_view op_text(CompareOp op) {
  switch (op) {
    case CompareOp::Eq: return "==";
    case CompareOp::Ne: return "!=";
    case CompareOp::Lt: return "<";
    case CompareOp::Le: return "<=";
    case CompareOp::Gt: return ">";
    case CompareOp::Ge: return ">=";
  }
  return "?";
}

std::optional<CompareOp> op_of(std::string_view s) {
  for (CompareOp op : {CompareOp::Eq, CompareOp::Ne, CompareOp::Lt, CompareOp::Le, CompareOp::Gt, CompareOp::Ge})
    if (op_text(op) == s) return op;
  return std::nullopt;
}

// A word starts like a NUMBER when it starts with a digit or '.', or with a
// sign followed by a digit, '.' or "inf" (so "-inf" is never a NAME, while
// "inf" and "nan" are NAMEs where a NAME can stand).
bool starts_like_number(std::string_view s) {
  if (s.empty()) return false;
  if (is_digit(s[0]) || s[0] == '.') return true;
  if (s[0] != '+' && s[0] != '-') return false;
  if (s.size() >= 2 && (is_digit(s[1]) || s[1] == '.')) return true;
  return s.size() >= 4 && lower(s[1]) == 'i' && lower(s[2]) == 'n' && lower(s[3]) == 'f';
}

// A piece of the text for an error message: quoted, at most kQuoted bytes
// (a 4 KiB word would drown the message), control bytes escaped so that the
// message stays one printable line.
constexpr std::size_t kQuoted = 32;
std::string quoted(std::string_view s) {
  std::string out = "'";
  for (char c : s.substr(0, kQuoted)) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    else
      out += c;
  }
  out += s.size() > kQuoted ? "'..." : "'";
  return out;
}

// Thrown inside the parser only; parse_condition turns it into the result.
struct Failure {
  ConditionError error;
};

// Recursive descent over the grammar of condition.h. Recursion happens only
// at '(' and '!', each of which counts one level of `depth`, so the stack is
// bounded by kMaxDepth whatever the text.
class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Condition parse() {
    if (text_.size() > kMaxLength)
      fail(kMaxLength, fmt::format("condition longer than {} bytes", kMaxLength));
    skip_blanks();
    if (at_end()) fail(pos_, "empty condition");
    Condition c = parse_or(0, "");
    skip_blanks();
    if (!at_end()) {
      if (peek() == ')') fail(pos_, "unbalanced ')'");
      fail(pos_, fmt::format("unexpected {}, expected '&', '|' or the end", describe_here()));
    }
    return c;
  }

 private:
  [[noreturn]] void fail(std::size_t at, std::string what) const {
    throw Failure{{at, fmt::format("{} at {}", what, at)}};
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek(std::size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }
  void skip_blanks() {
    while (!at_end() && is_blank(peek())) ++pos_;
  }
  // The run of word characters at the cursor (possibly empty), not consumed.
  std::string_view word_here() const {
    std::size_t end = pos_;
    while (end < text_.size() && is_word_char(text_[end])) ++end;
    return text_.substr(pos_, end - pos_);
  }
  // The token at the cursor, quoted (never called at the end).
  std::string describe_here() const {
    std::string_view w = word_here();
    return quoted(w.empty() ? text_.substr(pos_, 1) : w);
  }
  // ", found X" for messages that expected something else; nothing at the end.
  std::string found() const { return at_end() ? std::string() : ", found " + describe_here(); }

  // cond := and ('|' and)*
  Condition parse_or(std::size_t depth, std::string_view after) {
    Condition first = parse_and(depth, after);
    skip_blanks();
    if (peek() != '|') return first;
    Condition c;
    c.kind = Condition::Kind::Or;
    c.children.push_back(std::move(first));
    while (peek() == '|') {
      ++pos_;
      c.children.push_back(parse_and(depth, "'|'"));
      skip_blanks();
    }
    return c;
  }

  // and := term ('&' term)*
  Condition parse_and(std::size_t depth, std::string_view after) {
    Condition first = parse_term(depth, after);
    skip_blanks();
    if (peek() != '&') return first;
    Condition c;
    c.kind = Condition::Kind::And;
    c.children.push_back(std::move(first));
    while (peek() == '&') {
      ++pos_;
      c.children.push_back(parse_term(depth, "'&'"));
      skip_blanks();
    }
    return c;
  }

  void enter(std::size_t depth) const {
    if (depth + 1 > kMaxDepth) fail(pos_, fmt::format("nesting deeper than {}", kMaxDepth));
  }

  // '!' starts a negation unless it starts the operator "!=" (an atom
  // without a name); "!==" can only be '!' before "==".
  bool negation_here() const { return peek() == '!' && (peek(1) != '=' || peek(2) == '='); }

  // term := '!' term | '(' cond ')' | atom
  Condition parse_term(std::size_t depth, std::string_view after) {
    skip_blanks();
    if (at_end()) {
      fail(pos_, after.empty() ? std::string("expected a condition")
                               : fmt::format("expected a condition after {}", after));
    }
    if (negation_here()) {
      enter(depth);
      ++pos_;
      Condition c;
      c.kind = Condition::Kind::Not;
      c.children.push_back(parse_term(depth + 1, "'!'"));
      return c;
    }
    if (peek() == '(') {
      enter(depth);
      std::size_t open = pos_++;
      Condition c = parse_or(depth + 1, "'('");
      skip_blanks();
      if (at_end()) fail(pos_, fmt::format("missing ')' for the '(' at {}", open));
      if (peek() != ')') fail(pos_, fmt::format("unexpected {}, expected ')' or a connective", describe_here()));
      ++pos_;
      return c;
    }
    Condition c;
    c.atom = parse_atom(after);
    return c;
  }

  // atom := [NAME] OP NUMBER | [NAME] 'in' '[' NUMBER ',' NUMBER ']'
  Atom parse_atom(std::string_view after) {
    Atom a;
    a.position = pos_;
    if (++atoms_ > kMaxAtoms) fail(pos_, fmt::format("more than {} atoms", kMaxAtoms));
    std::string_view w = word_here();
    if (starts_like_number(w))
      fail(pos_, fmt::format("unexpected number {} (a number follows an operator or 'in')", quoted(w)));
    if (!w.empty() && w != "in") {
      a.name = std::string(w);
      pos_ += w.size();
      skip_blanks();
      w = word_here();
    }
    if (w == "in") {
      pos_ += w.size();
      parse_interval(&a);
      return a;
    }
    if (!w.empty() || at_end() || !is_operator_char(peek())) {
      if (!a.name.empty())
        fail(pos_, fmt::format("expected an operator or 'in' after {}{}", quoted(a.name), found()));
      fail(pos_, after.empty() ? fmt::format("expected a condition{}", found())
                               : fmt::format("expected a condition after {}{}", after, found()));
    }
    std::size_t op_at = pos_;
    std::size_t end = pos_;
    while (end < text_.size() && is_operator_char(text_[end])) ++end;
    std::string_view op = text_.substr(pos_, end - pos_);
    auto parsed = op_of(op);
    if (!parsed) fail(op_at, fmt::format("unknown operator {}", quoted(op)));
    pos_ = end;
    a.op = *parsed;
    a.value = parse_number_here(quoted(op));
    return a;
  }

  static bool is_operator_char(char c) { return c == '=' || c == '!' || c == '<' || c == '>'; }

  void parse_interval(Atom* a) {
    a->interval = true;
    skip_blanks();
    if (peek() != '[') fail(pos_, fmt::format("expected '[' after 'in'{}", found()));
    ++pos_;
    a->low = parse_number_here("'['");
    skip_blanks();
    if (peek() != ',') fail(pos_, fmt::format("expected ',' after {}{}", quoted(a->low.text), found()));
    ++pos_;
    a->high = parse_number_here("','");
    skip_blanks();
    if (peek() != ']') fail(pos_, fmt::format("expected ']' after {}{}", quoted(a->high.text), found()));
    ++pos_;
  }

  Number parse_number_here(std::string_view after) {
    skip_blanks();
    std::string_view w = word_here();
    if (w.empty()) fail(pos_, fmt::format("expected a number after {}{}", after, found()));
    auto n = parse_number(w);
    if (!n) fail(pos_, fmt::format("malformed number {}", quoted(w)));
    pos_ += w.size();
    return *n;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  std::size_t atoms_ = 0;
};

void atom_text(const Atom& a, std::string* out) {
  if (a.interval) {
    // A blank keeps the NAME apart from the keyword.
    if (!a.name.empty()) *out += a.name + " ";
    *out += "in[" + a.low.text + "," + a.high.text + "]";
    return;
  }
  *out += a.name;
  *out += op_text(a.op);
  *out += a.value.text;
}

// A child needs parentheses when the parser would otherwise attach its
// parts to the parent: any And/Or under a Not, an Or under an And, and a
// child of the parent's own kind (the parser keeps `(a&b)&c` as two levels).
bool needs_parentheses(Condition::Kind parent, const Condition& child) {
  using K = Condition::Kind;
  if (child.kind == K::Atom || child.kind == K::Not) return false;
  if (parent == K::Not) return true;
  if (parent == K::And) return true;  // an And or an Or under an And
  return child.kind == K::Or;         // under an Or: only another Or
}

void write_text(const Condition& c, std::string* out) {
  using K = Condition::Kind;
  if (c.kind == K::Atom) return atom_text(c.atom, out);
  for (std::size_t i = 0; i < c.children.size(); ++i) {
    if (c.kind == K::Not) *out += '!';
    if (i > 0) *out += (c.kind == K::And ? '&' : '|');
    bool parens = needs_parentheses(c.kind, c.children[i]);
    if (parens) *out += '(';
    write_text(c.children[i], out);
    if (parens) *out += ')';
  }
}

bool same_number(const Number& a, const Number& b) { return a.text == b.text; }

}  // namespace

std::variant<Condition, ConditionError> parse_condition(std::string_view text) {
  try {
    return Parser(text).parse();
  } catch (const Failure& f) {
    return f.error;
  }
}

std::string to_text(const Condition& c) {
  std::string out;
  write_text(c, &out);
  return out;
}

std::vector<std::string> names(const Condition& c) {
  std::vector<std::string> out;
  for_each_atom(c, [&](const Atom& a) {
    if (std::find(out.begin(), out.end(), a.name) == out.end()) out.push_back(a.name);
  });
  return out;
}

void for_each_atom(const Condition& c, const std::function<void(const Atom&)>& visit) {
  if (c.kind == Condition::Kind::Atom) return visit(c.atom);
  for (const Condition& child : c.children) for_each_atom(child, visit);
}

bool same_tree(const Condition& a, const Condition& b) {
  if (a.kind != b.kind || a.children.size() != b.children.size()) return false;
  if (a.kind == Condition::Kind::Atom) {
    const Atom &x = a.atom, &y = b.atom;
    if (x.name != y.name || x.interval != y.interval) return false;
    if (x.interval) return same_number(x.low, y.low) && same_number(x.high, y.high);
    return x.op == y.op && same_number(x.value, y.value);
  }
  for (std::size_t i = 0; i < a.children.size(); ++i)
    if (!same_tree(a.children[i], b.children[i])) return false;
  return true;
}

}  // namespace mmfs::indexes
