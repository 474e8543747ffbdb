// The template's syntax: its pieces (text, {{ }}, {% %}), the tokens of an expression, and the trees the parser
// makes of them (Expr, Node), which the renderer walks.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "llm/jinja/value.h"

namespace tern::llm::jinja {

struct Piece {
  enum Kind { Text, Expr, Stmt } kind;
  std::string text;
  int line;
};

[[noreturn]] void syntax(const std::string& what, int line, const std::string& msg);

// Splits the source into text, {{ }} and {% %} pieces with jinja2's whitespace rules as transformers sets them:
// `-` strips all whitespace on its side, lstrip_blocks strips the spaces and tabs before a {% or {# that begins its
// line, trim_blocks drops the newline right after a %} or #} (`+` turns either off for its side).
std::vector<Piece> split(const std::string& src, const std::string& what);

struct Token {
  enum Kind { Name, Str, Int, Float, Op, End } kind;
  std::string text;
  int64_t i = 0;
  double f = 0;
};

std::vector<Token> tokenize(const std::string& s, const std::string& what, int line);

// The filters and tests the renderer has: a template naming another is refused when it is parsed.
bool known_filter(const std::string& n);
bool known_test(const std::string& n);

struct Expr {
  enum Kind { Literal, Name, Attr, Item, Slice, Call, Filter, Test, Neg, Not, Binary, And, Or, Cond, ListLit, DictLit } kind;
  Value value;                              // Literal
  std::string name;                         // Name, Attr, Filter, Test; Binary's operator
  std::vector<std::shared_ptr<Expr>> args;  // operands, call arguments, list items, dict keys and values in turn
  std::vector<std::pair<std::string, std::shared_ptr<Expr>>> kwargs;
  bool negated = false;  // `is not`
  int line = 0;
};
using ExprPtr = std::shared_ptr<Expr>;

struct Node {
  enum Kind { Block, Text, Output, If, For, Set, SetBlock, Macro, Break, Continue } kind = Block;
  std::string text;                             // Text; Set's name (or namespace) and attribute; Macro's name
  std::string attr;                             // `set ns.attr`
  std::vector<std::string> names;               // For's targets; Set's targets; Macro's parameters
  std::vector<std::shared_ptr<Expr>> exprs;     // Output; If's conditions; For's iterable and filter; Set's value; Macro's defaults
  std::vector<std::shared_ptr<Node>> children;  // Block's; If's branches (one per condition, then an else); For's body, else
  int line = 0;
};
using NodePtr = std::shared_ptr<Node>;

// The tree of a template's source; errors name `what` and the line.
NodePtr parse_template(const std::string& source, const std::string& what);

}  // namespace tern::llm::jinja
