#include <algorithm>
#include <cctype>

#include "llm/jinja/syntax.h"

namespace tern::llm::jinja {

namespace {

class ExprParser {
 public:
  ExprParser(std::vector<Token> tokens, const std::string& what, int line) : t_(std::move(tokens)), what_(what), line_(line) {}

  ExprPtr expression() {
    ExprPtr e = or_expr();
    if (is_name("if")) {
      ++p_;
      auto c = make(Expr::Cond);
      c->args = {or_expr(), e};
      if (is_name("else")) {
        ++p_;
        c->args.push_back(expression());
      }
      return c;
    }
    return e;
  }
  // An expression without a trailing `if` (a for loop's iterable, before its filter).
  ExprPtr expression_no_cond() { return or_expr(); }
  // A comma-separated tuple at the top (`set a, b = ...`, `for k, v in`): the names.
  std::vector<std::string> target_names() {
    std::vector<std::string> names;
    do names.push_back(name_token());
    while (accept(","));
    return names;
  }
  std::string name_token() {
    if (t_[p_].kind != Token::Name) error("expected a name");
    return t_[p_++].text;
  }
  bool is_name(const char* n) const { return t_[p_].kind == Token::Name && t_[p_].text == n; }
  bool accept(const char* op) {
    if (t_[p_].kind == Token::Op && t_[p_].text == op) {
      ++p_;
      return true;
    }
    return false;
  }
  void expect(const char* op) {
    if (!accept(op)) error(std::string("expected '") + op + "'");
  }
  bool at_end() const { return t_[p_].kind == Token::End; }
  void expect_end() {
    if (!at_end()) error("unexpected '" + t_[p_].text + "'");
  }
  [[noreturn]] void error(const std::string& msg) const {
    syntax(what_, line_, msg + (t_[p_].kind == Token::End ? " at the end" : " at '" + t_[p_].text + "'"));
  }

 private:
  ExprPtr make(Expr::Kind k) {
    auto e = std::make_shared<Expr>();
    e->kind = k;
    e->line = line_;
    return e;
  }
  ExprPtr binary(const std::string& op, ExprPtr a, ExprPtr b) {
    auto e = make(Expr::Binary);
    e->name = op;
    e->args = {std::move(a), std::move(b)};
    return e;
  }
  ExprPtr or_expr() {
    ExprPtr e = and_expr();
    while (is_name("or")) {
      ++p_;
      auto o = make(Expr::Or);
      o->args = {e, and_expr()};
      e = o;
    }
    return e;
  }
  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    while (is_name("and")) {
      ++p_;
      auto o = make(Expr::And);
      o->args = {e, not_expr()};
      e = o;
    }
    return e;
  }
  // Counts one level of nesting while it lives (expressions that hold expressions: parentheses, `not`, unary signs).
  struct Nest {
    explicit Nest(ExprParser& p) : p(p) {
      if (++p.depth_ > kMaxNesting) p.error("the expression nests deeper than " + std::to_string(kMaxNesting));
    }
    ~Nest() { --p.depth_; }
    ExprParser& p;
  };
  ExprPtr not_expr() {
    if (is_name("not")) {
      ++p_;
      const Nest nest(*this);
      auto n = make(Expr::Not);
      n->args = {not_expr()};
      return n;
    }
    return compare();
  }
  ExprPtr compare() {
    ExprPtr e = math1();
    for (;;) {
      const Token& t = t_[p_];
      if (t.kind == Token::Op && (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == ">" || t.text == "<=" || t.text == ">=")) {
        ++p_;
        e = binary(t.text, e, math1());
      } else if (is_name("in")) {
        ++p_;
        e = binary("in", e, math1());
      } else if (is_name("not") && t_[p_ + 1].kind == Token::Name && t_[p_ + 1].text == "in") {
        p_ += 2;
        e = binary("not in", e, math1());
      } else return e;
    }
  }
  ExprPtr math1() {
    ExprPtr e = concat();
    while (t_[p_].kind == Token::Op && (t_[p_].text == "+" || t_[p_].text == "-")) {
      const std::string op = t_[p_++].text;
      e = binary(op, e, concat());
    }
    return e;
  }
  ExprPtr concat() {
    ExprPtr e = math2();
    while (accept("~")) e = binary("~", e, math2());
    return e;
  }
  ExprPtr math2() {
    ExprPtr e = power();
    while (t_[p_].kind == Token::Op && (t_[p_].text == "*" || t_[p_].text == "/" || t_[p_].text == "//" || t_[p_].text == "%")) {
      const std::string op = t_[p_++].text;
      e = binary(op, e, power());
    }
    return e;
  }
  ExprPtr power() {
    ExprPtr e = unary();
    while (accept("**")) e = binary("**", e, unary());
    return e;
  }
  ExprPtr unary() {
    const Nest nest(*this);
    if (accept("-")) {
      auto n = make(Expr::Neg);
      n->args = {unary()};
      return filters(n);
    }
    if (accept("+")) return unary();
    return filters(postfix(primary()));
  }
  void call_args(const ExprPtr& e) {
    if (accept(")")) return;
    do {
      if (t_[p_].kind == Token::Name && t_[p_ + 1].kind == Token::Op && t_[p_ + 1].text == "=") {
        const std::string k = t_[p_].text;
        p_ += 2;
        e->kwargs.emplace_back(k, expression());
      } else e->args.push_back(expression());
    } while (accept(",") && !(t_[p_].kind == Token::Op && t_[p_].text == ")"));
    expect(")");
  }
  ExprPtr filters(ExprPtr e) {
    for (;;) {
      if (accept("|")) {
        auto f = make(Expr::Filter);
        f->name = name_token();
        if (!known_filter(f->name)) syntax(what_, line_, "the filter '" + f->name + "' is not supported");
        f->args = {e};
        if (accept("(")) call_args(f);
        e = f;
      } else if (is_name("is")) {
        ++p_;
        auto t = make(Expr::Test);
        if (is_name("not")) {
          ++p_;
          t->negated = true;
        }
        t->name = name_token();
        if (!known_test(t->name)) syntax(what_, line_, "the test '" + t->name + "' is not supported");
        t->args = {e};
        if (accept("(")) call_args(t);
        else if (t_[p_].kind == Token::Str || t_[p_].kind == Token::Int || t_[p_].kind == Token::Float ||
                 (t_[p_].kind == Token::Name && !is_name("and") && !is_name("or") && !is_name("else") && !is_name("if") && !is_name("in") &&
                  !is_name("not") && !is_name("is")))
          t->args.push_back(postfix(primary()));  // `is divisibleby 3`, `is sameas none`
        e = t;
      } else return e;
    }
  }
  ExprPtr postfix(ExprPtr e) {
    for (;;) {
      if (accept(".")) {
        auto a = make(Expr::Attr);
        if (t_[p_].kind == Token::Int) {  // messages.0
          a->kind = Expr::Item;
          auto idx = make(Expr::Literal);
          idx->value = Value::integer(t_[p_++].i);
          a->args = {e, idx};
        } else {
          a->name = name_token();
          a->args = {e};
        }
        e = a;
      } else if (accept("[")) {
        ExprPtr lo, hi, step;
        bool slice = false;
        if (!(t_[p_].kind == Token::Op && t_[p_].text == ":")) lo = expression();
        if (accept(":")) {
          slice = true;
          if (!(t_[p_].kind == Token::Op && (t_[p_].text == "]" || t_[p_].text == ":"))) hi = expression();
          if (accept(":") && !(t_[p_].kind == Token::Op && t_[p_].text == "]")) step = expression();
        }
        expect("]");
        auto s = make(slice ? Expr::Slice : Expr::Item);
        s->args = {e, lo, hi, step};
        if (!slice) s->args.resize(2);
        e = s;
      } else if (accept("(")) {
        auto c = make(Expr::Call);
        c->args = {e};
        call_args(c);
        e = c;
      } else return e;
    }
  }
  ExprPtr primary() {
    const Token t = t_[p_];
    auto lit = [&](Value v) {
      ++p_;
      auto e = make(Expr::Literal);
      e->value = std::move(v);
      return e;
    };
    switch (t.kind) {
      case Token::Str: {
        std::string s = t.text;
        ++p_;
        while (t_[p_].kind == Token::Str) s += t_[p_++].text;  // adjacent literals join, as in Python
        auto e = make(Expr::Literal);
        e->value = Value::string(std::move(s));
        return e;
      }
      case Token::Int: return lit(Value::integer(t.i));
      case Token::Float: return lit(Value::number(t.f));
      case Token::Name:
        if (t.text == "true" || t.text == "True") return lit(Value::boolean(true));
        if (t.text == "false" || t.text == "False") return lit(Value::boolean(false));
        if (t.text == "none" || t.text == "None") return lit(Value::none());
        {
          ++p_;
          auto e = make(Expr::Name);
          e->name = t.text;
          return e;
        }
      case Token::Op:
        if (t.text == "(") {
          ++p_;
          if (accept(")")) return lit_list();
          ExprPtr e = expression();
          if (accept(",")) {  // a tuple: a list here
            auto l = make(Expr::ListLit);
            l->args.push_back(e);
            while (!accept(")")) {
              l->args.push_back(expression());
              if (!accept(",")) {
                expect(")");
                break;
              }
            }
            return l;
          }
          expect(")");
          return e;
        }
        if (t.text == "[") {
          ++p_;
          auto l = make(Expr::ListLit);
          while (!accept("]")) {
            l->args.push_back(expression());
            if (!accept(",")) {
              expect("]");
              break;
            }
          }
          return l;
        }
        if (t.text == "{") {
          ++p_;
          auto d = make(Expr::DictLit);
          while (!accept("}")) {
            d->args.push_back(expression());
            expect(":");
            d->args.push_back(expression());
            if (!accept(",")) {
              expect("}");
              break;
            }
          }
          return d;
        }
        break;
      case Token::End: break;
    }
    error("expected a value");
  }
  ExprPtr lit_list() { return make(Expr::ListLit); }

  std::vector<Token> t_;
  size_t p_ = 0;
  int depth_ = 0;
  const std::string& what_;
  int line_;
};

class TemplateParser {
 public:
  TemplateParser(std::vector<Piece> pieces, const std::string& what) : pieces_(std::move(pieces)), what_(what) {}

  NodePtr parse() {
    std::string end;
    NodePtr root = block({}, end);
    if (!end.empty()) syntax(what_, pieces_[p_ - 1].line, "unexpected {% " + end + " %}");
    return root;
  }

 private:
  static std::string keyword(const std::string& body) {
    const size_t b = body.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return "";
    size_t e = b;
    while (e < body.size() && (std::isalnum(static_cast<unsigned char>(body[e])) || body[e] == '_')) ++e;
    return body.substr(b, e - b);
  }
  ExprParser expr_parser(const Piece& piece, size_t skip_keyword) {
    const size_t b = piece.text.find_first_not_of(" \t\r\n");
    return ExprParser(tokenize(piece.text.substr(b + skip_keyword), what_, piece.line), what_, piece.line);
  }
  NodePtr make(Node::Kind k, int line) {
    auto n = std::make_shared<Node>();
    n->kind = k;
    n->line = line;
    return n;
  }

  // Parses pieces into a block until a statement whose keyword is in `ends` (returned in `end`, its piece consumed).
  NodePtr block(const std::vector<std::string>& ends, std::string& end) {
    if (++depth_ > kMaxNesting) syntax(what_, pieces_[p_ - 1].line, "blocks nest deeper than " + std::to_string(kMaxNesting));
    struct Leave {
      int& d;
      ~Leave() { --d; }
    } leave{depth_};
    NodePtr b = make(Node::Block, p_ < pieces_.size() ? pieces_[p_].line : 0);
    while (p_ < pieces_.size()) {
      const Piece& piece = pieces_[p_++];
      if (piece.kind == Piece::Text) {
        if (!piece.text.empty()) {
          auto t = make(Node::Text, piece.line);
          t->text = piece.text;
          b->children.push_back(t);
        }
        continue;
      }
      if (piece.kind == Piece::Expr) {
        auto o = make(Node::Output, piece.line);
        ExprParser ep(tokenize(piece.text, what_, piece.line), what_, piece.line);
        o->exprs = {ep.expression()};
        ep.expect_end();
        b->children.push_back(o);
        continue;
      }
      const std::string kw = keyword(piece.text);
      if (std::find(ends.begin(), ends.end(), kw) != ends.end()) {
        end = kw;
        last_ = &piece;
        return b;
      }
      b->children.push_back(statement(piece, kw));
    }
    end.clear();
    if (!ends.empty()) syntax(what_, pieces_.empty() ? 0 : pieces_.back().line, "{% " + ends.back() + " %} is missing");
    return b;
  }

  NodePtr statement(const Piece& piece, const std::string& kw) {
    std::string end;
    if (kw == "if") {
      auto n = make(Node::If, piece.line);
      ExprParser ep = expr_parser(piece, 2);
      n->exprs.push_back(ep.expression());
      ep.expect_end();
      for (;;) {
        n->children.push_back(block({"elif", "else", "endif"}, end));
        if (end == "endif") return n;
        if (end == "else") {
          n->children.push_back(block({"endif"}, end));
          return n;
        }
        ExprParser ei = expr_parser(*last_, 4);
        n->exprs.push_back(ei.expression());
        ei.expect_end();
      }
    }
    if (kw == "for") {
      auto n = make(Node::For, piece.line);
      ExprParser ep = expr_parser(piece, 3);
      n->names = ep.target_names();
      if (!ep.is_name("in")) ep.error("expected 'in'");
      ep.name_token();
      n->exprs.push_back(ep.expression_no_cond());
      if (ep.is_name("if")) {
        ep.name_token();
        n->exprs.push_back(ep.expression());
      }
      if (ep.is_name("recursive")) ep.error("recursive loops are not supported");
      ep.expect_end();
      n->children.push_back(block({"else", "endfor"}, end));
      if (end == "else") n->children.push_back(block({"endfor"}, end));
      return n;
    }
    if (kw == "set") {
      ExprParser ep = expr_parser(piece, 3);
      std::vector<std::string> names = ep.target_names();
      std::string attr;
      if (names.size() == 1 && ep.accept(".")) attr = ep.name_token();
      if (ep.at_end()) {  // {% set x %}...{% endset %}
        auto n = make(Node::SetBlock, piece.line);
        n->text = names[0];
        n->attr = attr;
        n->children.push_back(block({"endset"}, end));
        return n;
      }
      ep.expect("=");
      auto n = make(Node::Set, piece.line);
      n->names = names;
      n->attr = attr;
      n->exprs.push_back(ep.expression());
      ep.expect_end();
      return n;
    }
    if (kw == "macro") {
      auto n = make(Node::Macro, piece.line);
      ExprParser ep = expr_parser(piece, 5);
      n->text = ep.name_token();
      ep.expect("(");
      while (!ep.accept(")")) {
        n->names.push_back(ep.name_token());
        n->exprs.push_back(ep.accept("=") ? ep.expression() : nullptr);
        if (!ep.accept(",")) {
          ep.expect(")");
          break;
        }
      }
      ep.expect_end();
      n->children.push_back(block({"endmacro"}, end));
      return n;
    }
    if (kw == "break" || kw == "continue") return make(kw == "break" ? Node::Break : Node::Continue, piece.line);
    if (kw == "generation") {  // transformers' assistant-mask marker: renders its body
      NodePtr body = block({"endgeneration"}, end);
      return body;
    }
    syntax(what_, piece.line, "{% " + (kw.empty() ? piece.text : kw) + " %} is not supported");
  }

  std::vector<Piece> pieces_;
  size_t p_ = 0;
  int depth_ = 0;
  const Piece* last_ = nullptr;
  const std::string& what_;
};

}  // namespace

NodePtr parse_template(const std::string& source, const std::string& what) { return TemplateParser(split(source, what), what).parse(); }

}  // namespace tern::llm::jinja
